"""SPACL's relative-threshold cut for link prediction, by histogram refinement.

:func:`top_share_cut` keeps, per query, the heaviest prefix of the candidate entities (and
generated negatives) holding ``share`` of their softmax mass, the same selection as
:meth:`spacl.mining.RelativeThresholdNegatives.select` without sorting a row of ``E``
entities.  :class:`spacl.losses.kg.LinkSPACLLoss` calls it every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from spacl.mining.negatives import RelativeThresholdNegatives

__all__ = ["top_share_cut"]


@dataclass
class _CutState:
    """The histogram refinement of :func:`top_share_cut`, row by row (``[B, E + K]``)."""

    joint: Tensor  # logits, -inf off the candidates
    alive: Tensor  # still in play
    shift: Tensor  # [B, 1] row maxima
    weight: Tensor  # float64 exp(joint - shift)
    target: Tensor  # share of the row's mass
    banked: Tensor  # mass of the candidates above those in play
    threshold: Tensor  # NaN until settled
    todo: Tensor  # rows not settled

    @classmethod
    def start(cls, joint: Tensor, share: float) -> _CutState:
        b = joint.shape[0]
        shift = joint.amax(1, keepdim=True)
        weight = torch.exp(joint - shift).to(torch.float64)  # 0 at -inf
        target = share * weight.sum(1)
        return cls(
            joint,
            joint > -math.inf,  # in play (not NaN, not a masked entry)
            shift,
            weight,
            target,
            torch.zeros_like(target),
            torch.full((b,), math.nan, dtype=joint.dtype, device=joint.device),
            torch.ones(b, dtype=torch.bool, device=joint.device),
        )

    def _take(self, x: Tensor, rows: Tensor) -> Tensor:  # rows of x, no copy for all rows
        return x if rows.numel() == x.shape[0] else x[rows]

    def finish_small(self, max_exact: int) -> None:
        """Rows with at most ``max_exact`` candidates in play: one ``topk`` settles them."""
        count = self.alive.sum(1)
        finish = self.todo & (count <= max_exact)
        if not bool(finish.any()):
            return
        rows = finish.nonzero().squeeze(1)
        k = max(int(count[rows].max()), 1)
        live = self._take(self.alive, rows)
        vals = self._take(self.joint, rows).masked_fill(~live, -math.inf).topk(k, 1).values
        mass = torch.exp(vals - self.shift[rows]).double().cumsum(1)
        reached = (self.banked[rows].unsqueeze(1) + mass) >= self.target[rows].unsqueeze(1)
        value = vals.gather(1, reached.long().argmax(1, keepdim=True)).squeeze(1)
        ok = reached.any(1) & torch.isfinite(value)
        self.threshold[rows[ok]] = value[ok]
        self.todo[rows] = False
        self.alive[rows] = False

    def refine(self, bins: int) -> None:
        """One level: bin the candidates in play, keep the bin where the target is reached."""
        rows = self.todo.nonzero().squeeze(1)
        vals, live = self._take(self.joint, rows), self._take(self.alive, rows)
        low = vals.masked_fill(~live, math.inf).amin(1, keepdim=True)
        high = vals.masked_fill(~live, -math.inf).amax(1, keepdim=True)
        width = (high - low).clamp_min(torch.finfo(vals.dtype).tiny)
        index = ((vals - low) * (bins / width)).floor_().clamp_(0, bins - 1).long()
        index.masked_fill_(~live, bins)  # out of play: a spare last bin
        mass = torch.zeros(len(rows), bins + 1, dtype=torch.float64, device=vals.device)
        mass.scatter_add_(1, index, self._take(self.weight, rows))
        from_top = mass[:, :bins].flip(1).cumsum(1) + self.banked[rows].unsqueeze(1)
        above = (from_top < self.target[rows].unsqueeze(1)).sum(1)  # bins wholly above
        reachable = above < bins
        chosen = torch.where(reachable, bins - 1 - above, bins + 1)  # unreachable: no bin
        previous = from_top.gather(1, (above - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
        self.banked[rows] = torch.where(above > 0, previous, self.banked[rows])
        self.alive[rows] = index == chosen.unsqueeze(1)
        self.todo[rows[~reachable]] = False  # out of reach by rounding: exact fallback


@torch.no_grad()
def top_share_cut(
    masked: Tensor,
    extra: Tensor | None,
    cut: RelativeThresholdNegatives,
    *,
    bins: int = 1024,
    max_exact: int = 256,
    max_levels: int = 4,
) -> tuple[Tensor, Tensor | None]:
    """SPACL's relative-threshold cut over ``[B, E]`` entity logits plus ``[B, K]`` extras.

    ``masked`` holds ``-inf`` at the candidates that are not negatives; ``extra`` (the
    generated negatives) are all candidates.  Returns the kept masks of both blocks,
    the same as ``cut.select(cat(masked, extra), valid)``: the shortest heaviest prefix
    holding ``cut.share`` of ``sum exp``, i.e. every candidate at or above the threshold
    ``t_a`` where the descending cumulative mass first reaches ``share * total``.

    No row is sorted whole.  The threshold is located by histogram refinement: the
    candidates still in play are put into ``bins`` equal-width value bins, the bin
    where the cumulative mass (from the top) reaches the target is kept, the mass of
    the bins above it is banked, and so on until at most ``max_exact`` candidates are
    left in play; those are ordered by one ``topk``.  The bin of a value is monotone in
    the value, so this is exact (up to the order of float64 summation); each level is a
    few passes over ``[B, E]``.  Rows not settled within ``max_levels`` levels, or whose
    target is out of reach by rounding, take the miner's exact selection.
    **Decision**: candidates tied with the smallest kept one are all kept (the miner
    keeps the lowest-indexed; with real-valued scores ties have probability zero).
    """
    b, e = masked.shape
    extra_t = masked.new_zeros(b, 0) if extra is None else extra
    if cut.share >= 1.0:
        return torch.isfinite(masked), (None if extra is None else torch.isfinite(extra_t))
    joint = torch.cat((masked, extra_t), 1)
    if cut.mass != "exp":  # the histogram refinement below bins the softmax mass
        keep_joint = cut.select(joint, torch.isfinite(joint))
        return keep_joint[:, :e], (None if extra is None else keep_joint[:, e:])
    state = _CutState.start(joint, cut.share)
    for level in range(max_levels + 1):
        state.finish_small(max_exact)
        if level == max_levels or not bool(state.todo.any()):
            break
        state.refine(bins)
    threshold = state.threshold
    keep_joint = (joint >= threshold.unsqueeze(1)) & (joint > -math.inf)  # NaN: False
    rows = torch.isnan(threshold).nonzero().squeeze(1)
    if rows.numel():
        keep_joint[rows] = cut.select(joint[rows], torch.isfinite(joint[rows]))
    keep = keep_joint[:, :e]
    return keep, (None if extra is None else keep_joint[:, e:])
