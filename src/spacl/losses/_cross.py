"""The log-sum-exp of anchors against a constant set of extra candidates (a negative queue).

With anchors ``a[A, d]`` and extra rows ``q[Q, d]`` (a queue of past target embeddings,
no gradient) the extra negative mass of anchor ``a`` is

    lse_a = log sum_j exp(s <a, q_j>),           s = 1 / tau.

When ``|s <a, q_j>| <= bound`` (unit-norm rows: ``bound = s``) the exponentials use the
fixed shift ``bound``: ``W = exp(s A Q^T - bound)`` is computed in place, once, and
reused by the backward pass, ``dA = s (g / sum_j W_aj) W Q`` — one ``[A, Q] x [Q, d]``
matmul.  The cost is the matmul floor of the extra candidates (one forward and one
backward matmul) plus one exponential pass.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class _CrossLogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchors: Tensor, others: Tensor, scale: float, bound: float) -> Tensor:
        # exp(s A Q^T - bound): the shift is fused into the GEMM (beta * C), exp in place
        shift = torch.full((1,), -bound, dtype=anchors.dtype, device=anchors.device)
        weights = torch.addmm(shift, anchors, others.T, alpha=scale).exp_()
        total = weights.sum(1)
        ctx.save_for_backward(anchors, others, weights, total)
        ctx.scale, ctx.bound = scale, bound
        return total.log() + bound

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        anchors, others, weights, total = ctx.saved_tensors
        scale = ctx.scale
        if torch.is_grad_enabled():
            # create_graph=True: recompute the weights in differentiable ops
            weights = torch.mm(anchors, others.T).mul(scale).sub(ctx.bound).exp()
            total = weights.sum(1)
        row = (grad / total) * scale  # [A]; the row scale is applied after the matmul
        grad_a = grad_o = None
        if ctx.needs_input_grad[0]:
            grad_a = torch.mm(weights, others) * row.unsqueeze(1)
        if ctx.needs_input_grad[1]:
            grad_o = torch.mm(weights.T, anchors * row.unsqueeze(1))
        return grad_a, grad_o, None, None


def cross_logsumexp(anchors: Tensor, others: Tensor, scale: float, bound: float | None) -> Tensor:
    """``[A]``: ``log sum_j exp(scale <anchors_a, others_j>)`` for ``others[Q, d]``, ``Q >= 1``.

    ``bound`` must bound ``|scale <a, q>|`` (``scale`` for rows in the unit ball) and
    ``2 bound`` must not underflow a row (see ``kernel.SAFE_SPAN``); ``None`` falls back
    to ``torch.logsumexp`` of the logits.
    """
    if anchors.ndim != 2 or others.ndim != 2 or anchors.shape[1] != others.shape[1]:
        raise ValueError(
            f"anchors [A, d] and others [Q, d] must share d, got {tuple(anchors.shape)} "
            f"and {tuple(others.shape)}"
        )
    if others.shape[0] == 0:
        raise ValueError("others must have at least one row")
    if bound is None:
        return torch.logsumexp((anchors @ others.T) * scale, dim=1)
    with torch.autocast(device_type=anchors.device.type, enabled=False):
        out: Tensor = _CrossLogSumExp.apply(anchors, others, float(scale), float(bound))
    return out
