"""Sufficient statistics for linear and unbiased-HSIC CKA, and their exact (Chan-style) merge.

For paired samples ``x_i in R^{dx}``, ``y_i in R^{dy}`` centred at their means ``m_x, m_y``
(``x~ = x - m_x``, ``a_i = |x~_i|^2``, ``b_i = |y~_i|^2``) we keep, in float64,

    n, m_x, m_y,
    Cxx = sum x~ x~^T,  Cyy = sum y~ y~^T,  Cxy = sum x~ y~^T          (co-moments)
    qxx = sum a^2,  qyy = sum b^2,  qxy = sum a b                      (4th-order scalars)
    ux = sum a x~,  uy = sum b y~,  vx = sum b x~,  vy = sum a y~      (3rd-order vectors)

From these the biased and the unbiased HSIC of the linear kernels follow without any
``N x N`` Gram matrix (see :func:`hsic_terms`).  Moving the centre by ``delta`` (x) and
``eps`` (y) changes every statistic by a closed-form polynomial in ``delta, eps`` and lower
statistics (``sum x~ = 0`` kills the odd cross terms), which gives an exact merge of two
accumulators: both are re-centred at the pooled mean and added.  This is the Chan et al.
(1979) update generalised to the third and fourth moments; it never forms raw sums minus
``n * mean^2``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from spacl.geometry.inputs import F64, column_mean, gram, row_slices


@dataclass
class PairMoments:
    """Centred float64 statistics of ``n`` paired rows (see the module docstring)."""

    n: float
    mean_x: Tensor
    mean_y: Tensor
    cxx: Tensor
    cyy: Tensor
    cxy: Tensor
    qxx: Tensor
    qyy: Tensor
    qxy: Tensor
    ux: Tensor
    uy: Tensor
    vx: Tensor
    vy: Tensor

    @classmethod
    def empty(cls, dx: int, dy: int, device: torch.device | None = None) -> PairMoments:
        """Statistics of zero samples."""

        def z(*shape: int) -> Tensor:
            return torch.zeros(shape, dtype=F64, device=device)

        return cls(
            0.0,
            z(dx),
            z(dy),
            z(dx, dx),
            z(dy, dy),
            z(dx, dy),
            z(),
            z(),
            z(),
            z(dx),
            z(dy),
            z(dx),
            z(dy),
        )

    @classmethod
    def from_batch(
        cls,
        x: Tensor,
        y: Tensor,
        names: tuple[str, str] = ("X", "Y"),
        *,
        higher: bool = True,
    ) -> PairMoments:
        """Statistics of the rows of ``x [n, dx]`` and ``y [n, dy]`` (two float64 passes).

        Non-finite inputs raise ``ValueError`` (found from the float64 column sums).
        ``higher=False`` skips the third/fourth-order moments (left at zero): enough for the
        biased HSIC (linear CKA), not for the unbiased one or for merging.
        """
        mean_x, mean_y = column_mean(x, names[0]), column_mean(y, names[1])
        out = cls.empty(x.shape[1], y.shape[1], device=x.device)
        out.n, out.mean_x, out.mean_y = float(x.shape[0]), mean_x, mean_y
        for rows in row_slices(x.shape[0], x.shape[1] + y.shape[1]):
            xc = x[rows].to(F64, copy=True).sub_(mean_x)
            yc = y[rows].to(F64, copy=True).sub_(mean_y)
            out.cxx += gram(xc)
            out.cyy += gram(yc)
            out.cxy += xc.T @ yc
            if not higher:
                continue
            a = torch.einsum("ij,ij->i", xc, xc)
            b = torch.einsum("ij,ij->i", yc, yc)
            out.qxx += a @ a
            out.qyy += b @ b
            out.qxy += a @ b
            out.ux += xc.T @ a
            out.uy += yc.T @ b
            out.vx += xc.T @ b
            out.vy += yc.T @ a
        return out

    def recentred(self, mean_x: Tensor, mean_y: Tensor) -> PairMoments:
        """The same samples' statistics about new centres ``mean_x, mean_y`` (exact shift).

        Valid when ``self`` is centred at the samples' own mean (``sum x~ = 0``), as
        :meth:`from_batch` and :meth:`merged` produce it.
        """
        d = self.mean_x - mean_x  # x~' = x~ + d
        e = self.mean_y - mean_y
        n = self.n
        ax, ay = self.cxx.trace(), self.cyy.trace()
        dd, ee = d @ d, e @ e
        cxx_d, cyy_e = self.cxx @ d, self.cyy @ e
        cxy_e, cyx_d = self.cxy @ e, self.cxy.T @ d
        return PairMoments(
            n=n,
            mean_x=mean_x,
            mean_y=mean_y,
            cxx=self.cxx + n * torch.outer(d, d),
            cyy=self.cyy + n * torch.outer(e, e),
            cxy=self.cxy + n * torch.outer(d, e),
            qxx=self.qxx + 4 * (d @ cxx_d) + n * dd * dd + 4 * (self.ux @ d) + 2 * dd * ax,
            qyy=self.qyy + 4 * (e @ cyy_e) + n * ee * ee + 4 * (self.uy @ e) + 2 * ee * ay,
            qxy=(
                self.qxy
                + 2 * (self.vy @ e)
                + ee * ax
                + 2 * (self.vx @ d)
                + 4 * (d @ cxy_e)
                + dd * ay
                + n * dd * ee
            ),
            ux=self.ux + ax * d + 2 * cxx_d + n * dd * d,
            uy=self.uy + ay * e + 2 * cyy_e + n * ee * e,
            vx=self.vx + ay * d + 2 * cxy_e + n * ee * d,
            vy=self.vy + ax * e + 2 * cyx_d + n * dd * e,
        )

    def merged(self, other: PairMoments) -> PairMoments:
        """Statistics of the union of both sample sets (exact up to float64 rounding)."""
        if self.n == 0:
            return other.copy()
        if other.n == 0:
            return self.copy()
        n = self.n + other.n
        mean_x = self.mean_x + (other.mean_x - self.mean_x) * (other.n / n)
        mean_y = self.mean_y + (other.mean_y - self.mean_y) * (other.n / n)
        a = self.recentred(mean_x, mean_y)
        b = other.recentred(mean_x, mean_y)
        out = PairMoments(
            n, mean_x, mean_y, *(getattr(a, f.name) + getattr(b, f.name) for f in fields(self)[3:])
        )
        return out

    def copy(self) -> PairMoments:
        """A deep copy."""
        tensors = {f.name: getattr(self, f.name).clone() for f in fields(self)[1:]}
        return replace(self, **tensors)

    def flatten(self) -> Tensor:
        """All statistics in one float64 vector (for ``torch.distributed`` exchange)."""
        parts = [torch.tensor([self.n], dtype=F64, device=self.mean_x.device)]
        parts += [getattr(self, f.name).reshape(-1) for f in fields(self)[1:]]
        return torch.cat(parts)

    @classmethod
    def unflatten(cls, flat: Tensor, dx: int, dy: int) -> PairMoments:
        """Inverse of :meth:`flatten`."""
        template = cls.empty(dx, dy, device=flat.device)
        values: list[float | Tensor] = [float(flat[0])]
        offset = 1
        for f in fields(template)[1:]:
            shape = getattr(template, f.name).shape
            size = int(torch.Size(shape).numel())
            values.append(flat[offset : offset + size].reshape(shape).clone())
            offset += size
        return cls(*values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class HSICTerms:
    """HSIC of the linear kernels, up to the common factors that cancel in CKA.

    ``biased_*`` are ``<HKH, HLH>_F`` (= ``||Cxy||_F^2`` etc.) and ``unbiased_*`` the
    unbiased HSIC of Song et al. (2012) (``nan`` when ``n < 4``).  A representation whose
    centred norm is within ``64 eps`` of its raw norm is constant up to rounding: its terms
    are then exactly 0, so CKA reports it as undefined instead of a ratio of rounding noise.
    """

    biased_xy: float
    biased_xx: float
    biased_yy: float
    unbiased_xy: float
    unbiased_xx: float
    unbiased_yy: float


def hsic_terms(m: PairMoments) -> HSICTerms:
    """Biased and unbiased HSIC terms from centred statistics, in O(d^2).

    With ``K = X~ X~^T``, ``L = Y~ Y~^T``, ``K~``/``L~`` their copies with zero diagonal and
    centred features (``K~ 1 = -a``), Song et al.'s estimator

        HSIC_u = [tr(K~ L~) + (1^T K~ 1)(1^T L~ 1)/((n-1)(n-2)) - 2/(n-2) 1^T K~ L~ 1] / (n(n-3))

    becomes ``[||Cxy||^2 - qxy + tr(Cxx) tr(Cyy)/((n-1)(n-2)) - 2 qxy/(n-2)] / (n(n-3))``.
    """
    n = m.n
    bxy = float((m.cxy * m.cxy).sum())
    bxx = float((m.cxx * m.cxx).sum())
    byy = float((m.cyy * m.cyy).sum())
    ax, ay = float(m.cxx.trace()), float(m.cyy.trace())
    noise = (64 * torch.finfo(F64).eps) ** 2
    if ax <= noise * (ax + n * float(m.mean_x @ m.mean_x)):
        bxy = bxx = ax = 0.0
    if ay <= noise * (ay + n * float(m.mean_y @ m.mean_y)):
        bxy = byy = ay = 0.0
    if n < 4:
        nan = float("nan")
        return HSICTerms(bxy, bxx, byy, nan, nan, nan)

    def unbiased(frob: float, q: float, s1: float, s2: float) -> float:
        return (frob - q + s1 * s2 / ((n - 1) * (n - 2)) - 2.0 * q / (n - 2)) / (n * (n - 3))

    qxy = float(m.qxy) if ax and ay else 0.0
    return HSICTerms(
        bxy,
        bxx,
        byy,
        unbiased(bxy, qxy, ax, ay),
        unbiased(bxx, float(m.qxx) if ax else 0.0, ax, ax),
        unbiased(byy, float(m.qyy) if ay else 0.0, ay, ay),
    )


def batched_unbiased_hsic(xb: Tensor, yb: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Unbiased HSIC (xy, xx, yy) of each of ``k`` minibatches ``xb [k, b, dx]``, ``yb [k, b, dy]``.

    Each minibatch is centred at its own mean (HSIC_u is shift invariant); the Gram form
    (``b x b`` per batch) or the feature form (``d x d``) is used, whichever is cheaper.
    Returns three float64 tensors of shape ``[k]``.  Requires ``b >= 4``.
    """
    b = xb.shape[1]
    xc = xb.to(F64)
    xc = xc - xc.mean(1, keepdim=True)
    yc = yb.to(F64)
    yc = yc - yc.mean(1, keepdim=True)
    a = (xc * xc).sum(2)  # [k, b]
    c = (yc * yc).sum(2)
    dx, dy = xc.shape[2], yc.shape[2]
    if b * (dx + dy) <= dx * dx + dy * dy + dx * dy:
        k_gram = xc @ xc.transpose(1, 2)
        l_gram = yc @ yc.transpose(1, 2)
        fxy = (k_gram * l_gram).sum((1, 2))
        fxx = (k_gram * k_gram).sum((1, 2))
        fyy = (l_gram * l_gram).sum((1, 2))
    else:
        cxy = xc.transpose(1, 2) @ yc
        cxx = xc.transpose(1, 2) @ xc
        cyy = yc.transpose(1, 2) @ yc
        fxy = (cxy * cxy).sum((1, 2))
        fxx = (cxx * cxx).sum((1, 2))
        fyy = (cyy * cyy).sum((1, 2))
    sa, sc = a.sum(1), c.sum(1)
    qxy, qxx, qyy = (a * c).sum(1), (a * a).sum(1), (c * c).sum(1)

    def unbiased(frob: Tensor, q: Tensor, s1: Tensor, s2: Tensor) -> Tensor:
        return (frob - q + s1 * s2 / ((b - 1) * (b - 2)) - 2.0 * q / (b - 2)) / (b * (b - 3))

    return unbiased(fxy, qxy, sa, sc), unbiased(fxx, qxx, sa, sa), unbiased(fyy, qyy, sc, sc)
