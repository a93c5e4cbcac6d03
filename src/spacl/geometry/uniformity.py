"""Alignment and uniformity of Wang & Isola (2020), blocked so that large N fits in memory."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from spacl._validation import check_positive
from spacl.geometry.inputs import (
    F64,
    as_matrix,
    check_same_columns,
    check_same_rows,
    chunk_rows,
    column_mean,
)

__all__ = ["alignment", "alignment_uniformity", "uniformity"]


def alignment(z0: Any, z1: Any, alpha: float = 2.0, *, normalize: bool = True) -> float:
    """Alignment ``mean_i ||z0_i - z1_i||^alpha`` of the positive pairs (Wang & Isola 2020).

    The rows ``z0[i]`` and ``z1[i]`` (both ``[N, d]``) are the two views of sample ``i``;
    lower is better aligned.  **Decision**: ``normalize=True`` (default) projects both views
    onto the unit sphere first, where the metric is defined (Wang & Isola 2020).  Computed in
    float64, so a float32 and a float64 view may be mixed.  ``z0`` and ``z1`` must have the
    same shape (``ValueError`` naming both otherwise).

    Example:
        >>> import torch
        >>> from spacl.geometry import alignment
        >>> z = torch.eye(3)
        >>> alignment(z, z)
        0.0
        >>> round(alignment(z, z.roll(1, dims=0)), 4)  # orthogonal unit pairs: ||u - v||^2 = 2
        2.0
    """
    return pair_alignment(z0, z1, alpha, normalize, ("z0", "z1"))


def pair_alignment(
    z0: Any, z1: Any, alpha: float, normalize: bool, names: tuple[str, str]
) -> float:
    """:func:`alignment` whose errors name the caller's arguments ``names``."""
    a = as_matrix(z0, names[0])
    b = as_matrix(z1, names[1])
    check_same_rows(a, b, *names)
    check_same_columns(a, b, *names)
    alpha = check_positive(alpha, "alpha")
    a64, b64 = _maybe_normalize(a, normalize, names[0]), _maybe_normalize(b, normalize, names[1])
    return float((a64 - b64).norm(dim=1).pow(alpha).mean())


def uniformity(
    z: Any,
    t: float = 2.0,
    *,
    normalize: bool = True,
    sample: int | None = None,
    generator: torch.Generator | None = None,
    check_finite: bool = True,
) -> float:
    """``log E_{i<j} exp(-t ||z_i - z_j||^2)`` over all distinct pairs (Wang & Isola 2020).

    Computed exactly in row blocks with a running log-sum-exp (O(N^2 d) time, O(N * block)
    memory).  ``sample=m`` first draws ``m`` of the N points without replacement with
    ``generator`` (a fresh generator seeded 0 when none is given, so results repeat) and
    uses all pairs among them: an unbiased estimate at O(m^2 d) cost.  ``normalize=True``
    (default, as in :func:`alignment`) works on the unit sphere; ``False`` on the raw rows.
    ``check_finite=False`` skips the scan of ``z`` (for callers that validated it already).
    Lower (more negative) is more uniform; the minimum over ``N`` points is reached by a
    regular simplex.

    Example:
        >>> import torch
        >>> from spacl.geometry import uniformity
        >>> round(uniformity(torch.eye(4)), 4)  # every pair at ||u - v||^2 = 2: log e^{-2t}
        -4.0
        >>> _ = torch.manual_seed(0)
        >>> uniformity(torch.randn(100, 8)) < uniformity(torch.randn(100, 8) + 5.0)
        True
    """
    x = as_matrix(z, "z", min_rows=2, check_finite=check_finite)
    t = check_positive(t, "t")
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 2:
            raise ValueError(f"sample must be an int >= 2 or None, got {sample!r}")
        if sample < x.shape[0]:
            gen = generator if generator is not None else torch.Generator().manual_seed(0)
            idx = torch.randperm(x.shape[0], generator=gen, device=gen.device)[:sample]
            x = x[idx.to(x.device)]
    points = _maybe_normalize(x, normalize, "z")
    if not normalize:
        points = points - column_mean(points)
    return _log_mean_exp_pairs(points, t)


def alignment_uniformity(
    z0: Any,
    z1: Any,
    *,
    alpha: float = 2.0,
    t: float = 2.0,
    normalize: bool = True,
    sample: int | None = None,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Wang & Isola's alignment of the pairs ``(z0_i, z1_i)`` and the uniformity of each view.

    Returns ``{"alignment", "uniformity", "uniformity_z0", "uniformity_z1"}`` where
    ``uniformity`` is the mean of the two views' uniformity (as in their training code):
    ``E ||z0_i - z1_i||^alpha`` and ``log E_{i<j} exp(-t ||z_i - z_j||^2)`` (Wang & Isola
    2020).  See :func:`alignment` and :func:`uniformity` for the arguments; the shapes of
    ``z0`` and ``z1`` are checked before any pairwise work.

    Example:
        >>> import torch
        >>> from spacl.geometry import alignment_uniformity
        >>> z = torch.eye(4)
        >>> {k: round(v, 4) for k, v in alignment_uniformity(z, z).items()}
        {'alignment': 0.0, 'uniformity': -4.0, 'uniformity_z0': -4.0, 'uniformity_z1': -4.0}
    """
    aligned = alignment(z0, z1, alpha, normalize=normalize)  # checks the shapes first
    u0 = uniformity(z0, t, normalize=normalize, sample=sample, generator=generator)
    u1 = uniformity(z1, t, normalize=normalize, sample=sample, generator=generator)
    return {
        "alignment": aligned,
        "uniformity": 0.5 * (u0 + u1),
        "uniformity_z0": u0,
        "uniformity_z1": u1,
    }


def _maybe_normalize(x: Tensor, normalize: bool, name: str) -> Tensor:
    x64 = x.to(F64)
    if not normalize:
        return x64
    norms = x64.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()):
        raise ValueError(f"{name} has {int((norms == 0).sum())} all-zero row(s); cannot normalise")
    return x64 / norms


def _log_mean_exp_pairs(x: Tensor, t: float) -> float:
    """``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` over the upper triangle, block by block.

    Row block ``[a, b)`` is paired with itself (strict upper triangle) and with all rows
    ``>= b``, so only about half of the ``N x N`` products are computed.
    """
    n = x.shape[0]
    sq = (x * x).sum(1)
    step = min(chunk_rows(n, n), max(128, -(-n // 8)))
    partial = []
    for a in range(0, n, step):
        b = min(n, a + step)
        own = sq[a:b, None] + sq[None, a:b] - 2.0 * (x[a:b] @ x[a:b].T)
        upper = torch.ones(b - a, b - a, dtype=torch.bool, device=x.device).triu_(1)
        # rounding can leave a tiny negative squared distance for (near-)equal points
        values = [own.clamp_min_(0.0)[upper]]
        if b < n:
            rest = sq[a:b, None] + sq[None, b:] - 2.0 * (x[a:b] @ x[b:].T)
            values.append(rest.clamp_min_(0.0).reshape(-1))
        for v in values:
            if v.numel():
                partial.append(torch.logsumexp(v * (-t), 0))
    total = torch.logsumexp(torch.stack(partial), 0)
    return float(total) - math.log(n * (n - 1) / 2)
