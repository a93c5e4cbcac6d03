"""SPACL's ordered option grid at an edge: the generator count ``K_adv`` (issue 39).

Stage 2 of the study (:func:`~.stages._select_option`) sweeps SPACL's options one factor
at a time around its base, at the base's temperature, on seed 0's validation split.  One
factor of :data:`~.methods.FACTORS` is an ordered grid: ``generator``, the number of
adversarial negatives ``K_adv`` in ``0, 1 (the base), 8, 32`` (its ``cond1``, a
conditional discriminator at ``K_adv = 1``, is not on that order and is left out).  Its
best value at the lowest or highest count may not be the method's optimum, as for a
temperature: :func:`option_edges` lists, per bench and setting, the best ``K_adv`` at or
tied with an edge of the counts that ran, with ties broken as the option selection
breaks them (to the base, then to the earlier option), and why the grid did not grow:
option grids are one one-factor round and never grow (only temperature grids do), and
nothing lies below 0 generators.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spacl.studies.spacl_bench.edges import edge_of
from spacl.studies.spacl_bench.methods import BASE, FACTORS, same_score

__all__ = [
    "FACTOR",
    "LABEL",
    "OptionEdge",
    "chosen_counts",
    "generator_curve",
    "option_edge",
    "option_edges",
]

#: the ordered option factor checked (a key of :data:`~.methods.FACTORS`)
FACTOR = "generator"
#: how the report names the grid
LABEL = "SPACL K_adv (generator count)"
#: an option's generator in its name (``"SPACL[..., gen=8]"``)
_GEN = re.compile(r"\bgen=(\w+)")


@dataclass(frozen=True)
class OptionEdge:
    """The best ``K_adv`` of one setting's option grid at (or tied with) an edge.

    ``where`` is ``"<bench> <setting>"``; ``best`` the best count (text, as the options
    name it); ``edge`` as :func:`~.edges.edge_of` says it; ``curve`` the validation score
    per count (ascending); ``chosen`` the option stage 2 chose (its ``change``, e.g.
    ``"gradient=ema"``, or ``"base"``) and ``chosen_score`` its validation score."""

    where: str
    best: str
    edge: str
    curve: dict[str, float]
    chosen: str
    chosen_score: float

    def curve_text(self) -> str:
        """``"0: 87.38, 1: 87.33, 8: 87.47, 32: 87.64"`` (validation %, two decimals)."""
        return ", ".join(f"{k}: {v:.2f}" for k, v in self.curve.items())

    def why(self) -> str:
        """Why no count beyond the edge was tried, and how the edge value compares with
        the option stage 2 chose over every factor."""
        own = self.curve[self.best]
        if self.edge == "lowest" and int(self.best) == 0:
            reason = "0 generators is the smallest possible count: nothing lies beyond"
        else:
            reason = (
                "option grids are one one-factor round at the base's temperature and do "
                "not grow (only temperature grids grow)"
            )
        if self.chosen == f"{FACTOR}={self.best}" or (
            self.chosen == "base" and self.best == BASE.generator
        ):
            return f"{reason}; the chosen option is this count itself ({own:.2f})"
        if same_score(own, self.chosen_score):
            side = "tied with it"
        elif own < self.chosen_score:
            side = "below it"
        else:
            side = "above it"
        return (
            f"{reason}; the chosen option, `{self.chosen}`, scored {self.chosen_score:.2f} "
            f"on validation at the same temperature: K_adv = {self.best} ({own:.2f}) {side}"
        )


def generator_curve(g: Mapping[str, Any]) -> dict[str, float]:
    """One setting's (``metrics["benches"][bench][setting]``) validation score of its
    criterion per ``K_adv`` count (text -> %, ascending by count): the base's from the
    ``"base"`` option, the others from their ``"generator=K"`` options; counts whose
    option did not run, and ``cond1`` (not a count), left out."""
    crit = g["criterion"]
    by_change = {o["change"]: o for o in (g.get("options") or {}).values()}
    curve: dict[str, float] = {}
    for count in FACTORS[FACTOR]:
        if not count.isdigit():
            continue
        option = by_change.get("base" if count == BASE.generator else f"{FACTOR}={count}")
        if option is not None and crit in option.get("val", {}):
            curve[count] = float(option["val"][crit])
    return dict(sorted(curve.items(), key=lambda kv: int(kv[0])))


def option_edge(where: str, g: Mapping[str, Any]) -> OptionEdge | None:
    """The setting's best ``K_adv`` if it lies at or ties an edge of the counts that ran
    (:func:`~.edges.edge_of`), else ``None`` (an interior best, or fewer than three
    counts ran).  Ties are broken as :func:`~.stages._select_option` breaks them: to the
    base, then to the option that comes first in :data:`~.methods.FACTORS`."""
    curve = generator_curve(g)
    if len(curve) < 3:
        return None
    order = [BASE.generator, *(c for c in FACTORS[FACTOR] if c != BASE.generator)]
    best: str | None = None
    for count in (c for c in order if c in curve):  # a tie keeps the earlier option
        if best is None or curve[count] > curve[best]:
            best = count
    assert best is not None
    edge = edge_of(float(best), curve)
    if not edge:
        return None
    options = g.get("options") or {}
    chosen = options.get(g.get("selected_name")) or {}
    return OptionEdge(
        where,
        best,
        edge,
        curve,
        str(chosen.get("change", "not recorded")),
        float((chosen.get("val") or {}).get(g["criterion"], float("nan"))),
    )


def option_edges(m: Mapping[str, Any]) -> tuple[list[OptionEdge], int]:
    """Every bench and setting whose best ``K_adv`` lies at or ties an edge of its option
    grid (:func:`option_edge`), and how many settings ran that grid (three counts or
    more)."""
    found: list[OptionEdge] = []
    checked = 0
    for bench, sets in m["benches"].items():
        for setting, g in sets.items():
            if len(generator_curve(g)) >= 3:
                checked += 1
                hit = option_edge(f"{bench} {setting}", g)
                if hit is not None:
                    found.append(hit)
    return found, checked


def chosen_counts(m: Mapping[str, Any]) -> dict[str, str]:
    """``"<bench> <setting>"`` -> the generator of the option stage 2 chose there (read
    from its name: ``"1"``, ``"cond1"``, ...), settings whose name says none left out."""
    out: dict[str, str] = {}
    for bench, sets in m["benches"].items():
        for setting, g in sets.items():
            hit = _GEN.search(str(g.get("selected_name") or ""))
            if hit:
                out[f"{bench} {setting}"] = hit.group(1)
    return out
