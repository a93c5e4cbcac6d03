"""Terms shared by the link-prediction objectives of :mod:`spacl.losses.kg`.

Per-query reductions of per-pair losses (:func:`reduce_pairs`), the kept-mask
log-sum-exp ``log sum_j keep_j e^{l_j}`` of SPACL-KG's negatives
(:class:`KeptLogSumExp`), the known ``(query, tail)`` pairs and the input checks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from spacl._validation import check_finite, check_tensor

#: how the per-pair losses are averaged: over queries, or over training triples
WEIGHTINGS = ("query", "triple")


def per_query_mean(per_pair: Tensor, row: Tensor, b: int) -> Tensor:
    """Mean of ``per_pair`` within each query (``row`` = query of each pair), ``[b]``."""
    sums = per_pair.new_zeros(b).index_add(0, row, per_pair)
    counts = torch.bincount(row, minlength=b).to(per_pair.dtype)
    return sums / counts.clamp_min(1.0)


def reduce_pairs(per_pair: Tensor, row: Tensor, b: int, weighting: str) -> Tensor:
    """``"triple"``: mean over pairs; ``"query"``: mean over queries of their pair means."""
    if weighting == "triple":
        return per_pair.mean()
    return per_query_mean(per_pair, row, b).mean()


class KeptLogSumExp(torch.autograd.Function):
    """``log sum_j keep_j e^{l_j}`` per row, ``keep`` a 0/1 float mask (``-inf`` if empty).

    ``shift[B]`` is the largest kept logit (the cut keeps each row's largest candidate
    first), so ``e_j = keep_j exp(min(l_j - shift, 0))`` are the masked logsumexp's
    terms, with no ``exp(-inf)`` (slow on CPU) and no boolean pass; backward is
    ``grad_j = e_j g / sum_j e_j`` (0 off the mask), one float pass.  ``weights``: the
    cut's ``exp(l_j - shift)`` (0 off its candidates) with ``shift`` its row maxima, if
    the caller has them (overwritten here by the terms: the caller must not use them
    again); then ``e_j = keep_j weights_j``, one pass instead of four.  A
    row whose largest candidate is a generated negative far above every kept entity
    (``shift - l_j`` beyond the dtype's exponent range) then gives ``-inf``, a term
    ``e^{-88}`` or less of the largest, which the caller's sum with that negative does
    not see in float32.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, keep: Tensor, shift: Tensor, weights: Tensor | None = None
    ) -> Tensor:
        if weights is None:
            e = (logits.detach() - shift.unsqueeze(1)).clamp_max_(0.0).exp_().mul_(keep)
        else:  # the cut's own exp(l_j - shift), consumed here: no second exponentiation
            e = weights.mul_(keep)
        total = e.sum(1)
        ctx.save_for_backward(e, total)
        return total.log() + shift

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        e, total = ctx.saved_tensors
        scale = torch.where(total > 0, grad / total.clamp_min(torch.finfo(total.dtype).tiny), 0.0)
        return e.mul_(scale.unsqueeze(1)), None, None, None  # e is not needed again


def check_link_inputs(query: Tensor, entities: Tensor, positives: Tensor) -> tuple[Tensor, Tensor]:
    """``(query, entities)`` checked (floating, ``[B, d]`` and ``[E, d]``, neither empty,
    ``positives`` a ``[B, E]`` bool mask) and brought to their common dtype, as the
    pairwise losses promote theirs.  Their values are checked by
    :func:`check_link_loss` only when the loss is not finite (one scalar read, not a
    pass over ``[E, d]``, per step)."""
    check_tensor(query, "query", finite=False)
    check_tensor(entities, "entities", finite=False)
    if query.ndim != 2 or entities.ndim != 2 or query.shape[1] != entities.shape[1]:
        raise ValueError(
            f"query must be [B, d] and entities [E, d], got {tuple(query.shape)} and "
            f"{tuple(entities.shape)}"
        )
    for name, x in (("query", query), ("entities", entities)):
        if x.shape[0] == 0:
            raise ValueError(f"{name} is empty, of shape {tuple(x.shape)}")
    if positives.dtype != torch.bool or positives.shape != (query.shape[0], entities.shape[0]):
        raise ValueError(
            f"positives must be a bool [B, E] = [{query.shape[0]}, {entities.shape[0]}] mask, "
            f"got {positives.dtype} {tuple(positives.shape)}"
        )
    wide = torch.promote_types(query.dtype, entities.dtype)
    return query.to(wide), entities.to(wide)


def check_link_loss(loss: Tensor, query: Tensor, entities: Tensor, name: str) -> Tensor:
    """``loss`` if finite; else a ``ValueError`` naming the non-finite input, or saying
    that finite inputs overflowed (one scalar host wait per call)."""
    if not bool(torch.isfinite(loss)):
        check_finite(query, "query")
        check_finite(entities, "entities")
        raise ValueError(f"{name} is {float(loss)} on finite inputs (overflow?)")
    return loss


def known_pairs(
    positives: Tensor, known: tuple[Tensor, Tensor] | None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(row, col, counts)``: the ``True`` entries of ``positives`` in row-major order and
    their number per query (every query needs one).

    ``known``: the same pairs, if the caller has them (any order, repeats allowed): they
    are sorted and deduplicated, which saves the ``[B, E]`` scan of ``nonzero``.  They
    must be ``True`` in ``positives`` (checked); that none is missing is the caller's
    promise (checking it is the scan saved).
    """
    b, e = positives.shape
    if known is None:
        row, col = positives.nonzero(as_tuple=True)
    else:
        if not isinstance(known, tuple) or len(known) != 2:
            raise TypeError(
                f"known must be a (row, col) pair of tensors, got {type(known).__name__}"
            )
        row, col = known
        for name, value, size in (("known row", row, b), ("known col", col, e)):
            if not isinstance(value, Tensor) or value.ndim != 1 or value.is_floating_point():
                raise ValueError(f"{name} must be a 1-D integer tensor")
            if value.numel() and (int(value.min()) < 0 or int(value.max()) >= size):
                raise ValueError(
                    f"{name} must lie in [0, {size}), got {int(value.min())}..{int(value.max())}"
                )
        if row.shape != col.shape:
            raise ValueError(
                f"known row and col must have one length, got {row.numel()} and {col.numel()}"
            )
        flat = torch.unique(row.to(positives.device).long() * e + col.to(positives.device).long())
        row, col = flat // e, flat % e
        if not bool(positives[row, col].all()):
            raise ValueError("known lists a pair that is not a positive")
    counts = torch.bincount(row, minlength=b)
    if not bool((counts > 0).all()):
        raise ValueError("every query needs at least one positive (known tail)")
    return row, col, counts
