"""Validation of :class:`~spacl.losses.SPACLLoss`'s inputs (errors name the argument), the
checked :class:`Batch`, and the candidate (target) embeddings ``g`` of a pool."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from spacl._validation import check_all_finite, check_labels, check_tensor
from spacl.losses.normalize import normalize
from spacl.losses.spacl.options import SPACLOptions
from spacl.mining.pool import check_anchor_index
from spacl.mining.positives import check_pool_size


@dataclass(frozen=True)
class Batch:
    """One forward pass's inputs, checked (:func:`checked_batch`).

    ``anchors``: ``None``, ``[B, d]`` or ``[B, V, d]`` online embeddings; ``pool[B, V, d]``
    the target embeddings of every view; ``labels[B]`` and ``anchor_index[B]`` on the
    pool's device (or ``None``); ``extra[Q, d]`` / ``extra_labels[Q]`` the queue's
    candidates (``None`` for none or an empty queue; labels only with ``labels``).
    """

    anchors: Tensor | None
    pool: Tensor
    labels: Tensor | None
    anchor_index: Tensor | None
    extra: Tensor | None
    extra_labels: Tensor | None


def checked_batch(
    options: SPACLOptions,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None,
    anchor_index: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
) -> Batch:
    """:func:`check_inputs`, :func:`check_extra` then :func:`check_anchor_set`, as one
    :class:`Batch`."""
    labels, anchor_index = check_inputs(options, anchors, pool, labels, anchor_index)
    extra, extra_labels = check_extra(options, pool, labels, extra, extra_labels)
    batch = Batch(anchors, pool, labels, anchor_index, extra, extra_labels)
    check_anchor_set(options, batch)
    return batch


def one_anchor(options: SPACLOptions, batch: Batch) -> bool:
    """Whether ``batch`` is computed with one anchor per instance (the dynamic anchor set,
    or an explicit ``anchor_index``) rather than every view an anchor."""
    return options.anchor_set == "dynamic" or batch.anchor_index is not None


def check_anchor_set(options: SPACLOptions, batch: Batch) -> None:
    """Every view an anchor needs the online embeddings of every view (or none)."""
    anchors = batch.anchors
    if not one_anchor(options, batch) and anchors is not None and anchors.ndim == 2:
        raise ValueError(
            "anchor_set='every_view' needs the online embeddings of every view: "
            f"anchors [B, V, d] or None, got {tuple(anchors.shape)}"
        )


def target_embeddings(options: SPACLOptions, pool: Tensor, unit_pool: Tensor) -> Tensor:
    """The candidate (target) embeddings ``g`` the logits are taken against: the pool
    normalised, constants unless ``detach_candidates=False`` (``unit_pool``: the pool on
    the unit sphere, already taken by the mining)."""
    if options.detach_candidates and options.normalize == "sphere":
        return unit_pool
    return normalize(pool.detach() if options.detach_candidates else pool, options.normalize)


def check_pool(
    options: SPACLOptions,
    pool: Tensor,
    labels: Tensor | None,
    *,
    positives: bool = True,
    finite: bool = True,
) -> None:
    check_tensor(pool, "pool", ndim=3, finite=finite)
    b, v, d = pool.shape
    if b < 1 or d < 1:
        raise ValueError(f"pool must be [B, V, d] with B >= 1 and d >= 1, got {tuple(pool.shape)}")
    if options.parts.dynamic_anchor and v < 2:
        raise ValueError(
            f"pool holds {v} view per instance; the dynamic anchor needs at least 2 "
            f"(got shape {tuple(pool.shape)})"
        )
    if positives:
        class_labels = labels if options.positive_pool == "class" else None
        check_pool_size(v, options.num_positives, class_labels)


def check_inputs(
    options: SPACLOptions,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None,
    anchor_index: Tensor | None,
) -> tuple[Tensor | None, Tensor | None]:
    check_tensor(pool, "pool", ndim=3, finite=False)
    b, v, d = pool.shape
    if labels is not None:
        labels = check_labels(labels, b).to(pool.device)
    elif options.positive_pool != "instance":
        raise ValueError(
            f"positive_pool={options.positive_pool!r} is a supervised mode and needs labels: "
            "call loss(anchors, pool, labels)"
        )
    check_pool(options, pool, labels, finite=False)
    if anchors is not None:
        check_tensor(anchors, "anchors", ndim=(2, 3), finite=False)
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
    check_all_finite({"pool": pool, "anchors": anchors})
    return labels, anchor_index


def check_extra(
    options: SPACLOptions,
    pool: Tensor,
    labels: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
) -> tuple[Tensor | None, Tensor | None]:
    """Validate ``extra_negatives`` / ``extra_negative_labels``; ``None`` for an empty queue.

    As for the baseline losses (:func:`spacl.losses._batch.check_extra_negatives`), the
    queue's labels are required exactly when the batch has labels, whatever
    ``positive_pool``: a queue row of the anchor's class is never a negative, which
    needs its label (and labels of a queue without batch labels would be ignored).
    """
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
    if labels is None:
        if extra_labels is not None:
            raise ValueError(
                "extra_negative_labels given, but the loss is computed without labels "
                "(pass labels for the batch, or drop extra_negative_labels)"
            )
    elif extra_labels is None:
        raise ValueError(
            "the batch has labels, so extra_negatives needs extra_negative_labels[Q] "
            "(a queue row of the anchor's class is no negative; "
            f"positive_pool={options.positive_pool!r}), got extra_negatives of shape "
            f"{tuple(extra.shape)} and extra_negative_labels=None"
        )
    else:
        extra_labels = check_labels(extra_labels, extra.shape[0], "extra_negative_labels")
        extra_labels = extra_labels.to(pool.device)
    if extra.shape[0] == 0:
        return None, None
    return extra.to(pool.device), extra_labels
