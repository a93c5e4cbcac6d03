"""The coupled log-sum-exp of a self-similarity matrix, fused from the embeddings.

When every view is both an anchor and a candidate (``anchor_mode="all"``, no target
encoder) and the embeddings are bounded (``|<z_a, z_k>| <= 1``), the denominator of
NT-Xent / SupCon L_out is

    lse_a = log sum_{k != a} exp(s <z_a, z_k>),      s = 1 / tau.

With ``W_ak = exp(s <z_a, z_k> - s)`` (zero on the diagonal; ``W`` symmetric) and the
incoming gradient ``g``, the gradient is ``d/dz_a = s sum_k W_ak (c_a + c_k) z_k`` with
``c = g / sum_k W_ak``: one ``[N, N] x [N, d]`` matmul in the backward pass where
autograd runs two for ``A @ C^T``, and no ``[N, N]`` transpose.  The similarity matmul is
most of the cost of these losses at ``d ~ 128``; the forward one is taken from its upper
block triangle (:func:`spacl.losses._mirror.mirrored_mm`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from spacl.losses._mirror import mirrored_mm


class _GramLogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z: Tensor, scale: float, bound: float) -> Tensor:
        # exp(s <z_a, z_k> - bound) <= 1: the fixed shift cannot overflow (caller checks
        # that 2 * bound cannot underflow a whole row either)
        weights = mirrored_mm(z, z).mul_(scale).sub_(bound).exp_()
        weights.diagonal().zero_()
        total = weights.sum(1)
        ctx.save_for_backward(z, weights, total)
        ctx.scale, ctx.bound = scale, bound
        return total.log() + bound

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        z, weights, total = ctx.saved_tensors
        if torch.is_grad_enabled():
            # create_graph=True: recompute the weights from z in differentiable ops
            weights = torch.mm(z, z.T).mul(ctx.scale).sub(ctx.bound).exp()
            weights = weights * (1.0 - torch.eye(z.shape[0], dtype=z.dtype, device=z.device))
            total = weights.sum(1)
            sym = (grad / total).unsqueeze(1)
            return torch.mm((sym + sym.T) * weights, z) * ctx.scale, None, None
        c = grad / total
        sym = (c.unsqueeze(1) + c.unsqueeze(0)).mul_(weights)
        return torch.mm(sym, z).mul_(ctx.scale), None, None


def gram_logsumexp_without_self(z: Tensor, scale: float, bound: float) -> Tensor:
    """``[N]``: ``log sum_{k != a} exp(scale <z_a, z_k>)`` for ``z[N, d]``.

    ``bound`` must bound ``|scale <z_a, z_k>|`` (``scale`` for vectors in the unit ball);
    it is the fixed shift of the exponentials.  Double backward (``create_graph=True``)
    recomputes the weights in differentiable ops.
    """
    if z.ndim != 2:
        raise ValueError(f"z must be [N, d], got shape {tuple(z.shape)}")
    # full precision under autocast: exp(l - bound) spans e^{-2 bound}, below float16's range
    with torch.autocast(device_type=z.device.type, enabled=False):
        out: Tensor = _GramLogSumExp.apply(z, float(scale), float(bound))
    return out
