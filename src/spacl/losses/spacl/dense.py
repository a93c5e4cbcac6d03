"""SPACL's dense kernel call over every candidate column of the anchor rows.

Columns of an anchor row: the in-batch candidates, the ``P`` hard positives, the
``K_adv`` generated negatives, the queue; the negative mask is cut once
(:meth:`RelativeThresholdNegatives.select`) and the kernel computes::

    loss_a = log( sum_{p in P_a} e^{l_ap} + sum_{q in Q_a^h} e^{l_aq} ) - pos_a

(``pos_a`` the log-sum-exp or the mean of the positive logits).  Used where the compact
path (:mod:`spacl.losses.spacl.compact`) does not apply or would not pay.
"""

from __future__ import annotations

import torch
from torch import Tensor

from spacl.losses.kernel import PositiveMode, contrastive_kernel
from spacl.losses.normalize import normalize
from spacl.losses.spacl.options import SPACLOptions
from spacl.losses.spacl.rows import Rows, extra_masks
from spacl.mining.cut import RelativeThresholdNegatives


def dense_objective(
    options: SPACLOptions,
    cut: RelativeThresholdNegatives,
    rows: Rows,
    in_batch: tuple[Tensor, Tensor, Tensor, Tensor],
    kept: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Assemble every anchor row's candidates, cut once, and call the kernel once.

    ``in_batch``: ``(cand_logits, pos_logits, other, same)``, the in-batch candidates'
    and the positives' logits and the candidates' negative and positive masks.
    Columns: the in-batch candidates, the ``P`` hard positives, the ``K_adv``
    generated negatives, the queue.  Returns the per-anchor losses, the candidate and
    kept masks, and the number of generated negatives kept per row.  ``kept``: the
    cut's mask, if already taken (by a caller that found at least one candidate).
    """
    cand_logits, pos_logits, other, same = in_batch
    online, gen_logits, extra = rows.online, rows.gen_logits, rows.extra
    labels = rows.row_labels
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
        queue = normalize(extra.detach(), options.normalize).to(online.dtype)
        pieces.append(online @ queue.T)
        q_neg, q_pos = extra_masks(
            options.positive_pool, labels, rows.extra_labels, a, extra.shape[0], device
        )
        neg_blocks.append(q_neg)
        pos_blocks.append(q_pos)
    candidates = torch.cat(neg_blocks, dim=1)
    # a cut taken before (``kept``: the compact path's, which found an in-batch
    # candidate) spares this check's host wait
    if kept is None and not bool(candidates.any()):
        raise ValueError(
            f"SPACL: no anchor has a negative ({a} anchor(s), K_adv={k_adv}"
            + (", labels leave no other class" if labels is not None else "")
            + ")"
        )
    logits = torch.cat(pieces, dim=1)
    if kept is None:  # else the compact path's selection, on the same logits
        kept = cut.select(logits.detach(), candidates, finite=False)
    positives: Tensor
    if options.positive_pool == "instance_class" or rows.extra_labels is not None:
        positives = torch.cat(pos_blocks, dim=1)
    else:  # the common case: the P positive columns, as an index (no [A, K] mask)
        positives = torch.arange(n_cand, n_cand + p, device=device).expand(a, p)
    mode: PositiveMode = "log_sum_exp" if options.positive_mode == "log_sum_exp" else "mean"
    per_anchor = contrastive_kernel(  # every anchor holds its P >= 1 positive columns
        logits, positives, kept, positive_mode=mode, check_positives=False
    )
    kept_gen = kept[:, n_cand + p : n_cand + p + k_adv].sum(1)
    return per_anchor, candidates, kept, kept_gen
