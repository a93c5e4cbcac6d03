"""The loss of every SPACL anchor row: the compact path where it applies, else the dense one.

Shared by the one-anchor (:mod:`spacl.losses.spacl.one_anchor`) and every-view
(:mod:`spacl.losses.spacl.every_view`) forms: both build a
:class:`~spacl.losses.spacl.rows.Rows` and call :func:`row_objective`.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from spacl.losses.spacl.compact import compact_loss
from spacl.losses.spacl.dense import dense_objective
from spacl.losses.spacl.options import SPACLOptions
from spacl.losses.spacl.rows import Rows
from spacl.losses.spacl.step import SPACLStep
from spacl.mining.cut import RelativeThresholdNegatives


def row_objective(
    options: SPACLOptions,
    cut: RelativeThresholdNegatives,
    rows: Rows,
    in_batch: Callable[[], tuple[Tensor, Tensor, Tensor, Tensor]],
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The loss of every anchor row by the compact path where it applies, else the dense
    one (``in_batch()`` gives the dense path's in-batch logits and masks).

    Returns the per-anchor losses, the candidate and kept negatives per row and the
    generated negatives kept per row.
    """
    compact = compact_loss(options, cut, rows)
    if isinstance(compact, tuple):
        return compact
    per_anchor, candidates, kept, kept_gen = dense_objective(
        options, cut, rows, in_batch(), compact
    )
    return per_anchor, candidates.sum(1), kept.sum(1), kept_gen


def objective_and_step(
    options: SPACLOptions,
    cut: RelativeThresholdNegatives,
    rows: Rows,
    in_batch: Callable[[], tuple[Tensor, Tensor, Tensor, Tensor]],
    anchor: Tensor,
    positives: Tensor,
    game_losses: tuple[Tensor | None, Tensor | None],
) -> tuple[Tensor, SPACLStep]:
    """:func:`row_objective`'s per-anchor losses, and what the pass chose
    (:class:`~spacl.losses.spacl.step.SPACLStep`: the anchors' views, the ``positives``,
    the candidate and kept negatives, the game's ``(d_loss, g_loss)``)."""
    per_anchor, n_candidates, n_kept, kept_gen = row_objective(options, cut, rows, in_batch)
    step = SPACLStep(
        anchor=anchor.detach(),
        positives=positives.detach(),
        candidate_negatives=n_candidates,
        kept_negatives=n_kept,
        kept_generated=kept_gen,
        d_loss=game_losses[0],
        g_loss=game_losses[1],
    )
    return per_anchor, step
