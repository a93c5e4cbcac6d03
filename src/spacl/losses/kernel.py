"""The one masked-logsumexp kernel under every contrastive objective in spacl.

Every objective in scope is the same computation over an anchor-by-candidate logit
matrix ``logits[A, K] = <anchor_a, candidate_k> / tau`` with positives ``P``, negatives
``Q`` and optional negative log-weights ``w`` (DESIGN.md)::

    loss_a = den_a - pos_a

    pos_a  = mean_{p in P_a} l_ap                  ("mean":         SupCon L_out, NT-Xent, DCL)
           = log mean_{p in P_a} exp(l_ap)         ("log_mean_exp": SupCon L_in)
           = log sum_{p in P_a} exp(l_ap)          ("log_sum_exp":  SPACL, SPEC §1.5)

    neg_a  = log sum_{q in Q_a} exp(l_aq + w_aq)   (optionally transformed: debiasing)
    den_a  = logaddexp(log sum_{p in P_a} e^{l_ap}, neg_a)   coupled (positives in the denominator)
           = neg_a                                            decoupled (Yeh et al. 2022)

A fourth positive mode, ``"pairwise"``, gives every positive pair its own two-term
denominator, ``loss_a = mean_p -log(e^{l_ap} / (e^{l_ap} + e^{neg_a}))`` (the sampling
estimator of the NC/DC paper, Jiang et al.).

Positives come either as a boolean mask ``[A, K]`` or, when every anchor has the same
number of them (instance positives), as an index ``[A, P]``; the index form avoids
every ``[A, K]`` boolean pass and is what makes NT-Xent cheap.  ``Q`` defaults to
"every candidate that is neither a positive nor the anchor itself" (``self_index``).

Everything is computed in log space; masked entries are ``-inf`` so that they carry
exactly zero weight and zero gradient, and rows with an empty mask never produce NaN
gradients (:func:`masked_logsumexp`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl._validation import check_choice


@dataclass(frozen=True)
class GroupPositives:
    """Positives given by group ids: ``P_a = {k : group_k == group_a, k != self_a}``.

    The label form of SupCon's positives.  In the common coupled "mean" case the
    kernel never materialises the ``[A, K]`` mask: the positive logit sum is a matmul
    with the candidates' one-hot group matrix (``O(A K C)`` in BLAS) and the counts
    come from a bincount.  Other modes fall back to :meth:`mask`.
    """

    anchor_group: Tensor  # [A] long, values in [0, num_groups)
    candidate_group: Tensor  # [K] long, values in [0, num_groups)
    num_groups: int
    #: optional ``[A]`` sums ``sum_{p in P_a} l_ap``, precomputed from the embeddings
    logit_sums: Tensor | None = None

    @classmethod
    def from_labels(cls, anchor_labels: Tensor, candidate_labels: Tensor) -> GroupPositives:
        """Groups from arbitrary integer labels (negative or sparse ids are fine).

        Labels spanning a range of at most ``2 (A + K)`` ids are shifted to start at 0
        (no sort; empty groups are harmless); wider ranges are compacted with
        ``torch.unique``.
        """
        shared = anchor_labels is candidate_labels
        both = candidate_labels if shared else torch.cat((anchor_labels, candidate_labels))
        low, high = (int(x) for x in torch.aminmax(both))
        if high - low < 2 * both.shape[0]:
            groups, num = both - low, high - low + 1
        else:
            uniq, groups = torch.unique(both, return_inverse=True)
            num = int(uniq.shape[0])
        if shared:
            return cls(groups, groups, num)
        a = anchor_labels.shape[0]
        return cls(groups[:a], groups[a:], num)

    def mask(self, self_index: Tensor | None) -> Tensor:
        """Dense ``[A, K]`` bool mask of the positives."""
        same = self.anchor_group.unsqueeze(1) == self.candidate_group.unsqueeze(0)
        if self_index is not None:
            same = same.scatter(1, self_index.unsqueeze(1), False)
        return same

    def counts(self, self_index: Tensor | None) -> Tensor:
        """``[A]`` number of positives of each anchor."""
        per_group = torch.bincount(self.candidate_group, minlength=self.num_groups)
        count = per_group[self.anchor_group]
        if self_index is not None:
            count = count - (self.candidate_group[self_index] == self.anchor_group).long()
        return count

    def rows(self, keep: Tensor) -> GroupPositives:
        """The same positives for the anchors selected by ``keep``."""
        sums = None if self.logit_sums is None else self.logit_sums[keep]
        return GroupPositives(self.anchor_group[keep], self.candidate_group, self.num_groups, sums)

    def with_logit_sums(
        self, scaled_anchors: Tensor, candidates: Tensor, self_index: Tensor | None
    ) -> GroupPositives:
        """Attach ``sum_{p in P_a} <a/tau, c_p>`` computed from class sums of the candidates.

        ``O((A + K) d)``: ``sum_{k: y_k = y_a} <a, c_k> = <a, sum_{k: y_k = y_a} c_k>``,
        minus the anchor's own candidate when it is in its group.
        """
        class_sums = torch.zeros(
            self.num_groups, candidates.shape[1], dtype=candidates.dtype, device=candidates.device
        ).index_add(0, self.candidate_group, candidates)
        sums = (scaled_anchors * class_sums[self.anchor_group]).sum(1)
        if self_index is not None:
            own = (scaled_anchors * candidates[self_index]).sum(1)
            in_group = self.candidate_group[self_index] == self.anchor_group
            sums = sums - torch.where(in_group, own, torch.zeros_like(own))
        return GroupPositives(self.anchor_group, self.candidate_group, self.num_groups, sums)


PositiveMode = Literal["mean", "log_mean_exp", "log_sum_exp", "pairwise"]
POSITIVE_MODES: tuple[str, ...] = ("mean", "log_mean_exp", "log_sum_exp", "pairwise")

#: a transform of ``neg_a`` given ``(neg, logits, positive_mask, negative_mask)``
NegativeTransform = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def masked_logsumexp(x: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """``log sum_{j: mask_j} exp(x_j)`` along ``dim``, ``-inf`` for an empty mask.

    A row whose mask is empty returns ``-inf`` in the forward pass *and* a zero
    gradient in the backward pass (never NaN): the shift is detached and finite and
    every masked entry is cut out of the graph by ``masked_fill``.

    Example:
        >>> import torch
        >>> from spacl.losses import masked_logsumexp
        >>> x, mask = torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([[True, False, True]])
        >>> torch.allclose(masked_logsumexp(x, mask), torch.logsumexp(torch.tensor([0.0, 2.0]), 0))
        True
    """
    if mask is not None:
        x = x.masked_fill(~mask, -math.inf)
    shift = x.detach().amax(dim=dim, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    total = (x - shift).exp().sum(dim=dim, keepdim=True)
    return (total.log() + shift).squeeze(dim)


def segment_logsumexp(
    values: Tensor, segment: Tensor, count: int, dense: Tensor | None = None
) -> Tensor:
    """``[count]``: ``log( sum_{j: segment_j = r} e^{values_j} + sum_k e^{dense_rk} )`` per row.

    The log-sum-exp of a flat list of entries grouped by row (``segment[E]`` in
    ``[0, count)``), plus an optional ``dense[count, K]`` block (``-inf`` where absent).
    Shifted by each row's largest entry (detached): one segment ``amax``, one
    ``index_add`` of the exponentials.  A row with no entry returns ``-inf`` with a zero
    (never NaN) gradient, as :func:`masked_logsumexp`.
    """
    shift = values.new_full((count,), -math.inf).scatter_reduce(
        0, segment, values.detach(), reduce="amax", include_self=True
    )
    if dense is not None:
        shift = torch.maximum(shift, dense.detach().amax(1))
    shift = torch.where(torch.isfinite(shift), shift, 0.0)
    total = values.new_zeros(count).index_add(0, segment, (values - shift[segment]).exp())
    if dense is not None:
        total = total + (dense - shift.unsqueeze(1)).exp().sum(1)
    some = total > 0
    return torch.where(some, torch.where(some, total, 1.0).log() + shift, -math.inf)


def _fill_at(x: Tensor, index: Tensor, value: float) -> Tensor:
    """Out-of-place ``x[a, index[a, j]] = value`` (index ``[A]`` or ``[A, P]``)."""
    if index.ndim == 1:
        index = index.unsqueeze(1)
    return x.scatter(1, index, value)


def _index_to_mask(index: Tensor, shape: torch.Size) -> Tensor:
    mask = torch.zeros(shape, dtype=torch.bool, device=index.device)
    idx = index.unsqueeze(1) if index.ndim == 1 else index
    return mask.scatter_(1, idx, True)


def tilt_log_weights(logits: Tensor, negative_mask: Tensor, beta: float) -> Tensor:
    """HCL's hardness log-weights ``log(N_a softmax_q(beta l_aq))`` over the negatives.

    ``sum_q exp(l_aq + w_aq) = N_a * sum_q softmax_q(beta l_aq) e^{l_aq}`` (Robinson et
    al. 2021), entries off ``negative_mask`` are irrelevant (masked later).
    """
    tilted = beta * logits
    count = negative_mask.sum(1, keepdim=True).to(logits.dtype)
    return tilted + count.log() - masked_logsumexp(tilted, negative_mask).unsqueeze(1)


# long: a 45-line docstring of its 14 arguments; the body (about 55 lines) only dispatches
def contrastive_kernel(
    logits: Tensor,
    positives: Tensor | GroupPositives,
    negative_mask: Tensor | None = None,
    *,
    self_index: Tensor | None = None,
    negative_log_weights: Tensor | None = None,
    tilt: float = 0.0,
    detach_tilt: bool = False,
    positive_mode: PositiveMode = "mean",
    positive_in_denominator: bool = True,
    negative_transform: NegativeTransform | None = None,
    inplace: bool = False,
    positive_logits: Tensor | None = None,
    logit_bound: float | None = None,
    check_positives: bool = True,
) -> Tensor:
    """Per-anchor contrastive loss ``[A]`` (formula in the module docstring).

    Args:
        logits: ``[A, K]`` anchor-candidate similarities divided by the temperature.
        positives: bool mask ``[A, K]``, long index ``[A, P]`` or :class:`GroupPositives`
            of each anchor's positives.  Every anchor must have at least one (callers
            drop the others; a ``ValueError`` otherwise).
        negative_mask: ``[A, K]`` bool; ``None`` = every candidate that is neither a
            positive nor ``self_index``.
        self_index: ``[A]`` candidate index of each anchor itself (excluded from both
            sides), or ``None`` when anchors are not among the candidates.
        negative_log_weights: ``[A, K]`` additive log-weights on the negatives.
        tilt: hardness ``beta`` of HCL's reweighting (``0`` = uniform); added to
            ``negative_log_weights`` via :func:`tilt_log_weights`.
        detach_tilt: detach the hardness weights from the graph.
        positive_mode: how positives enter the numerator.
        positive_in_denominator: coupled (``True``) or decoupled (``False``).
        negative_transform: applied to ``neg[A]`` before it enters the denominator.
        inplace: the kernel may overwrite ``logits`` (the caller owns them and needs
            them no more); saves ``[A, K]`` copies on the common path.
        positive_logits: ``[A, P]`` values of ``logits`` at index positives, when the
            caller computed them from the embeddings (``O(A P d)``); lets the common
            path skip indexing into ``logits`` (whose backward is a dense ``[A, K]`` fill).
        logit_bound: a bound on ``|logits|`` known to the caller (``1/tau`` for
            embeddings on the sphere or in the ball); enables a fixed-shift logsumexp.
        check_positives: verify that every anchor has a positive (one pass and one
            device-to-host read); ``False`` for a caller that built them so (the losses).

    Example (one positive per row, in the denominator: cross-entropy on the logits):
        >>> import torch
        >>> from spacl.losses import contrastive_kernel
        >>> logits = torch.randn(5, 5)
        >>> per_row = contrastive_kernel(logits, torch.eye(5, dtype=torch.bool))
        >>> ce = torch.nn.functional.cross_entropy(logits, torch.arange(5), reduction="none")
        >>> torch.allclose(per_row, ce)
        True
    """
    check_choice(positive_mode, "positive_mode", POSITIVE_MODES)
    simple = (
        positive_in_denominator
        and negative_mask is None
        and negative_log_weights is None
        and tilt == 0.0
        and negative_transform is None
        and positive_mode != "pairwise"
    )
    if isinstance(positives, GroupPositives):
        if simple and positive_mode == "mean":
            return _group_mean_loss(logits, positives, self_index, inplace, logit_bound)
        positives = positives.mask(self_index)
    as_index = positives.dtype != torch.bool
    if check_positives:
        _check_every_anchor_has_a_positive(positives, as_index)
    if simple:
        return _all_candidates_loss(
            logits, positives, self_index, positive_mode, inplace, positive_logits, logit_bound
        )

    needs_mask = (
        negative_mask is not None
        or negative_log_weights is not None
        or tilt != 0.0
        or negative_transform is not None
        or not as_index
    )
    pos_mask = positives
    if as_index and needs_mask:
        pos_mask = _index_to_mask(positives, logits.shape)
    if negative_mask is None and needs_mask:
        negative_mask = ~pos_mask
        if self_index is not None:
            negative_mask = negative_mask & ~_index_to_mask(self_index, logits.shape)
    neg = _negative_term(
        logits, positives, self_index, negative_mask, negative_log_weights, tilt, detach_tilt
    )
    if negative_transform is not None:
        assert negative_mask is not None
        neg = negative_transform(neg, logits, pos_mask, negative_mask)

    if positive_mode == "pairwise":
        return _pairwise_loss(logits, positives, pos_mask, neg)
    den = neg  # decoupled; coupled: the positives join the denominator
    if positive_in_denominator:
        den = torch.logaddexp(_positive_lse(logits, positives, as_index), neg)
    return den - _positive_term(logits, positives, positive_mode, as_index)


def _pairwise_loss(logits: Tensor, positives: Tensor, pos_mask: Tensor, neg: Tensor) -> Tensor:
    """``mean_p softplus(neg_a - l_ap)``: one binary term per positive pair."""
    as_index = positives.dtype != torch.bool
    pos_logits = logits.gather(1, positives) if as_index else logits
    pair = F.softplus(neg.unsqueeze(1) - pos_logits)
    if as_index:
        return pair.mean(1)
    pair = pair.masked_fill(~pos_mask, 0.0)
    return pair.sum(1) / pos_mask.sum(1).to(logits.dtype)


def _check_every_anchor_has_a_positive(positives: Tensor, as_index: bool) -> None:
    """``ValueError`` unless every row of ``positives`` (index or mask) names one."""
    if as_index and positives.shape[1] == 0:
        found = f"an index of shape {tuple(positives.shape)}"
    elif not as_index and not bool(positives.any(1).all()):
        found = f"a mask with {int((~positives.any(1)).sum())} of {positives.shape[0]} rows empty"
    else:
        return
    raise ValueError(
        "positives: every anchor needs at least one positive (the loss of an anchor "
        f"without one is undefined; drop those rows first), got {found}"
    )


def _all_candidates_loss(
    logits: Tensor,
    positives: Tensor,
    self_index: Tensor | None,
    positive_mode: PositiveMode,
    inplace: bool,
    positive_logits: Tensor | None,
    logit_bound: float | None,
) -> Tensor:
    """The common path: P u Q = every candidate but the anchor itself, positives in the
    denominator, uniform weights: one logsumexp, no mask."""
    as_index = positives.dtype != torch.bool
    if as_index and positive_mode == "mean":
        if positive_logits is None:
            rows = torch.arange(logits.shape[0], device=logits.device).unsqueeze(1)
            positive_logits = logits[rows, positives]
            inplace = False  # indexing's backward is not affected, but keep it simple
        lse = _logsumexp_without_self(logits, self_index, inplace, logit_bound)
        return lse - positive_logits.mean(1)
    full = _exclude_self(logits, self_index, inplace=False)
    log_prob = F.log_softmax(full, dim=1)
    return -_positive_term(log_prob, positives, positive_mode, as_index)


def _negative_term(
    logits: Tensor,
    positives: Tensor,
    self_index: Tensor | None,
    negative_mask: Tensor | None,
    negative_log_weights: Tensor | None,
    tilt: float,
    detach_tilt: bool,
) -> Tensor:
    """``neg[A] = log sum_{k in N(a)} w_ak e^{l_ak}``: the weighted (and tilted) logsumexp
    over the negative mask, or, with no mask (index positives, uniform weights), over
    every candidate but the positives and the anchor itself."""
    weighted = logits
    if negative_log_weights is not None:
        weighted = weighted + negative_log_weights
    if tilt != 0.0:
        assert negative_mask is not None
        w = tilt_log_weights(logits, negative_mask, tilt)
        weighted = weighted + (w.detach() if detach_tilt else w)
    if negative_mask is not None:
        return masked_logsumexp(weighted, negative_mask)
    blocked = positives if self_index is None else torch.cat((positives, self_index[:, None]), 1)
    return torch.logsumexp(_fill_at(weighted, blocked, -math.inf), dim=1)


def _exclude_self(logits: Tensor, self_index: Tensor | None, inplace: bool) -> Tensor:
    """``logits`` with ``-inf`` at each anchor's own candidate."""
    if self_index is None:
        return logits
    idx = self_index.unsqueeze(1)
    if inplace:
        return logits.scatter_(1, idx, -math.inf)
    return logits.scatter(1, idx, -math.inf)


