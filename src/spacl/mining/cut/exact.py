"""The exact relative-threshold selection (radix-style levels) behind the one cut.

:class:`spacl.mining.cut.threshold.RelativeThresholdNegatives` settles most rows by its fast
path (:mod:`spacl.mining.cut.fast`); the rows it leaves come here.  Given keys and
non-negative weights non-decreasing in the key, the kept set of a row is the shortest
prefix, in (key desc, index asc) order, whose cumulative weight reaches
``target = share * sum_j w_j``.  Each level spreads the row's undecided keys over equal-
width buckets of their range (a monotone map), adds the weights per bucket with one
``scatter_add``, keeps the buckets before the crossing one and continues inside it; a
stable sort of the few candidates left finishes the prefix (:func:`prefix_mask`).  Rows
of at least ``WIDE_ROWS`` candidates take one level of ``_WIDE_BUCKETS`` buckets from
the row's largest key down to a lower bound (:func:`wide_prefix`).  The module
docstring of :mod:`spacl.mining.cut.threshold` states the decisions (masses, tie rule, precision).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from spacl._validation import check_in_range
from spacl.mining.cut.compiled import NUM_BUCKETS as _WIDE_BUCKETS  # of the long-row level
from spacl.mining.cut.compiled import CompiledPasses
from spacl.mining.cut.sparse import padded_bool, sparse_nonzero

_NUM_BUCKETS = 512
_EXACT_CAP = 64
_MAX_LEVELS = 8
_WIDE_CAP = 128  # most candidates in its chosen bucket finished by a sort (else levels)
WIDE_ROWS = 4096  # rows at least this long take the one-level selection
_WIDE_LEVELS = 2  # further levels of it on a crowded bucket, then the general levels


def check_share(share: float) -> float:
    """Require ``0 < share <= 1``."""
    return check_in_range(share, "share", 0.0, 1.0, low_inclusive=False)


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


def _first_at_least(cum: Tensor, target: Tensor) -> Tensor:
    """``[B]`` the first column ``j`` with ``cum[b, j] >= target[b]`` (the last column if
    none), for ``cum`` non-decreasing along each row (running sums of weights >= 0).

    A binary search per row (``searchsorted``, left side: the first ``j`` with ``target <=
    cum[j]``), instead of a ``[B, NB]`` comparison, its integer copy and an ``argmax``.
    """
    found = torch.searchsorted(cum, target.to(cum.dtype).unsqueeze(1)).squeeze(1)
    return found.clamp_max(cum.shape[1] - 1)


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
    # rounding may leave the target just out of reach: then continue in the last bucket
    chosen = _first_at_least(cum, target).unsqueeze(1)
    new_above = (cum.gather(1, chosen) - hist.gather(1, chosen)).squeeze(1)
    return bucket < chosen, bucket == chosen, new_above


def prefix_mask(
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


def sorted_prefixes(
    keys: Tensor,
    weights: Tensor,
    valid: Tensor,
    target: Tensor,
    keep_all: Tensor | None = None,
) -> tuple[Tensor, Tensor, int]:
    """``(cols[B, m], kept[B, m], widest)``: every row's prefix by one stable descending sort.

    The same prefix as :func:`prefix_mask` (the shortest one, in (key desc, index asc)
    order, whose running float64 weight reaches ``target``; every candidate of a row
    whose running weight never reaches it), read off the sorted row: a fixed sequence of
    tensor operations with one host wait (the width ``m``, the most entries a row keeps),
    where the bucket levels wait on the host at every level.  The device path of the
    cut (:class:`spacl.mining.cut.threshold.RelativeThresholdNegatives`); on the CPU the
    scan of :mod:`spacl.mining.cut.kernel` avoids the sort.

    ``keys`` are ``-inf`` off the candidates ``valid``; ``weights`` float64, 0 off them
    and non-decreasing in the key within a row; ``keep_all[B]`` marks rows that keep
    every candidate.  ``cols`` lists each row's columns in sorted order, the kept ones
    first (``kept``); ``widest`` is the most entries a row keeps (0 where no row has a
    candidate), ``m = max(widest, 1)``.

    Example:
        >>> import torch
        >>> from spacl.mining.cut.exact import sorted_prefixes
        >>> keys = torch.tensor([[0.2, 0.9, 0.5]])
        >>> w = keys.double()
        >>> target = torch.tensor([1.2], dtype=w.dtype)
        >>> cols, kept, widest = sorted_prefixes(keys, w, keys > 0, target)
        >>> cols[kept].tolist(), widest
        ([1, 2], 2)
    """
    b, k = keys.shape
    order = keys.sort(dim=1, descending=True, stable=True).indices
    candidate = valid.gather(1, order)
    running = torch.where(candidate, weights.gather(1, order), 0.0).cumsum(1)
    reached = running >= target.to(running.dtype).unsqueeze(1)
    count = candidate.sum(1)
    last = torch.where(reached.any(1), reached.long().argmax(1), count - 1)
    if keep_all is not None:
        last = torch.where(keep_all, count - 1, last)
    kept = (torch.arange(k, device=keys.device).unsqueeze(0) <= last.unsqueeze(1)) & candidate
    widest = int(kept.sum(1).max()) if b else 0
    width = max(widest, 1)
    return order[:, :width], kept[:, :width], widest


def sample_min(keys: Tensor) -> Tensor:
    """``[B]`` smallest candidate key among about 1024 strided columns (``inf`` if none).

    Only a bucket range: keys below it are bunched in the last bucket of
    :func:`wide_prefix`, which stays exact either way.
    """
    step = max(keys.shape[1] // 1024, 1)
    return keys[:, ::step].nan_to_num(neginf=math.inf).amin(1)


# long: a 25-line docstring of the method; the body: one bucket pass, [B, K] buffers freed as used
def wide_prefix(
    keys: Tensor,
    weights: Tensor,
    target: Tensor | float,
    hi: Tensor,
    lo: Tensor,
    *,
    top: Tensor | None = None,
    bottom: Tensor | None = None,
    above: Tensor | None = None,
    depth: int = 0,
    as_float: bool = False,
    passes: CompiledPasses | None = None,
) -> tuple[Tensor, Tensor | None]:
    """:func:`prefix_mask` for long rows whose keys are ``-inf`` off the candidates.

    One level of ``_WIDE_BUCKETS`` buckets over ``[lo, hi]`` (``lo`` only sets the
    resolution: keys below it share the last bucket, a monotone map either way), one
    ``scatter_add`` of the weights, and a stable sort of the few candidates of the
    bucket where the running weight crosses ``target``.  About a dozen passes over
    ``[B, K]`` and no ``[B, K]`` validity mask (the off-candidate keys are ``-inf``, of
    weight 0: they add nothing to a bucket and are dropped when that bucket is
    finished).  Rows whose chosen bucket holds more than ``_WIDE_CAP`` entries (a bulk
    bunched far below a few large keys) take a level on that bucket alone, up to
    ``_WIDE_LEVELS`` deep, then :func:`prefix_mask` (e.g. keys all equal).  ``above``:
    the weight already kept before these keys (as in :func:`_bucket_level`).  ``top`` /
    ``bottom``: bounds of the keys above ``hi`` / below ``lo`` (default ``hi`` / ``lo``),
    the range of a crowded first or last bucket.  ``as_float``: return the mask as 0/1 in
    the keys' dtype, the buckets before the chosen one found by one comparison of the
    bucket coordinate ``p`` written as floats (``floor(p) < c`` iff ``p < c`` for an
    integer ``c``), no ``[B, K]`` boolean pass.

    ``passes``: the compiled histogram and mask passes (:mod:`spacl.mining.cut.compiled`;
    the same buckets and masks, ``weights`` then in any float dtype); ``target`` may then
    be the share, and the row total comes from the histogram pass.  Returns ``(keep,
    total)``: ``total`` is that float64 row total, ``None`` without ``passes``.
    """
    b = keys.shape[0]
    nb = _WIDE_BUCKETS
    device = keys.device
    lo = torch.minimum(lo, hi)
    span = hi - lo
    scale = torch.where(span > 0, nb / torch.where(span > 0, span, 1.0), 1.0)
    total = None
    if passes is not None:
        hist, total = passes.histogram(keys, weights, hi, scale)
    else:
        # bucket 0 holds the largest keys; -inf and keys below lo land in the last one
        position = (hi.unsqueeze(1) - keys).mul_(scale.unsqueeze(1)).clamp_(0, nb - 1)
        # int64: the index dtype scatter_add_ and the comparison with `chosen` use natively
        # (an int32 index costs two hidden int64 copies of [B, K] there: slower overall)
        bucket = position.long()
        hist = torch.zeros(b, nb, dtype=weights.dtype, device=device)
        hist.scatter_add_(1, bucket, weights)
    if not isinstance(target, Tensor):
        if total is None:
            raise ValueError("a share as target needs the compiled passes (the row total)")
        target = target * total
    if above is None:
        above = torch.zeros(b, dtype=hist.dtype, device=device)  # float64, as the histogram
    cum = above.unsqueeze(1) + hist.cumsum(1)
    # rounding may leave the target just out of reach: then continue in the last bucket
    chosen = _first_at_least(cum, target)
    before = cum.gather(1, (chosen - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
    above = torch.where(chosen > 0, before, above)
    if passes is not None:
        keep, member_float = passes.masks(keys, hi, scale, chosen)
        member = padded_bool(member_float)  # 0/1 floats: one fast conversion
        if not as_float:
            keep = keep.bool()
    else:
        if as_float:  # 1 where floor(position) < chosen, i.e. position < chosen: one pass
            keep = torch.lt(
                position, chosen.to(keys.dtype).unsqueeze(1), out=torch.empty_like(keys)
            )
        else:
            keep = bucket < chosen.unsqueeze(1)
        del position
        member = bucket == chosen.unsqueeze(1)
        del bucket
    row, col = sparse_nonzero(member)  # a few per row: word-wise, not byte-wise
    counts = torch.bincount(row, minlength=b)
    big = counts > _WIDE_CAP
    if bool(big.any()):
        # the chosen bucket is crowded (keys bunched far below a few large ones): the
        # next level spreads that bucket alone over the buckets (the others -inf, 0)
        small = ~big[row]
        row, col, counts = row[small], col[small], counts.masked_fill(big, 0)
        rows = big.nonzero().squeeze(1)
        crowd = member[rows]
        bounds = (hi, lo, top, bottom, scale, chosen)
        inner = _crowded_bucket(keys, weights, crowd, rows, target, above, bounds, depth)
        if as_float:
            keep[rows] = torch.maximum(keep[rows], inner.to(keep.dtype))
        else:
            keep[rows] |= inner
    del member
    if row.numel() > 0:
        _keep_within_chosen_bucket(keys, weights, (row, col, counts), target, above, keep)
    return keep, total


def _crowded_bucket(
    keys: Tensor,
    weights: Tensor,
    crowd: Tensor,
    rows: Tensor,
    target: Tensor,
    above: Tensor,
    bounds: tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor, Tensor],
    depth: int,
) -> Tensor:
    """The keep mask of ``rows`` whose chosen bucket is crowded (``crowd``: its members):
    :func:`wide_prefix` one level deeper on that bucket's range alone (the other keys
    ``-inf``, weight 0), or past ``_WIDE_LEVELS`` levels :func:`prefix_mask`.
    ``bounds``: ``(hi, lo, top, bottom, scale, chosen)`` of the level above."""
    hi, lo, top, bottom, scale, chosen = bounds
    sub_keys = keys[rows].masked_fill(~crowd, -math.inf)
    sub_w = weights[rows].to(torch.float64).masked_fill(~crowd, 0.0)
    if depth >= _WIDE_LEVELS:
        sub_valid = torch.isfinite(sub_keys)
        return prefix_mask(sub_keys, sub_w, sub_valid, target[rows] - above[rows])
    c, step, h = chosen[rows], scale[rows], hi[rows]
    cf = c.to(keys.dtype)
    top_r = h if top is None else top[rows]
    bottom_r = lo[rows] if bottom is None else bottom[rows]
    hi2 = torch.where(c == 0, top_r, h - cf / step)
    lo2 = torch.where(c == _WIDE_BUCKETS - 1, bottom_r, h - (cf + 1) / step)
    inner, _ = wide_prefix(
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
    return inner


def _keep_within_chosen_bucket(
    keys: Tensor,
    weights: Tensor,
    members: tuple[Tensor, Tensor, Tensor],
    target: Tensor,
    above: Tensor,
    keep: Tensor,
) -> None:
    """Set in ``keep`` (bool, or 0/1 floats) the members of each row's chosen bucket down
    to where the running weight, from ``above``, reaches ``target``: one stable
    descending sort of those few (``members``: their ``(row, col)`` and each row's
    count; ties in column order)."""
    row, col, counts = members
    b, k = keys.shape
    device = keys.device
    m = int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(row.shape[0], device=device) - starts[row]
    sub_keys = torch.full((b, m), -math.inf, dtype=keys.dtype, device=device)
    sub_w = torch.zeros(b, m, dtype=torch.float64, device=device)
    sub_col = torch.full((b, m), k, dtype=torch.long, device=device)
    sub_keys[row, rank] = keys[row, col]  # each row's entries in increasing column order
    sub_w[row, rank] = weights[row, col].to(torch.float64)
    sub_col[row, rank] = col
    order = sub_keys.sort(dim=1, descending=True, stable=True).indices  # ties: index order
    keys_sorted = sub_keys.gather(1, order)
    col_sorted = sub_col.gather(1, order)
    reached = (above.unsqueeze(1) + sub_w.gather(1, order).cumsum(1)) >= target.unsqueeze(1)
    # rounding may leave the target just out of reach: then every candidate here is kept
    last = torch.where(reached.any(1), reached.long().argmax(1), m - 1)
    kept = (torch.arange(m, device=device) <= last.unsqueeze(1)) & (keys_sorted > -math.inf)
    kept_row, kept_at = kept.nonzero(as_tuple=True)
    keep[kept_row, col_sorted[kept_row, kept_at]] = 1.0 if keep.is_floating_point() else True


def masked_cut(
    keys: Tensor,
    weights: Tensor,
    valid: Tensor,
    share: float,
    hi: Tensor | None = None,
    lo: Tensor | None = None,
) -> Tensor:
    total = weights.sum(1)
    mask = prefix_mask(keys, weights, valid, share * total, hi, lo)
    if bool((total > 0).all()):
        return mask
    return torch.where((total > 0).unsqueeze(1), mask, valid)
