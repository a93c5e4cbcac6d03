"""Validation of :class:`~spacl.losses.SPACLLoss`'s inputs (errors name the argument)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

from spacl._validation import check_labels, check_tensor
from spacl.mining._common import check_anchor_index
from spacl.mining.positives import check_pool_size

if TYPE_CHECKING:
    from spacl.losses.spacl import SPACLLoss


def check_pool(
    loss: SPACLLoss, pool: Tensor, labels: Tensor | None, *, positives: bool = True
) -> None:
    check_tensor(pool, "pool", ndim=3)
    b, v, d = pool.shape
    if b < 1 or d < 1:
        raise ValueError(f"pool must be [B, V, d] with B >= 1 and d >= 1, got {tuple(pool.shape)}")
    if loss.parts.dynamic_anchor and v < 2:
        raise ValueError(
            f"pool holds {v} view per instance; the dynamic anchor needs at least 2 "
            f"(got shape {tuple(pool.shape)})"
        )
    if positives:
        class_labels = labels if loss.positive_pool == "class" else None
        check_pool_size(v, loss.num_positives, class_labels)


def check_inputs(
    loss: SPACLLoss,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None,
    anchor_index: Tensor | None,
) -> tuple[Tensor | None, Tensor | None]:
    check_tensor(pool, "pool", ndim=3)
    b, v, d = pool.shape
    if labels is not None:
        labels = check_labels(labels, b).to(pool.device)
    elif loss.positive_pool != "instance":
        raise ValueError(
            f"positive_pool={loss.positive_pool!r} is a supervised mode and needs labels: "
            "call loss(anchors, pool, labels)"
        )
    check_pool(loss, pool, labels)
    if anchors is not None:
        check_tensor(anchors, "anchors", ndim=(2, 3))
        want = (b, d) if anchors.ndim == 2 else (b, v, d)
        if tuple(anchors.shape) != want:
            raise ValueError(
                f"anchors must be [B, d] or [B, V, d] matching pool {tuple(pool.shape)}, "
                f"got {tuple(anchors.shape)}"
            )
        if anchors.dtype != pool.dtype:
            raise TypeError(f"anchors dtype {anchors.dtype} differs from pool dtype {pool.dtype}")
    if anchor_index is not None:
        anchor_index = check_anchor_index(anchor_index, b, v, "anchor_index").to(pool.device)
    return labels, anchor_index


def check_extra(
    loss: SPACLLoss,
    pool: Tensor,
    labels: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
) -> tuple[Tensor | None, Tensor | None]:
    """Validate ``extra_negatives`` / ``extra_negative_labels``; ``None`` for an empty queue."""
    if extra is None:
        if extra_labels is not None:
            raise ValueError("extra_negative_labels given without extra_negatives")
        return None, None
    check_tensor(extra, "extra_negatives", ndim=2)
    if extra.shape[1] != pool.shape[2]:
        raise ValueError(
            f"extra_negatives must be [Q, {pool.shape[2]}] (the pool's d), got {tuple(extra.shape)}"
        )
    if extra.dtype != pool.dtype:
        raise TypeError(f"extra_negatives dtype {extra.dtype} differs from pool {pool.dtype}")
    if extra_labels is not None:
        extra_labels = check_labels(extra_labels, extra.shape[0], "extra_negative_labels")
        extra_labels = extra_labels.to(pool.device)
    elif labels is not None and loss.positive_pool != "instance":
        raise ValueError(
            f"positive_pool={loss.positive_pool!r} with extra_negatives needs "
            "extra_negative_labels (a queue of the wrong class would be a negative)"
        )
    if extra.shape[0] == 0:
        return None, None
    return extra.to(pool.device), extra_labels if labels is not None else None