#: largest ``2 * bound`` for which ``exp(l - bound)`` cannot underflow a whole row, per dtype
SAFE_SPAN = {torch.float32: 80.0, torch.float64: 700.0}


class _SelfExcludedLogSumExp(torch.autograd.Function):
    """``log sum_{k != self_a} exp(l_ak)`` computed in place on ``logits``.

    Forward writes ``-inf`` at the self entries of ``logits`` (owned by the caller)
    and reduces; backward is the softmax times the incoming gradient, exactly zero at
    the self entries.  When every logit is known to lie in ``[-bound, bound]``
    (unit-norm embeddings: ``bound = 1/tau``) the row maximum is replaced by the fixed
    shift ``bound`` — ``exp(l - bound) <= 1`` cannot overflow and, for
    ``2 bound <= 80`` in float32, cannot underflow a row — so the exponentials are
    computed once, in place, and reused by the backward pass.
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, self_index: Tensor, bound: float | None) -> Tensor:
        logits.scatter_(1, self_index.unsqueeze(1), -math.inf)
        if bound is None:
            lse = torch.logsumexp(logits, dim=1)
            ctx.save_for_backward(logits, lse)
            ctx.fixed_shift = False
            return lse
        weights = logits.sub_(bound).exp_()  # exp(l - bound), 0 at self
        total = weights.sum(1)
        ctx.save_for_backward(weights, total)
        ctx.fixed_shift, ctx.bound = True, bound
        return total.log() + bound

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        if torch.is_grad_enabled():
            # create_graph=True: a differentiable softmax of the original logits.  The
            # saved tensor is the input after its in-place update; rebuild the values
            # and keep an identity path to the input's graph (straight-through).
            saved, _ = ctx.saved_tensors
            if ctx.fixed_shift:  # saved = exp(l - bound), 0 at self
                rebuilt = saved.detach().log() + ctx.bound
                saved = saved - saved.detach() + rebuilt
            return torch.softmax(saved, dim=1) * grad.unsqueeze(1), None, None
        if ctx.fixed_shift:
            weights, total = ctx.saved_tensors
            return weights * (grad / total).unsqueeze(1), None, None
        logits, lse = ctx.saved_tensors
        soft = (logits - lse.unsqueeze(1)).exp_()
        return soft.mul_(grad.unsqueeze(1)), None, None


def _logsumexp_without_self(
    logits: Tensor, self_index: Tensor | None, inplace: bool, bound: float | None = None
) -> Tensor:
    """Row-wise logsumexp of ``logits`` leaving out each anchor's own candidate."""
    if self_index is None:
        return torch.logsumexp(logits, dim=1)
    if inplace and logits.requires_grad and logits.grad_fn is not None:
        span = SAFE_SPAN.get(logits.dtype)
        if bound is not None and (span is None or 2.0 * bound > span):
            bound = None
        out: Tensor = _SelfExcludedLogSumExp.apply(logits, self_index, bound)
        return out
    return torch.logsumexp(_exclude_self(logits, self_index, inplace), dim=1)


