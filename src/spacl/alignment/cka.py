"""Centred kernel alignment (Kornblith et al. 2019) computed exactly and in feature space.

All functions take ``X [N, dx]`` and ``Y [N, dy]`` (torch tensors or numpy arrays, rows are
the same N samples; ``dx`` and ``dy`` may differ, and so may the floating dtypes: every
product is computed in float64, so a float32 ``X`` with a float64 ``Y`` gives the float64
answer) and return a Python float.  A different number of rows is a ``ValueError`` naming
``X`` and ``Y``.

Numerics (the reasons the peer packages disagree, see PEERS.md):

* features are centred at their float64 column mean before any product, and every product
  is accumulated in float64, chunk by chunk, so float32 inputs with a large mean offset give
  the float64 answer and memory is O(d^2) whatever N is;
* linear kernels never form the ``N x N`` Gram matrix: ``<HKH, HLH>_F = ||X~^T Y~||_F^2``;
* no epsilon and no clamping: an undefined ratio (a constant representation, a non-positive
  unbiased self-HSIC) is returned as NaN with a ``RuntimeWarning``; a negative debiased CKA
  is a legitimate value and is returned as is.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from spacl._validation import check_positive
from spacl.alignment._moments import PairMoments, batched_unbiased_hsic, hsic_terms
from spacl.geometry.inputs import (
    F64,
    as_matrix,
    check_same_rows,
    column_mean,
    nan_with_warning,
    row_slices,
)

__all__ = ["debiased_cka", "linear_cka", "minibatch_cka", "rbf_cka", "unbiased_hsic"]


def _pair(x: Any, y: Any, min_rows: int, check_finite: bool = True) -> tuple[Tensor, Tensor]:
    xt = as_matrix(x, "X", min_rows=min_rows, check_finite=check_finite)
    yt = as_matrix(y, "Y", min_rows=min_rows, check_finite=check_finite)
    check_same_rows(xt, yt)
    return xt, yt


def cka_ratio(xy: float, xx: float, yy: float, what: str) -> float:
    """``xy / sqrt(xx * yy)``, or NaN with a warning when a self term is not positive."""
    if not (xx > 0 and yy > 0):
        return nan_with_warning(
            f"{what} is undefined: self-similarity terms are HSIC(X,X)={xx:.3e}, "
            f"HSIC(Y,Y)={yy:.3e} (a constant or degenerate representation); returning NaN"
        )
    return xy / math.sqrt(xx * yy)


def linear_cka(X: Any, Y: Any) -> float:
    """Linear CKA, ``||X~^T Y~||_F^2 / (||X~^T X~||_F ||Y~^T Y~||_F)`` on centred features.

    Equal to Kornblith et al.'s (2019) ``<HKH, HLH>_F / (||HKH||_F ||HLH||_F)`` with
    ``K = X X^T``, ``L = Y Y^T`` (biased HSIC), at cost O(N (dx^2 + dy^2 + dx dy)) and O(d^2)
    memory.  Invariant to orthogonal transforms and isotropic scaling of either side.
    Requires ``N >= 2``.

    Example:
        >>> import torch
        >>> from spacl.alignment import linear_cka
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> Q, _ = torch.linalg.qr(torch.randn(8, 8))  # an orthogonal matrix
        >>> round(linear_cka(X, 3.0 * X @ Q), 4)
        1.0
        >>> linear_cka(X, torch.randn(50, 8)) < 0.5  # independent representations
        True
    """
    xt, yt = _pair(X, Y, 2, check_finite=False)  # from_batch checks the column sums
    terms = hsic_terms(PairMoments.from_batch(xt, yt, higher=False))
    return cka_ratio(terms.biased_xy, terms.biased_xx, terms.biased_yy, "linear CKA")


def debiased_cka(X: Any, Y: Any) -> float:
    """Debiased linear CKA: the unbiased HSIC of Song et al. (2012) in place of the biased one.

    ``HSIC_u(K, L) / sqrt(HSIC_u(K, K) HSIC_u(L, L))`` (Kornblith et al. 2019, Nguyen et al.
    2021), computed in feature space from ``X~^T X~``, ``Y~^T Y~``, ``X~^T Y~`` and the row
    norms (see :func:`spacl.alignment._moments.hsic_terms`), so O(N d^2) like
    :func:`linear_cka`.  Can be negative.  Requires ``N >= 4``.

    Example:
        >>> import torch
        >>> from spacl.alignment import debiased_cka
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> Q, _ = torch.linalg.qr(torch.randn(8, 8))
        >>> round(debiased_cka(X, 3.0 * X @ Q), 4)
        1.0
        >>> abs(debiased_cka(X, torch.randn(50, 8))) < 0.2  # about 0 when independent
        True
    """
    xt, yt = _pair(X, Y, 4, check_finite=False)  # from_batch checks the column sums
    terms = hsic_terms(PairMoments.from_batch(xt, yt))
    return cka_ratio(terms.unbiased_xy, terms.unbiased_xx, terms.unbiased_yy, "debiased CKA")


def unbiased_hsic(X: Any, Y: Any) -> float:
    """The unbiased HSIC estimator of Song et al. (2012) with linear kernels, in feature space.

    ``[tr(K~L~) + 1^T K~ 1 1^T L~ 1 / ((N-1)(N-2)) - 2/(N-2) 1^T K~ L~ 1] / (N (N-3))`` with
    ``K~ = X X^T`` and ``L~ = Y Y^T`` with zeroed diagonals.  Requires ``N >= 4``.

    Example:
        >>> import torch
        >>> from spacl.alignment import unbiased_hsic
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> round(unbiased_hsic(X, 2.0 * X) / unbiased_hsic(X, X), 4)  # linear in each kernel
        4.0
    """
    xt, yt = _pair(X, Y, 4)
    return hsic_terms(PairMoments.from_batch(xt, yt)).unbiased_xy


def minibatch_cka(
    X: Any,
    Y: Any,
    batch_size: int,
    *,
    generator: torch.Generator | None = None,
) -> float:
    """Minibatch CKA of Nguyen et al. (2021): unbiased HSIC averaged over minibatches.

    ``CKA_mb = mean_i HSIC_u(X_i, Y_i) / sqrt(mean_i HSIC_u(X_i, X_i) * mean_i HSIC_u(Y_i, Y_i))``
    over consecutive minibatches of ``batch_size`` rows (after a random permutation when a
    ``generator`` is given).  **Decision**: a trailing partial minibatch is kept when it has
    at least 4 rows and dropped otherwise.  All full minibatches are processed together as
    one batched product.  Requires ``4 <= batch_size``.

    Example:
        >>> import torch
        >>> from spacl.alignment import minibatch_cka
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> round(minibatch_cka(X, 3.0 * X, batch_size=10), 4)
        1.0
    """
    xt, yt = _pair(X, Y, 4)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 4:
        raise ValueError(f"batch_size must be >= 4 for the unbiased HSIC, got {batch_size}")
    n = xt.shape[0]
    if generator is not None:
        order = torch.randperm(n, generator=generator, device=generator.device).to(xt.device)
        xt, yt = xt[order], yt[order]
    k = n // batch_size
    sums = torch.zeros(3, dtype=F64, device=xt.device)
    count = 0
    # bound the per-step memory: a group of minibatches at a time
    width = max(xt.shape[1] + yt.shape[1], batch_size)
    group = max(1, (1 << 22) // (batch_size * width))
    for start in range(0, k, group):
        stop = min(k, start + group)
        rows = slice(start * batch_size, stop * batch_size)
        xb = xt[rows].reshape(stop - start, batch_size, -1)
        yb = yt[rows].reshape(stop - start, batch_size, -1)
        sums += torch.stack([h.sum() for h in batched_unbiased_hsic(xb, yb)])
        count += stop - start
    tail = n - k * batch_size
    if tail >= 4:
        hs = batched_unbiased_hsic(xt[k * batch_size :][None], yt[k * batch_size :][None])
        sums += torch.stack([h.sum() for h in hs])
        count += 1
    if count == 0:  # pragma: no cover - n >= 4 always yields one minibatch
        raise ValueError(f"no minibatch of at least 4 rows in N={n} samples")
    hxy, hxx, hyy = (float(s) / count for s in sums)
    return cka_ratio(hxy, hxx, hyy, "minibatch CKA")


def rbf_cka(X: Any, Y: Any, sigma: float = 1.0, *, relative: bool = True) -> float:
    """CKA with Gaussian (RBF) kernels ``k(u, v) = exp(-|u - v|^2 / (2 s^2))`` (biased HSIC).

    With ``relative=True`` (Kornblith et al. 2019) the bandwidth of each representation is
    ``s^2 = sigma^2 * median(|u - v|^2)``, the median over distinct pairs (**Decision**: the
    diagonal zeros are excluded from the median); with ``relative=False`` ``s = sigma``.

    The kernel is not linear, so this is O(N^2 d) time, but it is computed in row blocks:
    ``<HKH, HLH>_F = sum K*L - 2/N sum_i r_i^K r_i^L + (1^T K 1)(1^T L 1)/N^2`` with row sums
    ``r``, so memory is O(N * block) apart from the median's O(N^2) pair distances.

    Example:
        >>> import torch
        >>> from spacl.alignment import rbf_cka
        >>> _ = torch.manual_seed(0)
        >>> X = torch.randn(50, 8)
        >>> round(rbf_cka(X, 5.0 * X), 4)  # the relative bandwidth follows the scale
        1.0
        >>> rbf_cka(X, torch.randn(50, 8)) < 0.5
        True
    """
    xt, yt = _pair(X, Y, 2)
    sigma = check_positive(sigma, "sigma")
    xc = xt.to(F64) - column_mean(xt)
    yc = yt.to(F64) - column_mean(yt)
    sx = _bandwidth(xc, sigma, relative, "X")
    sy = _bandwidth(yc, sigma, relative, "Y")
    n = xc.shape[0]
    rx = torch.zeros(n, dtype=F64, device=xc.device)
    ry = torch.zeros(n, dtype=F64, device=xc.device)
    kl = kk = ll = 0.0
    for rows in row_slices(n, n):
        kb = _rbf_block(xc, rows, sx)
        lb = _rbf_block(yc, rows, sy)
        rx[rows] = kb.sum(1)
        ry[rows] = lb.sum(1)
        kl += float((kb * lb).sum())
        kk += float((kb * kb).sum())
        ll += float((lb * lb).sum())
    tx, ty = float(rx.sum()), float(ry.sum())
    hxy = kl - 2.0 / n * float(rx @ ry) + tx * ty / n**2
    hxx = kk - 2.0 / n * float(rx @ rx) + tx * tx / n**2
    hyy = ll - 2.0 / n * float(ry @ ry) + ty * ty / n**2
    return cka_ratio(hxy, hxx, hyy, "RBF CKA")


def _sq_dist_block(xc: Tensor, rows: slice) -> Tensor:
    norms = (xc * xc).sum(1)
    block = norms[rows, None] + norms[None, :] - 2.0 * (xc[rows] @ xc.T)
    # Rounding can push a squared distance of (near-)equal points slightly below zero.
    return block.clamp_min_(0.0)


def _rbf_block(xc: Tensor, rows: slice, s: float) -> Tensor:
    return torch.exp(_sq_dist_block(xc, rows) / (-2.0 * s * s))


def _bandwidth(xc: Tensor, sigma: float, relative: bool, name: str) -> float:
    if not relative:
        return sigma
    n = xc.shape[0]
    parts = []
    for rows in row_slices(n, n):
        block = _sq_dist_block(xc, rows)
        upper = (
            torch.arange(n, device=xc.device)[None, :]
            > torch.arange(rows.start, rows.stop, device=xc.device)[:, None]
        )
        parts.append(block[upper].cpu().numpy())
    median = float(np.median(np.concatenate(parts)))
    if median <= 0:
        raise ValueError(
            f"{name}: the median pairwise squared distance is {median}; a relative RBF "
            "bandwidth is undefined (more than half the samples coincide); pass relative=False"
        )
    return sigma * math.sqrt(median)
