"""The class positives of SPACL's supervised pool (``positive_pool="instance_class"``).

Under ``positive_pool="instance_class"`` every view of every other same-class instance
(and every same-class queue row) is a positive of an anchor row ``a`` besides its ``P``
hard positives.  With ``C_a`` those class positives and ``l_ac = <f(a), g(c)> / tau``,
the compact path (:mod:`spacl.losses.spacl.compact`) needs per row

    lse_a   = log sum_{c in C_a} e^{l_ac}       (the denominator, both positive modes)
    sum_a   = sum_{c in C_a} l_ac = <f(a), S_{y(a)} - I_{i(a)}> / tau     ("mean")
    count_a = |C_a|

with ``S_y`` the sum of the class-``y`` candidates and ``I_i`` the sum of instance
``i``'s own views (all of its class): the sum is a closed form, no ``[A, K]`` entry.
The log-sum-exp reads the logits of each class block ``[G, A_g, C_g]`` (rows and
candidates grouped by label, padded to the largest group) out of the no-gradient logit
matrix the cut already took (:func:`class_blocks`), and its backward pass is one
batched matmul per needed gradient (:class:`_ClassLogSumExp`); when the anchor rows are
the candidates over the temperature (every view an anchor, one encoder, no queue) the
two gradients are one: ``d/dg_c = (W + W^T) g / tau`` over the block, a single ``bmm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


def _group_slots(groups: Tensor, num_groups: int) -> tuple[Tensor, Tensor]:
    """``(index[G, w], slot[N])``: the members of each group, padded with ``N``.

    ``index[g, j]`` is the ``j``-th member (in increasing order) of group ``g``;
    ``slot[i]`` is member ``i``'s position ``j`` in its group.  Groups ``>= G`` are left
    out of ``index`` (their ``slot`` is meaningless).
    """
    n = groups.shape[0]
    device = groups.device
    order = groups.argsort(stable=True)
    counts = torch.bincount(groups, minlength=num_groups + 1)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(groups)
    slot[order] = torch.arange(n, device=device) - starts[groups[order]]
    width = max(int(counts[:num_groups].max()) if num_groups else 0, 1)
    index = torch.full((num_groups, width), n, dtype=torch.long, device=device)
    inside = groups < num_groups
    index[groups[inside], slot[inside]] = torch.arange(n, device=device)[inside]
    return index, slot


def _block_valid(
    a_index: Tensor, c_index: Tensor, row_inst: Tensor, cand_inst: Tensor, k: int
) -> Tensor:
    """``[G, wa, wc]``: candidate slot ``j`` is a class positive of row slot ``i`` (a real
    candidate of another instance)."""
    pad_inst = torch.tensor([-1], device=row_inst.device)
    a_inst = torch.cat((row_inst, pad_inst))[a_index]
    c_inst = torch.cat((cand_inst, pad_inst - 1))[c_index]
    return (c_index < k).unsqueeze(1) & (a_inst.unsqueeze(2) != c_inst.unsqueeze(1))


@dataclass(frozen=True)
class ClassBlocks:
    """The class blocks of the anchor rows, their logits read from the cut's matrix.

    ``a_index[G, wa]`` / ``c_index[G, wc]``: the rows / candidates of each class
    (padded with ``A`` / ``K``); ``at[A]``: row ``a``'s place in the flattened
    ``[G, wa]`` layout; ``values[G, wa, wc]``: their logits (no gradient);
    ``valid[G, wa, wc]``: the class positives; ``count[A]``: ``|C_a|``;
    ``row_groups[A]`` / ``cand_groups[K]``: the classes (``>= G``: none).
    """

    a_index: Tensor
    c_index: Tensor
    at: Tensor
    values: Tensor
    valid: Tensor
    count: Tensor
    row_groups: Tensor
    cand_groups: Tensor


def class_blocks(
    logits: Tensor,
    row_groups: Tensor,
    row_inst: Tensor,
    cand_groups: Tensor,
    cand_inst: Tensor,
    num_groups: int,
    column: Tensor,
) -> ClassBlocks:
    """Group the rows and candidates by class and read the blocks' logits from ``logits``.

    ``logits[A, J]``: the rows' logits (no gradient, contiguous), candidate ``c`` in
    column ``column[c]``; ``cand_groups`` ``>= num_groups`` marks candidates of no
    row's class.
    """
    a, j = logits.shape
    k = cand_groups.shape[0]
    a_index, a_slot = _group_slots(row_groups, num_groups)
    c_index, _ = _group_slots(cand_groups, num_groups)
    rows = a_index.clamp_max(a - 1)  # the padding reads some entry, masked out below
    cols = torch.cat((column, column[:1])).index_select(0, c_index.reshape(-1))
    flat = (rows.unsqueeze(2) * j + cols.view(c_index.shape).unsqueeze(1)).reshape(-1)
    values = logits.reshape(-1).index_select(0, flat).view(*a_index.shape, c_index.shape[1])
    valid = _block_valid(a_index, c_index, row_inst, cand_inst, k)
    at = row_groups * a_index.shape[1] + a_slot
    count = valid.sum(2).reshape(-1).index_select(0, at)
    return ClassBlocks(a_index, c_index, at, values, valid, count, row_groups, cand_groups)


class _ClassLogSumExp(torch.autograd.Function):
    """``lse[G, wa]`` of each block row over its class positives, values given.

    Backward: with ``W`` the softmax weights of each row over its positives and ``g`` the
    incoming gradient, ``d/donline_a = sum_c g_a W_ac candidates_c`` and
    ``d/dcandidates_c = sum_a g_a W_ac online_a``: one ``bmm`` each, or with ``tied = s``
    (``online = s * candidates``, the same class layout for both) one ``bmm`` of
    ``s (G + G^T)`` returned as the candidates' whole gradient (``online``'s then flows
    through them: ``None`` for ``online``).
    """

    @staticmethod
    def forward(
        ctx: Any,
        online: Tensor,
        candidates: Tensor,
        values: Tensor,
        valid: Tensor,
        a_index: Tensor,
        c_index: Tensor,
        tied: float | None,
    ) -> Tensor:
        x = values.masked_fill(~valid, -torch.inf)
        shift = x.amax(2, keepdim=True)
        shift = torch.where(torch.isfinite(shift), shift, 0.0)
        weights = x.sub_(shift).exp_()  # 0 off the positives
        total = weights.sum(2, keepdim=True)
        weights.div_(total.clamp_min(torch.finfo(total.dtype).tiny))
        ctx.save_for_backward(online, candidates, weights, a_index, c_index)
        ctx.tied = tied
        return (total.log() + shift).squeeze(2)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        online, candidates, weights, a_index, c_index = ctx.saved_tensors
        g = weights * grad.unsqueeze(2)  # [G, wa, wc]
        d = online.shape[1]

        def padded(x: Tensor, index: Tensor) -> Tensor:
            rows = torch.cat((x.detach().to(g.dtype), g.new_zeros(1, d)))
            return rows.index_select(0, index.reshape(-1)).view(*index.shape, d)

        def scattered(block_grad: Tensor, index: Tensor, like: Tensor) -> Tensor:
            out = block_grad.new_zeros(like.shape[0] + 1, d)
            out.index_add_(0, index.reshape(-1), block_grad.reshape(-1, d))
            return out[:-1].to(like.dtype)

        grad_online = grad_cand = None
        c_pad = padded(candidates, c_index)
        if ctx.tied is not None:
            sym = torch.bmm(g + g.transpose(1, 2), c_pad).mul_(ctx.tied)
            return None, scattered(sym, c_index, candidates), None, None, None, None, None
        if ctx.needs_input_grad[0]:
            grad_online = scattered(torch.bmm(g, c_pad), a_index, online)
        if ctx.needs_input_grad[1]:
            on_pad = padded(online, a_index)
            grad_cand = scattered(torch.bmm(g.transpose(1, 2), on_pad), c_index, candidates)
        return grad_online, grad_cand, None, None, None, None, None


def class_logsumexp(
    online: Tensor, candidates: Tensor, blocks: ClassBlocks, tied: float | None = None
) -> Tensor:
    """``lse_a = log sum_{c in C_a} e^{l_ac}`` ``[A]`` from the blocks' logits, with the
    gradient of ``l_ac = <online_a, candidates_c>`` (``-inf`` for a row without class
    positives, zero gradient there).  ``tied``: ``s`` where ``online = s * candidates``
    row for row (the rows are the candidates): one ``bmm`` in the backward pass."""
    lse = _ClassLogSumExp.apply(
        online,
        candidates,
        blocks.values,
        blocks.valid,
        blocks.a_index,
        blocks.c_index,
        tied,
    )
    return lse.reshape(-1).index_select(0, blocks.at)


def class_pool_loss(
    positive_mode: str,
    online: Tensor,
    candidates: Tensor,
    hard_logits: Tensor,
    neg_lse: Tensor,
    blocks: ClassBlocks,
    row_inst: Tensor,
    v: int,
    n: int,
    tied: float | None = None,
) -> Tensor:
    """Per-row loss under ``positive_pool="instance_class"`` (SPACL's multi-positive loss).

    ``P_a`` = the ``P`` hard positives (``hard_logits``) and the class positives ``C_a``
    (module docstring); ``neg_lse[a] = lse_{q in Q_a^h} l_aq`` over the kept negatives
    (``-inf`` for none)::

        den_a = logaddexp(lse_{p in P_a} l_ap, neg_lse_a)
        loss_a = den_a - lse_{p in P_a} l_ap                      ("log_sum_exp")
               = den_a - (sum_{p in P_a} l_ap) / |P_a|             ("mean")

    ``candidates``: the ``n`` in-batch candidates (instance-major, ``v`` views each) then
    any queue rows (``blocks.cand_groups`` their classes); ``tied``: ``s`` where
    ``online = s * candidates`` (the same rows, no queue).
    """
    class_lse = class_logsumexp(online, candidates, blocks, tied)
    pos_lse = torch.logaddexp(torch.logsumexp(hard_logits, 1), class_lse)
    den = torch.logaddexp(pos_lse, neg_lse)
    if positive_mode == "log_sum_exp":
        return den - pos_lse
    d = candidates.shape[1]
    num_groups = blocks.a_index.shape[0]
    sums = candidates.new_zeros(num_groups + 1, d).index_add(0, blocks.cand_groups, candidates)
    own = candidates[:n].view(n // v, v, d).sum(1).index_select(0, row_inst)  # [A, d]
    class_sum = (online * (sums.index_select(0, blocks.row_groups) - own).to(online.dtype)).sum(1)
    count = (blocks.count + hard_logits.shape[1]).to(online.dtype)
    return den - (hard_logits.sum(1) + class_sum) / count


__all__ = [
    "ClassBlocks",
    "class_blocks",
    "class_logsumexp",
    "class_pool_loss",
]