def _group_mean_loss(
    logits: Tensor,
    group: GroupPositives,
    self_index: Tensor | None,
    inplace: bool,
    bound: float | None = None,
) -> Tensor:
    """Coupled "mean" loss (SupCon L_out) with label positives, without an ``[A, K]`` mask.

    ``loss_a = lse_{k != a} l_ak - (sum_{k in P_a} l_ak) / |P_a|``; the positive sums come
    precomputed from class sums of the embeddings, or from ``logits @ onehot``.
    """
    sums = group.logit_sums
    if sums is None:
        onehot = F.one_hot(group.candidate_group, group.num_groups).to(logits.dtype)
        sums = (logits @ onehot).gather(1, group.anchor_group.unsqueeze(1)).squeeze(1)
        if self_index is not None:
            in_group = group.candidate_group[self_index] == group.anchor_group
            own = logits.gather(1, self_index.unsqueeze(1)).squeeze(1)
            sums = sums - torch.where(in_group, own, torch.zeros_like(own))
        inplace = False  # logits were used above
    lse = _logsumexp_without_self(logits, self_index, inplace, bound)
    return lse - sums / group.counts(self_index).to(logits.dtype)


def _positive_lse(logits: Tensor, positives: Tensor, as_index: bool) -> Tensor:
    if as_index:
        return torch.logsumexp(logits.gather(1, positives), dim=1)
    return masked_logsumexp(logits, positives)


def _positive_term(logits: Tensor, positives: Tensor, mode: str, as_index: bool) -> Tensor:
    if mode == "mean":
        if as_index:
            return logits.gather(1, positives).mean(1)
        count = positives.sum(1).to(logits.dtype)
        return torch.where(positives, logits, 0.0).sum(1) / count
    lse = _positive_lse(logits, positives, as_index)
    if mode == "log_mean_exp":
        if as_index:
            return lse - math.log(positives.shape[1])
        return lse - positives.sum(1).to(logits.dtype).log()
    return lse


def reduce_anchors(per_anchor: Tensor, reduction: str) -> Tensor:
    """Reduce per-anchor losses: ``"mean"`` (default everywhere), ``"sum"`` or ``"none"``."""
    if reduction == "mean":
        return per_anchor.mean()
    if reduction == "sum":
        return per_anchor.sum()
    if reduction == "none":
        return per_anchor
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
