"""SPACL-KG's objective on a checked batch (:func:`link_spacl_objective`), and what a call
chose (:class:`LinkSPACLStep`); formula and **Decisions** in the module docstring of
:mod:`spacl.losses.kg`.

The function takes the options record (:class:`~spacl.losses.kg.options.LinkSPACLOptions`),
the state it uses (the cut, the game's players, the random generator), a
:class:`LinkBatch` and the hard positives (:func:`spacl.losses.kg.positives.hard_pairs`),
never the loss object.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from spacl.losses.kernel import masked_logsumexp, segment_logsumexp
from spacl.losses.kg.negatives import generated_logits, kept_negatives
from spacl.losses.kg.options import LinkSPACLOptions
from spacl.losses.kg.terms import KeptLogSumExp, reduce_pairs
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.cut import RelativeThresholdNegatives


@dataclass
class LinkSPACLStep:
    """Diagnostics of the last :class:`~spacl.losses.kg.LinkSPACLLoss` call (batch means)."""

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


@dataclass(frozen=True)
class LinkBatch:
    """A checked batch of link queries: ``query[B, d]``, ``entities[E, d]``,
    ``positives[B, E]`` (bool), the ``(row, col)`` pairs of its known tails and their
    count per query (:func:`spacl.losses.kg.terms.known_pairs`)."""

    query: Tensor
    entities: Tensor
    positives: Tensor
    known: tuple[Tensor, Tensor]
    counts: Tensor


def link_spacl_objective(
    options: LinkSPACLOptions,
    cut: RelativeThresholdNegatives,
    game: AdversarialNegatives | None,
    rng: torch.Generator,
    training: bool,
    batch: LinkBatch,
    hard: tuple[Tensor, Tensor],
) -> tuple[Tensor, LinkSPACLStep]:
    """The loss of ``batch`` (a scalar, unchecked) and its :class:`LinkSPACLStep`.

    ``hard``: the ``(row, col)`` pairs of the hard positives, row-major; ``game``: the
    players (``None`` where ``options`` generate no negatives), which play one round on
    the batch in ``training``; ``cut``: the relative-threshold cut of the candidates.
    """
    query, entities, positives = batch.query, batch.entities, batch.positives
    b = positives.shape[0]
    n_positives = batch.counts
    logits = query @ entities.T
    if options.temperature != 1.0:
        logits = logits / options.temperature

    adv_logits = None
    d_loss = g_loss = None
    row, col = hard
    if game is not None:
        adv_logits, d_loss, g_loss = generated_logits(
            options, game, rng, training, query, entities, positives, hard
        )

    keep, keep_adv, shift, cut_weights = kept_negatives(
        cut, logits.detach(), batch.known, adv_logits
    )
    neg: Tensor = KeptLogSumExp.apply(logits, keep, shift, cut_weights)
    if adv_logits is not None:
        neg = torch.logaddexp(neg, masked_logsumexp(adv_logits, keep_adv))
    if options.positive_mode == "log_sum_exp":
        pos = segment_logsumexp(logits[row, col], row, b)
        per_query = torch.logaddexp(pos, neg) - pos
        if options.weighting == "query":
            loss = per_query.mean()
        else:
            w = n_positives.to(per_query.dtype)
            loss = (per_query * w).sum() / w.sum()
    else:
        pos = logits[row, col]
        per_pair = torch.logaddexp(neg[row], pos) - pos
        loss = reduce_pairs(per_pair, row, b, options.weighting)
    kept_gen = 0 if keep_adv is None else int(torch.count_nonzero(keep_adv))
    step = LinkSPACLStep(
        positives=float(n_positives.float().mean()),
        hard_positives=float(len(row) / b),
        # a float sum: one fast pass (a per-row bool sum costs several on [B, E])
        kept_negatives=(float(keep.sum()) + kept_gen) / b,
        kept_generated=kept_gen / b,
        d_loss=d_loss,
        g_loss=g_loss,
    )
    return loss, step
