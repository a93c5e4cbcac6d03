"""SPACL's mining on the target pool: the anchor and the positives of every anchor row.

Without gradient, on the pool on the unit sphere (SPEC §1.2): the dynamic anchor
``a_i = argmax_{u in C_i} h(u)`` (view 0 for ``no_anchor`` / ``oaa``), then
``lambda_P`` positives per anchor row by farthest-point selection from the anchor (or
drawn uniformly without replacement for ``no_hard_positive`` / ``oaa``, from the
loss's ``torch.Generator``), within the instance's views or, for
``positive_pool="class"``, every same-class view of the batch.  :func:`mine` gives one
anchor per instance, :func:`mine_every` every view an anchor once (``B V`` rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from spacl.losses.spacl.options import SPACLOptions, SPACLParts
from spacl.mining.pool import unit
from spacl.mining.positives import (
    DynamicAnchor,
    class_pool_members,
    farthest_point_flat,
    farthest_point_from_dissimilarity,
    farthest_point_rows,
    pool_dissimilarity,
    random_positives,
)


@dataclass(frozen=True)
class Mined:
    """What the mining chose (no gradient).

    ``unit_pool[B, V, d]``: the pool on the unit sphere; ``anchor[B]``: each instance's
    anchor view (the dynamic form's: the rows the game round is played on);
    ``positives[A, P]``: the positives as returned to users (view indices, or flat pool
    indices for ``positive_pool="class"``); ``flat_positives[A, P]``: flat pool indices.
    ``A = B`` (one anchor per instance) or ``B V`` (every view an anchor).
    """

    unit_pool: Tensor
    anchor: Tensor
    positives: Tensor
    flat_positives: Tensor


def anchor_of(parts: SPACLParts, unit_pool: Tensor, dissimilarity: Tensor | None) -> Tensor:
    """``LongTensor[B]``: the dynamic anchor ``argmax_u h(u)`` of each instance, or view 0
    where the variant has no dynamic anchor (``dissimilarity``: the pool's, if taken)."""
    b = unit_pool.shape[0]
    if not parts.dynamic_anchor:
        return torch.zeros(b, dtype=torch.long, device=unit_pool.device)
    if dissimilarity is None:
        dissimilarity = pool_dissimilarity(unit_pool)
    return DynamicAnchor.from_dissimilarity(dissimilarity)


@torch.no_grad()
def mine(
    options: SPACLOptions,
    rng: torch.Generator,
    pool: Tensor,
    labels: Tensor | None,
    anchor_index: Tensor | None,
) -> Mined:
    """One anchor per instance (``anchor_index``, else :func:`anchor_of`) and its positives."""
    unit_pool = unit(pool.detach())
    dissimilarity = None
    if options.parts.dynamic_anchor or options.parts.hard_positives:
        dissimilarity = pool_dissimilarity(unit_pool)
    anchor = anchor_index
    if anchor is None:
        anchor = anchor_of(options.parts, unit_pool, dissimilarity)
    positives, flat_pos = positives_of(options, rng, unit_pool, anchor, labels, dissimilarity)
    return Mined(unit_pool, anchor, positives, flat_pos)


def positives_of(
    options: SPACLOptions,
    rng: torch.Generator,
    unit_pool: Tensor,
    anchor: Tensor,
    labels: Tensor | None,
    dissimilarity: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """``(positives, flat)`` of one anchor per instance: indices as returned to users and
    flat pool indices (``rng``: the random positives' generator)."""
    b, v, d = unit_pool.shape
    rows = torch.arange(b, device=unit_pool.device)
    start = rows * v + anchor
    num = options.num_positives
    if options.positive_pool == "class":
        assert labels is not None
        member = class_pool_members(labels, v, start)
        if options.parts.hard_positives:
            flat = farthest_point_flat(unit_pool.reshape(b * v, d), start, member, num)
        else:
            flat = random_positives(member, num, rng)
        return flat, flat
    if options.parts.hard_positives:
        if dissimilarity is None:
            dissimilarity = pool_dissimilarity(unit_pool)
        views = farthest_point_from_dissimilarity(dissimilarity, anchor, num)
    else:
        member = torch.ones(b, v, dtype=torch.bool, device=unit_pool.device)
        member.scatter_(1, anchor.unsqueeze(1), False)
        views = random_positives(member, num, rng)
    return views, rows.unsqueeze(1) * v + views


@torch.no_grad()
def mine_every(
    options: SPACLOptions, rng: torch.Generator, pool: Tensor, labels: Tensor | None
) -> Mined:
    """Mining of the every-view rows, once for all ``B V`` anchors.

    Row ``r`` has view ``r % V`` as its anchor and flat pool index ``r``; the
    :attr:`Mined.anchor` is the one the dynamic form would use (the dynamic anchor, or
    view 0 for ``no_anchor`` / ``oaa``), the rows the game round is played on.
    """
    b, v, d = pool.shape
    n = b * v
    device = pool.device
    parts, num = options.parts, options.num_positives
    unit_pool = unit(pool.detach())
    dissimilarity = None
    if parts.dynamic_anchor or parts.hard_positives:
        dissimilarity = pool_dissimilarity(unit_pool)  # [B, V, V], once
    game_anchor = anchor_of(parts, unit_pool, dissimilarity)
    start = torch.arange(n, device=device)  # row r starts at its own view
    if options.positive_pool == "class":
        assert labels is not None
        row_labels = labels.repeat_interleave(v)
        member = row_labels.unsqueeze(1) == row_labels.unsqueeze(0)
        member.fill_diagonal_(False)  # row r's anchor is view r itself
        flat_unit = unit_pool.reshape(n, d)
        if parts.hard_positives:
            # every row of the [BV, BV] Gram matrix is some row's start: one matmul
            dist = 1.0 - flat_unit @ flat_unit.T
            flat = farthest_point_rows(dist, member, num)
        else:
            flat = random_positives(member, num, rng)
        return Mined(unit_pool, game_anchor, flat, flat)
    view = start % v
    if parts.hard_positives:
        assert dissimilarity is not None
        per_row = dissimilarity.repeat_interleave(v, dim=0)  # [BV, V, V], small
        views = farthest_point_from_dissimilarity(per_row, view, num)
    else:
        member = torch.ones(n, v, dtype=torch.bool, device=device)
        member.scatter_(1, view.unsqueeze(1), False)  # row r = start r
        views = random_positives(member, num, rng)
    return Mined(unit_pool, game_anchor, views, (start - view).unsqueeze(1) + views)
