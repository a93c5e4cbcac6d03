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

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from spacl.losses.normalize import normalize
from spacl.losses.spacl_dense import row_objective
from spacl.losses.spacl_one_anchor import candidate_masks
from spacl.losses.spacl_step import SPACLStep
from spacl.mining._common import unit
from spacl.mining.positives import (
    farthest_point_from_dissimilarity,
    farthest_point_rows,
    pool_dissimilarity,
    random_positives,
)

if TYPE_CHECKING:
    from spacl.losses.spacl import SPACLLoss


def every_view_loss(
    loss: SPACLLoss,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
) -> tuple[Tensor, SPACLStep]:
    """Per-anchor losses ``[B V]`` with every view an anchor, fused (no loop over views).

    Row ``r`` is instance ``r // V`` with view ``r % V`` as its anchor (instance-major,
    as :mod:`spacl.losses._batch` lays out rows).  The pool is normalised and its
    ``[B, V, V]`` dissimilarities computed once; farthest-point selection runs once
    for all ``B V`` rows; one ``[B V] x [B V]`` logit matmul (one batched
    ``[B] x [B]`` per view for ``negatives="anchor_views"``), one game round, one cut
    and one kernel call over every row.
    """
    b, v, d = pool.shape
    n = b * v
    unit_pool, positives, flat_pos, game_anchor = mine_every(loss, pool, labels)
    target = loss._target(pool, unit_pool)
    if anchors is None and not loss.detach_candidates:
        online = target.reshape(n, d) / loss.temperature  # the same normalised pool
    else:
        online = pool if anchors is None else anchors
        online = normalize(online.reshape(n, d), loss.normalize) / loss.temperature
    row_labels = None if labels is None else labels.repeat_interleave(v)
    gen_logits = d_loss = g_loss = None
    if loss.effective_adversarial > 0:
        gen_logits, d_loss, g_loss = generated_every(loss, online, unit_pool, game_anchor, flat_pos)
    row_inst = torch.arange(b, device=pool.device).repeat_interleave(v)
    per_anchor, n_candidates, n_kept, kept_gen = row_objective(
        loss,
        online,
        target,
        flat_pos,
        row_inst,
        row_labels,
        labels,
        gen_logits,
        extra,
        extra_labels,
        lambda: in_batch_every(loss, online, target, flat_pos, labels, row_labels),
        mirrored=anchors is None,  # online row r: target row r / tau
    )
    step = SPACLStep(
        anchor=torch.arange(v, device=pool.device).repeat(b),
        positives=positives.detach(),
        candidate_negatives=n_candidates,
        kept_negatives=n_kept,
        kept_generated=kept_gen,
        d_loss=d_loss,
        g_loss=g_loss,
    )
    return per_anchor, step


@torch.no_grad()
def mine_every(
    loss: SPACLLoss, pool: Tensor, labels: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Mining of the every-view rows, once for all ``B V`` anchors, no gradient.

    Returns ``(unit_pool, positives[BV, P], flat_positives[BV, P], game_anchor[B])``:
    row ``r`` has view ``r % V`` as its anchor and flat pool index ``r``;
    ``game_anchor`` is the anchor the dynamic form would use (the dynamic anchor, or
    view 0 for ``no_anchor`` / ``oaa``), the rows the game round is played on.
    """
    b, v, d = pool.shape
    n = b * v
    device = pool.device
    unit_pool = unit(pool.detach())
    dissimilarity = None
    if loss.parts.dynamic_anchor or loss.parts.hard_positives:
        dissimilarity = pool_dissimilarity(unit_pool)  # [B, V, V], once
    game_anchor = loss._anchor(unit_pool, dissimilarity)
    start = torch.arange(n, device=device)  # row r starts at its own view
    if loss.positive_pool == "class":
        assert labels is not None
        row_labels = labels.repeat_interleave(v)
        member = row_labels.unsqueeze(1) == row_labels.unsqueeze(0)
        member.fill_diagonal_(False)  # row r's anchor is view r itself
        flat_unit = unit_pool.reshape(n, d)
        if loss.parts.hard_positives:
            # every row of the [BV, BV] Gram matrix is some row's start: one matmul
            dist = 1.0 - flat_unit @ flat_unit.T
            flat = farthest_point_rows(dist, member, loss.num_positives)
        else:
            flat = random_positives(member, loss.num_positives, loss.rng)
        return unit_pool, flat, flat, game_anchor
    view = start % v
    if loss.parts.hard_positives:
        assert dissimilarity is not None
        per_row = dissimilarity.repeat_interleave(v, dim=0)  # [BV, V, V], small
        views = farthest_point_from_dissimilarity(per_row, view, loss.num_positives)
    else:
        member = torch.ones(n, v, dtype=torch.bool, device=device)
        member[start, view] = False
        views = random_positives(member, loss.num_positives, loss.rng)
    return unit_pool, views, (start - view).unsqueeze(1) + views, game_anchor


def in_batch_every(
    loss: SPACLLoss,
    online: Tensor,
    target: Tensor,
    flat_pos: Tensor,
    labels: Tensor | None,
    row_labels: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:meth:`_in_batch` for the ``B V`` every-view rows (masks from instance ids).

    ``online[BV, d]`` (already divided by the temperature), ``target[B, V, d]``.
    ``"all_views"``: one ``[BV, BV]`` matmul; ``"anchor_views"``: row ``(i, u)``'s
    candidates are view ``u`` of every instance, one batched ``[B, B]`` matmul per
    view index.
    """
    b, v, d = target.shape
    n = b * v
    device = target.device
    target_flat = target.reshape(n, d)
    row_inst = torch.arange(b, device=device).repeat_interleave(v)
    if loss.negatives == "all_views":
        cand_logits = online @ target_flat.T
        pos_logits = cand_logits.gather(1, flat_pos)
        cand_inst, cand_labels = row_inst, row_labels
    else:
        by_view = torch.bmm(online.view(b, v, d).transpose(0, 1), target.permute(1, 2, 0))
        cand_logits = by_view.transpose(0, 1).reshape(n, b)  # [V, B, B] -> rows (i, u)
        pos_logits = (online.unsqueeze(1) * target_flat[flat_pos]).sum(2)
        cand_inst, cand_labels = torch.arange(b, device=device), labels
    other, same = candidate_masks(loss.positive_pool, row_inst, row_labels, cand_inst, cand_labels)
    return cand_logits, pos_logits, other, same


def generated_every(
    loss: SPACLLoss, online: Tensor, unit_pool: Tensor, game_anchor: Tensor, flat_pos: Tensor
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Logits ``[BV, K_adv]`` of the generated negatives of every row, and the game's losses.

    Training mode: **one** round of the game per forward pass, played on the rows
    the dynamic form plays it on (each instance's ``game_anchor`` view and its hard
    positives), so the generator takes the same steps whatever the anchor set; then
    one draw of the updated generator gives ``K_adv`` negatives to every one of the
    ``B V`` anchor rows.  Eval mode: the draw only.
    """
    b, v, d = unit_pool.shape
    adversarial = loss._players(d)
    flat_unit = unit_pool.reshape(b * v, d)
    d_loss = g_loss = None
    if loss.training:
        rows = torch.arange(b, device=unit_pool.device) * v + game_anchor
        d_loss, g_loss = adversarial.step(flat_unit[rows], flat_unit[flat_pos[rows]])
    generated = adversarial.sample(flat_unit)
    logits = (online.unsqueeze(1) * generated.to(online.dtype)).sum(2)
    return logits, d_loss, g_loss
