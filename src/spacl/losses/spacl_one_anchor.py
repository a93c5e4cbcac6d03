"""SPACL with one anchor per instance (the paper's form; ``SPACLLoss(anchor_set="dynamic")``).

For each instance ``i`` the anchor is the dynamic anchor ``a_i = argmax_u h(u)`` (view 0
for ``no_anchor`` / ``oaa``, or ``anchor_index``), the positives ``P_i`` its
farthest-point selection (or random ones), and::

    loss_i = -log( S_i^+ / (S_i^+ + sum_{q in Q_i^h} e^{l_iq}) ),  S_i^+ = sum_{p in P_i} e^{l_ip}

with ``l_ic = <f(a_i), g(c)> / tau`` (module docstring of :mod:`spacl.losses.spacl`).
Mining runs on the target pool without gradient; the game's round (training mode) is
played on ``g(a_i)`` and its hard positives, and its draw is the loss's generated
negatives.  The loss is computed on the kept negatives only where it can
(:mod:`spacl.losses.spacl_compact`), else by the dense kernel (:mod:`spacl.losses.spacl_dense`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from spacl.losses.normalize import normalize
from spacl.losses.spacl_dense import row_objective
from spacl.losses.spacl_step import SPACLStep
from spacl.mining._common import unit
from spacl.mining.positives import (
    class_pool_members,
    farthest_point_flat,
    farthest_point_from_dissimilarity,
    pool_dissimilarity,
    random_positives,
)

if TYPE_CHECKING:
    from spacl.losses.spacl import SPACLLoss


def one_anchor_loss(
    loss: SPACLLoss,
    anchors: Tensor | None,
    pool: Tensor,
    labels: Tensor | None,
    anchor_index: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
) -> tuple[Tensor, SPACLStep]:
    """Per-anchor losses ``[B]`` with one anchor per instance, and what was chosen."""
    b = pool.shape[0]
    rows = torch.arange(b, device=pool.device)
    unit_pool, anchor, positives, flat_pos = mine(loss, pool, labels, anchor_index)

    if anchors is None:
        online = pool[rows, anchor]
    elif anchors.ndim == 3:
        online = anchors[rows, anchor]
    else:
        online = anchors
    online = normalize(online, loss.normalize) / loss.temperature  # logits = online @ g
    target = loss._target(pool, unit_pool)
    gen_logits = d_loss = g_loss = None
    if loss.effective_adversarial > 0:
        gen_logits, d_loss, g_loss = generated(loss, online, unit_pool, anchor, flat_pos)
    per_anchor, n_candidates, n_kept, kept_gen = row_objective(
        loss,
        online,
        target,
        flat_pos,
        rows,
        labels,
        labels,
        gen_logits,
        extra,
        extra_labels,
        lambda: in_batch(loss, online, target, anchor, flat_pos, labels),
    )
    step = SPACLStep(
        anchor=anchor.detach(),
        positives=positives.detach(),
        candidate_negatives=n_candidates,
        kept_negatives=n_kept,
        kept_generated=kept_gen,
        d_loss=d_loss,
        g_loss=g_loss,
    )
    return per_anchor, step


@torch.no_grad()
def mine(
    loss: SPACLLoss, pool: Tensor, labels: Tensor | None, anchor_index: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(unit_pool, anchor, positives, flat_positives)`` on the target pool, no gradient."""
    unit_pool = unit(pool.detach())
    dissimilarity = None
    if loss.parts.dynamic_anchor or loss.parts.hard_positives:
        dissimilarity = pool_dissimilarity(unit_pool)
    anchor = anchor_index
    if anchor is None:
        anchor = loss._anchor(unit_pool, dissimilarity)
    positives, flat_pos = positives_of(loss, unit_pool, anchor, labels, dissimilarity)
    return unit_pool, anchor, positives, flat_pos


