"""SPACL's dense kernel call over every candidate column, and the queue's masks.

Columns of an anchor row: the in-batch candidates, the ``P`` hard positives, the
``K_adv`` generated negatives, the queue; the negative mask is cut once
(:meth:`RelativeThresholdNegatives.select`) and the kernel computes::

    loss_a = log( sum_{p in P_a} e^{l_ap} + sum_{q in Q_a^h} e^{l_aq} ) - pos_a

(``pos_a`` the log-sum-exp or the mean of the positive logits).  Used where the compact
path (:mod:`spacl.losses.spacl_compact`) does not apply or would not pay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from spacl.losses.kernel import PositiveMode, contrastive_kernel
from spacl.losses.normalize import normalize

if TYPE_CHECKING:
    from spacl.losses.spacl import SPACLLoss


def dense_objective(
    loss: SPACLLoss,
    online: Tensor,
    cand_logits: Tensor,
    pos_logits: Tensor,
    other: Tensor,
    same: Tensor,
    gen_logits: Tensor | None,
    labels: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
    kept: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Assemble every anchor row's candidates, cut once, and call the kernel once.

    Columns: the in-batch candidates, the ``P`` hard positives, the ``K_adv``
    generated negatives, the queue.  ``labels`` are those of the anchor rows.
    Returns the per-anchor losses, the candidate and kept masks, and the number of
    generated negatives kept per row.  ``kept``: the cut's mask, if already taken.
    """
    a = online.shape[0]
    device = online.device
    k_adv = 0 if gen_logits is None else gen_logits.shape[1]
    p = pos_logits.shape[1]
    n_cand = cand_logits.shape[1]
    pieces, neg_blocks, pos_blocks = [cand_logits, pos_logits], [other], [same]
    neg_blocks.append(torch.zeros(a, p, dtype=torch.bool, device=device))
    pos_blocks.append(torch.ones(a, p, dtype=torch.bool, device=device))
    if gen_logits is not None:
        pieces.append(gen_logits)
        neg_blocks.append(torch.ones(a, k_adv, dtype=torch.bool, device=device))
        pos_blocks.append(torch.zeros(a, k_adv, dtype=torch.bool, device=device))
    if extra is not None:
        queue = normalize(extra.detach(), loss.normalize).to(online.dtype)
        pieces.append(online @ queue.T)
        q_neg, q_pos = extra_masks(loss, labels, extra_labels, a, extra.shape[0], device)
        neg_blocks.append(q_neg)
        pos_blocks.append(q_pos)
    candidates = torch.cat(neg_blocks, dim=1)
    if not bool(candidates.any()):
        raise ValueError(
            f"SPACL: no anchor has a negative ({a} anchor(s), K_adv={k_adv}"
            + (", labels leave no other class" if labels is not None else "")
            + ")"
        )
    logits = torch.cat(pieces, dim=1)
    if kept is None:  # else the compact path's selection, on the same logits
        kept = loss.cut.select(logits.detach(), candidates)
    positives: Tensor
    if loss.positive_pool == "instance_class" or extra_labels is not None:
        positives = torch.cat(pos_blocks, dim=1)
    else:  # the common case: the P positive columns, as an index (no [A, K] mask)
        positives = torch.arange(n_cand, n_cand + p, device=device).expand(a, p)
    mode: PositiveMode = "log_sum_exp" if loss.positive_mode == "log_sum_exp" else "mean"
    per_anchor = contrastive_kernel(logits, positives, kept, positive_mode=mode)
    kept_gen = kept[:, n_cand + p : n_cand + p + k_adv].sum(1)
    return per_anchor, candidates, kept, kept_gen


def extra_masks(
    loss: SPACLLoss,
    labels: Tensor | None,
    extra_labels: Tensor | None,
    b: int,
    q: int,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    """``(negative, positive)`` masks ``[B, Q]`` of the queue rows."""
    if labels is None or extra_labels is None:
        ones = torch.ones(b, q, dtype=torch.bool, device=device)
        return ones, ~ones
    same = labels.unsqueeze(1) == extra_labels.unsqueeze(0)
    positive = same if loss.positive_pool == "instance_class" else torch.zeros_like(same)
    return ~same, positive


def row_objective(
    loss: SPACLLoss,
    online: Tensor,
    target: Tensor,
    flat_pos: Tensor,
    row_ids: Tensor,
    row_labels: Tensor | None,
    labels: Tensor | None,
    gen_logits: Tensor | None,
    extra: Tensor | None,
    extra_labels: Tensor | None,
    in_batch: Callable[[], tuple[Tensor, Tensor, Tensor, Tensor]],
    mirrored: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The loss of every anchor row by the compact path where it applies, else the dense
    one (``in_batch()`` gives the dense path's in-batch logits and masks).

    Returns the per-anchor losses, the candidate and kept negatives per row and the
    generated negatives kept per row; shared by the one-anchor and every-view forms.
    ``mirrored``: anchor row ``r`` is candidate row ``r`` over the temperature (the
    compact path then mirrors the in-batch logits)."""
    compact = loss._compact(
        online,
        target,
        flat_pos,
        row_ids,
        row_labels,
        labels,
        gen_logits,
        extra,
        extra_labels,
        mirrored,
    )
    if isinstance(compact, tuple):
        return compact
    cand_logits, pos_logits, other, same = in_batch()
    per_anchor, candidates, kept, kept_gen = dense_objective(
        loss,
        online,
        cand_logits,
        pos_logits,
        other,
        same,
        gen_logits,
        row_labels,
        extra,
        extra_labels,
        compact,
    )
    return per_anchor, candidates.sum(1), kept.sum(1), kept_gen
