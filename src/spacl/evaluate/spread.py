"""Spread over seeds of thresholded open-intent metrics (issue 18).

:func:`seed_spread`: mean, sample standard deviation and count over seeds of each metric;
:func:`std_interval`: the confidence interval of the true standard deviation that a few
seeds allow; :func:`seeds_to_settle`: how many seeds that interval would need to fall on
one side of a bound.  Re-exported by :mod:`spacl.evaluate.ood`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from spacl._validation import check_in_range

#: the metrics of a thresholded decision (their spread over seeds: :func:`seed_spread`)
THRESHOLDED_METRICS = ("accuracy", "macro_f1", "f1_ood", "f1_ind")

__all__ = ["THRESHOLDED_METRICS", "seed_spread", "seeds_to_settle", "std_interval"]


def seed_spread(
    runs: Sequence[Mapping[str, float | None]], keys: Sequence[str] = THRESHOLDED_METRICS
) -> dict[str, dict[str, float]]:
    """Mean, sample standard deviation (``n - 1``) and count over seeds of each metric.

    ``runs`` are the metric dicts of one setting's seeds (e.g. :func:`open_intent_metrics`);
    a run without a key (or with ``None``) is left out of that key.  ``std`` is NaN for a
    single value: no spread can be estimated from one seed.

    Raises:
        ValueError: no run holds one of ``keys``.
    """
    out: dict[str, dict[str, float]] = {}
    for key in keys:
        values = torch.tensor(
            [float(v) for run in runs if (v := run.get(key)) is not None], dtype=torch.float64
        )
        if values.numel() == 0:
            raise ValueError(f"no run holds the metric {key!r} (keys={tuple(keys)})")
        std = float(values.std(correction=1)) if values.numel() > 1 else math.nan
        out[key] = {"mean": float(values.mean()), "std": std, "n": float(values.numel())}
    return out


def std_interval(std: float, n: int, level: float = 0.90) -> tuple[float, float]:
    """Confidence interval of a population's standard deviation ``sigma`` from ``n`` values.

    For ``n`` independent normal values with sample standard deviation ``s`` (``n - 1``
    in the denominator), ``(n - 1) s^2 / sigma^2`` follows a chi-square law with ``n - 1``
    degrees of freedom, so the equal-tailed interval at ``level`` is::

        [ s sqrt((n - 1) / chi2_{(1 + level) / 2, n - 1}),
          s sqrt((n - 1) / chi2_{(1 - level) / 2, n - 1}) ]

    (``chi2_{p, k}`` the ``p``-quantile).  It says what a std over a few seeds can show: with
    3 seeds and ``level = 0.9`` the interval runs from ``0.58 s`` to ``4.4 s``, so a std
    bound is firmly exceeded only when ``s`` is ``1.7`` times above it, and never firmly
    met unless ``s`` is ``4.4`` times below it.

    Raises:
        ValueError: ``n < 2``, a negative or non-finite ``std``, or ``level`` outside (0, 1).
    """
    from scipy import stats

    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"std_interval needs n >= 2 values, got n={n!r}")
    if isinstance(std, bool) or not isinstance(std, (int, float)):
        raise TypeError(f"std must be a number, got {type(std).__name__}")
    if not math.isfinite(std) or std < 0:
        raise ValueError(f"std must be a finite number >= 0, got {std!r}")
    check_in_range(level, "level", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    dof = n - 1
    low = std * math.sqrt(dof / float(stats.chi2.ppf((1.0 + level) / 2.0, dof)))
    high = std * math.sqrt(dof / float(stats.chi2.ppf((1.0 - level) / 2.0, dof)))
    return low, high


def seeds_to_settle(std: float, bound: float, level: float = 0.90, max_n: int = 1000) -> int | None:
    """The fewest seeds ``n >= 2`` whose :func:`std_interval` settles ``std`` against ``bound``.

    Settled: the interval lies wholly above the bound (``low > bound``: over it) or wholly
    at or below it (``high <= bound``: under it), as if the sample std stayed ``std`` with
    ``n`` seeds.  A planning figure, not a test: with more seeds the sample std moves too.
    The interval narrows as ``n`` grows (both ends tend to ``std``), so the answer is the
    first ``n`` of a bisection; ``None`` where even ``max_n`` seeds leave it open (``std``
    within a few percent of ``bound``, or equal to it).

    Raises:
        ValueError: a negative or non-finite ``std`` or ``bound``, ``max_n < 2``, or
            ``level`` outside (0, 1).
    """
    for name, value in (("std", std), ("bound", bound)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 2:
        raise ValueError(f"max_n must be an int >= 2, got {max_n!r}")

    def settled(n: int) -> bool:
        low, high = std_interval(std, n, level)
        return low > bound or high <= bound

    if not settled(max_n):
        return None
    lo, hi = 1, max_n  # settled(hi); lo is below every settled n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if settled(mid):
            hi = mid
        else:
            lo = mid
    return hi
