"""Frozen-encoder outputs kept in memory for training a head or top layers on them.

:class:`CachedTexts` holds, per text, the token states after the frozen bottom layers
(padded once, ``[N, T, d]`` with the lengths) or the pooled sentence vector (``[N, d]``,
when nothing below the head trains) with the class labels; :func:`length_batches` draws
random batches grouped by length (little padding); :func:`pooled_outputs` and
:class:`PooledEncoder` give the encoder's mean-pooled last layer, not normalised
(cacheable on disk by :class:`spacl.models.text.EmbeddingCache`).

Example:
    >>> texts = CachedTexts.pooled(torch.zeros(3, 4), torch.tensor([0, 1, 0]))
    >>> texts.batch(torch.tensor([0, 2]))[0].shape
    torch.Size([2, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from spacl.tasks.text_finetune import bottom_states

__all__ = ["CachedTexts", "PooledEncoder", "length_batches", "pooled_outputs"]


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
