"""Numba kernels of :mod:`spacl.mining.cut.kernel` (imported only when the kernel is used).

Weights (``mode``): 0 ``"similarity"`` ``max(s, 0)`` with ``s = float64(key) * tau``;
1 ``"linear"`` ``max((1 + s) / 2, 0)``; 2 ``"exp"`` ``float64(weights[r, j])`` (the
caller's ``exp(key - row_max)`` in the keys' dtype).  The same IEEE operations as
:meth:`spacl.mining.cut.threshold.RelativeThresholdNegatives._subset_weights`, so the same
float64 values, summed in the same order (decreasing key, one after the other).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: the widths tried in turn: a row whose prefix is longer goes to the exact selection
SIZES = (32, 64, 128)
#: the scans' starting floors (:func:`_sample_top`): the 24 largest keys of every 8th
#: column; width m starts at the (24 m / 128)-th, about 1.5 m keys above it
_SAMPLE_STRIDE = 8
_SAMPLE_RANK = 24


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
    floor: float,
) -> int:
    """The ``m`` first keys of a stable descending sort of the row's keys of weight > 0
    and above ``floor`` into ``vals`` / ``idx`` (sorted); returns how many (``< m``: all
    of those).  ``floor`` is float64: it compares exactly with float32 keys too."""
    c = 0
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
    sample = np.empty(_SAMPLE_RANK, dtype=keys.dtype)
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
        # the widest prefix weighs at most the keys of weight >= x plus SIZES[-1] x: with
        # x = t / (2 SIZES[-1]), a row whose heavy keys hold less than t / 2 ends beyond
        # it (long "exp" / "linear" prefixes): the exact selection, without a scan
        if 2.0 * _heavy_mass(row, wrow, mode, tau, t / (2.0 * SIZES[-1])) < t:
            continue
        sampled = _sample_top(row, wrow, mode, tau, sample, idx)
        # what the scans so far tell: the row's `known` first keys weigh `known_sum`,
        # every other at most `beyond`; a width whose bound falls short is skipped
        known, known_sum, beyond = 0, 0.0, top
        end = -1
        for m in SIZES:
            rank = _SAMPLE_RANK * m // SIZES[-1]  # about 1.5 m keys above it
            floor = sample[rank - 1] if sampled >= rank else -np.inf
            while known_sum + (m - known) * beyond >= t:
                c = _largest(row, wrow, mode, tau, m, vals, idx, floor)
                end, cum = _crossing(vals, idx, c, wrow, mode, tau, t)
                if end >= 0:
                    break
                known, known_sum = c, cum
                if c == m:  # the row's m first keys: a wider m, if any may reach
                    beyond = _bound(mode, tau, vals[m - 1], best, wrow)
                    break
                if floor == -np.inf:  # every weighted key taken: none reaches
                    beyond = 0.0
                    break
                # every key above the floor taken; the others weigh at most its weight
                beyond = _bound(mode, tau, floor, best, wrow)
                floor = -np.inf  # the next scan looks at every key
            if end >= 0:
                for p in range(end + 1):
                    flat[n + p] = idx[p]
                n += end + 1
                count[r] = end + 1
                break
    return n


@njit(cache=True, nogil=True)
def _crossing(
    vals: np.ndarray, idx: np.ndarray, c: int, wrow: np.ndarray, mode: int, tau: float, t: float
) -> tuple[int, float]:
    """The first position where the running weight of ``vals[:c]`` reaches ``t`` (-1:
    none) and the running weight there (of all ``c`` where none)."""
    cum = 0.0
    for p in range(c):
        cum += _weight(mode, tau, vals[p], wrow, idx[p])
        if cum >= t:
            return p, cum
    return -1, cum


@njit(cache=True, nogil=True, fastmath={"reassoc", "nsz", "contract"})
def _heavy_mass(row: np.ndarray, wrow: np.ndarray, mode: int, tau: float, x: float) -> float:
    """The summed weight of the row's keys of weight ``>= x`` (added in any order: it
    only decides whether the row is scanned here)."""
    total = 0.0
    for j in range(row.shape[0]):
        w = _weight(mode, tau, row[j], wrow, j)
        total += w if w >= x else 0.0
    return total


@njit(cache=True, nogil=True)
def _bound(mode: int, tau: float, key: float, best: float, wrow: np.ndarray) -> float:
    """About the weight of ``key`` (a little above it for ``"exp"``, whose weights the
    caller exponentiated): it only decides whether a wider scan may settle a row, never
    what is kept (a row not settled here goes to the exact selection)."""
    if mode == 2:
        return np.exp(key - best) * (1.0 + 1e-6)
    return _weight(mode, tau, key, wrow, 0)


@njit(cache=True, nogil=True)
def _sample_top(
    row: np.ndarray, wrow: np.ndarray, mode: int, tau: float, buf: np.ndarray, idx: np.ndarray
) -> int:
    """The ``_SAMPLE_RANK`` largest weighted keys of every ``_SAMPLE_STRIDE``-th column
    into ``buf`` (descending); returns how many (fewer on short rows).  Their ``i``-th
    stands above about ``_SAMPLE_STRIDE i`` of the row's keys: the starting floors of the
    scans (a guess: a scan that finds fewer keys than it needs above its floor looks at
    every key again)."""
    sample = row[::_SAMPLE_STRIDE]  # a strided view: its own compiled scan
    weights = wrow[::_SAMPLE_STRIDE] if mode == 2 else wrow
    return _largest(sample, weights, mode, tau, _SAMPLE_RANK, buf, idx, -np.inf)


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
