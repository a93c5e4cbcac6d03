"""The fast path of the one relative-threshold cut: the prefix among a row's largest keys.

The maxima of strided groups of columns pick (``topk``) the groups with the largest
maxima, and the largest of their keys are taken (a second ``topk``); every key strictly
above ``M``, the smallest chosen group maximum, is among them, so a row whose prefix
(``sum`` of weights ``>= target``) ends at a key ``t > M`` with no key equal to ``t``
left out is settled exactly (:func:`top_prefix`).  Also the index helpers shared by
the cut and SPACL's compact kernel (:func:`mask_of`, :func:`index_of`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

_FAST_BLOCKS = 32  # groups taken, and keys looked at, by the fast path
_MID_BLOCKS = 64  # the same for the rows the first pass leaves (longer prefixes)
_WIDE_BLOCKS = 128  # one topk of the whole row for the few the second pass leaves


def group_width(k: int) -> int:
    """Columns per group of the fast path: about 160 groups per row, 1 to 16 columns each."""
    return min(max(k // 160, 1), 16)


def group_maxima(keys: Tensor) -> Tensor:
    """``[B, g]`` maxima of the strided groups of :func:`top_prefix` (the keys if ``w = 1``)."""
    width = group_width(keys.shape[1])
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
    width = group_width(k)
    if width == 1:
        return keys.argmax(1)
    groups = group_max.shape[1]
    main = groups * width
    first = group_max.argmax(1, keepdim=True)  # the first group holding the maximum
    members = first + torch.arange(width, device=keys.device) * groups  # ascending columns
    at = (keys.gather(1, members) == row_max.unsqueeze(1)).long().argmax(1, keepdim=True)
    col = members.gather(1, at).squeeze(1)
    # a tie across groups (or with a tail column): a full argmax of those rows
    unsure = torch.count_nonzero(group_max == row_max.unsqueeze(1), 1) != 1
    if main < k:
        unsure |= (keys[:, main:] == row_max.unsqueeze(1)).any(1)
    if bool(unsure.any()):
        col[unsure] = keys[unsure].argmax(1)
    return col


def top_prefix(
    keys: Tensor,
    target: Tensor,
    weights_of: Callable[[Tensor, Tensor], Tensor],
    size: int = _FAST_BLOCKS,
    row_ids: Tensor | None = None,
    group_max: Tensor | None = None,
    direct: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fast path of the cut: ``(cols[B, m], kept[B, m], done[B])``, exact on the done rows.

    The first ``w g`` columns form ``g`` strided groups of ``w`` columns (group ``j``:
    columns ``j, j + g, ...``; :func:`group_width`); the ``_FAST_BLOCKS`` groups with
    the largest maxima (one ``topk``) and the last ``K - w g`` columns are the
    candidate set, and ``m = size`` of its largest keys are taken (a second
    ``topk``, ties in any order).  Every key strictly above ``M``, the smallest of the
    chosen group maxima, is in the candidate set.  The running weight of the ``m`` keys
    does not depend on the order of equal keys, so where it reaches ``target`` at a key
    ``t > M`` with exactly as many keys ``>= t`` among the ``m`` as the prefix needs
    (no tie at ``t`` is left out), the prefix of a stable sort of the whole row is
    exactly the keys ``>= t``, and the row is done.  Other rows (a tie split at the
    threshold, a prefix longer than ``m - 1``, or one ending at or below ``M``) are left
    to the exact selection.  No sort of the row; the members are read as a ``gather``
    of the ``[B, w, g]`` view along its groups, and only the ``m`` keys taken have their
    columns computed.

    ``keys`` are ``-inf`` off the candidates; ``weights_of(keys_subset, rows)`` gives
    their float64 weights (0 at ``-inf``, non-decreasing in the key; ``rows``: the
    ``row_ids`` of the rows given, default all).  ``kept`` marks the kept entries of
    ``cols`` (none on rows not done).  ``group_max``: :func:`group_maxima` of ``keys``,
    if the caller has it.  ``direct``: one ``topk`` of ``size`` over the whole rows of
    ``keys`` instead (cheaper for a few rows and a large ``size``; ``M`` is then the
    smallest of the ``size`` keys taken).
    """
    b = target.shape[0]
    k = keys.shape[1]
    width = group_width(k)
    groups = k // width
    main = groups * width
    m_groups = min(size, groups)
    if direct:
        values, cols = keys.topk(min(size, k), dim=1)  # descending; equal keys in any order
        return _prefix_of_top(values, cols, values[:, -1], target, weights_of, row_ids)
    if width > 1:
        if group_max is None:
            group_max = group_maxima(keys)
        # unsorted: only the set of groups and its smallest maximum matter here
        top_values, top_index = group_max.topk(m_groups, dim=1, sorted=False)
        # the members of the chosen groups, [b, w, m_groups] (member-major), then the tail
        members = keys[:, :main].unflatten(1, (width, groups))
        sub = members.gather(2, top_index.unsqueeze(1).expand(b, width, m_groups))
        sub = sub.reshape(b, width * m_groups)
        if main < k:
            sub = torch.cat((sub, keys[:, main:]), 1)
        values, order = sub.topk(min(size, sub.shape[1]), dim=1)  # descending; ties in any order
        # entry e of sub: member e // m_groups of group top_index[e % m_groups] (its column
        # adds e // m_groups strides of g), or tail column main + e - w m_groups
        in_groups = order < width * m_groups
        grouped = top_index.gather(1, order % m_groups) + (order // m_groups) * groups
        cols = torch.where(in_groups, grouped, order + (main - width * m_groups))
    else:
        top_values, cols = keys.topk(m_groups, dim=1, sorted=False)
        values, order = top_values.topk(min(size, m_groups), dim=1)
        cols = cols.gather(1, order)
    smallest = top_values.amin(1)
    return _prefix_of_top(values, cols, smallest, target, weights_of, row_ids)


def _prefix_of_top(
    values: Tensor,
    cols: Tensor,
    smallest: Tensor,
    target: Tensor,
    weights_of: Callable[[Tensor, Tensor], Tensor],
    row_ids: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The ending of :func:`top_prefix` on its ``m`` largest keys ``values`` (descending).

    A row is done where the running weight reaches ``target`` at a key ``t > smallest``
    before the last of the ``m`` with no key equal to ``t`` left out.
    """
    b, m = values.shape
    rows = torch.arange(b, device=values.device) if row_ids is None else row_ids
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
    kept = (torch.arange(m, device=values.device) <= last) & done.unsqueeze(1)
    return cols, kept, done


def mask_of(cols: Tensor, kept: Tensor, k: int) -> Tensor:
    """Bool ``[B, k]`` with ``True`` at the kept entries of an index ``cols[B, m]``."""
    out = torch.zeros(cols.shape[0], k + 1, dtype=torch.bool, device=cols.device)
    out.scatter_(1, torch.where(kept, cols, k), True)
    return out[:, :k]


def index_of(mask: Tensor) -> tuple[Tensor, Tensor]:
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


def fast_prefixes(
    keys: Tensor,
    group_max: Tensor,
    row_max: Tensor,
    target: Tensor,
    top_weight: Tensor,
    alone: Tensor,
    weights_of: Callable[[Tensor, Tensor], Tensor],
    positive_total: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The tensor path's fast rows: ``(cols[B, m], kept[B, m], done[B])``.

    1. Rows whose largest weight alone reaches the target (``alone``) keep their first
       largest key (:func:`_first_max`: the lowest index among ties, the tie rule).
    2. The others take :func:`top_prefix` (``_FAST_BLOCKS`` keys); while few are left,
       wider ones (``_MID_BLOCKS`` keys from the group maxima, then ``_WIDE_BLOCKS`` by one
       ``topk`` of each row).  ``positive_total``: rows that may be settled (``"exp"`` /
       ``"linear"``: a total > 0), ``None`` for all.  Rows not ``done`` are left to the
       exact selection.
    """
    b, k = keys.shape
    cols = _first_max(keys, group_max, row_max).unsqueeze(1)
    kept = alone.unsqueeze(1).clone()
    done = alone.clone()
    rest = (~done).nonzero().squeeze(1)
    for size in (_FAST_BLOCKS, _MID_BLOCKS, _WIDE_BLOCKS):
        if rest.numel() == 0 or (size > _FAST_BLOCKS and (k <= 4 * size or rest.numel() * 4 > b)):
            break
        # ``size`` keys weigh at most ``size`` times the largest: rows whose target is
        # beyond that cannot end among them (long "exp"/"linear" prefixes), skip them
        tried = rest[size * top_weight[rest] >= target[rest]]
        if tried.numel() == 0:
            continue
        whole = tried.numel() == b
        part_cols, part_kept, part_done = top_prefix(
            keys if whole else keys.index_select(0, tried),  # one copy of each row
            target[tried],
            weights_of,
            size,
            tried,
            group_max if whole else group_max.index_select(0, tried),
            direct=size == _WIDE_BLOCKS and group_width(k) > 1,  # one topk of each row
        )
        if positive_total is not None:
            part_done &= positive_total[tried]
            part_kept &= part_done.unsqueeze(1)
        width = max(cols.shape[1], part_cols.shape[1])
        cols = torch.nn.functional.pad(cols, (0, width - cols.shape[1]))
        kept = torch.nn.functional.pad(kept, (0, width - kept.shape[1]))
        cols[tried] = torch.nn.functional.pad(part_cols, (0, width - part_cols.shape[1]))
        kept[tried] = torch.nn.functional.pad(part_kept, (0, width - part_kept.shape[1]))
        done[tried] = part_done
        rest = (~done).nonzero().squeeze(1)
    return cols, kept, done
