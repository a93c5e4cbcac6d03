"""FB15k-237 seed runs whose validation-chosen epoch sits at the budget's edge (claims 26, 27).

A KG seed run (``benchmarks/kg_seeds.py``) trains for a fixed wall-clock budget and keeps
the epoch of best filtered validation MRR.  The engine's loop
(:class:`spacl.engine.loop.TrainLoop`) validates every ``eval.every_epochs`` epochs (1 in
the FB15k-237 recipes) **and** the epoch the budget cuts short, which it closes as an
epoch of its own (``close_partial_epoch``); the best is the earliest highest score.  The
store records two counts of a run (``tasks/kg/train.py``, ``_kg_summary``):

- ``epochs``: the training steps done over the steps of one epoch (``KGSteps.end_epoch``
  adds ``steps / steps_per_epoch`` as each epoch closes, the cut-short one included), so
  ``25.33`` is 25 whole epochs and a third of the 26th;
- ``best_epoch``: the 1-based number of the chosen epoch, counting the cut-short one.

So a run's last validated epoch is ``epochs`` rounded up (:func:`last_validated_epoch`),
and ``best_epoch`` may exceed ``epochs``: ``best_epoch = 26`` with ``epochs = 25.33`` is
the cut-short 26th epoch, the state after 25.33 epochs of steps, not a wrong record.  A
resumed run keeps both right: its checkpoint holds the loop's position, its step count
in the running epoch and the best epoch, and the body's ``epochs_done`` of the closed
epochs (the steps after the last checkpoint are redone, counted once).

A choice at the last validated epoch is at the edge of what the budget let the run see
(validation may still have been rising): :func:`budget_edge_text` flags it in the claim
rows, with the count per arm, and the edges section lists every run
(:func:`budget_edge_rows`).  A choice at the last *whole* epoch, with only the cut-short
part of the next one after it, is noted apart: that later state validated no higher.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KG_ARMS",
    "EpochChoice",
    "beyond_epochs",
    "budget_edge_rows",
    "budget_edge_stamp",
    "budget_edge_text",
    "epoch_choices",
    "last_validated_epoch",
]

#: the FB15k-237 seed runs' methods, as the claim rows name them
KG_ARMS = {"spacl": "SPACL", "infonce": "InfoNCE", "spacl_nocut": "SPACL without the cut"}
#: an ``epochs`` within this of a whole number ended at an epoch's end (floating sums)
_WHOLE = 1e-6


def last_validated_epoch(epochs: float) -> int:
    """The number (1-based) of a run's last validated epoch from the ``epochs`` it trained
    (steps done / steps per epoch): the epoch the budget cut short is validated too, so
    it is ``epochs`` rounded up.

    Example:
        >>> last_validated_epoch(25.332), last_validated_epoch(16.0), last_validated_epoch(0.1)
        (26, 16, 1)
    """
    return max(1, math.ceil(epochs - _WHOLE))


@dataclass(frozen=True)
class EpochChoice:
    """One seed run's epochs: ``epochs`` trained, ``best`` the validation-chosen epoch."""

    method: str
    seed: int
    epochs: float
    best: int

    @property
    def last(self) -> int:
        """The last validated epoch (:func:`last_validated_epoch`)."""
        return last_validated_epoch(self.epochs)

    @property
    def cut_short(self) -> bool:
        """Whether the last validated epoch is a part of an epoch (the budget's cut)."""
        return self.epochs < self.last - _WHOLE

    @property
    def at_edge(self) -> bool:
        """The choice is the last validated epoch: the budget may bound it."""
        return self.best >= self.last

    @property
    def last_whole(self) -> bool:
        """The choice is the last whole epoch, only the cut-short part of the next after it
        (which validated no higher: the best is the earliest highest score)."""
        return not self.at_edge and self.cut_short and self.best == self.last - 1

    def where(self) -> str:
        """The chosen epoch in words: ``"epoch 26, cut short by the budget after 25.33
        epochs"`` (the cut-short last one), else ``"epoch 16 of 16.94 trained"``."""
        if self.at_edge and self.cut_short:
            return f"epoch {self.best}, cut short by the budget after {self.epochs:.2f} epochs"
        return f"epoch {self.best} of {self.epochs:.2f} trained"


