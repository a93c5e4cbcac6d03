"""SPACL with every view an anchor, fused (``SPACLLoss(anchor_set="every_view")``).

Row ``r`` of the ``B V`` anchor rows is instance ``r // V`` with view ``r % V`` as its
anchor (instance-major).  For every row the loss is SPACL's (module docstring of
:mod:`spacl.losses.spacl`)::

    loss_r = -log( S_r^+ / (S_r^+ + sum_{q in Q_r^h} e^{l_rq}) ),  S_r^+ = sum_{p in P_r} e^{l_rp}

with ``P_r`` the farthest-point positives chosen from view ``r % V`` in the instance's
pool, ``Q_r^h`` the cut of the other instances' views (+ ``K_adv`` generated negatives,
+ the queue).  Computed once for all rows: the pool normalised and its ``[B, V, V]``
dissimilarities taken once, farthest-point selection once for the ``B V`` rows, one
game round (on the rows the dynamic form plays it on) and one draw of the updated
generator for every row, one ``[B V] x [B V (+ K_adv + Q)]`` logit matrix with masks
from instance ids, one cut and one kernel call.  Equal to the view-by-view loop
(tests/loss_references.py) to rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from spacl.losses.normalize import normalize
from spacl.losses.spacl.inputs import Batch, target_embeddings
from spacl.losses.spacl.mining import Mined
from spacl.losses.spacl.objective import objective_and_step
from spacl.losses.spacl.options import SPACLOptions
from spacl.losses.spacl.rows import Rows, candidate_masks
from spacl.losses.spacl.step import SPACLStep
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.cut import RelativeThresholdNegatives


def every_view_loss(
    options: SPACLOptions,
    cut: RelativeThresholdNegatives,
    batch: Batch,
    mined: Mined,
    game: AdversarialNegatives | None,
    training: bool,
) -> tuple[Tensor, SPACLStep]:
    """Per-anchor losses ``[B V]`` with every view an anchor, fused (no loop over views).

    Row ``r`` is instance ``r // V`` with view ``r % V`` as its anchor (instance-major,
    as :mod:`spacl.losses._batch` lays out rows).  ``mined``:
    :func:`spacl.losses.spacl.mining.mine_every` of the batch (the pool normalised and
    its ``[B, V, V]`` dissimilarities taken once, farthest-point selection once for all
    ``B V`` rows); then one ``[B V] x [B V]`` logit matmul (one batched ``[B] x [B]`` per
    view for ``negatives="anchor_views"``), one game round (``training``), one cut and
    one kernel call over every row.
    """
    anchors, pool, labels = batch.anchors, batch.pool, batch.labels
    b, v, d = pool.shape
    n = b * v
    target = target_embeddings(options, pool, mined.unit_pool)
    if anchors is None and not options.detach_candidates:
        online = target.reshape(n, d) / options.temperature  # the same normalised pool
    else:
        online = pool if anchors is None else anchors
        online = normalize(online.reshape(n, d), options.normalize) / options.temperature
    row_labels = None if labels is None else labels.repeat_interleave(v)
    gen_logits = d_loss = g_loss = None
    if game is not None:
        gen_logits, d_loss, g_loss = generated_every(game, training, online, mined)
    row_inst = torch.arange(b, device=pool.device).repeat_interleave(v)
    bundle = Rows(
        online,
        target,
        mined.flat_positives,
        row_inst,
        row_labels,
        labels,
        gen_logits,
        batch.extra,
        batch.extra_labels,
        mirrored=anchors is None,  # online row r: target row r / tau
    )
    return objective_and_step(
        options,
        cut,
        bundle,
        lambda: in_batch_every(options.negatives, options.positive_pool, bundle),
        torch.arange(v, device=pool.device).repeat(b),
        mined.positives,
        (d_loss, g_loss),
    )


def in_batch_every(
    negatives: str, positive_pool: str, rows: Rows
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`spacl.losses.spacl.one_anchor.in_batch` for the ``B V`` every-view rows.

    ``rows.online[BV, d]`` (already divided by the temperature), ``rows.target[B, V, d]``.
    ``"all_views"``: one ``[BV, BV]`` matmul; ``"anchor_views"``: row ``(i, u)``'s
    candidates are view ``u`` of every instance, one batched ``[B, B]`` matmul per
    view index.  Masks from instance ids.
    """
    online, target, flat_pos = rows.online, rows.target, rows.flat_positives
    labels, row_labels = rows.labels, rows.row_labels
    b, v, d = target.shape
    n = b * v
    device = target.device
    target_flat = target.reshape(n, d)
    row_inst = torch.arange(b, device=device).repeat_interleave(v)
    if negatives == "all_views":
        cand_logits = online @ target_flat.T
        pos_logits = cand_logits.gather(1, flat_pos)
        cand_inst, cand_labels = row_inst, row_labels
    else:
        by_view = torch.bmm(online.view(b, v, d).transpose(0, 1), target.permute(1, 2, 0))
        cand_logits = by_view.transpose(0, 1).reshape(n, b)  # [V, B, B] -> rows (i, u)
        pos_logits = (online.unsqueeze(1) * target_flat[flat_pos]).sum(2)
        cand_inst, cand_labels = torch.arange(b, device=device), labels
    other, same = candidate_masks(positive_pool, row_inst, row_labels, cand_inst, cand_labels)
    return cand_logits, pos_logits, other, same


def generated_every(
    game: AdversarialNegatives, training: bool, online: Tensor, mined: Mined
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Logits ``[BV, K_adv]`` of the generated negatives of every row, and the game's losses.

    ``training``: **one** round of the game per forward pass, played on the rows the
    dynamic form plays it on (each instance's ``mined.anchor`` view and its hard
    positives), so the generator takes the same steps whatever the anchor set; then
    one draw of the updated generator gives ``K_adv`` negatives to every one of the
    ``B V`` anchor rows.  Otherwise the draw only.
    """
    unit_pool = mined.unit_pool
    b, v, d = unit_pool.shape
    flat_unit = unit_pool.reshape(b * v, d)
    d_loss = g_loss = None
    if training:
        rows = torch.arange(b, device=unit_pool.device) * v + mined.anchor
        d_loss, g_loss = game.step(
            flat_unit[rows], flat_unit[mined.flat_positives[rows]], assume_finite=True
        )
    points = game.sample(flat_unit, assume_finite=True)
    logits = (online.unsqueeze(1) * points.to(online.dtype)).sum(2)
    return logits, d_loss, g_loss
