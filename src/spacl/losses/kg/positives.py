"""SPACL-KG's hard positives ``P^h`` (module docstring of :mod:`spacl.losses.kg`).

Queries with at most ``lambda_P`` known tails keep all of them; the others choose
``lambda_P`` by farthest-point selection (or at random for
``variant="no_hard_positive"``) among at most ``pool_size`` of their tails.  Each function
takes the options record (:class:`~spacl.losses.kg.options.LinkSPACLOptions`), the random
generator and tensors, never the loss object.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from spacl.losses.kg.options import LinkSPACLOptions
from spacl.mining.positives import farthest_point_from_dissimilarity, random_positives


@torch.no_grad()
def subsample(
    options: LinkSPACLOptions,
    rng: torch.Generator,
    query: Tensor,
    entities: Tensor,
    positives: Tensor,
    counts: Tensor | None,
) -> tuple[Tensor, Tensor] | None:
    """``(rows, chosen[rows, lambda_P])``: the queries with more than ``lambda_P`` known
    tails and the tails they keep (``None`` if there is none); draws from ``rng``.
    ``counts``: ``positives.sum(1)`` if the caller has it."""
    if counts is None:
        counts = positives.sum(1)
    rows = (counts > options.num_positives).nonzero().squeeze(1)
    if rows.numel() == 0:
        return None
    members = positives[rows]
    b = rows.numel()
    k = int(min(options.pool_size, int(members.sum(1).max())))
    pool = random_positives(members, k, rng)  # [b, k] a random subset of the tails
    valid = members.gather(1, pool)
    if not options.parts.hard_positives:
        scores = torch.rand(pool.shape, generator=rng).to(pool.device)
        order = scores.masked_fill(~valid, -1.0).topk(options.num_positives, 1).indices
        chosen = pool.gather(1, order)
    else:
        units = torch.cat((query[rows].unsqueeze(1), entities[pool]), dim=1)
        units = units / units.norm(dim=2, keepdim=True).clamp_min(1e-12)
        dissimilarity = 1.0 - torch.bmm(units, units.transpose(1, 2))  # [b, 1+k, 1+k]
        blocked = torch.cat((torch.zeros(b, 1, dtype=torch.bool, device=valid.device), ~valid), 1)
        dissimilarity = dissimilarity.masked_fill(blocked.unsqueeze(1), -math.inf)
        start = torch.zeros(b, dtype=torch.long, device=query.device)
        picks = farthest_point_from_dissimilarity(dissimilarity, start, options.num_positives)
        chosen = pool.gather(1, picks - 1)  # these rows have > lambda_P valid members
    return rows, chosen


@torch.no_grad()
def hard_positives(
    options: LinkSPACLOptions,
    rng: torch.Generator,
    query: Tensor,
    entities: Tensor,
    positives: Tensor,
    counts: Tensor | None = None,
) -> Tensor:
    """``BoolTensor[B, E]`` of the hard positives ``P^h`` (module docstring)."""
    hard = positives.clone()
    picked = subsample(options, rng, query, entities, positives, counts)
    if picked is None:
        return hard
    rows, chosen = picked
    sub = torch.zeros(rows.numel(), positives.shape[1], dtype=torch.bool, device=rows.device)
    sub.scatter_(1, chosen, True)
    hard[rows] = sub
    return hard


@torch.no_grad()
def hard_pairs(
    options: LinkSPACLOptions,
    rng: torch.Generator,
    query: Tensor,
    entities: Tensor,
    positives: Tensor,
    known: tuple[Tensor, Tensor],
    counts: Tensor,
) -> tuple[Tensor, Tensor]:
    """``(row, col)`` of :func:`hard_positives` in row-major order (the same draws), from
    the known pairs (``positives.nonzero()``) without a ``[B, E]`` pass over the hard
    mask."""
    picked = subsample(options, rng, query, entities, positives, counts)
    if picked is None:
        return known
    rows, chosen = picked
    row, col = known
    subsampled = torch.zeros(positives.shape[0], dtype=torch.bool, device=row.device)
    subsampled[rows] = True
    stay = ~subsampled[row]
    row = torch.cat((row[stay], rows.repeat_interleave(chosen.shape[1])))
    col = torch.cat((col[stay], chosen.reshape(-1)))
    order = (row * positives.shape[1] + col).argsort()
    return row[order], col[order]