def positives_of(
    loss: SPACLLoss,
    unit_pool: Tensor,
    anchor: Tensor,
    labels: Tensor | None,
    dissimilarity: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """``(positives, flat)``: indices as returned to users and flat pool indices."""
    b, v, d = unit_pool.shape
    rows = torch.arange(b, device=unit_pool.device)
    start = rows * v + anchor
    if loss.positive_pool == "class":
        assert labels is not None
        member = class_pool_members(labels, v, start)
        if loss.parts.hard_positives:
            flat = farthest_point_flat(
                unit_pool.reshape(b * v, d), start, member, loss.num_positives
            )
        else:
            flat = random_positives(member, loss.num_positives, loss.rng)
        return flat, flat
    if loss.parts.hard_positives:
        if dissimilarity is None:
            dissimilarity = pool_dissimilarity(unit_pool)
        views = farthest_point_from_dissimilarity(dissimilarity, anchor, loss.num_positives)
    else:
        member = torch.ones(b, v, dtype=torch.bool, device=unit_pool.device)
        member[rows, anchor] = False
        views = random_positives(member, loss.num_positives, loss.rng)
    return views, rows.unsqueeze(1) * v + views


def in_batch(
    loss: SPACLLoss,
    online: Tensor,
    target: Tensor,
    anchor: Tensor,
    flat_pos: Tensor,
    labels: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Logits of the in-batch candidates and of the positives, and two candidate masks.

    ``online`` is already divided by the temperature.  Candidates are every view
    (``"all_views"``, ``[B, B*V]``) or the anchor view (``"anchor_views"``, ``[B, B]``) of
    every instance; the negative mask keeps the other instances (of another class,
    with labels); the positive mask marks the other same-class instances under
    ``positive_pool="instance_class"`` (else nothing).
    """
    b, v, d = target.shape
    rows = torch.arange(b, device=target.device)
    target_flat = target.reshape(b * v, d)
    if loss.negatives == "all_views":
        cand_logits = online @ target_flat.T
        pos_logits = cand_logits.gather(1, flat_pos)
        cand_inst = rows.repeat_interleave(v)
        cand_labels = None if labels is None else labels.repeat_interleave(v)
    else:
        cand_logits = online @ target[rows, anchor].T
        pos_logits = (online.unsqueeze(1) * target_flat[flat_pos]).sum(2)
        cand_inst, cand_labels = rows, labels
    other, same = candidate_masks(loss.positive_pool, rows, labels, cand_inst, cand_labels)
    return cand_logits, pos_logits, other, same


def candidate_masks(
    positive_pool: str,
    row_inst: Tensor,
    row_labels: Tensor | None,
    cand_inst: Tensor,
    cand_labels: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """``(negative, positive)`` masks ``[rows, candidates]`` from instance ids and labels.

    A candidate of another instance is a negative; with labels, one of the anchor row's
    class is not, and under ``positive_pool="instance_class"`` it is a positive instead.
    """
    other = cand_inst.unsqueeze(0) != row_inst.unsqueeze(1)
    same = torch.zeros_like(other)
    if row_labels is not None and cand_labels is not None:
        same_class = cand_labels.unsqueeze(0) == row_labels.unsqueeze(1)
        if positive_pool == "instance_class":
            same = other & same_class
        other &= ~same_class
    return other, same


def generated(
    loss: SPACLLoss, online: Tensor, unit_pool: Tensor, anchor: Tensor, flat_pos: Tensor
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Logits ``[B, K_adv]`` of the generated negatives (constants) and the game's losses.

    In training mode one round of the game is played on the target anchor embeddings
    ``g(a_i)`` and the hard positives, and its draw is used; in eval mode a fresh draw.
    """
    b, v, d = unit_pool.shape
    adversarial = loss._players(d)
    gen_anchor = unit_pool[torch.arange(b, device=unit_pool.device), anchor]
    d_loss = g_loss = None
    if loss.training:
        real = unit_pool.reshape(b * v, d)[flat_pos]
        generated, d_loss, g_loss = adversarial.play(gen_anchor, real)
    else:
        generated = adversarial.sample(gen_anchor)
    logits = (online.unsqueeze(1) * generated.to(online.dtype)).sum(2)
    return logits, d_loss, g_loss
