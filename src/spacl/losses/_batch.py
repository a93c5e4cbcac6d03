"""Turn the public input forms of the losses into anchors, candidates and group ids.

Input forms accepted by every pairwise loss:

- ``loss(features)`` / ``loss(features, labels)`` with ``features[B, V, d]``, ``V >= 1``;
- ``loss(z0, z1)`` / ``loss(z0, z1, labels=labels)`` with two views ``[B, d]``;
- ``targets=[B, V, d]`` (keyword): candidates come from another encoder (EMA/target),
  anchors from ``features``.  The same (instance, view) pair is never its own
  candidate, in either case.

Rows are instance-major: anchor/candidate ``r`` is instance ``r // V``, view ``r % V``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from spacl._validation import check_choice, check_labels, check_tensor


@dataclass(frozen=True)
class ViewBatch:
    """Validated views, labels and optional target views of one batch."""

    views: Tensor  # [B, V, d]
    labels: Tensor | None  # [B]
    targets: Tensor | None  # [B, V, d]

    @property
    def num_instances(self) -> int:
        return int(self.views.shape[0])

    @property
    def num_views(self) -> int:
        return int(self.views.shape[1])


def parse_views(
    features: Tensor,
    other: Tensor | None = None,
    labels: Tensor | None = None,
    targets: Tensor | None = None,
) -> ViewBatch:
    """Validate and normalise the accepted input forms into a :class:`ViewBatch`."""
    if not isinstance(features, Tensor):
        raise TypeError(f"features must be a torch.Tensor, got {type(features).__name__}")
    if features.ndim == 2:
        if other is None:
            raise ValueError(
                "features of shape [B, d] need a second view: call loss(z0, z1), "
                f"or pass features[B, V, d]; got shape {tuple(features.shape)} alone"
            )
        check_tensor(features, "z0", ndim=2)
        check_tensor(other, "z1", ndim=2)
        if other.shape != features.shape:
            raise ValueError(
                f"z0 and z1 must have the same shape, got {tuple(features.shape)} "
                f"and {tuple(other.shape)}"
            )
        views = torch.stack((features, other), dim=1)
    elif features.ndim == 3:
        check_tensor(features, "features", ndim=3)
        views = features
        if other is not None:
            if labels is not None:
                raise ValueError("labels given twice: positionally and as labels=")
            if isinstance(other, Tensor) and other.is_floating_point():
                raise TypeError(
                    "with features[B, V, d] the second argument is labels (an integer "
                    f"tensor), got a floating tensor of shape {tuple(other.shape)}"
                )
            labels = other
    else:
        raise ValueError(
            f"features must be [B, V, d] (or two views [B, d]), got shape {tuple(features.shape)}"
        )
    if views.shape[-1] < 1:
        raise ValueError(f"features must have d >= 1, got shape {tuple(views.shape)}")
    n = int(views.shape[0])
    if labels is not None:
        labels = check_labels(labels, n).to(views.device)
    if targets is not None:
        check_tensor(targets, "targets", ndim=3)
        if targets.shape != views.shape:
            raise ValueError(
                f"targets must have the shape of the views {tuple(views.shape)}, "
                f"got {tuple(targets.shape)}"
            )
        if targets.dtype != views.dtype:
            raise TypeError(
                f"targets dtype {targets.dtype} differs from features dtype {views.dtype}"
            )
    return ViewBatch(views=views, labels=labels, targets=targets)


def check_anchor_mode(anchor_mode: str) -> str:
    """``"all"``: every view is an anchor (SupCon "all"); ``"one"``: view 0 only."""
    check_choice(anchor_mode, "anchor_mode", ("all", "one"))
    return anchor_mode


@dataclass(frozen=True)
class PairLayout:
    """Anchors ``[A, d]``, candidates ``[K, d]`` and how they relate.

    ``self_index[a]`` is the candidate that is anchor ``a`` itself (same instance and
    view); ``instance_positives[a]`` the ``V - 1`` other views of its instance
    (``None`` when ``V = 1``).  Label masks are built on demand.
    """

    anchors: Tensor
    candidates: Tensor
    num_views: int
    anchor_instance: Tensor  # [A]
    candidate_instance: Tensor  # [K]
    self_index: Tensor  # [A]
    instance_positives: Tensor | None  # [A, V-1]
    anchor_labels: Tensor | None  # [A]
    candidate_labels: Tensor | None  # [K]
    #: anchors and candidates are the same rows (``anchor_mode="all"``, no targets)
    shared: bool = False

    def same_label(self) -> Tensor:
        """``[A, K]`` bool: candidate has the anchor's label (self included)."""
        if self.anchor_labels is None or self.candidate_labels is None:
            raise ValueError("this loss needs labels")
        return self.anchor_labels.unsqueeze(1) == self.candidate_labels.unsqueeze(0)


