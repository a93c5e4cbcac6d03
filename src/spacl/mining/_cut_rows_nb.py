"""Numba kernels of :mod:`spacl.mining.cut_kernel` (imported only when the kernel is used).

Weights (``mode``): 0 ``"similarity"`` ``max(s, 0)`` with ``s = float64(key) * tau``;
1 ``"linear"`` ``max((1 + s) / 2, 0)``; 2 ``"exp"`` ``float64(weights[r, j])`` (the
caller's ``exp(key - row_max)`` in the keys' dtype).  The same IEEE operations as
:meth:`spacl.mining.negatives.RelativeThresholdNegatives._subset_weights`, so the same
float64 values, summed in the same order (decreasing key, one after the other).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: the widths tried in turn: a row whose prefix is longer goes to the exact selection
SIZES = (32, 64, 128)


@njit(cache=True, nogil=True, inline="always")
def _weight(mode: int, tau: float, key: float, wrow: np.ndarray, j: int) -> float:
    if mode == 0:
        w = np.float64(key) * tau
        return w if w > 0.0 else 0.0
    if mode == 1:
        w = (1.0 + np.float64(key) * tau) / 2.0
        return w if w > 0.0 else 0.0
    return np.float64(wrow[j])


@njit(cache=True, nogil=True)
def _largest(
    row: np.ndarray,
    wrow: np.ndarray,
    mode: int,
    tau: float,
    m: int,
    vals: np.ndarray,
    idx: np.ndarray,
) -> int:
    """The ``m`` first keys of a stable descending sort of the row's keys of weight > 0
    into ``vals`` / ``idx`` (sorted); returns how many (``< m``: all of them)."""
    c = 0
    floor = -np.inf  # float64: compares exactly with float32 keys too
    for j in range(row.shape[0]):
        v = row[j]
        if not v > floor:  # a key equal to the m-th comes after it (larger index)
            continue
        if _weight(mode, tau, v, wrow, j) == 0.0:
            continue
        if c == m:
            c -= 1
        p = c
        while p > 0 and vals[p - 1] < v:  # equal keys keep their (increasing) order
            vals[p] = vals[p - 1]
            idx[p] = idx[p - 1]
            p -= 1
        vals[p] = v
        idx[p] = j
        c += 1
        if c == m:
            floor = vals[m - 1]
    return c


@njit(cache=True, nogil=True)
def prefixes(
    keys: np.ndarray,
    row_max: np.ndarray,
    weights: np.ndarray,
    mode: int,
    tau: float,
    target: np.ndarray,
    allow: np.ndarray,
    flat: np.ndarray,
    count: np.ndarray,
) -> int:
    """Each row's kept columns into ``flat`` (row after row), their number into ``count``
    (``-1``: not settled here); returns how many were written."""
    b = keys.shape[0]
    vals = np.empty(SIZES[-1], dtype=keys.dtype)
    idx = np.empty(SIZES[-1], dtype=np.int64)
    n = 0
    for r in range(b):
        row = keys[r]
        wrow = weights[r] if mode == 2 else weights[0]
        best = row_max[r]
        count[r] = -1
        if not best > -np.inf:
            count[r] = 0  # no candidate: nothing kept
            continue
        if not allow[r]:
            continue
        at = 0
        while row[at] != best:  # the first largest key
            at += 1
        top = _weight(mode, tau, best, wrow, at)
        t = target[r]
        if top >= t:
            flat[n] = at
            n += 1
            count[r] = 1
            continue
        for m in SIZES:
            if m * top < t:  # m keys weigh at most m times the largest
                continue
            c = _largest(row, wrow, mode, tau, m, vals, idx)
            cum = 0.0
            end = -1
            for p in range(c):
                cum += _weight(mode, tau, vals[p], wrow, idx[p])
                if cum >= t:
                    end = p
                    break
            if end >= 0:
                for p in range(end + 1):
                    flat[n + p] = idx[p]
                n += end + 1
                count[r] = end + 1
                break
            if c < m:
                break  # every weighted key taken, the target not reached
    return n


@njit(cache=True, nogil=True)
def padded(flat: np.ndarray, count: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cols[B, width], kept[B, width])`` from :func:`prefixes`' output."""
    b = count.shape[0]
    cols = np.zeros((b, width), dtype=np.int64)
    kept = np.zeros((b, width), dtype=np.bool_)
    n = 0
    for r in range(b):
        for p in range(count[r]):
            cols[r, p] = flat[n + p]
            kept[r, p] = True
        if count[r] > 0:
            n += count[r]
    return cols, kept
