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
  the total weight of a row is summed in the logits' dtype (for ``"exp"`` from the
  same weights): a relative error of a few ulps of that dtype, against a margin of
  ``(1 - share)`` of the total.  It can move the cut only where a running sum lies
  that close to the target.
- This is the one implementation of the cut: :class:`SPACLLoss`,
  :class:`RelativeThresholdNegatives` and the link-prediction objective all call
  :meth:`RelativeThresholdNegatives.select`.

Algorithm (no sort of the ``K`` candidates).  Fast path, one ``amax`` over ``[B, K]``:
the maxima of strided groups of ``c`` columns pick (``topk``) the 32 groups with the
largest maxima, and the 32 largest of their keys are taken (a second ``topk``); every
key strictly above ``M``, the smallest of those 32 maxima, is among them, so a row whose
prefix ends at a key ``t > M``, with no key equal to ``t`` left out of the 32, is
settled exactly (ties included: the prefix is then every key ``>= t``); before it, rows
whose largest weight alone reaches the target keep their first largest key.  Rows whose
prefix reaches further (a large kept share, as ``"exp"`` and ``"linear"`` usually keep)
take a wider pass (128) if they are few, then the exact radix-style selection on the key
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
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_choice, check_in_range, check_positive, check_tensor

MASSES: tuple[str, ...] = ("similarity", "exp", "linear")

_NUM_BUCKETS = 512
_EXACT_CAP = 64
_MAX_LEVELS = 8
_FAST_BLOCKS = 32  # groups taken, and keys looked at, by the fast path
_WIDE_BLOCKS = 128  # the same for the rows the first pass leaves (a few long prefixes)
_WIDE_BUCKETS = 2048  # buckets of the one-level exact selection of long rows
_WIDE_CAP = 128  # most candidates in its chosen bucket finished by a sort (else levels)
_WIDE_ROWS = 4096  # rows at least this long take the one-level selection
_WIDE_LEVELS = 2  # further levels of it on a crowded bucket, then the general levels


def check_share(share: float) -> float:
    """Require ``0 < share <= 1``."""
    return check_in_range(share, "share", 0.0, 1.0, low_inclusive=False)


def _checked_mask(mask: Tensor | None, like: Tensor, name: str = "valid") -> Tensor:
    """A bool mask of ``like``'s shape (all ``True`` if ``None``), or a clear error."""
    if mask is None:
        return torch.ones(like.shape, dtype=torch.bool, device=like.device)
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a bool tensor, got {got}")
    if mask.shape != like.shape:
        raise ValueError(f"{name} must have the shape {tuple(like.shape)}, got {tuple(mask.shape)}")
    return mask


def _active_key_range(keys: Tensor, active: Tensor) -> tuple[Tensor, Tensor]:
    """Largest and smallest active key per row (``0, 0`` for a row with none)."""
    hi = torch.where(active, keys, -math.inf).amax(1)
    lo = torch.where(active, keys, math.inf).amin(1)
    none = ~torch.isfinite(hi)
    return hi.masked_fill(none, 0.0), lo.masked_fill(none, 0.0)


def _keep_first(active: Tensor, need: Tensor) -> Tensor:
    """The first ``need[b]`` active entries of each row, in index order."""
    return active & (active.cumsum(1) <= need.unsqueeze(1))


def _finish_sorted(
    keys: Tensor, weights: Tensor, active: Tensor, above: Tensor, target: Tensor
) -> Tensor:
    """Exact prefix inside the small active sets: a stable sort of at most a few entries."""
    b, k = keys.shape
    position = active.cumsum(1)  # 1-based slot of each active entry
    m = int(position[:, -1].max())
    slot = torch.where(active, position, 0)  # slot 0 collects everything else
    columns = torch.arange(k, device=keys.device).expand(b, k)
    col = torch.full((b, m + 1), k, dtype=torch.long, device=keys.device)
    col.scatter_(1, slot, columns)
    col = col[:, 1:]
    filled = col < k
    safe = col.clamp_max(k - 1)
    sub_keys = torch.where(filled, keys.gather(1, safe), -math.inf)
    order = sub_keys.sort(dim=1, descending=True, stable=True).indices
    col_sorted = col.gather(1, order)
    w_sorted = torch.where(filled, weights.gather(1, safe), 0.0).gather(1, order)
    reached = (above.unsqueeze(1) + w_sorted.cumsum(1)) >= target.unsqueeze(1)
    # rounding may leave the target just out of reach: then every active entry is kept
    last = torch.where(reached.any(1), reached.long().argmax(1), m - 1)
    kept = torch.arange(m, device=keys.device).unsqueeze(0) <= last.unsqueeze(1)
    out = torch.zeros(b, k + 1, dtype=torch.bool, device=keys.device)
    out.scatter_(1, torch.where(kept & filled, col_sorted, k), True)
    return out[:, :k]


