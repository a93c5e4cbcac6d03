"""Barlow Twins (Zbontar et al. 2021): redundancy reduction on the cross-correlation matrix.

Not a pairwise contrastive objective — there is no anchor-by-candidate logit matrix, so it
does not go through the masked-logsumexp kernel; it shares the input forms of the other
losses (``loss(z0, z1)`` or ``loss(features[B, V, d])``).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_flag, check_tensor
from spacl.losses._batch import parse_views

__all__ = ["BarlowTwinsLoss"]


class _AllReduceSum(torch.autograd.Function):
    """Sum over ranks; the backward sums the incoming gradients over ranks too.

    Every rank computes the same loss from the summed statistics, so rank ``r``'s
    gradient w.r.t. its own rows is ``W * dL/dz_r``; DDP's ``1/W`` averaging then leaves
    ``dL/dtheta`` — the contract of :mod:`spacl.engine.distributed`.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        out = x.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad


def _multi_rank() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _sum_over_ranks(x: Tensor) -> Tensor:
    out: Tensor = _AllReduceSum.apply(x)
    return out


class BarlowTwinsLoss(nn.Module):
    """Barlow Twins (Zbontar, Jing, Misra, LeCun, Deny; ICML 2021), Algorithm 1.

    Each view's embeddings are standardised along the batch
    (``(z - mean_b z) / sqrt(var_b z + eps)``, biased variance, as ``BatchNorm1d``
    without affine parameters), and with ``N`` the batch size::

        C_ij = 1/N sum_b zA_bi zB_bj                       (cross-correlation, [d, d])
        loss = sum_i (1 - C_ii)^2 + lambda_offdiag sum_{i != j} C_ij^2

    computed as ``lambda ||C||_F^2 + sum_i [(1 - C_ii)^2 - lambda C_ii^2]`` (no copy of
    the off-diagonal entries).  ``lambda_offdiag = 5e-3`` is the paper's value (for
    ``d = 8192``).  This equals lightly's ``BarlowTwinsLoss(lambda_param=...)``.

    **Decisions.**
    - ``V > 2`` views (``features[B, V, d]``): the mean of the loss over the ``V(V-1)/2``
      unordered view pairs (the loss is symmetric in its two views: ``C`` transposes).
    - ``gather_distributed=True`` under an initialised multi-rank process group: the
      batch statistics (means, variances) and ``C`` are *summed across ranks* and
      divided by the global batch size, so ``W`` processes with batch ``b`` give the
      loss of one process on the ``W b`` batch exactly (the authors' code: SyncBatchNorm
      plus ``all_reduce(C)``; lightly standardises per rank and does not).  Inside
      spacl's engine leave it ``False``: the engine already gathers the global batch.
    - No labels (self-supervised); ``eps = 1e-5`` as ``BatchNorm1d``.
    - A batch of fewer than 2 instances raises ``ValueError`` (the variance is undefined).

    Example (two equal views leave only the off-diagonal term):
        >>> import torch
        >>> from spacl.losses import BarlowTwinsLoss
        >>> z0, z1 = torch.randn(16, 32), torch.randn(16, 32)
        >>> bool(BarlowTwinsLoss()(z0, z0) < BarlowTwinsLoss()(z0, z1))
        True
    """

    supports_labels = False

    def __init__(
        self,
        lambda_offdiag: float = 5e-3,
        *,
        eps: float = 1e-5,
        gather_distributed: bool = False,
    ) -> None:
        super().__init__()
        for name, value in (("lambda_offdiag", lambda_offdiag), ("eps", eps)):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        self.lambda_offdiag = float(lambda_offdiag)
        self.eps = float(eps)
        self.gather_distributed = check_flag(gather_distributed, "gather_distributed")

    def _standardise(self, z: Tensor) -> Tensor:
        """``[N, d]`` standardised along the batch (global statistics when gathering)."""
        if not (self.gather_distributed and _multi_rank()):
            return F.batch_norm(z, None, None, training=True, eps=self.eps)
        n = _sum_over_ranks(torch.tensor(float(z.shape[0]), dtype=z.dtype, device=z.device))
        mean = _sum_over_ranks(z.sum(0)) / n
        centred = z - mean
        var = _sum_over_ranks(centred.square().sum(0)) / n
        return centred * torch.rsqrt(var + self.eps)

    def _pair_loss(self, za: Tensor, zb: Tensor, n: int) -> Tensor:
        s = torch.mm(za.T, zb)  # N * C
        if self.gather_distributed and _multi_rank():
            s = _sum_over_ranks(s)
            n = n * dist.get_world_size()
        flat, diag = s.reshape(-1), s.diagonal()
        off = diag * (1.0 / n) - 1.0  # C_ii - 1
        lam = self.lambda_offdiag / (n * n)
        # sum_i (1 - C_ii)^2 + lambda (||C||^2 - sum_i C_ii^2), as three dot products
        return torch.dot(off, off) + lam * (torch.dot(flat, flat) - torch.dot(diag, diag))

    def forward(
        self,
        features: Tensor,
        other: Tensor | None = None,
        *,
        labels: Tensor | None = None,
    ) -> Tensor:
        """Loss of two views ``(z0[B, d], z1[B, d])`` or of ``features[B, V, d]``."""
        if labels is not None:
            raise ValueError("BarlowTwinsLoss is self-supervised and takes no labels")
        if isinstance(features, Tensor) and features.ndim == 2 and isinstance(other, Tensor):
            # the two-view form: shapes and dtypes here, finiteness checked on the result
            for name, x in (("z0", features), ("z1", other)):
                if not x.is_floating_point():
                    raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
            if other.shape != features.shape:
                raise ValueError(
                    f"z0 and z1 must have the same shape, got {tuple(features.shape)} "
                    f"and {tuple(other.shape)}"
                )
            wide = torch.promote_types(features.dtype, other.dtype)  # as parse_views does
            views = [features.to(wide), other.to(wide)]
        else:
            stacked = parse_views(features, other).views
            views = [stacked[:, i] for i in range(int(stacked.shape[1]))]
        b, v = int(views[0].shape[0]), len(views)
        if b < 2:
            raise ValueError(f"BarlowTwinsLoss needs a batch of at least 2 instances, got {b}")
        if v < 2:
            raise ValueError(f"BarlowTwinsLoss needs V >= 2 views, got V = {v}")
        unit = [self._standardise(x) for x in views]
        total = self._pair_loss(unit[0], unit[1], b)
        if v > 2:
            pairs = list(combinations(range(v), 2))
            for i, j in pairs[1:]:
                total = total + self._pair_loss(unit[i], unit[j], b)
            total = total / len(pairs)
        if not bool(torch.isfinite(total)):
            for i, x in enumerate(views):
                check_tensor(x, f"view {i} of the features")
            raise ValueError(f"BarlowTwinsLoss is {float(total)} on finite inputs (overflow?)")
        return total

    def extra_repr(self) -> str:
        return (
            f"lambda_offdiag={self.lambda_offdiag}, eps={self.eps}, "
            f"gather_distributed={self.gather_distributed}"
        )
