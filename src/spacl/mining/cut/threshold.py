"""Relative-threshold negative selection for SPACL (SPEC §1.4): a top-p cut without a sort.

Given weights ``w_ij`` of the candidate negatives of anchor ``i``, keep the hardest
negatives ``Q_i^h``: the *shortest prefix* of the candidates sorted by decreasing
similarity whose cumulative weight reaches ``share * sum_j w_ij``.  Every kept negative
is at least as similar to the anchor as every dropped one.

**Decisions** (SPEC §1.4, revised):

- ``mass="similarity"`` (default, the paper's formula
  ``sum_{q in Q^h} sim(a, q) = lambda_Q * sum_{q in Q} sim(a, q)`` on raw inner products):
  ``w_ij = s_ij``, signed.  Sort by decreasing ``s_ij`` and keep the shortest prefix
  whose cumulative sum of ``s_ij`` reaches ``share * sum_j s_ij``.  When the total is
  ``> 0`` the prefix ends inside the positive similarities (their sum is at least the
  total), so the cumulative sum is monotone where it crosses; when the total is
  ``<= 0`` the first candidate already reaches it (or nothing ever does), and exactly
  the hardest negative is kept — no special case.  The cut is adaptive: while the
  negatives are all alike (early training, every ``s`` near 1) it keeps about
  ``share`` of them; once they spread around 0 it keeps only those above the bulk.
- ``mass="exp"``: ``w_ij = exp(s_ij / tau)`` — a top-p cut of the negatives' softmax
  mass.  It changes an anchor's loss by at most ``-log(share)`` (0.051 nats at 0.95):
  an option, not the paper's reading.  ``mass="linear"``: ``w_ij = (1 + s_ij) / 2``
  (clamped at 0 for non-unit embeddings).
- The order is by decreasing logit (both masses are non-decreasing functions of it),
  ties broken by *index*: the prefix is that of a stable sort (equal logits in
  increasing candidate order), so exactly as many tied candidates are kept as the
  prefix needs, the lowest-indexed first.
- ``share = 1`` keeps every candidate for every mass (also those whose weight underflows
  to 0, and the negatively similar tail of ``"similarity"``): ``lambda_Q = 1`` is the
  paper's "no negative selection" ablation.  With ``"exp"`` / ``"linear"`` a row whose
  total weight is 0 keeps every candidate.
- Running weights are summed in float64 whatever the input dtype (for ``"exp"`` from
  weights exponentiated in the logits' dtype, an ulp or two of relative error each);
  the total weight of a row is summed in the logits' dtype on the fast path (for
  ``"exp"`` from the same weights) and again in float64 by the exact selection of the
  rows the fast path leaves (for long rows with ``compiled=True``, in the histogram
  pass): totals that differ by a few ulps of the logits' dtype, against a margin of
  ``(1 - share)`` of the total.  They can move the cut only where a running sum lies
  that close to the target.
- This is the one implementation of the cut, with one entry point,
  :meth:`RelativeThresholdNegatives.select` (the output form an argument):
  :class:`SPACLLoss`'s dense and compact paths and the link-prediction objective all
  call it.

On a GPU (:data:`SORTED_DEVICES`) every row takes one stable descending sort
(:func:`~spacl.mining.cut.exact.sorted_prefixes`): the same totals and weights, the
prefix read off the sorted running sums, one host wait in all; the branches of the path
below wait on the host at every step, which costs a GPU more than the sort (14 of
the 27 host waits of a SPACL step on an H200 before the sort; after it and the removal
of the others, 5 in all, SimCLR's 4 and this one: ``benchmarks/results/gpu.md``).

Algorithm elsewhere (no sort of the ``K`` candidates).  On CPU (float32 / float64 keys,
numba available) the fast rows are settled by :mod:`spacl.mining.cut.kernel`: one compiled
scan per row keeps its 32 (then 64, 128) first keys of a stable descending sort and
adds their weights in that order, the same float64 values the tensor path adds, so the
same prefix.  Elsewhere the tensor fast path, one ``amax`` over ``[B, K]``:
the maxima of strided groups of ``c`` columns pick (``topk``) the 32 groups with the
largest maxima, and the 32 largest of their keys are taken (a second ``topk``); every
key strictly above ``M``, the smallest of those 32 maxima, is among them, so a row whose
prefix ends at a key ``t > M``, with no key equal to ``t`` left out of the 32, is
settled exactly (ties included: the prefix is then every key ``>= t``); before it, rows
whose largest weight alone reaches the target keep their first largest key.  Rows whose
prefix reaches further (a large kept share, as ``"exp"`` and ``"linear"`` usually keep)
take wider passes if they are few (64 keys from the group maxima, then the 128 largest
of each row by one ``topk``), then the exact radix-style selection on the key
values.  Each level spreads the still-undecided candidates of a row over 512 equal-width
buckets of their key range (a monotone map: equal keys share a bucket), adds the weights
per bucket with one vectorised ``scatter_add`` over ``[B, K]``, keeps every bucket above
the one where the cumulative weight crosses ``share * total`` and continues inside that
bucket only.  Once at most 64 candidates are left per row (one level, in practice) a
stable sort of those few finishes the prefix exactly; a bucket whose keys are all equal
is finished by counting (the first ``ceil(rest / w)`` ties).  Rows of at least 4096
candidates (the link-prediction rows, where ``"exp"`` keeps most of 14,541 entities early
in training) take one level of 2048 buckets instead, over ``[lo, row max]`` with ``lo``
the smallest key of a strided sample (only the resolution: keys below it share the last
bucket), and no validity mask (off-candidate keys are ``-inf``, of weight 0): about a
dozen passes over ``[B, K]``; a row whose chosen bucket holds more than 128 candidates
falls back to the levels above.

Modules of :mod:`spacl.mining.cut`: :mod:`~spacl.mining.cut.fast` (the fast path: group
maxima, ``topk``, index masks), :mod:`~spacl.mining.cut.exact` (the exact radix selection,
the long-row selection and the GPU's sorted rows),
:mod:`~spacl.mining.cut.kernel` (the numba scan of the fast rows, its kernels in
:mod:`~spacl.mining.cut.rows_nb`), :mod:`~spacl.mining.cut.compiled` (the long rows'
compiled passes); this module holds the cut itself, :class:`RelativeThresholdNegatives`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.profiler import record_function

from spacl._validation import check_choice, check_flag, check_positive, check_tensor
from spacl.mining.cut import kernel as cut_kernel
from spacl.mining.cut.compiled import PASSES
from spacl.mining.cut.exact import (
    WIDE_ROWS,
    check_share,
    masked_cut,
    prefix_mask,
    sample_min,
    sorted_prefixes,
    wide_prefix,
)
from spacl.mining.cut.fast import fast_prefixes, group_maxima, group_width, index_of, mask_of

MASSES: tuple[str, ...] = ("similarity", "exp", "linear")
#: the forms :meth:`RelativeThresholdNegatives.select` answers in
CutForm = Literal["mask", "float", "index", "selection"]
CUT_FORMS: tuple[CutForm, ...] = ("mask", "float", "index", "selection")
#: devices whose rows are cut by one stable sort each
#: (:func:`~spacl.mining.cut.exact.sorted_prefixes`): on a GPU a sort of ``[B, K]`` is
#: cheap and the fast path's and the levels' data-dependent branches each wait on the host
SORTED_DEVICES: frozenset[str] = frozenset({"cuda"})


def _check_inputs(
    scores: Tensor,
    mask: Tensor | None,
    form: str,
    total: Tensor | None,
    weights_out: dict[str, Tensor] | None,
    finite: bool,
) -> None:
    """:meth:`RelativeThresholdNegatives.select`'s input checks, each error naming the
    argument and what was found (``finite``: also :func:`_check_values`)."""
    check_tensor(scores, "scores", ndim=2, finite=False)
    if scores.shape[1] == 0:
        raise ValueError(
            "scores must hold at least one candidate column (K >= 1), got shape "
            f"{tuple(scores.shape)}"
        )
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a bool tensor, got {got}")
        if mask.shape != scores.shape:
            raise ValueError(
                f"mask must have the shape {tuple(scores.shape)} of scores, got {tuple(mask.shape)}"
            )
    check_choice(form, "form", CUT_FORMS)
    if total is not None:
        check_tensor(total, "total", ndim=1, finite=False)
        if total.shape[0] != scores.shape[0]:
            raise ValueError(
                f"total must have the shape ({scores.shape[0]},) (one per row of scores), "
                f"got {tuple(total.shape)}"
            )
    if weights_out is not None and not isinstance(weights_out, dict):
        raise TypeError(f"weights_out must be a dict or None, got {type(weights_out).__name__}")
    if check_flag(finite, "finite"):
        _check_values(scores, mask)


def _check_values(scores: Tensor, mask: Tensor | None) -> None:
    """Raise ``ValueError`` for a NaN or ``+inf`` score (``mask=None``: ``-inf`` marks a
    column that is no candidate) or a non-finite score of a candidate (a ``mask``; the
    scores off it are never read).

    One sum over ``[B, K]`` and one host read: it is finite where every score is, and
    ``-inf`` where the only non-finite scores are ``-inf``; only otherwise (a NaN, an
    infinity, finite scores that overflow the sum, ``-inf`` beside a ``mask``) are the
    bad entries counted.  E.g. ``[[0.5, -inf]]`` passes, ``[[0.5, nan]]`` raises.
    """
    values = scores.detach()
    total = float(values.sum())
    if math.isfinite(total) or (mask is None and total == -math.inf):
        return
    if mask is None:
        bad = torch.isnan(values) | (values == math.inf)
        what = "NaN or +inf; -inf marks a column that is no candidate"
    else:
        bad = mask & ~torch.isfinite(values)
        what = "NaN or inf on a candidate of mask"
    count = int(bad.sum())
    if count:
        raise ValueError(f"scores contains {count} non-finite value(s) ({what})")


@dataclass(frozen=True)
class Selection:
    """The cut's answer before it is put in one form (:meth:`RelativeThresholdNegatives.select`).

    The fast rows as an index, ``cols[B, m]`` with ``kept[B, m]`` (the kept entries lead
    each row); the rows the exact selection took, ``rest[R]``, with their keep mask
    ``rest_keep[R, K]`` (bool, or 0/1 in the keys' dtype for ``form="float"``), both
    ``None`` where the fast path settled every row.  ``width``: ``K``.  ``known_widest``:
    :meth:`widest`, where the selection already read it (the sort path), else ``None``.
    """

    cols: Tensor
    kept: Tensor
    rest: Tensor | None
    rest_keep: Tensor | None
    width: int
    known_widest: int | None = None

    def widest(self) -> int:
        """The largest number of kept columns of a row: 0 where no row has a candidate
        (a row with one keeps at least one).  A host wait or two (the fast and the exact
        rows), none after the sort path, which read it with its own."""
        if self.known_widest is not None:
            return self.known_widest
        width = int(self.kept.sum(1).max()) if self.kept.numel() else 0
        if self.rest_keep is not None and self.rest_keep.numel():
            width = max(width, int(self.rest_keep.sum(1).max()))
        return width

    def mask(self) -> Tensor:
        """``[B, K]`` keep mask: bool (``rest_keep`` as it is where every row took the
        exact selection, so 0/1 floats after a ``form="float"`` selection)."""
        rest, rest_keep = self.rest, self.rest_keep
        if rest is not None and rest_keep is not None and rest.numel() == self.cols.shape[0]:
            return rest_keep
        keep = mask_of(self.cols, self.kept, self.width)
        if rest is not None and rest_keep is not None:
            keep[rest] = rest_keep.to(torch.bool)
        return keep

    def index(self) -> tuple[Tensor, Tensor]:
        """``(cols[B, m], kept[B, m])`` of every row, the exact rows merged in."""
        rest, rest_keep = self.rest, self.rest_keep
        if rest is None or rest_keep is None:
            return self.cols, self.kept
        rest_cols, rest_kept = index_of(rest_keep)
        width = max(self.cols.shape[1], rest_cols.shape[1])
        cols = F.pad(self.cols, (0, width - self.cols.shape[1]))
        kept = F.pad(self.kept, (0, width - self.kept.shape[1]))
        cols[rest] = F.pad(rest_cols, (0, width - rest_cols.shape[1]))
        kept[rest] = F.pad(rest_kept, (0, width - rest_kept.shape[1]))
        return cols, kept

    def as_form(
        self, form: CutForm, dtype: torch.dtype
    ) -> Tensor | tuple[Tensor, Tensor] | Selection:
        """This selection in ``form`` (a float mask in ``dtype``)."""
        if form == "selection":
            return self
        if form == "index":
            return self.index()
        return self.mask().to(dtype) if form == "float" else self.mask()


class RelativeThresholdNegatives(nn.Module):
    """SPACL's relative-threshold negative selection (SPEC §1.4), a top-p cut.

    Keep the hardest candidate negatives until they hold ``share`` of the negative
    mass.  ``logits = s / tau`` of the anchor against its candidates, with
    ``s = logits * temperature`` (so ``temperature`` must be the one that produced the
    logits).  ``mass="similarity"`` (default): ``w = s``, the paper's formula on raw
    similarities; ``"exp"``: ``w = exp(logits)``; ``"linear"``: ``w = (1 + s) / 2``.
    See the module docstring for the exact prefix definition, tie rule and algorithm.
    No gradient.  With the candidates ``q_1, q_2, ...`` of anchor ``i`` sorted by
    decreasing logit::

        Q_i^h = {q_1, ..., q_m},  m the smallest with  sum_{j <= m} w_ij >= share * sum_j w_ij

    (SPACL, ICLR 2026, OpenReview 4cZvjp8Iwk, SPEC §1.4; ``share`` is its ``lambda_Q``).

    Call: :meth:`select` ``(scores[B, K], mask=None, form=...)``, the one entry point: it
    checks its inputs and answers in the form the caller names (``form="mask" | "float" |
    "index" | "selection"``).  Calling the module, ``cut(scores, mask=None) ->
    BoolTensor[B, K]`` (``True`` = kept; always ``False`` off the candidates), is
    ``cut.select(scores, mask)`` (:meth:`forward`).

    ``compiled=True``: the exact selection of long rows (``K >= 4096`` under ``"exp"``,
    the link-prediction rows) runs its histogram and mask passes through
    ``torch.compile`` (:mod:`spacl.mining.cut.compiled`): the same selection, fewer
    passes over ``[B, K]``; the first call compiles (tens of seconds, cached on disk by
    inductor); where compilation fails, a warning and the eager passes.  On a GPU
    (:data:`SORTED_DEVICES`) every row takes one stable sort instead, ``compiled`` or not.

    Example (similarities ``0.9 + 0.5 = 1.4`` reach ``0.8`` of the total ``1.3``):
        >>> import torch
        >>> from spacl.mining import RelativeThresholdNegatives
        >>> logits = torch.tensor([[0.9, 0.5, 0.1, -0.2]])
        >>> RelativeThresholdNegatives(share=0.8)(logits)
        tensor([[ True,  True, False, False]])
        >>> RelativeThresholdNegatives(share=1.0)(logits)  # lambda_Q = 1: no selection
        tensor([[True, True, True, True]])
        >>> valid = torch.tensor([[False, True, True, True]])  # column 0 is no candidate
        >>> RelativeThresholdNegatives(share=0.8)(logits, valid)
        tensor([[False,  True, False, False]])
    """

    def __init__(
        self,
        share: float = 0.95,
        mass: str = "similarity",
        temperature: float = 1.0,
        *,
        compiled: bool = False,
    ) -> None:
        super().__init__()
        self.share = check_share(share)
        check_choice(mass, "mass", MASSES)
        self.mass = mass
        self.temperature = check_positive(temperature, "temperature")
        self.compiled = check_flag(compiled, "compiled")

    def weights(self, logits: Tensor, valid_mask: Tensor) -> Tensor:
        """Float64 ``[B, K]`` weights (0 off ``valid_mask``); scaled per row for ``exp``.

        For ``"similarity"`` these are the signed similarities ``s``.
        """
        if self.mass == "similarity":
            s = logits.detach().to(torch.float64) * self.temperature
            return torch.where(valid_mask, s, 0.0)
        return self._weights(logits.detach().masked_fill(~valid_mask, -math.inf))[0]

    def _weights(self, masked_logits: Tensor) -> tuple[Tensor, Tensor]:
        """Weights and the per-row largest logit from logits that are ``-inf`` off the mask."""
        row_max = masked_logits.amax(1)
        row_max = torch.where(torch.isfinite(row_max), row_max, 0.0)
        l64 = masked_logits.to(torch.float64)
        if self.mass == "exp":
            return (l64 - row_max.to(torch.float64).unsqueeze(1)).exp(), row_max
        return ((1.0 + l64 * self.temperature) / 2.0).clamp_min(0.0), row_max

    def forward(self, scores: Tensor, mask: Tensor | None = None) -> Tensor:
        """``cut(scores, mask)``: :meth:`select` with ``form="mask"``, checks included.

        An alias, so the module is callable as any ``nn.Module``; the selection and the
        input checks live in :meth:`select` only.  E.g. ``cut(scores)`` is
        ``cut.select(scores)``, a ``BoolTensor[B, K]``.
        """
        return self.select(scores, mask)

    @overload
    def select(
        self,
        scores: Tensor,
        mask: Tensor | None = ...,
        *,
        form: Literal["mask", "float"] = ...,
        total: Tensor | None = ...,
        weights_out: dict[str, Tensor] | None = ...,
        finite: bool = ...,
    ) -> Tensor: ...
    @overload
    def select(
        self,
        scores: Tensor,
        mask: Tensor | None = ...,
        *,
        form: Literal["index"],
        total: Tensor | None = ...,
        weights_out: dict[str, Tensor] | None = ...,
        finite: bool = ...,
    ) -> tuple[Tensor, Tensor]: ...
    @overload
    def select(
        self,
        scores: Tensor,
        mask: Tensor | None = ...,
        *,
        form: Literal["selection"],
        total: Tensor | None = ...,
        weights_out: dict[str, Tensor] | None = ...,
        finite: bool = ...,
    ) -> Selection: ...
    @torch.no_grad()
    def select(
        self,
        scores: Tensor,
        mask: Tensor | None = None,
        *,
        form: CutForm = "mask",
        total: Tensor | None = None,
        weights_out: dict[str, Tensor] | None = None,
        finite: bool = True,
    ) -> Tensor | tuple[Tensor, Tensor] | Selection:
        """The cut of every row of ``scores[B, K]``, in the form the caller needs.

        The one entry point of the cut, and the one place its inputs are checked
        (calling the module is this with ``form="mask"``: :meth:`forward`).  ``scores``
        are the logits ``s / tau`` of each anchor row against its candidates (a floating
        ``[B, K]`` tensor, ``K >= 1``; ``B = 0`` gives an empty answer); ``mask[B, K]``
        (bool) marks the candidates, or ``None``: every column is a candidate but those
        the caller filled with ``-inf`` (cheaper than a mask pass).

        Checks: a ``TypeError`` or ``ValueError`` naming the argument and what was found
        for a ``scores`` that is not a floating 2-D tensor with a column, a ``mask`` that
        is not bool of ``scores``' shape, an unknown ``form``, a ``total`` that is not a
        floating ``[B]``, a ``weights_out`` that is not a dict; and, with ``finite=True``,
        a NaN or ``+inf`` in ``scores`` (``mask=None``) or a non-finite score of a
        candidate (a ``mask``; the scores off it are never read).  The value check is one
        reduction over ``[B, K]`` and one host read (on a GPU a host wait): the losses,
        whose inputs are checked before their logits are formed, pass ``finite=False``.

        ``form``:

        - ``"mask"``: ``BoolTensor[B, K]``, ``True`` = kept (never off the candidates);
        - ``"float"``: the same as 0/1 in ``scores``' dtype; where every row takes the
          long-row exact selection (link prediction under ``"exp"``) the mask is made by
          float arithmetic, without a ``[B, K]`` boolean pass and its conversion;
        - ``"index"``: ``(cols[B, m], kept[B, m])``: row ``b`` keeps the columns
          ``cols[b, j]`` where ``kept[b, j]`` (each once; padding entries ``False``), no
          ``[B, K]`` boolean pass for callers that only need the kept columns;
        - ``"selection"``: the :class:`Selection` before it is put in a form (the
          compact SPACL path reads its width, then takes the index or the mask).

        ``total`` (``mass="similarity"``, optional): ``[B]`` sum of the candidates'
        logits, if the caller has it (e.g. from sums of embeddings).  ``weights_out``
        (``mass="exp"``, ``share < 1``) receives ``"weights"`` = ``exp(scores - row_max)``
        (0 off the candidates) and ``"row_max"`` (0 for a row without one), for a loss's
        ``row_max + log sum_j keep_j weights_j`` without a second ``exp``.

        The fast path (module docstring) settles the rows whose prefix ends among their
        largest keys; the exact radix selection finishes the others.  Under
        :mod:`torch.profiler` the call is the region ``"spacl/cut"``.

        Example (the forms of one cut; ``-inf`` marks column 3 as no candidate):
            >>> import torch
            >>> from spacl.mining import RelativeThresholdNegatives
            >>> cut = RelativeThresholdNegatives(share=0.8)
            >>> scores = torch.tensor([[0.9, 0.5, 0.1, -float("inf")]])
            >>> cut.select(scores)
            tensor([[ True,  True, False, False]])
            >>> cut.select(scores, form="float")
            tensor([[1., 1., 0., 0.]])
            >>> cols, kept = cut.select(scores, form="index")
            >>> cols[kept].tolist()
            [0, 1]
            >>> cut.select(scores, form="selection").widest()
            2
            >>> cut.select(torch.tensor([[0.9, float("nan")]]))  # doctest: +ELLIPSIS
            Traceback (most recent call last):
              ...
            ValueError: scores contains 1 non-finite value(s) (NaN or +inf; ...)
        """
        with record_function("spacl/cut"):
            _check_inputs(scores, mask, form, total, weights_out, finite)
            return self._select(scores, mask, form, total, weights_out)

    def _select(
        self,
        scores: Tensor,
        mask: Tensor | None,
        form: CutForm,
        total: Tensor | None,
        weights_out: dict[str, Tensor] | None,
    ) -> Tensor | tuple[Tensor, Tensor] | Selection:
        """:meth:`select`'s body, on checked inputs."""
        if self.share >= 1.0:  # every candidate kept
            candidates = torch.isfinite(scores) if mask is None else mask.clone()
            if form == "mask":
                return candidates
            if form == "float":
                return candidates.to(scores.dtype)
            cols, kept = index_of(candidates)
            if form == "index":
                return cols, kept
            return Selection(cols, kept, None, None, scores.shape[1])
        keys = scores if mask is None else scores.detach().masked_fill(~mask, -math.inf)
        cols, kept, rest, rest_keep, widest = self._select_parts(
            keys, mask, total, as_float=form == "float", weights_out=weights_out
        )
        selection = Selection(cols, kept, rest, rest_keep, scores.shape[1], widest)
        return selection.as_form(form, scores.dtype)

    def _select_parts(
        self,
        keys: Tensor,
        valid_mask: Tensor | None,
        similarity_total: Tensor | None,
        as_float: bool = False,
        weights_out: dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None, int | None]:
        """Fast rows, then the exact selection: ``(cols, kept, rest_rows, rest_keep, widest)``
        (``widest``: :meth:`Selection.widest` where the sort path read it, else ``None``).

        ``weights_out``: receives the ``"exp"`` weights and the row maxima
        (:meth:`select`).  On CPU the rows whose prefix ends within their 128
        largest keys are settled by :mod:`spacl.mining.cut.kernel` (one scan per row),
        elsewhere by the tensor fast path (:func:`spacl.mining.cut.fast.fast_prefixes`);
        the exact selection takes the rest.
        """
        keys = keys.contiguous()
        b, k = keys.shape
        if keys.device.type in SORTED_DEVICES:
            return self._sorted_parts(keys, valid_mask, similarity_total, weights_out)
        kernel = cut_kernel.applies(keys, self.mass)
        group_max = None
        if kernel:
            raw_max = keys.amax(1)
        else:
            group_max = group_maxima(keys)
            raw_max = group_max.amax(1)
            tail = k - group_max.shape[1] * group_width(k)
            if tail:
                raw_max = torch.maximum(raw_max, keys[:, k - tail :].amax(1))
        some = torch.isfinite(raw_max)  # rows with a candidate
        row_max = torch.where(some, raw_max, 0.0)
        total, exp_weights = self._total_and_weights(keys, valid_mask, row_max, similarity_total)
        if weights_out is not None and exp_weights is not None:
            weights_out["weights"], weights_out["row_max"] = exp_weights, row_max
        target = self.share * total
        # a zero total keeps every candidate ("exp" / "linear"): the exact path
        positive = None if self.mass == "similarity" else total > 0
        fast = None
        if kernel:
            fast = cut_kernel.row_prefixes(
                keys, raw_max, exp_weights, self.mass, self.temperature, target, positive
            )
        if fast is None:
            if group_max is None:
                group_max = group_maxima(keys)
            top_weight = self._subset_weights(row_max.unsqueeze(1), row_max).squeeze(1)
            alone = (top_weight >= target) & some
            if positive is not None:
                alone &= positive

            def weights(sub: Tensor, rows: Tensor) -> Tensor:
                return self._subset_weights(sub, row_max[rows])

            fast = fast_prefixes(
                keys, group_max, row_max, target, top_weight, alone, weights, positive
            )
        cols, kept, done = fast
        rest = (~done).nonzero().squeeze(1)
        if rest.numel() == 0:
            return cols, kept, None, None, None
        if rest.numel() * 4 > b * 3:
            # most rows left (long prefixes): the exact selection of every row, without
            # copying the rows out and merging back (it settles the done rows the same
            # way: one definition, both exact)
            rest_keep = self._exact(keys, valid_mask, row_max, exp_weights, as_float)
            return cols, kept, torch.arange(b, device=keys.device), rest_keep, None
        rest_keep = self._exact(
            keys.index_select(0, rest),
            None if valid_mask is None else valid_mask[rest],
            row_max[rest],
            None if exp_weights is None else exp_weights[rest],
        )
        return cols, kept, rest, rest_keep, None

    def _sorted_parts(
        self,
        keys: Tensor,
        valid_mask: Tensor | None,
        similarity_total: Tensor | None,
        weights_out: dict[str, Tensor] | None,
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None, int | None]:
        """Every row by one stable sort (a device in :data:`SORTED_DEVICES`): the same
        totals and weights as the fast path, the same prefix as the exact selection, and
        the widest row's count read with the sort's one host wait."""
        raw_max = keys.amax(1)
        row_max = torch.where(torch.isfinite(raw_max), raw_max, 0.0)
        total, exp_weights = self._total_and_weights(keys, valid_mask, row_max, similarity_total)
        if weights_out is not None and exp_weights is not None:
            weights_out["weights"], weights_out["row_max"] = exp_weights, row_max
        weights = (
            exp_weights.to(torch.float64)
            if exp_weights is not None
            else self._subset_weights(keys, row_max)
        )
        valid = torch.isfinite(keys) if valid_mask is None else valid_mask
        # "similarity": a total <= 0 is reached by the first (hardest) candidate alone;
        # "exp" / "linear": a row of zero total weight keeps every candidate
        keep_all = None if self.mass == "similarity" else ~(total > 0)
        cols, kept, widest = sorted_prefixes(keys, weights, valid, self.share * total, keep_all)
        return cols, kept, None, None, widest

    def _total_of_keys(
        self,
        keys: Tensor,
        valid_mask: Tensor | None,
        row_max: Tensor,
        similarity_total: Tensor | None,
    ) -> Tensor:
        """Float64 ``[B]`` total weight of the candidates (signed for "similarity")."""
        return self._total_and_weights(keys, valid_mask, row_max, similarity_total)[0]

    def _total_and_weights(
        self,
        keys: Tensor,
        valid_mask: Tensor | None,
        row_max: Tensor,
        similarity_total: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """:meth:`_total_of_keys`, and for ``"exp"`` the weights in the keys' dtype."""
        # summed in the keys' dtype (pairwise summation: a few ulps of the total)
        if self.mass == "similarity":
            if similarity_total is None:
                valid = torch.isfinite(keys) if valid_mask is None else valid_mask
                similarity_total = torch.where(valid, keys, 0.0).sum(1)
            return similarity_total.to(torch.float64) * self.temperature, None
        if self.mass == "exp":
            # the same weights as _subset_weights before its float64 conversion
            w = (keys - row_max.unsqueeze(1)).exp()
            return w.sum(1).to(torch.float64), w
        w = ((keys * self.temperature + 1.0) / 2.0).clamp_min(0.0)
        return w.sum(1).to(torch.float64), None

    def _total(self, logits: Tensor, keys: Tensor, valid_mask: Tensor, row_max: Tensor) -> Tensor:
        """Float64 ``[B]`` total weight of the valid candidates (signed for "similarity")."""
        return self._total_of_keys(keys, valid_mask, row_max, None)

    def _subset_weights(self, keys: Tensor, row_max: Tensor) -> Tensor:
        """Float64 prefix weights of some keys (``-inf``: 0); "similarity" clamped at 0."""
        if self.mass == "exp":
            # exponentiated in the keys' dtype (as the row total is): a relative error of
            # an ulp or two per weight, then summed in float64
            shift = row_max.to(keys.dtype).unsqueeze(1)
            return (keys - shift).exp().to(torch.float64)
        k = keys.to(torch.float64)
        if self.mass == "similarity":
            return (k * self.temperature).clamp_min(0.0)
        return ((1.0 + k * self.temperature) / 2.0).clamp_min(0.0)

    def _exact(
        self,
        keys: Tensor,
        valid_mask: Tensor | None,
        row_max: Tensor,
        exp_weights: Tensor | None = None,
        as_float: bool = False,
    ) -> Tensor:
        """The exact radix selection of the rows the fast path left (module docstring).

        ``keys`` are ``-inf`` off the candidates (``valid_mask``: their mask, if the
        caller has it); ``exp_weights``: ``exp(keys - row_max)`` if already taken.
        ``as_float``: long rows of ``"exp"`` / ``"linear"`` may come back as a 0/1 mask
        in the keys' dtype (:func:`wide_prefix`); other cases are boolean either way.
        """
        if self.mass == "similarity":
            return self._similarity_cut(keys, valid_mask)
        long_rows = keys.shape[1] >= WIDE_ROWS
        # the compiled passes read the float32 weights (converted entry by entry)
        passes = PASSES if self.compiled and long_rows and exp_weights is not None else None
        if passes is not None:
            assert exp_weights is not None
            weights = exp_weights
        elif exp_weights is not None:
            weights = exp_weights.to(torch.float64)
        else:
            weights = self._subset_weights(keys, row_max)
        lo = None
        if self.mass == "exp":
            # the last kept weight is >= (1 - share) * total / K >= (1 - share) / K
            # (weights are scaled so that the largest is 1): a lower bound on its key
            lo = row_max + math.log((1.0 - self.share) / keys.shape[1])
        if long_rows:
            sample = sample_min(keys)
            lo = torch.minimum(sample if lo is None else torch.maximum(lo, sample), row_max)
            # the range [lo, row max]: a narrower one read off a sample of the columns
            # misses the few heavy keys at the top of a row and puts its crossing in an
            # end bucket (crowded: a second level) on 20-30% of the FB15k-237 rows
            total = None if passes is not None else weights.sum(1)
            keep, pass_total = wide_prefix(
                keys,
                weights,
                self.share if total is None else self.share * total,
                row_max,
                lo,
                as_float=as_float,
                passes=passes,
            )
            total = pass_total if total is None else total
            assert total is not None
            positive = total > 0
            if bool(positive.all()):
                return keep
            valid = torch.isfinite(keys) if valid_mask is None else valid_mask
            return torch.where(positive.unsqueeze(1), keep, valid.to(keep.dtype))
        valid = torch.isfinite(keys) if valid_mask is None else valid_mask
        return masked_cut(keys, weights, valid, self.share, row_max, lo)

    def _similarity_cut(self, keys: Tensor, valid_mask: Tensor | None) -> Tensor:
        """The literal cut on signed similarities (module docstring)."""
        valid = torch.isfinite(keys) if valid_mask is None else valid_mask
        s = torch.where(valid, keys.to(torch.float64) * self.temperature, 0.0)
        total = s.sum(1)
        # where the total is > 0 the prefix ends among the positive similarities, where
        # the cumulative sum is monotone: the clamped weights give the same prefix
        weights = s.clamp_min(0.0)
        target = self.share * total
        if keys.shape[1] >= WIDE_ROWS:
            hi = keys.amax(1)
            hi = torch.where(torch.isfinite(hi), hi, 0.0)
            # zero weight below 0: the prefix of a positive total ends above it
            lo = sample_min(keys).clamp_min(0.0)
            keep, _ = wide_prefix(keys, weights, target, hi, lo)
        else:
            keep = prefix_mask(keys, weights, valid, target)
        hardest = torch.zeros_like(valid)
        hardest.scatter_(1, keys.argmax(1, keepdim=True), True)  # first maximum
        return torch.where((total > 0).unsqueeze(1), keep, hardest & valid)

    def extra_repr(self) -> str:
        compiled = ", compiled=True" if self.compiled else ""
        return f"share={self.share}, mass={self.mass!r}{compiled}"
