"""Shared machinery of the pairwise contrastive losses: inputs, logits, masks, reduction."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_positive
from spacl.losses._batch import (
    PairLayout,
    ViewBatch,
    check_anchor_mode,
    check_extra_negatives,
    pair_layout,
    parse_views,
    with_extra_candidates,
)
from spacl.losses._cross import cross_logsumexp
from spacl.losses._gram import gram_logsumexp_without_self
from spacl.losses.kernel import (
    SAFE_SPAN,
    GroupPositives,
    NegativeTransform,
    PositiveMode,
    contrastive_kernel,
    masked_logsumexp,
    reduce_anchors,
)
from spacl.losses.normalize import NormalizeMode, check_normalize_mode, normalize


class PairwiseContrastiveLoss(nn.Module):
    """Base class: builds ``logits = <f(a), g(c)> / tau``, selects pairs, calls the kernel.

    Subclasses define :meth:`select` (positives as an index or mask, and an optional
    explicit negative mask) and may set :meth:`kernel_options` (hardness tilt,
    debiasing).  Anchors that have no positive (or, for decoupled losses, no negative)
    are left out of the reduction; if *no* anchor is usable a ``ValueError`` says why
    (never NaN, never a silent zero).  With ``reduction="none"`` the result has one value
    per anchor, in anchor order, and 0 at an anchor left out (as torch's ``ignore_index``):
    its sum over the usable anchors, divided by their number, is the ``"mean"``.

    ``needs_negative_pair`` (class attribute, default ``True``): whether the loss is
    undefined on a batch without any negative pair (a single class).  Losses whose
    denominator excludes the positives (decoupled, negatives-only) or that weight and
    count the negatives (HCL, debiasing) need one; SupCon's denominator holds the
    positives, so it sets ``False`` and is computed on a one-class batch.

    Example (a minimal subclass: the other views of an instance are its positives, the
    rest its negatives, which is NT-Xent):
        >>> import torch
        >>> from spacl.losses import NTXentLoss, PairwiseContrastiveLoss
        >>> class InstanceLoss(PairwiseContrastiveLoss):
        ...     def select(self, layout):  # positives as an index [A, P]; default negatives
        ...         return layout.instance_positives, None
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> torch.allclose(InstanceLoss(0.5)(z0, z1), NTXentLoss(temperature=0.5)(z0, z1))
        True
    """

    positive_mode: PositiveMode = "mean"
    positive_in_denominator: bool = True
    needs_negative_pair: bool = True
    supports_labels: bool = True
    requires_labels: bool = False

    def __init__(
        self,
        temperature: float,
        *,
        normalize: NormalizeMode = "sphere",
        anchor_mode: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.normalize = check_normalize_mode(normalize)
        self.anchor_mode = check_anchor_mode(anchor_mode)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    # -- hooks ---------------------------------------------------------------------------
    def select(self, layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
        """Return ``(positives, negative_mask)``: positives as a long index ``[A, P]`` or
        a bool mask ``[A, K]``; ``negative_mask=None`` means "all but positives and self"."""
        raise NotImplementedError

    def kernel_options(self) -> dict[str, Any]:
        """Extra keyword arguments for :func:`contrastive_kernel` (tilt, transforms)."""
        return {}

    # -- forward ---------------------------------------------------------------------------
    def forward(
        self,
        features: Tensor,
        other: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        targets: Tensor | None = None,
        extra_negatives: Tensor | None = None,
        extra_negative_labels: Tensor | None = None,
    ) -> Tensor:
        """Loss of a batch.

        Args:
            features: ``[B, V, d]`` views of each instance, or the first of two views
                ``[B, d]`` when ``other`` is the second view.
            other: the second view ``z1[B, d]`` (two-view form), or the labels ``[B]``
                when ``features`` is ``[B, V, d]``.
            labels: class labels ``[B]`` (keyword form).
            targets: optional ``[B, V, d]`` candidate embeddings from a target encoder;
                anchors come from ``features``.
            extra_negatives: optional ``[Q, d]`` extra candidates, e.g. a
                :class:`~spacl.mining.NegativeQueue` of past target embeddings (MoCo).
                They are normalised like the candidates and join every anchor's
                candidates after the in-batch ones: negatives of every anchor (never
                an instance positive, never "self"), in the denominator, the hardness
                weights and the debiasing counts alike.  ``Q = 0`` is exactly no queue.
                Gradients flow into them only if they require grad (a queue's do not).
            extra_negative_labels: ``[Q]`` labels of the extra rows; required exactly
                when the batch has labels.  With labels, the positive rule of the loss
                applies to the extra rows too: for SupCon / HSCL a row of the anchor's
                class is a **positive** (it enters ``P_a`` and the positive mean of
                L_out), as in the MoCo-SupCon variants; for NSCL it is neither positive
                nor negative.
        """
        batch = parse_views(features, other, labels, targets)
        name = type(self).__name__
        check_loss_batch(
            batch,
            name,
            takes_labels=self.supports_labels,
            needs_labels=self.requires_labels,
            needs_negative_pair=self.needs_negative_pair,
        )
        extra, extra_labels = check_extra_negatives(extra_negatives, extra_negative_labels, batch)
        layout = pair_layout(batch, self.anchor_mode)
        anchors, candidates = scaled_pairs(layout, self.normalize, self.temperature)
        in_batch = candidates
        shared = layout.shared
        if extra is not None:
            extra = normalize(extra, self.normalize)
            layout = with_extra_candidates(layout, extra, extra_labels)
            candidates = torch.cat((in_batch, extra))
        positives, negatives = self.select(layout)
        positive_logits = None
        simple = self.uses_simple_path() and negatives is None
        if simple:
            positives, positive_logits = simple_positives(
                positives, anchors, candidates, layout.self_index
            )
        bound = self._logit_bound(candidates.dtype)
        if simple and shared and bound is not None:
            return self._shared_simple_loss(
                in_batch, positives, positive_logits, bound, name, extra
            )
        logits = anchors @ candidates.T
        return self._reduce_valid(
            logits, positives, negatives, layout.self_index, name, positive_logits
        )

    def _logit_bound(self, dtype: torch.dtype) -> float | None:
        """``1/tau`` when the embeddings are bounded and ``exp(l - 1/tau)`` cannot
        underflow a whole row in ``dtype``, else ``None``."""
        if self.normalize == "none":
            return None
        bound = 1.0 / self.temperature
        span = SAFE_SPAN.get(dtype)
        return bound if span is not None and 2.0 * bound <= span else None

    def _shared_simple_loss(
        self,
        unit: Tensor,
        positives: Tensor | GroupPositives,
        positive_logits: Tensor | None,
        bound: float,
        name: str,
        extra: Tensor | None = None,
    ) -> Tensor:
        """The coupled "mean" loss when anchors are the candidates (``self_index`` is the
        diagonal): the denominator is fused from the embeddings (:mod:`._gram`); extra
        candidates add ``log sum_j exp(<z_a, q_j>/tau)`` fused the same way (:mod:`._cross`)."""
        num = unit.shape[0]
        num_cand = num + (0 if extra is None else int(extra.shape[0]))
        if isinstance(positives, GroupPositives):
            assert positives.logit_sums is not None
            count = positives.counts(torch.arange(num, device=unit.device))
            valid = self._usable_anchors(count, None, num, num_cand, name)
            pos_mean = positives.logit_sums / count.clamp_min(1).to(unit.dtype)
        else:
            assert positive_logits is not None
            valid, pos_mean = None, positive_logits.mean(1)
        scale = 1.0 / self.temperature
        den = gram_logsumexp_without_self(unit, scale, bound)
        if extra is not None:
            den = torch.logaddexp(den, cross_logsumexp(unit, extra, scale, bound))
        per_anchor = den - pos_mean
        if valid is not None:
            per_anchor = per_anchor[valid]
        return self._reduce_kept(per_anchor, valid)

    def _reduce_kept(self, per_kept: Tensor, kept: Tensor | None) -> Tensor:
        """Reduce the losses of the ``kept`` anchors (``None``: all); with ``"none"``, one
        value per anchor, 0 at an anchor left out (as ``ignore_index`` in torch's losses)."""
        if kept is not None and self.reduction == "none":
            return per_kept.new_zeros(kept.shape).masked_scatter(kept, per_kept)
        return reduce_anchors(per_kept, self.reduction)

    def _usable_anchors(
        self,
        pos_count: Tensor,
        negatives: Tensor | None,
        num_anchors: int,
        num_cand: int,
        name: str,
    ) -> Tensor | None:
        """Anchors with a positive (and, decoupled, a negative); ``None`` when all are.

        Raises ``ValueError`` when the batch has no positive pair, or no negative pair
        for a loss that needs one (``needs_negative_pair``).
        """
        has_pos = pos_count > 0
        has_neg = negatives.any(1) if negatives is not None else pos_count < num_cand - 1
        if self.needs_negative_pair and not bool(has_neg.any()):
            raise ValueError(
                f"{name}: the batch has no negative pair (a single class?): "
                f"{num_anchors} anchors x {num_cand} candidates"
            )
        if not bool(has_pos.any()):
            raise ValueError(
                f"{name}: no anchor in the batch has a positive (every label unique "
                "and one view?); the loss is undefined"
            )
        valid = has_pos if self.positive_in_denominator else has_pos & has_neg
        if bool(valid.all()):
            return None
        if not bool(valid.any()):
            raise ValueError(f"{name}: no anchor has both a positive and a negative")
        return valid

    def uses_simple_path(self) -> bool:
        """Whether the kernel takes its mask-free path (coupled, "mean", no weights)."""
        return (
            self.positive_mode == "mean"
            and self.positive_in_denominator
            and not self.kernel_options()
        )

    def _reduce_valid(
        self,
        logits: Tensor,
        positives: Tensor | GroupPositives,
        negatives: Tensor | None,
        self_index: Tensor,
        name: str,
        positive_logits: Tensor | None = None,
    ) -> Tensor:
        num_anchors, num_cand = logits.shape
        kept: Tensor | None = None
        if isinstance(positives, GroupPositives) or positives.dtype == torch.bool:
            if isinstance(positives, GroupPositives):
                pos_count = positives.counts(self_index)
            else:
                pos_count = positives.sum(1)
            valid = self._usable_anchors(pos_count, negatives, num_anchors, num_cand, name)
            if valid is not None:
                if isinstance(positives, GroupPositives):
                    positives = positives.rows(valid)
                else:
                    positives = positives[valid]
                logits, self_index = logits[valid], self_index[valid]
                negatives = None if negatives is None else negatives[valid]
                kept = valid
        elif negatives is not None:
            has_neg = negatives.any(1)
            if not bool(has_neg.all()):
                if not bool(has_neg.any()):
                    raise ValueError(
                        f"{name}: no anchor has a negative (a single class in the batch?)"
                    )
                keep = has_neg
                logits, positives, self_index = logits[keep], positives[keep], self_index[keep]
                negatives = negatives[keep]
                kept = keep
        per_anchor = contrastive_kernel(
            logits,
            positives,
            negatives,
            self_index=self_index,
            positive_mode=self.positive_mode,
            positive_in_denominator=self.positive_in_denominator,
            inplace=True,
            positive_logits=positive_logits,
            logit_bound=None if self.normalize == "none" else 1.0 / self.temperature,
            check_positives=False,  # the rows kept above all have a positive
            **self.kernel_options(),
        )
        return self._reduce_kept(per_anchor, kept)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, normalize={self.normalize!r}, "
            f"anchor_mode={self.anchor_mode!r}"
        )


def check_loss_batch(
    batch: ViewBatch,
    name: str,
    *,
    takes_labels: bool,
    needs_labels: bool,
    needs_negative_pair: bool,
) -> None:
    """Refuse, naming the loss ``name``, a batch it is undefined on: labels it does not
    take or lacks, no instance, or one instance where a negative pair is needed."""
    if batch.labels is not None and not takes_labels:
        raise ValueError(f"{name} is unsupervised and takes no labels")
    if batch.labels is None and needs_labels:
        raise ValueError(f"{name} needs labels: call loss(features, labels)")
    if batch.num_instances == 0:
        raise ValueError(f"{name}: features is an empty batch, of shape {tuple(batch.views.shape)}")
    if batch.num_instances < 2 and needs_negative_pair:
        raise ValueError(
            f"{name}: a batch needs at least 2 instances to have a negative, got "
            f"features of shape {tuple(batch.views.shape)}"
        )


def scaled_pairs(
    layout: PairLayout, mode: NormalizeMode, temperature: float
) -> tuple[Tensor, Tensor]:
    """``(anchors / temperature, candidates)``, both normalised by ``mode``; when the
    layout shares them, the anchors are the normalised candidates themselves."""
    candidates = normalize(layout.candidates, mode)
    if layout.shared:
        return candidates / temperature, candidates
    return normalize(layout.anchors, mode) / temperature, candidates


def simple_positives(
    positives: Tensor | GroupPositives, anchors: Tensor, candidates: Tensor, self_index: Tensor
) -> tuple[Tensor | GroupPositives, Tensor | None]:
    """The positives of the kernel's mask-free path and their logits: a group gets its
    logit sums, an index ``[A, P]`` its logits ``<a/tau, c_p>`` from the embeddings
    (O(A P d), no indexing into the logits); a mask passes as it is, with no logits."""
    if isinstance(positives, GroupPositives):
        return positives.with_logit_sums(anchors, candidates, self_index), None
    if positives.dtype != torch.bool:
        return positives, torch.einsum("ad,apd->ap", anchors, candidates[positives])
    return positives, None


def instance_select(layout: PairLayout) -> tuple[Tensor, Tensor | None]:
    """Positives: the other views of the instance (index). Negatives: all other instances."""
    if layout.instance_positives is None:
        raise ValueError("instance positives need V >= 2 views per instance, got V = 1")
    return layout.instance_positives, None


def label_select(layout: PairLayout) -> tuple[Tensor | GroupPositives, Tensor | None]:
    """Positives: same label, not self (mask). Negatives: every other label.

    Without labels every instance is its own class (instance positives, NT-Xent).
    """
    if layout.anchor_labels is None or layout.candidate_labels is None:
        return instance_select(layout)
    return GroupPositives.from_labels(layout.anchor_labels, layout.candidate_labels), None


def debias_transform(tau_plus: float, temperature: float) -> NegativeTransform:
    """Chuang et al. (2020) debiasing of the negative mass, in log space.

    ``Ng = max((neg - tau_plus * N * pos) / (1 - tau_plus), N * exp(-1/tau))`` with ``N``
    the anchor's negative count and ``pos`` the mean positive ``exp(logit)`` (the one
    positive in the two-view case).  The clamp is the reference's ``N e^{-1/tau}``,
    the smallest mass ``N`` unit-norm negatives can have.
    """
    log_tp = math.log(tau_plus)
    log_one_minus = math.log1p(-tau_plus)

    def transform(
        neg: Tensor, logits: Tensor, positive_mask: Tensor, negative_mask: Tensor
    ) -> Tensor:
        n_pos = positive_mask.sum(1).to(logits.dtype)
        log_n = negative_mask.sum(1).to(logits.dtype).log()
        log_pos = masked_logsumexp(logits, positive_mask) - n_pos.log()
        ratio = log_tp + log_n + log_pos - neg  # log(tau+ N pos / neg)
        ok = ratio < 0
        safe = torch.where(ok, ratio, torch.full_like(ratio, -1.0))  # no NaN in either branch
        debiased = neg + torch.log(-torch.expm1(safe)) - log_one_minus
        debiased = torch.where(ok, debiased, torch.full_like(debiased, -math.inf))
        return torch.maximum(debiased, log_n - 1.0 / temperature)

    return transform