def _bucket_level(
    keys: Tensor,
    weights: Tensor,
    inactive: Tensor,
    hi: Tensor,
    lo: Tensor,
    above: Tensor,
    target: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """One radix level: ``(surely_kept, still_active, new_above)``.

    Buckets ``floor((hi - key) * NB / (hi - lo))`` clamped to ``[0, NB)`` (bucket 0 holds
    the largest keys; a monotone map, so equal keys share a bucket and keys outside
    ``[lo, hi]`` go to the end buckets).  The bucket where ``above`` plus the cumulative
    weight first reaches ``target`` stays active; the buckets before it are kept.
    """
    b = keys.shape[0]
    span = hi - lo
    scale = torch.where(span > 0, _NUM_BUCKETS / torch.where(span > 0, span, 1.0), 0.0)
    bucket = ((hi.unsqueeze(1) - keys) * scale.unsqueeze(1)).clamp(0, _NUM_BUCKETS - 1).long()
    bucket.masked_fill_(inactive, _NUM_BUCKETS)
    hist = torch.zeros(b, _NUM_BUCKETS + 1, dtype=weights.dtype, device=weights.device)
    hist.scatter_add_(1, bucket, weights)
    cum = above.unsqueeze(1) + hist[:, :_NUM_BUCKETS].cumsum(1)
    crossed = cum >= target.unsqueeze(1)
    # rounding may leave the target just out of reach: then continue in the last bucket
    chosen = torch.where(crossed.any(1), crossed.long().argmax(1), _NUM_BUCKETS - 1).unsqueeze(1)
    new_above = (cum.gather(1, chosen) - hist.gather(1, chosen)).squeeze(1)
    return bucket < chosen, bucket == chosen, new_above


def _prefix_mask(
    keys: Tensor,
    weights: Tensor,
    valid: Tensor,
    target: Tensor,
    hi: Tensor | None = None,
    lo: Tensor | None = None,
) -> Tensor:
    """Shortest prefix in (key desc, index asc) order whose weight reaches ``target``.

    ``weights`` are float64, non-negative, 0 off ``valid`` and non-decreasing in ``keys``
    within each row.  ``hi``/``lo`` optionally bound the level-0 bucket range (the
    threshold key must lie in ``[lo, hi]``; keys below ``lo`` may exist).
    """
    b = keys.shape[0]
    above = torch.zeros(b, dtype=weights.dtype, device=weights.device)
    keep = torch.zeros_like(valid)
    active = valid
    if hi is None or lo is None:
        hi, lo = _active_key_range(keys, active)
    count = active.sum(1)
    for _ in range(_MAX_LEVELS):
        if not bool(((count > _EXACT_CAP) & (hi > lo)).any()):
            break
        kept, active, above = _bucket_level(keys, weights, ~active, hi, lo, above, target)
        keep |= kept
        count = active.sum(1)
        if bool((count > _EXACT_CAP).any()):
            hi, lo = _active_key_range(keys, active)
        else:
            break

    if bool((count > _EXACT_CAP).any()):
        # large active sets left have equal keys: keep the first `need` of them by index
        hi, lo = _active_key_range(keys, active)
        equal = (count > _EXACT_CAP) & (hi == lo)
        t = torch.where(active, weights, -math.inf).amax(1)
        positive = equal & (t > 0)
        need = torch.where(positive, (target - above) / torch.where(positive, t, 1.0), count)
        need = torch.minimum(need.ceil().clamp_min(1.0), count.to(need.dtype))
        keep |= _keep_first(active & equal.unsqueeze(1), need)
        active = active & ~equal.unsqueeze(1)
    if bool(active.any()):
        keep |= _finish_sorted(keys, weights, active, above, target)
    return keep


def _sample_min(keys: Tensor) -> Tensor:
    """``[B]`` smallest candidate key among about 1024 strided columns (``inf`` if none).

    Only a bucket range: keys below it are bunched in the last bucket of
    :func:`_wide_prefix`, which stays exact either way.
    """
    step = max(keys.shape[1] // 1024, 1)
    return keys[:, ::step].nan_to_num(neginf=math.inf).amin(1)


def _sample_range(
    keys: Tensor, weights: Tensor, share: float, hi: Tensor, lo: Tensor
) -> tuple[Tensor, Tensor]:
    """A key range ``[lo', hi']`` likely to hold the cut of every row, from a sample.

    A histogram of about 1024 strided columns over ``[lo, hi]`` locates where their
    running weight (from the top) crosses ``share -+ 0.03``; the range spans those
    buckets.  Only the resolution of :func:`_wide_prefix` depends on it (keys above
    ``hi'`` share its first bucket, keys below ``lo'`` its last).
    """
    b, k = keys.shape
    nb = _WIDE_BUCKETS
    step = max(k // 1024, 1)
    sub_keys, sub_w = keys[:, ::step].contiguous(), weights[:, ::step].contiguous()
    span = hi - lo
    scale = torch.where(span > 0, nb / torch.where(span > 0, span, 1.0), 1.0)
    position = (hi.unsqueeze(1) - sub_keys).mul_(scale.unsqueeze(1)).clamp_(0, nb - 1)
    hist = torch.zeros(b, nb, dtype=weights.dtype, device=keys.device)
    hist.scatter_add_(1, position.long(), sub_w)
    cum = hist.cumsum(1)
    upper = (cum >= max(share - 0.03, 0.0) * cum[:, -1:]).long().argmax(1)
    past = cum >= (share + 0.03) * cum[:, -1:]
    lower = torch.where(past.any(1), past.long().argmax(1), nb - 1)
    new_hi = hi - upper.to(keys.dtype) / scale
    new_lo = hi - (lower + 1).to(keys.dtype) / scale
    return torch.minimum(new_hi, hi), torch.maximum(torch.minimum(new_lo, new_hi), lo)


def _wide_prefix(
    keys: Tensor,
    weights: Tensor,
    target: Tensor,
    hi: Tensor,
    lo: Tensor,
    *,
    top: Tensor | None = None,
    bottom: Tensor | None = None,
    above: Tensor | None = None,
    depth: int = 0,
) -> Tensor:
    """:func:`_prefix_mask` for long rows whose keys are ``-inf`` off the candidates.

    One level of ``_WIDE_BUCKETS`` buckets over ``[lo, hi]`` (``lo`` only sets the
    resolution: keys below it share the last bucket, a monotone map either way), one
    ``scatter_add`` of the weights, and a stable sort of the few candidates of the
    bucket where the running weight crosses ``target``.  About a dozen passes over
    ``[B, K]`` and no ``[B, K]`` validity mask (the off-candidate keys are ``-inf``, of
    weight 0: they add nothing to a bucket and are dropped when that bucket is
    finished).  Rows whose chosen bucket holds more than ``_WIDE_CAP`` entries (a bulk
    bunched far below a few large keys) take a level on that bucket alone, up to
    ``_WIDE_LEVELS`` deep, then :func:`_prefix_mask` (e.g. keys all equal).  ``above``:
    the weight already kept before these keys (as in :func:`_bucket_level`).  ``top`` /
    ``bottom``: bounds of the keys above ``hi`` / below ``lo`` (default ``hi`` / ``lo``),
    the range of a crowded first or last bucket.
    """
    b, k = keys.shape
    nb = _WIDE_BUCKETS
    device = keys.device
    lo = torch.minimum(lo, hi)
    span = hi - lo
    scale = torch.where(span > 0, nb / torch.where(span > 0, span, 1.0), 1.0)
    # bucket 0 holds the largest keys; -inf and keys below lo land in the last one
    position = (hi.unsqueeze(1) - keys).mul_(scale.unsqueeze(1)).clamp_(0, nb - 1)
    bucket = position.long()
    del position
    hist = torch.zeros(b, nb, dtype=weights.dtype, device=device)
    hist.scatter_add_(1, bucket, weights)
    if above is None:
        above = torch.zeros(b, dtype=weights.dtype, device=device)
    cum = above.unsqueeze(1) + hist.cumsum(1)
    crossed = cum >= target.unsqueeze(1)
    # rounding may leave the target just out of reach: then continue in the last bucket
    chosen = torch.where(crossed.any(1), crossed.long().argmax(1), nb - 1)
    before = cum.gather(1, (chosen - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
    above = torch.where(chosen > 0, before, above)
    keep = bucket < chosen.unsqueeze(1)
    row, col = (bucket == chosen.unsqueeze(1)).nonzero(as_tuple=True)
    counts = torch.bincount(row, minlength=b)
    big = counts > _WIDE_CAP
    if bool(big.any()):
        # the chosen bucket is crowded (keys bunched far below a few large ones): the
        # next level spreads that bucket alone over the buckets (the others -inf, 0)
        small = ~big[row]
        row, col, counts = row[small], col[small], counts.masked_fill(big, 0)
        rows = big.nonzero().squeeze(1)
        member = bucket[rows] == chosen[rows].unsqueeze(1)
        sub_keys = keys[rows].masked_fill(~member, -math.inf)
        sub_w = weights[rows].masked_fill(~member, 0.0)
        if depth < _WIDE_LEVELS:
            c, step, h = chosen[rows], scale[rows], hi[rows]
            cf = c.to(keys.dtype)
            top_r = h if top is None else top[rows]
            bottom_r = lo[rows] if bottom is None else bottom[rows]
            hi2 = torch.where(c == 0, top_r, h - cf / step)
            lo2 = torch.where(c == nb - 1, bottom_r, h - (cf + 1) / step)
            inner = _wide_prefix(
                sub_keys,
                sub_w,
                target[rows],
                hi2,
                lo2,
                top=hi2,
                bottom=lo2,
                above=above[rows],
                depth=depth + 1,
            )
        else:
            sub_valid = torch.isfinite(sub_keys)
            inner = _prefix_mask(sub_keys, sub_w, sub_valid, target[rows] - above[rows])
        keep[rows] |= inner
    del bucket
    if row.numel() == 0:
        return keep
    m = int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(row.shape[0], device=device) - starts[row]
    sub_keys = torch.full((b, m), -math.inf, dtype=keys.dtype, device=device)
    sub_w = torch.zeros(b, m, dtype=weights.dtype, device=device)
    sub_col = torch.full((b, m), k, dtype=torch.long, device=device)
    sub_keys[row, rank] = keys[row, col]  # each row's entries in increasing column order
    sub_w[row, rank] = weights[row, col]
    sub_col[row, rank] = col
    order = sub_keys.sort(dim=1, descending=True, stable=True).indices  # ties: index order
    keys_sorted = sub_keys.gather(1, order)
    col_sorted = sub_col.gather(1, order)
    reached = (above.unsqueeze(1) + sub_w.gather(1, order).cumsum(1)) >= target.unsqueeze(1)
    # rounding may leave the target just out of reach: then every candidate here is kept
    last = torch.where(reached.any(1), reached.long().argmax(1), m - 1)
    kept = (torch.arange(m, device=device) <= last.unsqueeze(1)) & (keys_sorted > -math.inf)
    kept_row, kept_at = kept.nonzero(as_tuple=True)
    keep[kept_row, col_sorted[kept_row, kept_at]] = True
    return keep


@torch.no_grad()
def top_share_mask(
    weights: Tensor, share: float, valid: Tensor | None = None, *, keys: Tensor | None = None
) -> Tensor:
    """Boolean ``[B, K]`` mask of the shortest heaviest prefix reaching ``share`` of the mass.

    Order the valid candidates of each row by decreasing ``keys`` (default: the weights
    themselves), ties by increasing index (a stable sort); keep the shortest prefix whose
    cumulative weight is ``>= share * total``.  Implemented without a full sort (module
    docstring).  ``share = 1`` keeps every valid candidate; a row of total weight 0
    keeps every valid candidate.

    Args:
        weights: ``[B, K]`` non-negative finite weights.
        share: the kept share, ``0 < share <= 1``.
        valid: ``[B, K]`` bool of the candidates that take part (default: all).
        keys: ``[B, K]`` finite sort keys with ``weights`` a non-decreasing function of
            them in every row (e.g. the logits when ``weights = exp(logits - max)``).
    """
    check_share(share)
    check_tensor(weights, "weights", ndim=2)
    if bool((weights < 0).any()):
        raise ValueError(f"weights must be non-negative, got minimum {float(weights.min())}")
    valid = _checked_mask(valid, weights)
    if keys is not None:
        check_tensor(keys, "keys", ndim=2)
        if keys.shape != weights.shape:
            raise ValueError(
                f"keys must have the shape of weights {tuple(weights.shape)}, "
                f"got {tuple(keys.shape)}"
            )
    if share >= 1.0:
        return valid.clone()
    w = torch.where(valid, weights.to(torch.float64), 0.0)
    return _masked_cut(w if keys is None else keys, w, valid, share)


def _masked_cut(
    keys: Tensor,
    weights: Tensor,
    valid: Tensor,
    share: float,
    hi: Tensor | None = None,
    lo: Tensor | None = None,
) -> Tensor:
    total = weights.sum(1)
    mask = _prefix_mask(keys, weights, valid, share * total, hi, lo)
    if bool((total > 0).all()):
        return mask
    return torch.where((total > 0).unsqueeze(1), mask, valid)


def _group_width(k: int) -> int:
    """Columns per group of the fast path: about 160 groups per row, 1 to 16 columns each."""
    return min(max(k // 160, 1), 16)


def _group_max(keys: Tensor) -> Tensor:
    """``[B, g]`` maxima of the strided groups of :func:`_top_prefix` (the keys if ``w = 1``)."""
    width = _group_width(keys.shape[1])
    if width == 1:
        return keys
    groups = keys.shape[1] // width
    return keys[:, : groups * width].unflatten(1, (width, groups)).amax(1)


def _first_max(keys: Tensor, group_max: Tensor, row_max: Tensor) -> Tensor:
    """``[B]`` the lowest column holding each row's largest key, from the group maxima.

    Where one group alone holds the maximum (and no tail column), its ``w`` columns
    are looked at; other rows (a tie across groups) take a full ``argmax``.
    """
    k = keys.shape[1]
    width = _group_width(k)
    if width == 1:
        return keys.argmax(1)
    groups = group_max.shape[1]
    main = groups * width
    hit = group_max == row_max.unsqueeze(1)
    first = hit.long().argmax(1, keepdim=True)
    members = first + torch.arange(width, device=keys.device) * groups  # ascending columns
    at = (keys.gather(1, members) == row_max.unsqueeze(1)).long().argmax(1, keepdim=True)
    col = members.gather(1, at).squeeze(1)
    unsure = hit.sum(1) != 1
    if main < k:
        unsure |= (keys[:, main:] == row_max.unsqueeze(1)).any(1)
    if bool(unsure.any()):
        col[unsure] = keys[unsure].argmax(1)
    return col


def _top_prefix(
    keys: Tensor | None,
    target: Tensor,
    weights_of: Callable[[Tensor, Tensor], Tensor],
    size: int = _FAST_BLOCKS,
    row_ids: Tensor | None = None,
    group_max: Tensor | None = None,
    full_keys: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fast path of the cut: ``(cols[B, m], kept[B, m], done[B])``, exact on the done rows.

    The first ``w g`` columns form ``g`` strided groups of ``w`` columns (group ``j``:
    columns ``j, j + g, ...``; :func:`_group_width`); the ``_FAST_BLOCKS`` groups with
    the largest maxima (one ``topk``) and the last ``K - w g`` columns are the
    candidate set, and ``m = size`` of its largest keys are taken (a second
    ``topk``, ties in any order).  Every key strictly above ``M``, the smallest of the
    chosen group maxima, is in the candidate set.  The running weight of the ``m`` keys
    does not depend on the order of equal keys, so where it reaches ``target`` at a key
    ``t > M`` with exactly as many keys ``>= t`` among the ``m`` as the prefix needs
    (no tie at ``t`` is left out), the prefix of a stable sort of the whole row is
    exactly the keys ``>= t``, and the row is done.  Other rows (a tie split at the
    threshold, a prefix longer than ``m - 1``, or one ending at or below ``M``) are left
    to the exact selection.  No sort of the row, no ``[B, K]`` pass but one ``amax``.

    ``keys`` are ``-inf`` off the candidates; ``weights_of(keys_subset, rows)`` gives
    their float64 weights (0 at ``-inf``, non-decreasing in the key; ``rows``: the
    ``row_ids`` of the rows given, default all).  ``kept`` marks the kept entries of
    ``cols`` (none on rows not done).  ``group_max``: :func:`_group_max` of ``keys``,
    if the caller has it.  ``full_keys``: a contiguous matrix whose rows ``row_ids`` are
    ``keys``; with groups (``w > 1``) only ``group_max`` and it are read, and ``keys``
    may be ``None``.
    """
    source = keys if keys is not None else full_keys
    assert source is not None
    b = target.shape[0]
    k = source.shape[1]
    width = _group_width(k)
    groups = k // width
    main = groups * width
    m_groups = min(size, groups)
    arange = torch.arange(width, device=source.device) * groups
    if width > 1:
        if group_max is None:
            assert keys is not None
            group_max = _group_max(keys)
        top_values, top_index = group_max.topk(m_groups, dim=1)
        cols = (top_index.unsqueeze(2) + arange).reshape(b, m_groups * width)
        if main < k:
            tail = torch.arange(main, k, device=source.device).expand(b, k - main)
            cols = torch.cat((cols, tail), 1)
        if full_keys is None:
            assert keys is not None
            sub = keys.gather(1, cols)
        else:  # rows of a larger matrix, read in place (no copy of the rows)
            flat = full_keys.reshape(-1)
            at = cols if row_ids is None else cols + (row_ids * k).unsqueeze(1)
            sub = flat.gather(0, at.reshape(-1)).view(at.shape)
    else:
        assert keys is not None
        top_values, cols = keys.topk(m_groups, dim=1)
        sub = top_values
    smallest = top_values[:, m_groups - 1]
    m = min(size, sub.shape[1])
    values, order = sub.topk(m, dim=1)  # descending; equal keys in any order
    cols = cols.gather(1, order)
    rows = torch.arange(b, device=source.device) if row_ids is None else row_ids
    reached = weights_of(values, rows).cumsum(1) >= target.unsqueeze(1)
    last = reached.long().argmax(1, keepdim=True)  # first position reaching the target
    threshold = values.gather(1, last)
    after = values.gather(1, (last + 1).clamp_max(m - 1))
    done = (
        reached.any(1)
        & (threshold.squeeze(1) > smallest)
        & (last.squeeze(1) < m - 1)
        & (after.squeeze(1) < threshold.squeeze(1))  # no key equal to the last one left out
    )
    kept = (torch.arange(m, device=source.device) <= last) & done.unsqueeze(1)
    return cols, kept, done


def _mask_of(cols: Tensor, kept: Tensor, k: int) -> Tensor:
    """Bool ``[B, k]`` with ``True`` at the kept entries of an index ``cols[B, m]``."""
    out = torch.zeros(cols.shape[0], k + 1, dtype=torch.bool, device=cols.device)
    out.scatter_(1, torch.where(kept, cols, k), True)
    return out[:, :k]


def _index_of(mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(cols[B, m], kept[B, m])``: the ``True`` columns of each row of ``mask``, padded."""
    b = mask.shape[0]
    row, col = mask.nonzero(as_tuple=True)
    counts = torch.bincount(row, minlength=b)
    m = max(int(counts.max()) if b else 0, 1)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(row.shape[0], device=mask.device) - starts[row]
    cols = torch.zeros(b, m, dtype=torch.long, device=mask.device)
    kept = torch.zeros(b, m, dtype=torch.bool, device=mask.device)
    cols[row, rank] = col
    kept[row, rank] = True
    return cols, kept


class RelativeThresholdNegatives(nn.Module):
    """SPACL's relative-threshold negative selection (SPEC §1.4), a top-p cut.

    Keep the hardest candidate negatives until they hold ``share`` of the negative
    mass.  ``logits = s / tau`` of the anchor against its candidates, with
    ``s = logits * temperature`` (so ``temperature`` must be the one that produced the
    logits).  ``mass="similarity"`` (default): ``w = s``, the paper's formula on raw
    similarities; ``"exp"``: ``w = exp(logits)``; ``"linear"``: ``w = (1 + s) / 2``.
    See the module docstring for the exact prefix definition, tie rule and algorithm.
    No gradient.

    Call: ``RelativeThresholdNegatives(share, mass, temperature)(logits[B, K],
    valid_mask=None) -> BoolTensor[B, K]`` (``True`` = kept; always ``False`` off
    ``valid_mask``).
    """

    def __init__(
        self, share: float = 0.95, mass: str = "similarity", temperature: float = 1.0
    ) -> None:
        super().__init__()
        self.share = check_share(share)
        check_choice(mass, "mass", MASSES)
        self.mass = mass
        self.temperature = check_positive(temperature, "temperature")

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

    @torch.no_grad()
    def forward(self, logits: Tensor, valid_mask: Tensor | None = None) -> Tensor:
        check_tensor(logits, "logits", ndim=2)
        return self.select(logits, _checked_mask(valid_mask, logits, "valid_mask"))

    @torch.no_grad()
    def select(self, logits: Tensor, valid_mask: Tensor) -> Tensor:
        """:meth:`forward` without the input checks (for callers that validated already).

        The fast path (module docstring) settles the rows whose prefix ends among their
        largest keys; the exact radix selection finishes the others.
        """
        if self.share >= 1.0:
            return valid_mask.clone()
        k = logits.shape[1]
        cols, kept, _, rest, rest_keep = self._select(logits, valid_mask)
        keep = _mask_of(cols, kept, k)
        if rest is not None and rest_keep is not None:
            keep[rest] = rest_keep
        return keep

    @torch.no_grad()
    def select_index(self, logits: Tensor, valid_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The same selection as :meth:`select` as an index: ``(cols[B, m], kept[B, m])``.

        Row ``b`` keeps the columns ``cols[b, j]`` where ``kept[b, j]`` (each once; ``m``
        is the largest kept count, at least the fast path's width; padding entries are
        ``False``).  Callers that only need the kept columns (SPACL's compact kernel)
        skip every ``[B, K]`` boolean pass of the mask.
        """
        if self.share >= 1.0:
            return _index_of(valid_mask)
        cols, kept, _, rest, rest_keep = self._select(logits, valid_mask)
        return self._merge(cols, kept, rest, rest_keep)

    @torch.no_grad()
    def select_keys(
        self, keys: Tensor, similarity_total: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """:meth:`select_index` of ``keys``: the logits, ``-inf`` off the candidates.

        For callers that can fill the non-candidates more cheaply than a mask pass.
        ``similarity_total`` (``mass="similarity"`` only, optional): ``[B]`` sum of the
        candidates' logits, if the caller has it (e.g. from sums of embeddings).
        """
        if self.share >= 1.0:
            return _index_of(torch.isfinite(keys))
        cols, kept, _, rest, rest_keep = self._select_keys(keys, None, similarity_total)
        return self._merge(cols, kept, rest, rest_keep)

    @torch.no_grad()
    def select_keys_mask(self, keys: Tensor) -> Tensor:
        """:meth:`select` of ``keys`` (the logits, ``-inf`` off the candidates): a mask."""
        if self.share >= 1.0:
            return torch.isfinite(keys)
        cols, kept, _, rest, rest_keep = self._select_keys(keys, None, None)
        if rest is not None and rest_keep is not None and rest.numel() == keys.shape[0]:
            return rest_keep  # every row took the exact selection (long prefixes)
        keep = _mask_of(cols, kept, keys.shape[1])
        if rest is not None and rest_keep is not None:
            keep[rest] = rest_keep
        return keep

    def _merge(
        self, cols: Tensor, kept: Tensor, rest: Tensor | None, rest_keep: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        if rest is None or rest_keep is None:
            return cols, kept
        rest_cols, rest_kept = _index_of(rest_keep)
        width = max(cols.shape[1], rest_cols.shape[1])
        cols = F.pad(cols, (0, width - cols.shape[1]))
        kept = F.pad(kept, (0, width - kept.shape[1]))
        cols[rest] = F.pad(rest_cols, (0, width - rest_cols.shape[1]))
        kept[rest] = F.pad(rest_kept, (0, width - rest_kept.shape[1]))
        return cols, kept

    def _select(
        self, logits: Tensor, valid_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
        keys = logits.detach().masked_fill(~valid_mask, -math.inf)
        return self._select_keys(keys, valid_mask, None)

    def _select_keys(
        self, keys: Tensor, valid_mask: Tensor | None, similarity_total: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
        """Fast paths, then the exact one: ``(cols, kept, done, rest_rows, rest_keep)``.

        1. Rows whose largest weight alone reaches the target keep their first largest
           key (``argmax``: the lowest index among ties, the tie rule), one pass.
        2. The others take :func:`_top_prefix` (``_FAST_BLOCKS`` keys), the few it
           leaves a wider one (``_WIDE_BLOCKS``), and what is left the exact selection.
        """
        keys = keys.contiguous()
        b, k = keys.shape
        group_max = _group_max(keys)
        row_max = group_max.amax(1)
        tail = k - group_max.shape[1] * _group_width(k)
        if tail:
            row_max = torch.maximum(row_max, keys[:, k - tail :].amax(1))
        some = torch.isfinite(row_max)  # rows with a candidate
        row_max = torch.where(some, row_max, 0.0)
        total, exp_weights = self._total_and_weights(keys, valid_mask, row_max, similarity_total)
        target = self.share * total
        top_weight = self._subset_weights(row_max.unsqueeze(1), row_max).squeeze(1)
        alone = (top_weight >= target) & some
        if self.mass != "similarity":
            alone &= total > 0  # a zero total keeps every candidate: the exact path
        cols = _first_max(keys, group_max, row_max).unsqueeze(1)
        kept = alone.unsqueeze(1).clone()
        done = alone.clone()
        rest = (~done).nonzero().squeeze(1)
        if rest.numel() == 0:
            return cols, kept, done, None, None

        def weights(sub: Tensor, rows: Tensor) -> Tensor:
            return self._subset_weights(sub, row_max[rows])

        for size in (_FAST_BLOCKS, _WIDE_BLOCKS):
            if size == _WIDE_BLOCKS and (k <= 4 * size or rest.numel() * 4 > b):
                break
            # ``size`` keys weigh at most ``size`` times the largest: rows whose target is
            # beyond that cannot end among them (long "exp"/"linear" prefixes), skip them
            tried = rest[size * top_weight[rest] >= target[rest]]
            if tried.numel() == 0:
                continue
            whole = tried.numel() == b
            grouped = _group_width(k) > 1  # then the rows are read in place
            part_cols, part_kept, part_done = _top_prefix(
                keys if whole else (None if grouped else keys[tried]),
                target[tried],
                weights,
                size,
                tried,
                group_max if whole else group_max[tried],
                None if whole else keys,
            )
            if self.mass != "similarity":
                part_done &= total[tried] > 0
                part_kept &= part_done.unsqueeze(1)
            width = max(cols.shape[1], part_cols.shape[1])
            cols = F.pad(cols, (0, width - cols.shape[1]))
            kept = F.pad(kept, (0, width - kept.shape[1]))
            cols[tried] = F.pad(part_cols, (0, width - part_cols.shape[1]))
            kept[tried] = F.pad(part_kept, (0, width - part_kept.shape[1]))
            done[tried] = part_done
            rest = (~done).nonzero().squeeze(1)
            if rest.numel() == 0:
                return cols, kept, done, None, None
        if rest.numel() == b:  # every row (long prefixes): no copy of the rows
            return cols, kept, done, rest, self._exact(keys, valid_mask, row_max, exp_weights)
        return (
            cols,
            kept,
            done,
            rest,
            self._exact(
                keys[rest],
                None if valid_mask is None else valid_mask[rest],
                row_max[rest],
                None if exp_weights is None else exp_weights[rest],
            ),
        )

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
    ) -> Tensor:
        """The exact radix selection of the rows the fast path left (module docstring).

        ``keys`` are ``-inf`` off the candidates (``valid_mask``: their mask, if the
        caller has it); ``exp_weights``: ``exp(keys - row_max)`` if already taken.
        """
        if self.mass == "similarity":
            return self._similarity_cut(keys, valid_mask)
        if exp_weights is not None:
            weights = exp_weights.to(torch.float64)
        else:
            weights = self._subset_weights(keys, row_max)
        lo = None
        if self.mass == "exp":
            # the last kept weight is >= (1 - share) * total / K >= (1 - share) / K
            # (weights are scaled so that the largest is 1): a lower bound on its key
            lo = row_max + math.log((1.0 - self.share) / keys.shape[1])
        if keys.shape[1] >= _WIDE_ROWS:
            total = weights.sum(1)
            sample = _sample_min(keys)
            lo = torch.minimum(sample if lo is None else torch.maximum(lo, sample), row_max)
            hi2, lo2 = _sample_range(keys, weights, self.share, row_max, lo)
            keep = _wide_prefix(keys, weights, self.share * total, hi2, lo2, top=row_max, bottom=lo)
            positive = total > 0
            if bool(positive.all()):
                return keep
            valid = torch.isfinite(keys) if valid_mask is None else valid_mask
            return torch.where(positive.unsqueeze(1), keep, valid)
        valid = torch.isfinite(keys) if valid_mask is None else valid_mask
        return _masked_cut(keys, weights, valid, self.share, row_max, lo)

    def _similarity_cut(self, keys: Tensor, valid_mask: Tensor | None) -> Tensor:
        """The literal cut on signed similarities (module docstring)."""
        valid = torch.isfinite(keys) if valid_mask is None else valid_mask
        s = torch.where(valid, keys.to(torch.float64) * self.temperature, 0.0)
        total = s.sum(1)
        # where the total is > 0 the prefix ends among the positive similarities, where
        # the cumulative sum is monotone: the clamped weights give the same prefix
        weights = s.clamp_min(0.0)
        target = self.share * total
        if keys.shape[1] >= _WIDE_ROWS:
            hi = keys.amax(1)
            hi = torch.where(torch.isfinite(hi), hi, 0.0)
            # zero weight below 0: the prefix of a positive total ends above it
            lo = _sample_min(keys).clamp_min(0.0)
            keep = _wide_prefix(keys, weights, target, hi, lo)
        else:
            keep = _prefix_mask(keys, weights, valid, target)
        hardest = torch.zeros_like(valid)
        hardest.scatter_(1, keys.argmax(1, keepdim=True), True)  # first maximum
        return torch.where((total > 0).unsqueeze(1), keep, hardest & valid)

    def extra_repr(self) -> str:
        return f"share={self.share}, mass={self.mass!r}"
