"""Link prediction with contrastive objectives: InfoNCE over all entities and SPACL (SPEC §1).

The model is a :class:`~spacl.models.kg.LinkPredictor` (query encoder ``f(h, r)``,
entity encoder ``g(t)``, score ``<f(h, r), g(t)>``).  By default (``train.unit=query``)
training iterates over the distinct training queries ``(h, r)`` (reciprocal relations
included); the positives of a query are *all* its known training tails ``P(h, r)``, the
candidates every entity.  ``train.unit=triple`` iterates over training triples instead,
each with its own tail as the one positive (``P(h, r) = {t}``: the unfiltered 1-vs-all
cross-entropy of Lacroix et al. 2018).  The N3 regulariser (``optim.n3``) is the mean
over the step's training triples of ``|h|^3 + |r|^3 + |t|^3`` in either unit.
With ``l_e = <f(h, r), g(e)> / tau``:

**Filtered InfoNCE** (:class:`LinkInfoNCELoss`), per training triple ``(h, r, t)``::

    loss(h, r, t) = -log( e^{l_t} / (e^{l_t} + sum_{e not in P(h, r)} e^{l_e}) )

the 1-N cross-entropy of Dettmers et al. (2018) with the other known tails of the query
taken out of the denominator.  All tails of one query share one score row (the
kernel's ``"pairwise"`` mode); the mean runs over triples (each query weighted by
``|P(h, r)|``).  ``num_negatives=k`` scores only ``k`` uniformly sampled entities
(shared by the batch) plus the batch's positives instead of every entity.

**SPACL for link prediction** (:class:`LinkSPACLLoss`, SPEC §1.2-1.5)::

    P^h   = farthest-point selection of lambda_P tails from P(h, r), starting at f(h, r)
    Q     = {e not in P(h, r)}  U  K_adv generated negatives G(f(h, r), xi)
    Q^h   = the heaviest prefix of Q holding lambda_Q of sum_q e^{l_q}
    loss  = -log( sum_{p in P^h} e^{l_p} / (sum_{p in P^h} e^{l_p} + sum_{q in Q^h} e^{l_q}) )

**Decisions** (the image recipe of SPEC §1 translated to triples):

- the anchor is the query ``f(h, r)`` itself: there are no views, so there is no dynamic
  anchor (``variant="no_anchor"`` is therefore the same as ``"full"`` and not offered);
- the positive pool is the known training tails of ``(h, r)``; a query with at most
  ``lambda_P`` of them uses them all; otherwise at most ``pool_size`` of them (chosen
  uniformly at random, the analogue of the ``M`` augmented views) enter farthest-point
  selection with the dissimilarity ``1 - cos`` and ``S = {f(h, r)}`` at the start;
- known tails that are not selected are neither positives nor negatives;
- the candidates ``g(e)`` are the trained entity table itself, **with** gradient: in
  link prediction the tails are the same parameters as the heads and freezing that
  side halves the training signal (SPEC §1.5's constant ``g`` is kept for images);
- generated negatives (unit vectors from :class:`~spacl.mining.AdversarialNegatives`,
  played on ``unit(f(h, r))`` against the unit hard positives) are rescaled by the mean
  norm of the query's hard positives, so that they live where entities live; they are
  constants;
- the loss is the mean over queries (SPEC §1.5: mean over anchors); ``weighting=
  "triple"`` weights each query by ``|P(h, r)|`` as the InfoNCE baseline does.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch import Tensor, nn

from spacl._validation import check_in_range, check_positive
from spacl.data.kg import UNSEEN_POLICIES, KnowledgeGraph, load_kg
from spacl.evaluate.ranking import TIE_POLICIES, evaluate_link_prediction
from spacl.losses.kernel import masked_logsumexp
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.negatives import RelativeThresholdNegatives
from spacl.mining.positives import farthest_point_from_dissimilarity, random_positives
from spacl.models.kg import KG_INTERACTIONS, LinkPredictor

__all__ = [
    "KG_OBJECTIVES",
    "KG_SPACL_VARIANTS",
    "KGConfig",
    "LinkInfoNCELoss",
    "LinkSPACLLoss",
    "build_kg_objective",
    "kg_config",
    "top_share_cut",
    "train_kg",
]

KG_OBJECTIVES = ("infonce", "spacl")
KG_SPACL_VARIANTS = ("full", "no_hard_positive", "no_adversarial", "no_negative_selection")
WEIGHTINGS = ("query", "triple")


def _per_query_mean(per_pair: Tensor, row: Tensor, b: int) -> Tensor:
    """Mean of ``per_pair`` within each query (``row`` = query of each pair), ``[b]``."""
    sums = per_pair.new_zeros(b).index_add(0, row, per_pair)
    counts = torch.bincount(row, minlength=b).to(per_pair.dtype)
    return sums / counts.clamp_min(1.0)


def _reduce(per_pair: Tensor, row: Tensor, b: int, weighting: str) -> Tensor:
    """``"triple"``: mean over pairs; ``"query"``: mean over queries of their pair means."""
    if weighting == "triple":
        return per_pair.mean()
    return _per_query_mean(per_pair, row, b).mean()


def _row_logsumexp(values: Tensor, row: Tensor, b: int) -> Tensor:
    """``[b]``: ``log sum_{j: row_j = a} exp(values_j)`` (every row must have an entry)."""
    shift = values.new_full((b,), -math.inf).scatter_reduce(
        0, row, values.detach(), reduce="amax", include_self=True
    )
    sums = values.new_zeros(b).index_add(0, row, torch.exp(values - shift[row]))
    return sums.log() + shift


def _check_inputs(query: Tensor, entities: Tensor, positives: Tensor) -> None:
    if query.ndim != 2 or entities.ndim != 2 or query.shape[1] != entities.shape[1]:
        raise ValueError(
            f"query must be [B, d] and entities [E, d], got {tuple(query.shape)} and "
            f"{tuple(entities.shape)}"
        )
    if positives.dtype != torch.bool or positives.shape != (query.shape[0], entities.shape[0]):
        raise ValueError(
            f"positives must be a bool [B, E] = [{query.shape[0]}, {entities.shape[0]}] mask, "
            f"got {positives.dtype} {tuple(positives.shape)}"
        )
    if not bool(positives.any(1).all()):
        raise ValueError("every query needs at least one positive (known tail)")


class LinkInfoNCELoss(nn.Module):
    """Filtered InfoNCE over all entities, or over sampled ones (module docstring).

    Call: ``loss(query[B, d], entities[E, d], positives[B, E] bool) -> scalar``.
    Computed as the kernel's ``"pairwise"`` mode without materialising it over ``[B, E]``:
    one masked log-sum-exp of the negatives per query, then
    ``log(e^{l_ap} + e^{neg_a}) - l_ap`` for the positive pairs only.

    Args:
        temperature: ``tau``.
        num_negatives: ``None`` scores every entity; ``k`` scores ``k`` uniformly sampled
            entities (shared by the batch, drawn from ``generator``) plus the positives.
        weighting: ``"triple"`` (default: the mean over training triples) or ``"query"``.
        generator: source of the sampled negatives.
    """

    def __init__(
        self,
        temperature: float = 1.0,
        num_negatives: int | None = None,
        weighting: str = "triple",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        if num_negatives is not None and (
            not isinstance(num_negatives, int)
            or isinstance(num_negatives, bool)
            or num_negatives < 1
        ):
            raise ValueError(f"num_negatives must be None or an int >= 1, got {num_negatives!r}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        self.num_negatives = num_negatives
        self.weighting = weighting
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)

    def forward(self, query: Tensor, entities: Tensor, positives: Tensor) -> Tensor:
        _check_inputs(query, entities, positives)
        if self.num_negatives is not None:
            sampled = torch.randint(
                0, entities.shape[0], (self.num_negatives,), generator=self.rng
            ).to(positives.device)
            cols = torch.unique(torch.cat((positives.any(0).nonzero().squeeze(1), sampled)))
            entities, positives = entities[cols], positives[:, cols]
        logits = (query @ entities.T) / self.temperature
        neg = masked_logsumexp(logits, ~positives)  # [B]
        row, col = positives.nonzero(as_tuple=True)
        pos = logits[row, col]
        per_pair = torch.logaddexp(neg[row], pos) - pos  # -log(e^l / (e^l + e^neg))
        return _reduce(per_pair, row, query.shape[0], self.weighting)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_negatives={self.num_negatives}, "
            f"weighting={self.weighting!r}"
        )


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
    alive = joint > -math.inf  # in play (not NaN, not a masked entry)
    shift = joint.amax(1, keepdim=True)
    weight = torch.exp(joint - shift).to(torch.float64)  # 0 at -inf
    target = cut.share * weight.sum(1)
    banked = torch.zeros_like(target)  # mass of the candidates above those in play
    threshold = torch.full((b,), math.nan, dtype=joint.dtype, device=joint.device)
    todo = torch.ones(b, dtype=torch.bool, device=joint.device)

    def take(x: Tensor, rows: Tensor) -> Tensor:  # rows of x, without a copy for all rows
        return x if rows.numel() == b else x[rows]

    for level in range(max_levels + 1):
        count = alive.sum(1)
        finish = todo & (count <= max_exact)
        if bool(finish.any()):
            rows = finish.nonzero().squeeze(1)
            k = max(int(count[rows].max()), 1)
            vals = take(joint, rows).masked_fill(~take(alive, rows), -math.inf).topk(k, 1).values
            cum = banked[rows].unsqueeze(1) + torch.exp(vals - shift[rows]).double().cumsum(1)
            reached = cum >= target[rows].unsqueeze(1)
            value = vals.gather(1, reached.long().argmax(1, keepdim=True)).squeeze(1)
            ok = reached.any(1) & torch.isfinite(value)
            threshold[rows[ok]] = value[ok]
            todo[rows] = False
            alive[rows] = False
        if level == max_levels or not bool(todo.any()):
            break
        rows = todo.nonzero().squeeze(1)
        vals, live = take(joint, rows), take(alive, rows)
        low = vals.masked_fill(~live, math.inf).amin(1, keepdim=True)
        high = vals.masked_fill(~live, -math.inf).amax(1, keepdim=True)
        width = (high - low).clamp_min(torch.finfo(vals.dtype).tiny)
        index = ((vals - low) * (bins / width)).floor_().clamp_(0, bins - 1).long()
        index.masked_fill_(~live, bins)  # out of play: a spare last bin
        mass = torch.zeros(len(rows), bins + 1, dtype=torch.float64, device=vals.device)
        mass.scatter_add_(1, index, take(weight, rows))
        from_top = mass[:, :bins].flip(1).cumsum(1) + banked[rows].unsqueeze(1)
        above = (from_top < target[rows].unsqueeze(1)).sum(1)  # bins wholly above the target
        reachable = above < bins
        chosen = torch.where(reachable, bins - 1 - above, bins + 1)  # unreachable: no bin
        previous = from_top.gather(1, (above - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
        banked[rows] = torch.where(above > 0, previous, banked[rows])
        alive[rows] = index == chosen.unsqueeze(1)
        todo[rows[~reachable]] = False  # out of reach by rounding: exact fallback below
    keep_joint = (joint >= threshold.unsqueeze(1)) & (joint > -math.inf)  # NaN: False
    rows = torch.isnan(threshold).nonzero().squeeze(1)
    if rows.numel():
        keep_joint[rows] = cut.select(joint[rows], torch.isfinite(joint[rows]))
    keep = keep_joint[:, :e]
    return keep, (None if extra is None else keep_joint[:, e:])


@dataclass
class LinkSPACLStep:
    """Diagnostics of the last :class:`LinkSPACLLoss` call (batch means)."""

    positives: float
    hard_positives: float
    kept_negatives: float
    kept_generated: float
    d_loss: float | None = None
    g_loss: float | None = None

    def log_dict(self) -> dict[str, float]:
        out = {
            "spacl/positives": self.positives,
            "spacl/hard_positives": self.hard_positives,
            "spacl/kept_negatives": self.kept_negatives,
            "spacl/kept_generated": self.kept_generated,
        }
        if self.d_loss is not None:
            out["spacl/d_loss"] = self.d_loss
        if self.g_loss is not None:
            out["spacl/g_loss"] = self.g_loss
        return out


class LinkSPACLLoss(nn.Module):
    """SPACL for link prediction: hard tails, adversarial and relative-threshold negatives.

    Call: ``loss(query[B, d], entities[E, d], positives[B, E] bool) -> scalar``; after the
    call :attr:`last` holds a :class:`LinkSPACLStep`.  Formula and **Decisions** in the
    module docstring; the cut is :func:`top_share_cut`.

    Args:
        temperature: ``tau``.
        num_positives: ``lambda_P``, hard positives per query (default 2).
        share: ``lambda_Q``, kept share of the negative mass (default 0.95).
        num_adversarial: ``K_adv`` generated negatives per query (default 1; 0: none).
        variant: ``"full"``, ``"no_hard_positive"`` (random positives),
            ``"no_adversarial"`` or ``"no_negative_selection"`` (SPEC §1.6).
        pool_size: most known tails entering farthest-point selection per query.
        mass: ``"exp"`` weights of the cut (SPEC §1.4; the fast cut supports this one).
        positive_mode: ``"log_sum_exp"`` (SPEC §1.5) or ``"pairwise"`` (each hard
            positive against the kept negatives, InfoNCE-style).
        weighting: ``"query"`` (SPEC: mean over anchors) or ``"triple"``.
        adversarial_lr: Adam learning rate of the generator/discriminator game.
        adversarial_hidden: hidden width of ``G`` and ``D`` (default ``2 d``, SPEC §1.3).
        game_batch: the game's round is played on at most this many queries of the
            batch, drawn at random (**Decision**: one ``D`` and one ``G`` step per
            training step as in SPEC §1.3, on a sub-batch to bound its cost; ``None``:
            all); the trained generator then draws the negatives of every query.
        generator: source of random positives and of the game's seed.
    """

    def __init__(
        self,
        temperature: float = 1.0,
        num_positives: int = 2,
        share: float = 0.95,
        num_adversarial: int = 1,
        variant: str = "full",
        *,
        pool_size: int = 32,
        mass: str = "exp",
        positive_mode: str = "log_sum_exp",
        weighting: str = "query",
        adversarial_lr: float = 1e-3,
        adversarial_hidden: int | None = None,
        game_batch: int | None = 256,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if variant not in KG_SPACL_VARIANTS:
            raise ValueError(f"variant must be one of {KG_SPACL_VARIANTS}, got {variant!r}")
        for name, value, low in (
            ("num_positives", num_positives, 1),
            ("num_adversarial", num_adversarial, 0),
            ("pool_size", pool_size, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if pool_size < num_positives:
            raise ValueError(f"pool_size ({pool_size}) must be >= num_positives ({num_positives})")
        if positive_mode not in ("log_sum_exp", "pairwise"):
            raise ValueError(
                f"positive_mode must be 'log_sum_exp' or 'pairwise', got {positive_mode!r}"
            )
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        if mass != "exp":
            raise ValueError(f"mass must be 'exp' for link prediction, got {mass!r}")
        check_in_range(share, "share", 0.0, 1.0, low_inclusive=False)
        self.temperature = check_positive(temperature, "temperature")
        self.num_positives = num_positives
        self.share = float(share)
        self.variant = variant
        self.pool_size = pool_size
        self.positive_mode = positive_mode
        self.weighting = weighting
        self.adversarial_lr = check_positive(adversarial_lr, "adversarial_lr")
        if game_batch is not None and (not isinstance(game_batch, int) or game_batch < 1):
            raise ValueError(f"game_batch must be None or an int >= 1, got {game_batch!r}")
        self.adversarial_hidden = adversarial_hidden
        self.game_batch = game_batch
        self.num_adversarial = 0 if variant == "no_adversarial" else num_adversarial
        effective_share = 1.0 if variant == "no_negative_selection" else self.share
        self.cut = RelativeThresholdNegatives(effective_share, mass, self.temperature)
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.register_module("adversarial", None)
        self.adversarial: AdversarialNegatives | None
        self.last: LinkSPACLStep | None = None

    def _game(self, dim: int) -> AdversarialNegatives:
        if self.adversarial is None:
            seed = int(torch.randint(0, 2**62, (1,), generator=self.rng))
            self.adversarial = AdversarialNegatives(
                dim,
                self.num_adversarial,
                hidden=self.adversarial_hidden,
                lr=self.adversarial_lr,
                generator=torch.Generator().manual_seed(seed),
            )
        return self.adversarial

    @torch.no_grad()
    def hard_positives(self, query: Tensor, entities: Tensor, positives: Tensor) -> Tensor:
        """``BoolTensor[B, E]`` of the hard positives ``P^h`` (module docstring).

        Queries with at most ``lambda_P`` known tails keep all of them; the others
        choose ``lambda_P`` by farthest-point selection (or at random for
        ``variant="no_hard_positive"``) among at most ``pool_size`` of their tails.
        """
        hard = positives.clone()
        rows = (positives.sum(1) > self.num_positives).nonzero().squeeze(1)
        if rows.numel() == 0:
            return hard
        members = positives[rows]
        b = rows.numel()
        k = int(min(self.pool_size, int(members.sum(1).max())))
        pool = random_positives(members, k, self.rng)  # [b, k] a random subset of the tails
        valid = members.gather(1, pool)
        if self.variant == "no_hard_positive":
            scores = torch.rand(pool.shape, generator=self.rng).to(pool.device)
            order = scores.masked_fill(~valid, -1.0).topk(self.num_positives, 1).indices
            chosen = pool.gather(1, order)
        else:
            units = torch.cat((query[rows].unsqueeze(1), entities[pool]), dim=1)
            units = units / units.norm(dim=2, keepdim=True).clamp_min(1e-12)
            dissimilarity = 1.0 - torch.bmm(units, units.transpose(1, 2))  # [b, 1+k, 1+k]
            blocked = torch.cat(
                (torch.zeros(b, 1, dtype=torch.bool, device=valid.device), ~valid), 1
            )
            dissimilarity = dissimilarity.masked_fill(blocked.unsqueeze(1), -math.inf)
            start = torch.zeros(b, dtype=torch.long, device=query.device)
            picks = farthest_point_from_dissimilarity(dissimilarity, start, self.num_positives)
            chosen = pool.gather(1, picks - 1)  # these rows have > lambda_P valid members
        sub = torch.zeros_like(members)
        sub.scatter_(1, chosen, True)
        hard[rows] = sub
        return hard

    def forward(self, query: Tensor, entities: Tensor, positives: Tensor) -> Tensor:
        _check_inputs(query, entities, positives)
        b = positives.shape[0]
        hard = self.hard_positives(query.detach(), entities.detach(), positives)
        logits = (query @ entities.T) / self.temperature

        adv_logits = None
        d_loss = g_loss = None
        if self.num_adversarial > 0:
            game = self._game(query.shape[1])
            ents = entities.detach()
            row, col = hard.nonzero(as_tuple=True)  # row-major: grouped by query
            counts = torch.bincount(row, minlength=b)
            starts = torch.cumsum(counts, 0) - counts
            first = col[starts]  # every query has at least one hard positive
            rank = torch.arange(len(row), device=row.device) - starts[row]
            slots = torch.empty(b, self.num_positives, dtype=torch.long, device=hard.device)
            slots[:] = first.unsqueeze(1)  # rows with fewer hard positives repeat the first
            keep = rank < self.num_positives
            slots[row[keep], rank[keep]] = col[keep]
            real = ents[slots]  # [B, P, d]
            scale = real.norm(dim=2).mean(1, keepdim=True)  # [B, 1]
            unit_real = real / real.norm(dim=2, keepdim=True).clamp_min(1e-12)
            anchors = query.detach()
            unit_anchor = anchors / anchors.norm(dim=1, keepdim=True).clamp_min(1e-12)
            if self.training:
                players = torch.arange(b, device=unit_anchor.device)
                if self.game_batch is not None and b > self.game_batch:
                    players = torch.randperm(b, generator=self.rng)[: self.game_batch]
                    players = players.to(unit_anchor.device)
                generated, dl, gl = game.play(unit_anchor[players], unit_real[players])
                d_loss, g_loss = float(dl), float(gl)
                if players.numel() < b:
                    generated = game.sample(unit_anchor)
            else:
                generated = game.sample(unit_anchor)
            generated = generated.to(query.dtype) * scale.unsqueeze(2)
            adv_logits = torch.einsum("bd,bkd->bk", query, generated) / self.temperature

        masked = logits.detach().masked_fill(positives, -math.inf)
        keep, keep_adv = top_share_cut(
            masked, None if adv_logits is None else adv_logits.detach(), self.cut
        )
        neg = masked_logsumexp(logits, keep)
        if adv_logits is not None:
            neg = torch.logaddexp(neg, masked_logsumexp(adv_logits, keep_adv))
        if self.positive_mode == "log_sum_exp":
            row, col = hard.nonzero(as_tuple=True)  # a handful per query: no [B, E] pass
            pos = _row_logsumexp(logits[row, col], row, b)
            per_query = torch.logaddexp(pos, neg) - pos
            if self.weighting == "query":
                loss = per_query.mean()
            else:
                w = positives.sum(1).to(per_query.dtype)
                loss = (per_query * w).sum() / w.sum()
        else:
            row, col = hard.nonzero(as_tuple=True)
            pos = logits[row, col]
            per_pair = torch.logaddexp(neg[row], pos) - pos
            loss = _reduce(per_pair, row, b, self.weighting)
        self.last = LinkSPACLStep(
            positives=float(positives.sum(1).float().mean()),
            hard_positives=float(hard.sum(1).float().mean()),
            kept_negatives=float(keep.sum(1).float().mean())
            + (0.0 if keep_adv is None else float(keep_adv.sum(1).float().mean())),
            kept_generated=0.0 if keep_adv is None else float(keep_adv.sum(1).float().mean()),
            d_loss=d_loss,
            g_loss=g_loss,
        )
        return loss

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_positives={self.num_positives}, "
            f"share={self.share}, num_adversarial={self.num_adversarial}, "
            f"variant={self.variant!r}, positive_mode={self.positive_mode!r}"
        )


# ----------------------------------------------------------------------------- config


@dataclass
class KGDataConfig:
    name: str = "fb15k-237"
    root: str | None = None  # default: spacl.data.default_data_root()
    unseen: str = "include"  # error | include | drop (valid/test names absent from train)


@dataclass
class KGModelConfig:
    kind: str = "complex"  # complex | distmult
    dim: int = 400
    init_scale: float = 1e-3
    dropout: float = 0.0
    normalize: bool = False


@dataclass
class KGObjectiveConfig:
    name: str = "infonce"  # infonce | spacl
    temperature: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class KGOptimConfig:
    name: str = "adagrad"  # adagrad | adam
    lr: float = 0.1
    n3: float = 0.0  # weight of the N3 regulariser, mean over the step's triples (h, r, t)
    weight_decay: float = 0.0


@dataclass
class KGTrainConfig:
    epochs: int = 100
    minutes: float | None = None  # training-time budget (evaluation excluded)
    batch_size: int = 1000  # queries (or triples, unit=triple) per step
    #: "query": a step holds distinct queries (h, r) with all their known tails as
    #: positives (K-vs-all); "triple": a step holds training triples, each with its one
    #: tail as positive and every other entity in the denominator (1-vs-all, Lacroix et
    #: al. 2018), the N3 term then covering (h, r, t)
    unit: str = "query"
    seed: int = 0
    device: str = "auto"
    threads: int | None = None  # torch.set_num_threads
    log_every: int = 0  # steps between progress lines (0: epoch lines only)


@dataclass
class KGEvalConfig:
    every_epochs: int = 1  # validation (model selection); 0: only at the end
    batch_size: int = 1000
    ties: str = "mean"
    valid_subset: int | None = None  # rank only the first N valid triples (faster checks)


@dataclass
class KGConfig:
    """A link-prediction recipe (``task: kg``)."""

    task: str = "kg"
    name: str | None = None
    out_dir: str | None = None  # writes summary.json there when set
    data: KGDataConfig = field(default_factory=KGDataConfig)
    model: KGModelConfig = field(default_factory=KGModelConfig)
    objective: KGObjectiveConfig = field(default_factory=KGObjectiveConfig)
    optim: KGOptimConfig = field(default_factory=KGOptimConfig)
    train: KGTrainConfig = field(default_factory=KGTrainConfig)
    eval: KGEvalConfig = field(default_factory=KGEvalConfig)


def kg_config(cfg: Any = None, overrides: Sequence[str] = ()) -> DictConfig:
    """Merge ``cfg`` (a mapping, DictConfig or YAML path) and dot-list overrides onto the
    :class:`KGConfig` schema and validate; unknown keys raise ``ValueError`` naming them."""
    schema = OmegaConf.structured(KGConfig)
    try:
        if isinstance(cfg, (str, Path)):
            cfg = OmegaConf.load(Path(cfg))
        merged = OmegaConf.merge(schema, cfg or {}, OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        first = str(getattr(err, "msg", None) or err).splitlines()[0]
        raise ValueError(
            f"kg config key {key!r}: {first}" if key else f"kg config: {first}"
        ) from err
    assert isinstance(merged, DictConfig)
    _validate(merged)
    return merged


def _validate(cfg: DictConfig) -> None:
    def choice(key: str, value: Any, options: Sequence[str]) -> None:
        if value not in options:
            raise ValueError(f"config key {key!r} must be one of {list(options)}, got {value!r}")

    choice("task", cfg.task, ["kg"])
    choice("data.unseen", cfg.data.unseen, UNSEEN_POLICIES)
    choice("model.kind", cfg.model.kind, KG_INTERACTIONS)
    choice("objective.name", cfg.objective.name, KG_OBJECTIVES)
    choice("optim.name", cfg.optim.name, ["adagrad", "adam"])
    choice("eval.ties", cfg.eval.ties, TIE_POLICIES)
    choice("train.unit", cfg.train.unit, ["query", "triple"])
    for key in ("optim.lr", "objective.temperature", "model.init_scale"):
        if not float(OmegaConf.select(cfg, key)) > 0:
            raise ValueError(f"config key {key!r} must be > 0, got {OmegaConf.select(cfg, key)}")
    for key in ("model.dim", "train.batch_size", "eval.batch_size"):
        if int(OmegaConf.select(cfg, key)) < 1:
            raise ValueError(f"config key {key!r} must be >= 1, got {OmegaConf.select(cfg, key)}")
    if cfg.train.minutes is not None and not float(cfg.train.minutes) > 0:
        raise ValueError(f"config key 'train.minutes' must be > 0, got {cfg.train.minutes}")
    if float(cfg.optim.n3) < 0:
        raise ValueError(f"config key 'optim.n3' must be >= 0, got {cfg.optim.n3}")


def build_kg_objective(ocfg: Any, seed: int = 0) -> nn.Module:
    """The loss module of an ``objective`` section (``infonce`` | ``spacl``)."""
    params = dict(ocfg.params or {})
    gen = torch.Generator().manual_seed(seed)
    cls: Callable[..., nn.Module] = LinkInfoNCELoss if ocfg.name == "infonce" else LinkSPACLLoss
    try:
        return cls(temperature=float(ocfg.temperature), generator=gen, **params)
    except TypeError as err:
        raise ValueError(f"config key 'objective.params' ({ocfg.name}): {err}") from err


# ----------------------------------------------------------------------------- training


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _optimizer(cfg: DictConfig, model: nn.Module) -> torch.optim.Optimizer:
    lr, wd = float(cfg.optim.lr), float(cfg.optim.weight_decay)
    if cfg.optim.name == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=lr, weight_decay=wd)
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)


def _evaluate(
    model: LinkPredictor,
    kg: KnowledgeGraph,
    split: str,
    filter_index: Any,
    cfg: DictConfig,
    device: torch.device,
) -> dict[str, float]:
    triples = kg.split(split)
    if split == "valid" and cfg.eval.valid_subset is not None:
        triples = triples[: int(cfg.eval.valid_subset)]
    model.eval()
    metrics = evaluate_link_prediction(
        model,
        triples,
        kg.num_relations,
        filter_index,
        batch_size=int(cfg.eval.batch_size),
        ties=str(cfg.eval.ties),
        device=device,
    )
    model.train()
    return metrics


def train_kg(
    config: Any,
    *,
    overrides: Sequence[str] = (),
    log: Callable[[str], None] | None = print,
    kg: KnowledgeGraph | None = None,
) -> dict[str, Any]:
    """Train a link predictor from a recipe and return its summary.

    The best epoch on filtered validation MRR (evaluated every ``eval.every_epochs``) is
    restored before the test evaluation.  ``train.minutes`` bounds the *training* time
    (validation excluded; the epoch running when the budget is reached finishes).

    Returns a dict with ``test`` and ``valid`` metrics (``mrr``, ``hits@1/3/10``...),
    ``epochs``, ``seconds_per_epoch``, ``train_seconds``, ``best_epoch`` and
    ``history`` (one record per validation).
    """
    cfg = kg_config(config, overrides)
    say = log or (lambda _msg: None)
    if cfg.train.threads:
        torch.set_num_threads(int(cfg.train.threads))
    device = _device(str(cfg.train.device))
    seed = int(cfg.train.seed)
    torch.manual_seed(seed)
    if kg is None:
        kg = load_kg(str(cfg.data.name), cfg.data.root, unseen=str(cfg.data.unseen))
    train_index = kg.train_index()
    filter_index = kg.filter_index()
    per_triple = str(cfg.train.unit) == "triple"
    items = train_index.triples() if per_triple else train_index.query_pairs()
    model = LinkPredictor(
        kg.num_entities,
        2 * kg.num_relations,
        int(cfg.model.dim),
        str(cfg.model.kind),
        init_scale=float(cfg.model.init_scale),
        dropout=float(cfg.model.dropout),
        normalize=bool(cfg.model.normalize),
    ).to(device)
    objective = build_kg_objective(cfg.objective, seed).to(device)
    optimizer = _optimizer(cfg, model)
    n3 = float(cfg.optim.n3)
    batch = int(cfg.train.batch_size)
    budget = None if cfg.train.minutes is None else 60.0 * float(cfg.train.minutes)
    order_gen = torch.Generator().manual_seed(seed)
    say(
        f"kg: {kg.name} E={kg.num_entities} R={kg.num_relations} "
        f"train {'triples' if per_triple else 'queries'}={len(items)} "
        f"objective={cfg.objective.name}"
    )

    history: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, Tensor]] | None = None
    train_seconds = 0.0
    epoch = 0
    epochs_done = 0.0
    steps_per_epoch = math.ceil(len(items) / batch)
    every = int(cfg.eval.every_epochs)
    for epoch in range(1, int(cfg.train.epochs) + 1):
        start = time.perf_counter()
        perm = torch.randperm(len(items), generator=order_gen)
        total, steps = 0.0, 0
        diagnostics: dict[str, float] = {}
        out_of_time = False
        for i in range(0, len(perm), batch):
            chunk = items[perm[i : i + batch]]
            if per_triple:  # 1-vs-all: the triple's own tail is the positive
                row, tail = torch.arange(len(chunk)), chunk[:, 2]
            else:  # K-vs-all: every known tail of the query
                row, tail = train_index.pairs(chunk[:, 0], chunk[:, 1])
            positives = torch.zeros(len(chunk), kg.num_entities, dtype=torch.bool)
            positives[row, tail] = True
            chunk, row, tail = chunk.to(device), row.to(device), tail.to(device)
            h, r = chunk[:, 0], chunk[:, 1]
            loss = objective(model.query(h, r), model.entities(), positives.to(device))
            if n3 > 0:  # per training triple (h, r, t), as in Lacroix et al. (2018)
                loss = loss + n3 * model.n3(h[row], r[row], tail)
            if not bool(torch.isfinite(loss)):
                raise ValueError(f"non-finite training loss at epoch {epoch}, step {steps}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            steps += 1
            last_step = getattr(objective, "last", None)
            if last_step is not None:
                for key, value in last_step.log_dict().items():
                    diagnostics[key] = diagnostics.get(key, 0.0) + value
            log_every = int(cfg.train.log_every)
            if log_every and steps % log_every == 0:
                say(
                    f"  epoch {epoch} step {steps}/{steps_per_epoch}: loss {total / steps:.4f} "
                    f"{(time.perf_counter() - start) / steps:.2f}s/step"
                )
            if budget is not None and train_seconds + time.perf_counter() - start >= budget:
                out_of_time = True
                break
        seconds = time.perf_counter() - start
        train_seconds += seconds
        epochs_done += steps / steps_per_epoch
        last = epoch == int(cfg.train.epochs) or out_of_time
        record: dict[str, Any] = {
            "epoch": epoch,
            "steps": steps,
            "loss": total / max(steps, 1),
            "seconds": seconds,
            **{k: v / max(steps, 1) for k, v in diagnostics.items()},
        }
        if (every and epoch % every == 0) or last:
            valid = _evaluate(model, kg, "valid", filter_index, cfg, device)
            record["valid"] = valid
            if best is None or valid["mrr"] > best[0]:
                best = (valid["mrr"], epoch, copy.deepcopy(model.state_dict()))
            say(
                f"epoch {epoch}: loss {record['loss']:.4f}  {seconds:.1f}s  "
                f"valid MRR {valid['mrr']:.4f} H@10 {valid['hits@10']:.4f}"
            )
        else:
            say(f"epoch {epoch}: loss {record['loss']:.4f}  {seconds:.1f}s")
        history.append(record)
        if out_of_time:
            break

    assert best is not None
    model.load_state_dict(best[2])
    full_cfg = OmegaConf.merge(cfg, {"eval": {"valid_subset": None}})
    assert isinstance(full_cfg, DictConfig)
    valid_full = _evaluate(model, kg, "valid", filter_index, full_cfg, device)
    test = _evaluate(model, kg, "test", filter_index, cfg, device)
    summary: dict[str, Any] = {
        "name": cfg.name or f"{kg.name}-{cfg.objective.name}",
        "objective": str(cfg.objective.name),
        "epochs": epochs_done,
        "best_epoch": best[1],
        "train_seconds": train_seconds,
        "seconds_per_epoch": train_seconds / max(epochs_done, 1e-12),
        "valid": valid_full,
        "test": test,
        "history": history,
        "config": OmegaConf.to_container(cfg),
    }
    say(
        f"test (best epoch {best[1]}): MRR {test['mrr']:.4f} H@1 {test['hits@1']:.4f} "
        f"H@3 {test['hits@3']:.4f} H@10 {test['hits@10']:.4f}"
    )
    if cfg.out_dir:
        out = Path(str(cfg.out_dir)).expanduser()
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