def pair_layout(batch: ViewBatch, anchor_mode: str = "all") -> PairLayout:
    """Flatten views (instance-major) into anchors/candidates and their relations."""
    views = batch.views
    b, v, d = views.shape
    cand_src = views if batch.targets is None else batch.targets
    candidates = cand_src.reshape(b * v, d)
    device = views.device
    cand_inst = torch.arange(b, device=device).repeat_interleave(v)
    rows = torch.arange(b * v, device=device)
    if anchor_mode == "all":
        anchors = views.reshape(b * v, d)
        anc_inst = cand_inst
        self_index = rows
    else:
        anchors = views[:, 0]
        anc_inst = torch.arange(b, device=device)
        self_index = anc_inst * v
    positives = None
    if v > 1:
        # the other v-1 views of the anchor's instance, as candidate indices
        offsets = torch.arange(1, v, device=device)
        own_view = self_index % v
        other_views = (own_view.unsqueeze(1) + offsets.unsqueeze(0)) % v
        positives = (anc_inst * v).unsqueeze(1) + other_views
    cand_lab = anc_lab = None
    if batch.labels is not None:
        cand_lab = batch.labels.repeat_interleave(v)
        anc_lab = cand_lab if anchor_mode == "all" else batch.labels
    shared = anchor_mode == "all" and batch.targets is None
    return PairLayout(
        candidates if shared else anchors,
        candidates,
        v,
        anc_inst,
        cand_inst,
        self_index,
        positives,
        anc_lab,
        cand_lab,
        shared,
    )


def check_extra_negatives(
    extra_negatives: Tensor | None,
    extra_negative_labels: Tensor | None,
    batch: ViewBatch,
) -> tuple[Tensor | None, Tensor | None]:
    """Validate ``extra_negatives[Q, d]`` (+ ``extra_negative_labels[Q]``) against a batch.

    Returns ``(None, None)`` when there is no extra row (``None`` or ``Q = 0``: a zero-row
    queue is exactly no queue).  Labels are required exactly when the batch has labels.
    """
    if extra_negatives is None:
        if extra_negative_labels is not None:
            raise ValueError("extra_negative_labels given without extra_negatives")
        return None, None
    check_tensor(extra_negatives, "extra_negatives", ndim=2)
    d = int(batch.views.shape[-1])
    if int(extra_negatives.shape[1]) != d:
        raise ValueError(
            f"extra_negatives must be [Q, {d}] (the embedding dimension of features), got "
            f"shape {tuple(extra_negatives.shape)}"
        )
    if extra_negatives.dtype != batch.views.dtype:
        raise TypeError(
            f"extra_negatives dtype {extra_negatives.dtype} differs from features dtype "
            f"{batch.views.dtype}"
        )
    q = int(extra_negatives.shape[0])
    if batch.labels is None:
        if extra_negative_labels is not None:
            raise ValueError(
                "extra_negative_labels given, but the loss is computed without labels "
                "(pass labels for the batch, or drop extra_negative_labels)"
            )
    elif extra_negative_labels is None:
        raise ValueError(
            "the batch has labels, so extra_negatives need extra_negative_labels[Q] "
            "(queue rows of the anchor's class are positives)"
        )
    if q == 0:
        return None, None
    labels = None
    if extra_negative_labels is not None:
        labels = check_labels(extra_negative_labels, q, "extra_negative_labels").to(
            batch.views.device
        )
    return extra_negatives.to(batch.views.device), labels


def with_extra_candidates(
    layout: PairLayout, extra: Tensor, extra_labels: Tensor | None
) -> PairLayout:
    """``layout`` with ``extra[Q, d]`` appended to the candidates (indices ``K .. K+Q-1``).

    Extra rows belong to no instance of the batch (instance id ``-1``): they are never
    instance positives and never an anchor's own candidate; with labels they carry
    ``extra_labels``.  ``extra`` must already be normalised like the candidates.
    """
    device = layout.candidates.device
    q = int(extra.shape[0])
    cand_labels = layout.candidate_labels
    if cand_labels is not None:
        assert extra_labels is not None
        cand_labels = torch.cat((cand_labels, extra_labels))
    return replace(
        layout,
        candidates=torch.cat((layout.candidates, extra)),
        candidate_instance=torch.cat(
            (layout.candidate_instance, torch.full((q,), -1, dtype=torch.long, device=device))
        ),
        candidate_labels=cand_labels,
        shared=False,
    )
