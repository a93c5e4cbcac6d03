"""SPACL-KG's negatives: the generated ones (:func:`generated_logits`) and the cut of the
joint candidate row (:func:`kept_negatives`).

The negatives are cut by the one relative-threshold cut,
:meth:`spacl.mining.RelativeThresholdNegatives.select` (``form="float"``: a 0/1 mask in
the logits' dtype, and the cut's ``exp`` weights for
:class:`~spacl.losses.kg.terms.KeptLogSumExp`).  Each function takes the options record
(:class:`~spacl.losses.kg.options.LinkSPACLOptions`), the state it uses (the game, the
cut, the random generator) and tensors, never the loss object.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from spacl.losses.kg.options import LinkSPACLOptions
from spacl.mining.adversarial import AdversarialNegatives
from spacl.mining.cut import RelativeThresholdNegatives


def generated_logits(
    options: LinkSPACLOptions,
    game: AdversarialNegatives,
    rng: torch.Generator,
    training: bool,
    query: Tensor,
    entities: Tensor,
    positives: Tensor,
    pairs: tuple[Tensor, Tensor],
) -> tuple[Tensor, float | None, float | None]:
    """Logits ``[B, K_adv]`` of the generated negatives and the game's losses (``None``
    out of ``training``: no round is played).

    The game's real samples are each query's first ``num_positives`` hard tails (rows
    with fewer repeat the first), on the unit sphere, given to ``D`` once per distinct
    tail with its multiplicity (:meth:`AdversarialNegatives.play_weighted`: the same
    round up to rounding, ``D`` on ~3 instead of ``P`` rows per query); the generated
    points are scaled back to the mean norm of those tails.  ``pairs``: the
    ``(query, tail)`` pairs of the hard positives, row-major.  The round is played on at
    most ``options.game_batch`` queries, drawn from ``rng``.
    """
    b = positives.shape[0]
    p = options.num_positives
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
    if training:
        players = torch.arange(b, device=unit_anchor.device)
        chosen: Tensor | slice = slice(None)
        if options.game_batch is not None and b > options.game_batch:
            players = torch.randperm(b, generator=rng)[: options.game_batch]
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
    return (query.unsqueeze(1) * generated).sum(2) / options.temperature, d_loss, g_loss


@torch.no_grad()
def kept_negatives(
    cut: RelativeThresholdNegatives,
    logits: Tensor,
    known: tuple[Tensor, Tensor],
    adv_logits: Tensor | None,
) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None]:
    """Kept entities ``[B, E]`` (0/1 in the logits' dtype), kept generated negatives
    ``[B, K_adv]`` (bool, or ``None``), the largest candidate logit of each row and,
    under ``mass="exp"``, the cut's weights ``exp(l - shift)`` of the entities
    (``[B, E]``, for :class:`~spacl.losses.kg.terms.KeptLogSumExp`; ``None`` otherwise).
    The shift is the largest candidate of the joint row (a generated negative's if that
    is larger).

    The candidates are every entity that is not a known tail, then the generated
    negatives: one call of the shared ``cut`` on the joint ``[B, E + K_adv]`` row
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
    kept = cut.select(keys, form="float", weights_out=cut_weights, finite=False)
    weights = cut_weights.get("weights")
    if weights is not None:
        row_max, weights = cut_weights["row_max"], weights[:, :e]
    else:
        row_max = keys[:, :e].amax(1)  # of the entity candidates: the logsumexp's shift
        row_max = torch.where(torch.isfinite(row_max), row_max, 0.0)
    if adv_logits is None:
        return kept, None, row_max, weights
    return kept[:, :e], kept[:, e:] > 0, row_max, weights
