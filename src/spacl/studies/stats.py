"""Statistics of ``spacl reproduce``: mean and sample std over seeds, Welch's t-test.

``mean`` and sample ``std`` (``ddof = 1``) over seeds; Welch's unequal-variance t-test,
two-sided.  The verdict rules built on them live in :mod:`spacl.studies.verdicts`; callers import
these names from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor

__all__ = ["fmt", "mean_std", "pooled_std", "seeds_needed", "summarize", "welch", "welch_parts"]


def checked_values(values: Sequence[float] | Tensor, name: str = "values") -> list[float]:
    out = [float(v) for v in (values.tolist() if isinstance(values, Tensor) else values)]
    if not out:
        raise ValueError(f"{name} must hold at least one value, got none")
    return out


def mean_std(values: Sequence[float] | Tensor) -> tuple[float, float]:
    """``(mean, sample std)`` with ``ddof = 1``; the std of a single value is ``0``."""
    v = checked_values(values)
    m = math.fsum(v) / len(v)
    if len(v) < 2:
        return m, 0.0
    return m, math.sqrt(math.fsum((x - m) ** 2 for x in v) / (len(v) - 1))


def pooled_std(a: Sequence[float], b: Sequence[float]) -> float:
    """``sqrt((std_a^2 + std_b^2) / 2)`` with sample standard deviations."""
    return math.sqrt((mean_std(a)[1] ** 2 + mean_std(b)[1] ** 2) / 2.0)


def fmt(values: Sequence[float] | float, scale: float = 1.0, digits: int = 2) -> str:
    """``"mean ± std"`` of ``values * scale`` (a single number: just the number)."""
    if isinstance(values, (int, float)):
        return f"{float(values) * scale:.{digits}f}"
    m, s = mean_std([float(v) * scale for v in values])
    if len(values) < 2:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def summarize(records: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per-seed scalar records -> ``{metric: {"values": [...], "mean": m, "std": s}}``.

    Every record must hold the same keys (one record per seed).
    """
    if not records:
        raise ValueError("records must hold at least one per-seed record, got none")
    keys = list(records[0])
    for i, rec in enumerate(records):
        if list(rec) != keys:
            raise ValueError(f"record {i} has keys {sorted(rec)}, record 0 has {sorted(keys)}")
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        values = [float(r[key]) for r in records]
        m, s = mean_std(values)
        out[key] = {"values": values, "mean": m, "std": s}
    return out


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """``(t, two-sided p)`` of Welch's t-test of ``E[a] = E[b]``; needs 2+ values each.

    With no spread on either side the difference is exact: ``p = 0`` if the means
    differ, ``1`` if not.
    """
    x, y = checked_values(a, "a"), checked_values(b, "b")
    if len(x) < 2 or len(y) < 2:
        raise ValueError(f"welch needs at least 2 values per side, got {len(x)} and {len(y)}")
    (mx, sx), (my, sy) = mean_std(x), mean_std(y)
    se2 = sx * sx / len(x) + sy * sy / len(y)
    if se2 == 0.0:
        return (math.copysign(math.inf, mx - my), 0.0) if mx != my else (0.0, 1.0)
    from scipy import stats

    t = (mx - my) / math.sqrt(se2)
    wx, wy = sx * sx / len(x) / se2, sy * sy / len(y) / se2  # shares of se2, no underflow
    df = 1.0 / (wx * wx / (len(x) - 1) + wy * wy / (len(y) - 1))  # Welch-Satterthwaite
    return t, float(2.0 * stats.t.sf(abs(t), df))


def seeds_needed(run_seconds: float) -> int:
    """Seeds a comparison needs: 5 where one run takes under a minute, else 3."""
    if not math.isfinite(run_seconds) or run_seconds < 0:
        raise ValueError(f"run_seconds must be a finite number >= 0, got {run_seconds!r}")
    return 5 if run_seconds < 60.0 else 3


def welch_parts(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """``(mean_x - mean_y, its standard error, Welch-Satterthwaite df)``."""
    (mx, sx), (my, sy) = mean_std(x), mean_std(y)
    vx, vy = sx * sx / len(x), sy * sy / len(y)
    se2 = vx + vy
    if se2 == 0.0:
        return mx - my, 0.0, math.inf
    wx, wy = vx / se2, vy / se2
    df = 1.0 / (wx * wx / (len(x) - 1) + wy * wy / (len(y) - 1))
    return mx - my, math.sqrt(se2), df
