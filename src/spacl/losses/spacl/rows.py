"""SPACL's anchor rows as one bundle (:class:`Rows`), and the candidate masks of a row.

Each anchor row ``a`` (one per instance, or ``B V`` with every view an anchor) has the
online embedding ``f(a) / tau``, its positives among the target pool's ``B V`` rows, its
generated negatives and the queue.  The one-anchor and every-view forms build a
:class:`Rows` and :func:`spacl.losses.spacl.objective.row_objective` computes the loss
of every row from it, by the compact or the dense path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Rows:
    """The anchor rows of one forward pass (``A`` rows, a pool of ``B`` instances).

    ``online[A, d]``: the rows' online embeddings over the temperature (logits are
    ``online @ g``); ``target[B, V, d]``: the candidate embeddings ``g``;
    ``flat_positives[A, P]``: each row's positives as flat pool rows; ``row_inst[A]``:
    each row's instance (instance-major); ``row_labels[A]`` / ``labels[B]``: the classes
    (or ``None``); ``gen_logits[A, K_adv]``: the generated negatives' logits (or
    ``None``); ``extra[Q, d]`` / ``extra_labels[Q]``: the queue; ``mirrored``: row ``r``
    is target row ``r`` over the temperature (every view an anchor on one encoder).
    """

    online: Tensor
    target: Tensor
    flat_positives: Tensor
    row_inst: Tensor
    row_labels: Tensor | None
    labels: Tensor | None
    gen_logits: Tensor | None
    extra: Tensor | None
    extra_labels: Tensor | None
    mirrored: bool = False


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


def extra_masks(
    positive_pool: str,
    labels: Tensor | None,
    extra_labels: Tensor | None,
    b: int,
    q: int,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    """``(negative, positive)`` masks ``[B, Q]`` of the queue rows (a row of the anchor's
    class is no negative, and a positive under ``positive_pool="instance_class"``)."""
    if labels is None or extra_labels is None:
        ones = torch.ones(b, q, dtype=torch.bool, device=device)
        return ones, ~ones
    same = labels.unsqueeze(1) == extra_labels.unsqueeze(0)
    positive = same if positive_pool == "instance_class" else torch.zeros_like(same)
    return ~same, positive
