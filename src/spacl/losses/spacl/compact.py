"""SPACL's loss on the kept negatives only (the compact path of :class:`~spacl.losses.SPACLLoss`).

The cut keeps a few of the ``K`` candidate negatives of each anchor row (about 1% of
``[B V]`` in-batch views on a trained pool), so the loss

    loss_a = log( sum_{p in P_a} e^{l_ap} + sum_{q in Q_a^h} e^{l_aq} ) - pos_a
    pos_a  = log sum_{p in P_a} e^{l_ap}      ("log_sum_exp")
           = (1 / |P_a|) sum_{p in P_a} l_ap   ("mean")

needs the logits ``l_aq = <f(a), g(q)> / tau`` of the kept ``Q_a^h`` only.  They are
taken once without gradient (one ``[A, d] x [d, K]`` matmul, which the cut reads).
The hard positives (in-batch columns too, read before the cut masks them) and the kept
negatives then form two flat lists of ``(row, column, logit)`` entries (``A P`` and
``E`` = the kept count of all rows, no padding to the widest row), whose gradient
flows through :class:`_KeptLogits` (a sparse CSR product per gradient); the negatives'
log-sum-exp per row is a segment ``amax`` and one ``index_add``
(:func:`spacl.losses.kernel.segment_logsumexp`), with the kept generated negatives beside
them.  Under
``positive_pool="instance_class"`` every view of every other same-class instance (and
every same-class queue row) is a positive too: their logits are read per class block out
of the same no-gradient matrix, before the cut masks them
(:mod:`spacl.losses.spacl.class_pool`: rows and columns grouped by label, a batched
matmul per gradient, the sum of their logits in closed form), never from an ``[A, K]``
mask. With every view an anchor on one encoder the in-batch logits are symmetric and
mirrored from their upper block triangle (:func:`spacl.losses._mirror.mirrored_mm`).
Same value and gradient as the dense kernel (tests/test_spacl_loss.py runs every case
both ways).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from spacl.losses._mirror import mirrored_mm
from spacl.losses.kernel import segment_logsumexp
from spacl.losses.normalize import normalize
from spacl.losses.spacl.class_pool import ClassBlocks, class_blocks, class_pool_loss
from spacl.losses.spacl.options import SPACLOptions
from spacl.losses.spacl.rows import Rows, extra_masks
from spacl.mining.cut import RelativeThresholdNegatives

#: the compact path runs while the widest row keeps at most this share of its candidates
_COMPACT_SHARE = 0.25


class _KeptLogits(torch.autograd.Function):
    """``out[e] = <online[anchor[e]], table[rows[e]]>`` for a flat list of entries, values given.

    Forward returns ``values`` (read from the dense no-gradient logits, so the cut and
    the loss see the same numbers).  ``anchor`` must be sorted (row-major entries).
    Backward touches the ``E`` entries only: with ``G[anchor[e], rows[e]] = grad[e]``,
    ``grad_online = G @ table`` (a CSR product) and ``grad_table = G^T @ online`` (a COO
    product of the same entries) when the table needs one.
    """

    @staticmethod
    def forward(
        ctx: Any, online: Tensor, table: Tensor, anchor: Tensor, rows: Tensor, values: Tensor
    ) -> Tensor:
        ctx.save_for_backward(online, table, anchor, rows)
        return values.clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None, None]:
        online, table, anchor, column = ctx.saved_tensors
        a = online.shape[0]
        g = grad.reshape(-1)
        grad_online = grad_table = None
        if ctx.needs_input_grad[0]:
            crow = torch.zeros(a + 1, dtype=torch.long, device=anchor.device)
            crow[1:] = torch.bincount(anchor, minlength=a).cumsum(0)
            with warnings.catch_warnings():  # "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                sparse = torch.sparse_csr_tensor(crow, column, g, size=(a, table.shape[0]))
            grad_online = (sparse @ table.detach().to(g.dtype)).to(online.dtype)
        if ctx.needs_input_grad[1]:
            # G^T from the entries as they are (COO, each (row, anchor) pair once): no
            # sort of the E entries by table row, which a CSR G^T would need
            sparse_t = torch.sparse_coo_tensor(
                torch.stack((column, anchor)), g, size=(table.shape[0], a)
            )
            grad_table = torch.sparse.mm(sparse_t, online.detach().to(g.dtype)).to(table.dtype)
        return grad_online, grad_table, None, None, None


def compact_loss(
    options: SPACLOptions, cut: RelativeThresholdNegatives, rows: Rows
) -> tuple[Tensor, Tensor, Tensor, Tensor] | Tensor | None:
    """The loss on the kept negatives only: ``(per_anchor, candidates, kept, kept_gen)``.

    Same value as :func:`spacl.losses.spacl.dense.dense_objective`
    (``negatives="all_views"``, a cut with ``share < 1``), computed without any
    ``[A, K]`` tensor in the graph: the in-batch logits are taken once without gradient
    (:func:`_joint_logits`) and their non-candidates filled with ``-inf`` in place (an
    ``[A, V]`` scatter, or one add of a per-class ``0 / -inf`` row:
    :func:`_negatives_only`); the cut returns the kept columns as an index
    (:meth:`RelativeThresholdNegatives.select`, the signed total from sums of the
    candidate embeddings); the loss then runs on the flat lists of the ``A P`` positive
    and ``E`` kept entries (their logits read from that matrix, their gradient through
    :class:`_KeptLogits`) and the ``[A, K_adv]`` generated logits, with the formula of
    :func:`spacl.losses.kernel.contrastive_kernel`; the class positives of
    ``positive_pool="instance_class"`` come from
    :func:`spacl.losses.spacl.class_pool.class_pool_loss`.
    ``None`` when the case is not covered; the kept mask in the dense kernel's columns
    when the cut keeps too many for the compact form to pay (then the dense path).
    ``rows.mirrored``: anchor row ``r`` is ``target`` row ``r`` over the temperature
    (every view an anchor, one encoder): the in-batch logits come from their upper block
    triangle (:func:`spacl.losses._mirror.mirrored_mm`).
    """
    if options.negatives != "all_views" or options.effective_share >= 1.0:
        return None
    online, flat_pos = rows.online, rows.flat_positives
    a, n = online.shape[0], rows.target.shape[0] * rows.target.shape[1]
    with torch.no_grad():
        joint, queue = _joint_logits(options, rows)
        # the hard positives are in-batch columns: their logits are read here, before
        # the own instance's (or class's) columns are masked, and carry their gradient
        # through the same sparse product as the kept negatives
        pos_values = joint[:, :n].gather(1, flat_pos)
        total, count, blocks, queue_groups = _negatives_only(options, rows, joint, queue)
        selection = cut.select(joint, total=total, form="selection", finite=False)
        # the kept entries lead each row; a row with a candidate keeps at least one, so
        # 0 = no in-batch candidate anywhere (one host wait, the cut's own on a GPU)
        width = selection.widest()
        if width == 0:
            return None  # the dense path: the generated negatives, or its error
        if width > _COMPACT_SHARE * joint.shape[1]:
            # many candidates kept: the dense kernel, with this selection moved to its
            # columns [in-batch | P positives | generated | queue]
            mask = selection.mask()
            hole = torch.zeros(a, flat_pos.shape[1], dtype=torch.bool, device=online.device)
            return torch.cat((mask[:, :n], hole, mask[:, n:]), 1)
        cols, kept = selection.index()
        entries = _kept_entries(joint, cols, kept[:, :width], n, rows.gen_logits)
    table = rows.target.reshape(n, -1)
    full_table = table if queue is None else torch.cat((table, queue), 0)
    pos, neg_lse, kept_count, kept_gen = _kept_terms(rows, full_table, pos_values, entries)
    if blocks is not None:  # positive_pool="instance_class" with labels
        # every view an anchor on one encoder, no queue: online = table / tau, one bmm
        tied = rows.mirrored and queue is None and not options.detach_candidates and a == n
        per_anchor = class_pool_loss(
            options.positive_mode,
            online,
            full_table if queue_groups is not None else table,
            pos,
            neg_lse,
            blocks,
            rows.row_inst,
            rows.target.shape[1],
            n,
            1.0 / options.temperature if tied else None,
        )
    else:
        pos_lse = torch.logsumexp(pos, 1)
        den = torch.logaddexp(pos_lse, neg_lse)
        per_anchor = den - (pos_lse if options.positive_mode == "log_sum_exp" else pos.mean(1))
    return per_anchor, count, kept_count, kept_gen


def _kept_terms(
    rows: Rows,
    full_table: Tensor,
    pos_values: Tensor,
    entries: tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None],
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """With gradient, from the kept entries: the ``[A, P]`` positive logits, the ``[A]``
    log-sum-exp of the kept negatives (``-inf`` where nothing is kept), the kept in-batch
    and the kept generated negatives per row."""
    online, flat_pos = rows.online, rows.flat_positives
    a, p = flat_pos.shape
    anchor, neg_rows, neg_values, kept_count, gen_kept = entries
    pos_anchor = torch.arange(a, device=online.device).repeat_interleave(p)
    pos = _KeptLogits.apply(
        online, full_table, pos_anchor, flat_pos.reshape(-1), pos_values.reshape(-1)
    ).view(a, p)
    neg = _KeptLogits.apply(online, full_table, anchor, neg_rows, neg_values)
    gen = None
    kept_gen = torch.zeros(a, dtype=torch.long, device=online.device)
    if rows.gen_logits is not None:
        assert gen_kept is not None
        gen = rows.gen_logits.masked_fill(~gen_kept, -torch.inf)
        kept_gen = gen_kept.sum(1)
    return pos, segment_logsumexp(neg, anchor, a, gen), kept_count, kept_gen


def _joint_logits(options: SPACLOptions, rows: Rows) -> tuple[Tensor, Tensor | None]:
    """``(joint, queue)``: the rows' logits (no gradient) against every candidate column
    ``[in-batch n | K_adv generated (left empty) | queue]``, and the normalised queue."""
    b, v, d = rows.target.shape
    n = b * v
    anchors = rows.online.detach()
    table = rows.target.reshape(n, d).detach()
    k_adv = 0 if rows.gen_logits is None else rows.gen_logits.shape[1]
    queue = None
    columns = [table]
    if k_adv:
        columns.append(table.new_zeros(k_adv, d))  # filled with gen_logits later
    if rows.extra is not None:
        queue = normalize(rows.extra.detach(), options.normalize).to(rows.online.dtype)
        columns.append(queue)
    if rows.mirrored and anchors.shape[0] == n:
        # anchor row r is table row r / tau: the in-batch block is symmetric
        joint = anchors.new_empty(n, n + sum(c.shape[0] for c in columns[1:]))
        mirrored_mm(anchors, table, out=joint[:, :n])
        if queue is not None:
            torch.mm(anchors, queue.T, out=joint[:, n + k_adv :])
        return joint, queue
    # one matmul for every candidate column: [in-batch | generated | queue]
    return anchors @ (torch.cat(columns, 0) if len(columns) > 1 else table).T, queue


def _negatives_only(
    options: SPACLOptions, rows: Rows, joint: Tensor, queue: Tensor | None
) -> tuple[Tensor, Tensor, ClassBlocks | None, Tensor | None]:
    """Leave only the candidate negatives in ``joint`` (``-inf`` elsewhere, in place; the
    generated negatives' logits filled in) and return ``(total, count, blocks,
    queue_groups)``: each row's signed sum of its candidates' logits and their number,
    and under ``positive_pool="instance_class"`` the class blocks (read before the
    class's columns are cut out) and the queue rows' classes."""
    target, row_inst, row_labels = rows.target, rows.row_inst, rows.row_labels
    b, v, d = target.shape
    a, n = rows.online.shape[0], b * v
    device = joint.device
    table = target.reshape(n, d).detach()
    k_adv = 0 if rows.gen_logits is None else rows.gen_logits.shape[1]
    keys = joint[:, :n]
    blocks = queue_groups = None
    if row_labels is None:
        own = (row_inst * v).unsqueeze(1) + torch.arange(v, device=device)
        keys.scatter_(1, own, -torch.inf)
        excluded = target.detach().sum(1).index_select(0, row_inst)  # [A, d]
        count = torch.full((a,), n - v, device=device)
    else:
        excluded, count, blocks, queue_groups = _class_out(options, rows, joint, k_adv)
    total = (rows.online.detach() * (table.sum(0) - excluded)).sum(1)
    if rows.gen_logits is not None:
        joint[:, n : n + k_adv] = rows.gen_logits.detach()
        total = total + rows.gen_logits.detach().sum(1)
        count = count + k_adv
    if rows.extra is not None:
        q_logits = joint[:, n + k_adv :]
        q_neg, _ = extra_masks(
            options.positive_pool, row_labels, rows.extra_labels, a, rows.extra.shape[0], device
        )
        if row_labels is not None and rows.extra_labels is not None:
            q_logits.masked_fill_(~q_neg, -torch.inf)
            total = total + torch.where(q_neg, q_logits, 0.0).sum(1)
            count = count + q_neg.sum(1)
        else:
            total = total + q_logits.sum(1)
            count = count + rows.extra.shape[0]
    return total, count, blocks, queue_groups


def _class_out(
    options: SPACLOptions, rows: Rows, joint: Tensor, k_adv: int
) -> tuple[Tensor, Tensor, ClassBlocks | None, Tensor | None]:
    """With labels: ``-inf`` at the in-batch columns of each row's class (in place) and
    ``(excluded, count, blocks, queue_groups)``: the sum of those candidates' embeddings
    and the number left per row, and the class blocks (``instance_class``)."""
    target, row_inst, labels = rows.target, rows.row_inst, rows.labels
    assert labels is not None
    b, v, d = target.shape
    a, n = rows.online.shape[0], b * v
    device = joint.device
    keys = joint[:, :n]
    groups, inverse = torch.unique(labels, return_inverse=True)
    num_groups = len(groups)
    cand_groups = inverse.repeat_interleave(v)
    row_groups = cand_groups[row_inst * v]
    blocks = queue_groups = None
    if options.positive_pool == "instance_class":
        if rows.extra is not None and rows.extra_labels is not None:
            at = torch.searchsorted(groups, rows.extra_labels).clamp_max(num_groups - 1)
            queue_groups = torch.where(groups[at] == rows.extra_labels, at, num_groups)
        # the class positives' logits, read before their columns are cut out
        blocks = _blocks_of(
            joint, row_groups, row_inst, cand_groups, queue_groups, num_groups, v, k_adv
        )
    # -inf at the columns of the row's class: one [A, n] add of a per-class row
    # (x + 0 = x exactly), no [A, n] boolean pass; broadcast over an instance's
    # rows where they are consecutive (every view an anchor), no [A, n] bias copy
    bias = torch.zeros(num_groups, n, dtype=keys.dtype, device=device)
    bias.scatter_(0, cand_groups.unsqueeze(0), -torch.inf)  # column j: its group's row
    # the rows are instance-major: ``per`` consecutive rows per instance (one for
    # the dynamic form, ``V`` with every view an anchor)
    per = a // b
    assert per * b == a and torch.equal(
        row_inst, torch.arange(b, device=device).repeat_interleave(per)
    )
    keys.unflatten(0, (b, per)).add_(bias.index_select(0, inverse).unsqueeze(1))
    table = target.reshape(n, d).detach()
    sums = torch.zeros(num_groups, d, dtype=table.dtype, device=device)
    excluded = sums.index_add_(0, cand_groups, table).index_select(0, row_groups)
    count = n - torch.bincount(cand_groups, minlength=num_groups)[row_groups]
    return excluded, count, blocks, queue_groups


def _kept_entries(
    joint: Tensor, cols: Tensor, kept: Tensor, n: int, gen_logits: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
    """The kept entries as a flat list, row-major (sorted by anchor row): ``(anchor,
    rows, values, kept_count, gen_kept)``, the table rows (queue rows follow the
    in-batch ones) and logits of the kept in-batch and queue entries, the kept count
    per row, and the kept generated negatives as an ``[A, K_adv]`` mask."""
    a = joint.shape[0]
    k_adv = 0 if gen_logits is None else gen_logits.shape[1]
    anchor, slot = kept.nonzero(as_tuple=True)
    col = cols[anchor, slot]
    kept_count = torch.bincount(anchor, minlength=a)
    is_gen = (col >= n) & (col < n + k_adv)
    gen_kept = None
    if gen_logits is not None:
        gen_kept = torch.zeros(a, k_adv, dtype=torch.bool, device=joint.device)
        gen_kept[anchor[is_gen], col[is_gen] - n] = True
        in_table = ~is_gen
        anchor, col = anchor[in_table], col[in_table]
    values = joint.reshape(-1).index_select(0, anchor * joint.shape[1] + col)
    return anchor, torch.where(col < n, col, col - k_adv), values, kept_count, gen_kept


def _blocks_of(
    joint: Tensor,
    row_groups: Tensor,
    row_inst: Tensor,
    cand_groups: Tensor,
    queue_groups: Tensor | None,
    num_groups: int,
    v: int,
    k_adv: int,
) -> ClassBlocks:
    """The class blocks of the rows in ``joint`` = ``[in-batch n | K_adv generated | queue]``."""
    n = cand_groups.shape[0]
    device = joint.device
    cand_inst = torch.arange(n, device=device) // v
    column = torch.arange(n, device=device)
    if queue_groups is not None:
        q = queue_groups.shape[0]
        cand_groups = torch.cat((cand_groups, queue_groups))
        cand_inst = torch.cat((cand_inst, cand_inst.new_full((q,), -2)))
        column = torch.cat((column, torch.arange(n + k_adv, n + k_adv + q, device=device)))
    return class_blocks(joint, row_groups, row_inst, cand_groups, cand_inst, num_groups, column)


__all__ = ["compact_loss"]