def epoch_choices(kg: Mapping[str, Any]) -> dict[str, list[EpochChoice]]:
    """Each method's runs (``kg``: :func:`spacl.studies.spacl_bench.kg_seed_metrics`), in
    seed order; a method whose store rows lack ``best_epoch`` has none."""
    out: dict[str, list[EpochChoice]] = {}
    for method in KG_ARMS:
        epochs = (kg.get("epochs") or {}).get(method) or []
        best = (kg.get("best_epoch") or {}).get(method) or []
        seeds = (kg.get("seeds") or {}).get(method) or []
        if epochs and len(best) == len(epochs) == len(seeds):
            out[method] = [
                EpochChoice(method, int(s), float(e), int(b))
                for s, e, b in zip(seeds, epochs, best, strict=True)
            ]
    return out


def budget_edge_text(kg: Mapping[str, Any], methods: Sequence[str]) -> str:
    """The sentence of a claim row comparing ``methods``: per arm, how many runs chose
    their last validated epoch (which, with its epoch), the runs at their last whole
    epoch before the budget's cut, and the caveat where any run is at the edge; ``""``
    where no compared run records its epochs."""
    choices = epoch_choices(kg)
    arms = [(KG_ARMS[m], choices[m]) for m in methods if choices.get(m)]
    if not arms:
        return ""
    counts = []
    for name, runs in arms:
        edge = [r for r in runs if r.at_edge]
        detail = "; ".join(f"s{r.seed}: {r.where()}" for r in edge)
        counts.append(f"{name} {len(edge)} of {len(runs)}" + (f" ({detail})" if edge else ""))
    text = (
        " Epoch chosen on validation MRR (every epoch validated, the one the budget cuts "
        "short included): at the run's last validated epoch " + ", ".join(counts)
    )
    whole = [f"{n} s{r.seed} ({r.where()})" for n, runs in arms for r in runs if r.last_whole]
    if whole:
        text += (
            "; at the last whole epoch, only the budget's cut-short part of the next after "
            "it, which validated no higher: " + ", ".join(whole)
        )
    text += "."
    flagged = [
        f"{k} of {len(runs)} runs of {n}" for n, runs in arms if (k := sum(r.at_edge for r in runs))
    ]
    if flagged:
        text += (
            " Caveat (budget edge): "
            + "; ".join(flagged)
            + " chose their last validated epoch: the budget, not the method, may bound them."
        )
    return text


def beyond_epochs(kg: Mapping[str, Any]) -> list[str]:
    """The runs whose chosen epoch's number exceeds the epochs they trained (the cut-short
    last epoch chosen): ``"SPACL without the cut s1 (26 of 25.33)"``."""
    return [
        f"{KG_ARMS[r.method]} s{r.seed} ({r.best} of {r.epochs:.2f})"
        for runs in epoch_choices(kg).values()
        for r in runs
        if r.best > r.epochs
    ]


def budget_edge_rows(kg: Mapping[str, Any]) -> list[list[str]]:
    """One row per seed run: run, epochs trained, the chosen epoch, the last validated
    epoch, and whether the choice is at the budget's edge (or the last whole epoch)."""
    rows = []
    for method, runs in epoch_choices(kg).items():
        for r in runs:
            flag = (
                "**at the edge**: its last validated epoch"
                if r.at_edge
                else "its last whole epoch; the cut-short part after it validated no higher"
                if r.last_whole
                else "inside"
            )
            last = f"{r.last}" + (" (cut short)" if r.cut_short else "")
            rows.append(
                [f"{KG_ARMS[method]} s{r.seed}", f"{r.epochs:.2f}", str(r.best), last, flag]
            )
    return rows


def budget_edge_stamp(kg: Mapping[str, Any]) -> str:
    """The header's clause: how many seed runs chose their last validated epoch; ``""``
    where no run records its epochs."""
    runs = [r for rs in epoch_choices(kg).values() for r in rs]
    if not runs:
        return ""
    edge = [f"{KG_ARMS[r.method]} s{r.seed}" for r in runs if r.at_edge]
    return (
        f"; FB15k-237: {len(edge)} of {len(runs)} seed runs chose their last validated epoch "
        "(the budget's edge" + (f": {', '.join(edge)}" if edge else "") + ")"
    )
