"""SPACL with one anchor per instance (the paper's form; ``SPACLLoss(anchor_set="dynamic")``).

For each instance ``i`` the anchor is the dynamic anchor ``a_i = argmax_u h(u)`` (view 0
for ``no_anchor`` / ``oaa``, or ``anchor_index``), the positives ``P_i`` its
farthest-point selection (or random ones), and::

    loss_i = -log( S_i^+ / (S_i^+ + sum_{q in Q_i^h} e^{l_iq}) ),  S_i^+ = sum_{p in P_i} e^{l_ip}

with ``l_ic = <f(a_i), g(c)> / tau`` (module docstring of :mod:`spacl.losses.spacl`).
Mining runs on the target pool without gradient; the game's round (training mode) is
played on ``g(a_i)`` and its hard positives, and its draw is the loss's generated
negatives.  The loss is computed on the kept negatives only where it can
(:mod:`spacl.losses.spacl.compact`), else by the dense kernel (:mod:`spacl.losses.spacl.dense`).
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


def one_anchor_loss(
    options: SPACLOptions,
    cut: RelativeThresholdNegatives,
    batch: Batch,
    mined: Mined,
    game: AdversarialNegatives | None,
    training: bool,
) -> tuple[Tensor, SPACLStep]:
    """Per-anchor losses ``[B]`` with one anchor per instance, and what was chosen.

    ``mined``: :func:`spacl.losses.spacl.mining.mine` of the batch; ``game``: the
    generator and discriminator (``None`` without generated negatives), one round
    played in ``training`` mode.
    """
    anchors, pool, labels = batch.anchors, batch.pool, batch.labels
    b = pool.shape[0]
    rows = torch.arange(b, device=pool.device)
    anchor, flat_pos = mined.anchor, mined.flat_positives
    if anchors is None:
        online = pool[rows, anchor]
    elif anchors.ndim == 3:
        online = anchors[rows, anchor]
    else:
        online = anchors
    online = normalize(online, options.normalize) / options.temperature  # logits = online @ g
    target = target_embeddings(options, pool, mined.unit_pool)
    gen_logits = d_loss = g_loss = None
    if game is not None:
        gen_logits, d_loss, g_loss = generated(game, training, online, mined)
    bundle = Rows(
        online, target, flat_pos, rows, labels, labels, gen_logits, batch.extra, batch.extra_labels
    )
    return objective_and_step(
        options,
        cut,
        bundle,
        lambda: in_batch(options.negatives, options.positive_pool, bundle, anchor),
        anchor,
        mined.positives,
        (d_loss, g_loss),
    )


def in_batch(
    negatives: str, positive_pool: str, rows: Rows, anchor: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Logits of the in-batch candidates and of the positives, and two candidate masks.

    ``rows.online`` is already divided by the temperature.  Candidates are every view
    (``negatives="all_views"``, ``[B, B*V]``) or the anchor view (``"anchor_views"``,
    ``[B, B]``) of every instance; the negative mask keeps the other instances (of
    another class, with labels); the positive mask marks the other same-class instances
    under ``positive_pool="instance_class"`` (else nothing).
    """
    online, target, flat_pos, labels = rows.online, rows.target, rows.flat_positives, rows.labels
    b, v, d = target.shape
    ids = torch.arange(b, device=target.device)
    target_flat = target.reshape(b * v, d)
    if negatives == "all_views":
        cand_logits = online @ target_flat.T
        pos_logits = cand_logits.gather(1, flat_pos)
        cand_inst = ids.repeat_interleave(v)
        cand_labels = None if labels is None else labels.repeat_interleave(v)
    else:
        cand_logits = online @ target[ids, anchor].T
        pos_logits = (online.unsqueeze(1) * target_flat[flat_pos]).sum(2)
        cand_inst, cand_labels = ids, labels
    other, same = candidate_masks(positive_pool, ids, labels, cand_inst, cand_labels)
    return cand_logits, pos_logits, other, same


def generated(
    game: AdversarialNegatives, training: bool, online: Tensor, mined: Mined
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Logits ``[B, K_adv]`` of the generated negatives (constants) and the game's losses.

    In ``training`` mode one round of the game is played on the target anchor embeddings
    ``g(a_i)`` and the hard positives, and its draw is used; else a fresh draw.
    """
    unit_pool = mined.unit_pool
    b, v, d = unit_pool.shape
    gen_anchor = unit_pool[torch.arange(b, device=unit_pool.device), mined.anchor]
    d_loss = g_loss = None
    if training:
        real = unit_pool.reshape(b * v, d)[mined.flat_positives]
        points, d_loss, g_loss = game.play(gen_anchor, real, assume_finite=True)
    else:
        points = game.sample(gen_anchor, assume_finite=True)
    logits = (online.unsqueeze(1) * points.to(online.dtype)).sum(2)
    return logits, d_loss, g_loss
