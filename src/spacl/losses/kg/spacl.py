"""SPACL for link prediction (:class:`LinkSPACLLoss`, SPEC §1.2-1.5); formula and
**Decisions** in the module docstring of :mod:`spacl.losses.kg`.

The negatives are cut by the one relative-threshold cut,
:meth:`spacl.mining.RelativeThresholdNegatives.select` (``form="float"``: a 0/1 mask in
the logits' dtype, and the cut's ``exp`` weights for :class:`KeptLogSumExp`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from spacl._validation import check_choice, check_flag, check_in_range, check_int, check_positive
from spacl.losses.game import LazyGameModule
from spacl.losses.kernel import masked_logsumexp, segment_logsumexp
from spacl.losses.kg.terms import (
    WEIGHTINGS,
    KeptLogSumExp,
    check_link_inputs,
    check_link_loss,
    known_pairs,
    reduce_pairs,
)
from spacl.losses.spacl.options import VARIANT_PARTS
from spacl.mining.adversarial import AdversarialNegatives, PlayerOptions, game_players
from spacl.mining.cut import MASSES, RelativeThresholdNegatives
from spacl.mining.positives import farthest_point_from_dissimilarity, random_positives

#: the variants of :data:`spacl.losses.spacl.options.VARIANT_PARTS` that a link query has
#: (no second view to anchor: the dynamic anchor's ablations do not apply)
KG_SPACL_VARIANTS = ("full", "no_hard_positive", "no_adversarial", "no_negative_selection")


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


class LinkSPACLLoss(LazyGameModule):
    """SPACL for link prediction: hard tails, adversarial and relative-threshold negatives.

    Call: ``loss(query[B, d], entities[E, d], positives[B, E] bool) -> scalar``; after the
    call :attr:`last` holds a :class:`LinkSPACLStep`.  Formula and **Decisions** in the
    module docstring; the cut is :meth:`RelativeThresholdNegatives.select`, the one
    implementation :class:`~spacl.losses.SPACLLoss` calls too (same tie rule: the
    lowest-indexed of the candidates tied at the threshold are kept first).

    Args:
        temperature: ``tau``.
        num_positives: ``lambda_P``, hard positives per query (default 2).
        share: ``lambda_Q``, kept share of the negative mass (default 0.95).
        num_adversarial: ``K_adv`` generated negatives per query (default 1; 0: none).
        variant: ``"full"``, ``"no_hard_positive"`` (random positives),
            ``"no_adversarial"`` or ``"no_negative_selection"`` (SPEC §1.6).
        pool_size: most known tails entering farthest-point selection per query.
        mass: reading of the cut (SPEC §1.4): ``"exp"`` (default here: the measured KG
            recipe), ``"similarity"`` (the paper's formula on raw scores) or
            ``"linear"``.
        positive_mode: ``"log_sum_exp"`` (SPEC §1.5) or ``"pairwise"`` (each hard
            positive against the kept negatives, InfoNCE-style).
        weighting: ``"query"`` (SPEC: mean over anchors) or ``"triple"``.
        adversarial_lr: Adam learning rate of the generator/discriminator game.
        adversarial_hidden: hidden width of ``G`` and ``D`` (default ``2 d``, SPEC §1.3).
        game_batch: the game's round is played on at most this many queries of the
            batch, drawn at random (**Decision**: one ``D`` and one ``G`` step per
            training step as in SPEC §1.3, on a sub-batch to bound its cost; ``None``:
            all); the trained generator then draws the negatives of every query.
        compiled_cut: run the cut's long-row passes through ``torch.compile``
            (:class:`~spacl.mining.RelativeThresholdNegatives` ``compiled=True``): the
            same negatives, a faster step on CPU after a one-off compilation.
        generator: source of random positives and of the game's seed.

    Example:
        >>> import torch
        >>> from spacl.losses.kg import LinkSPACLLoss
        >>> query, entities = torch.randn(4, 16, requires_grad=True), torch.randn(10, 16)
        >>> positives = torch.zeros(4, 10, dtype=torch.bool)
        >>> positives[:, :3] = True                    # three known tails per query
        >>> link_spacl = LinkSPACLLoss(temperature=0.5, num_positives=2)
        >>> loss = link_spacl(query, entities, positives)  # builds and plays its own G/D game
        >>> loss.backward()
        >>> link_spacl.last.hard_positives             # lambda_P hard tails of each query
        2.0
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
        compiled_cut: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        check_choice(variant, "variant", KG_SPACL_VARIANTS)
        for name, value, low in (
            ("num_positives", num_positives, 1),
            ("num_adversarial", num_adversarial, 0),
            ("pool_size", pool_size, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if pool_size < num_positives:
            raise ValueError(f"pool_size ({pool_size}) must be >= num_positives ({num_positives})")
        check_choice(positive_mode, "positive_mode", ("log_sum_exp", "pairwise"))
        check_choice(weighting, "weighting", WEIGHTINGS)
        check_choice(mass, "mass", MASSES)
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
        self.adversarial_hidden = (
            None
            if adversarial_hidden is None
            else check_int(adversarial_hidden, "adversarial_hidden", low=1)
        )
        self.game_batch = game_batch
        # the parts the variant keeps, as the image loss reads them (SPACLOptions)
        self.parts = VARIANT_PARTS[variant]
        self.num_adversarial = num_adversarial if self.parts.adversarial else 0
        effective_share = self.share if self.parts.negative_selection else 1.0
        self.cut = RelativeThresholdNegatives(
            effective_share,
            mass,
            self.temperature,
            compiled=check_flag(compiled_cut, "compiled_cut"),
        )
        self.rng = generator if generator is not None else torch.Generator().manual_seed(0)
        self.register_module("adversarial", None)
        self.adversarial: AdversarialNegatives | None
        self.last: LinkSPACLStep | None = None

    def player_options(self) -> PlayerOptions:
        """How the game's players are built, as a frozen record: ``K_adv``
        (:attr:`num_adversarial`), the hidden width and the learning rate."""
        return PlayerOptions(self.num_adversarial, self.adversarial_hidden, self.adversarial_lr)

    def _game(self, dim: int) -> AdversarialNegatives:
        """The game's players, built at the first call from :meth:`player_options` (a
        frozen record) and :attr:`rng`, data handed to
        :func:`~spacl.mining.adversarial.game_players`, which never reads the loss."""
        game = game_players(self.adversarial, dim, self.player_options(), self.rng)
        assert game is not None  # called only when K_adv > 0
        if self.adversarial is None:
            self.adversarial = game  # built at this first call
        return game

    @torch.no_grad()
    def hard_positives(
        self, query: Tensor, entities: Tensor, positives: Tensor, counts: Tensor | None = None
    ) -> Tensor:
        """``BoolTensor[B, E]`` of the hard positives ``P^h`` (module docstring).

        Queries with at most ``lambda_P`` known tails keep all of them; the others
        choose ``lambda_P`` by farthest-point selection (or at random for
        ``variant="no_hard_positive"``) among at most ``pool_size`` of their tails.
        ``counts``: ``positives.sum(1)`` if the caller has it.
        """
        hard = positives.clone()
        picked = self._subsample(query, entities, positives, counts)
        if picked is None:
            return hard
        rows, chosen = picked
        sub = torch.zeros(rows.numel(), positives.shape[1], dtype=torch.bool, device=rows.device)
        sub.scatter_(1, chosen, True)
        hard[rows] = sub
        return hard

    @torch.no_grad()
    def _hard_pairs(
        self,
        query: Tensor,
        entities: Tensor,
        positives: Tensor,
        known: tuple[Tensor, Tensor],
        counts: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """``(row, col)`` of :meth:`hard_positives` in row-major order, from the known
        pairs (``positives.nonzero()``) without a ``[B, E]`` pass over the hard mask."""
        picked = self._subsample(query, entities, positives, counts)
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

    def _subsample(
        self, query: Tensor, entities: Tensor, positives: Tensor, counts: Tensor | None
    ) -> tuple[Tensor, Tensor] | None:
        """``(rows, chosen[rows, lambda_P])``: the queries with more than ``lambda_P``
        known tails and the tails they keep (``None`` if there is none)."""
        if counts is None:
            counts = positives.sum(1)
        rows = (counts > self.num_positives).nonzero().squeeze(1)
        if rows.numel() == 0:
            return None
        members = positives[rows]
        b = rows.numel()
        k = int(min(self.pool_size, int(members.sum(1).max())))
        pool = random_positives(members, k, self.rng)  # [b, k] a random subset of the tails
        valid = members.gather(1, pool)
        if not self.parts.hard_positives:
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
        return rows, chosen

    def _adversarial_logits(
        self, query: Tensor, entities: Tensor, positives: Tensor, pairs: tuple[Tensor, Tensor]
    ) -> tuple[Tensor, float | None, float | None]:
        """Logits ``[B, K_adv]`` of the generated negatives and the game's losses.

        The game's real samples are each query's first ``num_positives`` hard tails (rows
        with fewer repeat the first), on the unit sphere, given to ``D`` once per distinct
        tail with its multiplicity (:meth:`AdversarialNegatives.play_weighted`: the same
        round up to rounding, ``D`` on ~3 instead of ``P`` rows per query); the generated
        points are scaled back to the mean norm of those tails.  ``pairs``: the
        ``(query, tail)`` pairs of the hard positives, row-major.
        """
        b = positives.shape[0]
        p = self.num_positives
        game = self._game(query.shape[1])
        ents = entities.detach()
        row, col = pairs  # hard.nonzero(): row-major, grouped by query
        counts = torch.bincount(row, minlength=b)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(len(row), device=row.device) - starts[row]
        # the [B, P] slots hold each query's first P hard tails, rows with fewer repeat
        # the first (every query has one): each distinct tail once, with its multiplicity
        weight = (rank < p).to(ents.dtype)
        weight[starts] += (p - counts.clamp_max(p)).to(ents.dtype)
        keep = weight > 0
        real_row, real_col, weight = row[keep], col[keep], weight[keep]
        real = ents[real_col]  # [N, d], N = sum_b min(|P^h_b|, P)
        norms = real.norm(dim=1)
        scale = real.new_zeros(b).index_add_(0, real_row, norms * weight) / p  # [B]
        unit_real = real / norms.unsqueeze(1).clamp_min(1e-12)
        anchors = query.detach()
        unit_anchor = anchors / anchors.norm(dim=1, keepdim=True).clamp_min(1e-12)
        d_loss = g_loss = None
        if self.training:
            players = torch.arange(b, device=unit_anchor.device)
            chosen: Tensor | slice = slice(None)
            if self.game_batch is not None and b > self.game_batch:
                players = torch.randperm(b, generator=self.rng)[: self.game_batch]
                players = players.to(unit_anchor.device)
                playing = torch.zeros(b, dtype=torch.bool, device=row.device)
                playing[players] = True
                chosen = playing[real_row]
            generated, dl, gl = game.play_weighted(
                unit_anchor[players], unit_real[chosen], weight[chosen]
            )
            d_loss, g_loss = float(dl), float(gl)
            if players.numel() < b:
                generated = game.sample(unit_anchor)
        else:
            generated = game.sample(unit_anchor)
        generated = generated.to(query.dtype) * scale.view(b, 1, 1)
        return (query.unsqueeze(1) * generated).sum(2) / self.temperature, d_loss, g_loss

    @torch.no_grad()
    def _cut(
        self, logits: Tensor, known: tuple[Tensor, Tensor], adv_logits: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None]:
        """Kept entities ``[B, E]`` (0/1 in the logits' dtype), kept generated negatives
        ``[B, K_adv]`` (bool, or ``None``), the largest candidate logit of each row and,
        under ``mass="exp"``, the cut's weights ``exp(l - shift)`` of the entities
        (``[B, E]``, for :class:`KeptLogSumExp`; ``None`` otherwise).  The shift is the
        largest candidate of the joint row (a generated negative's if that is larger).

        The candidates are every entity that is not a known tail, then the generated
        negatives: one call of the shared cut on the joint ``[B, E + K_adv]`` row
        (:meth:`RelativeThresholdNegatives.select`, ``form="float"``).  ``known``: the
        ``(row, entity)`` pairs of the known tails, set to ``-inf`` in a copy of the
        logits (a few entries: no ``[B, E]`` boolean pass).
        """
        b, e = logits.shape
        k_adv = 0 if adv_logits is None else adv_logits.shape[1]
        keys = logits.new_empty(b, e + k_adv)
        keys[:, :e] = logits
        if adv_logits is not None:
            keys[:, e:] = adv_logits.detach()
        keys.index_put_(known, keys.new_full((), -math.inf))
        cut_weights: dict[str, Tensor] = {}
        kept = self.cut.select(keys, form="float", weights_out=cut_weights, finite=False)
        weights = cut_weights.get("weights")
        if weights is not None:
            row_max, weights = cut_weights["row_max"], weights[:, :e]
        else:
            row_max = keys[:, :e].amax(1)  # of the entity candidates: the logsumexp's shift
            row_max = torch.where(torch.isfinite(row_max), row_max, 0.0)
        if adv_logits is None:
            return kept, None, row_max, weights
        return kept[:, :e], kept[:, e:] > 0, row_max, weights

    def forward(
        self,
        query: Tensor,
        entities: Tensor,
        positives: Tensor,
        known: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """The loss; ``known``: the ``(row, col)`` pairs of ``positives``' ``True``
        entries, if the caller has them (saves a ``[B, E]`` scan)."""
        query, entities = check_link_inputs(query, entities, positives)
        b = positives.shape[0]
        known_row, known_col, n_positives = known_pairs(positives, known)  # a few per query
        known = (known_row, known_col)
        logits = query @ entities.T
        if self.temperature != 1.0:
            logits = logits / self.temperature

        adv_logits = None
        d_loss = g_loss = None
        row, col = self._hard_pairs(
            query.detach(), entities.detach(), positives, known, n_positives
        )
        if self.num_adversarial > 0:
            adv_logits, d_loss, g_loss = self._adversarial_logits(
                query, entities, positives, (row, col)
            )

        keep, keep_adv, shift, cut_weights = self._cut(logits.detach(), known, adv_logits)
        neg: Tensor = KeptLogSumExp.apply(logits, keep, shift, cut_weights)
        if adv_logits is not None:
            neg = torch.logaddexp(neg, masked_logsumexp(adv_logits, keep_adv))
        if self.positive_mode == "log_sum_exp":
            pos = segment_logsumexp(logits[row, col], row, b)
            per_query = torch.logaddexp(pos, neg) - pos
            if self.weighting == "query":
                loss = per_query.mean()
            else:
                w = n_positives.to(per_query.dtype)
                loss = (per_query * w).sum() / w.sum()
        else:
            pos = logits[row, col]
            per_pair = torch.logaddexp(neg[row], pos) - pos
            loss = reduce_pairs(per_pair, row, b, self.weighting)
        kept_gen = 0 if keep_adv is None else int(torch.count_nonzero(keep_adv))
        self.last = LinkSPACLStep(
            positives=float(n_positives.float().mean()),
            hard_positives=float(len(row) / b),
            # a float sum: one fast pass (a per-row bool sum costs several on [B, E])
            kept_negatives=(float(keep.sum()) + kept_gen) / b,
            kept_generated=kept_gen / b,
            d_loss=d_loss,
            g_loss=g_loss,
        )
        return check_link_loss(loss, query, entities, type(self).__name__)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, num_positives={self.num_positives}, "
            f"share={self.share}, num_adversarial={self.num_adversarial}, "
            f"variant={self.variant!r}, positive_mode={self.positive_mode!r}"
        )
