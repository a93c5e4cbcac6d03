"""Validation choices at (or tied with) an edge of their tuning grid (issue 39).

A value chosen on validation (a temperature; Barlow Twins' ``lambda_offdiag``) at the
lowest or highest value of its grid may not be the method's optimum: a value beyond the
grid might score higher.  The same holds for a choice that **ties** the score at an
edge: :func:`~.protocol.select_temperature` breaks ties toward the lower value, so a
tie with the top of the grid chooses an interior value and hides that the curve is
still at its best at the edge.  The benches' grids grow past such an edge, either kind,
up to :data:`~.methods.MAX_GROWTH` values per end (:func:`~.methods.grow_grid`); what
is left at or tied with an edge is listed by :func:`grid_edges` over every choice of
the study (every baseline, SPACL's base and validation-chosen setting, every ablation
arm, the best-chance bench's arms, whose pre-registered grid does not grow), and
:func:`edge_caveat` is the caveat a claim row states for the choices it compares, with
why the grid did not grow further.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from spacl.studies.spacl_bench.methods import (
    BARLOW_LAMBDAS,
    MAX_GROWTH,
    TEMPERATURES,
    same_score,
)

__all__ = [
    "BEST_CHANCE",
    "edge_caveat",
    "edge_of",
    "grid_edges",
    "grown_grids",
    "tuned_choices",
    "why_not_grown",
]

#: the ``where`` of the best-chance bench's choices
BEST_CHANCE = "best chance"


def edge_of(chosen: float, tune: dict[str, float]) -> str:
    """Where ``chosen`` sits in its grid ``tune`` (value as text -> validation score):
    ``"lowest"`` / ``"highest"`` (at an edge), ``"ties the highest (0.5)"`` / ``"ties
    the lowest (0.05)"`` (inside, with the edge's score equal to its own), or ``""``
    (inside, strictly above both edges' scores, or a one-value grid).

    Example:
        >>> edge_of(0.2, {"0.05": 80.0, "0.2": 87.9, "0.5": 87.9})
        'ties the highest (0.5)'
        >>> edge_of(0.2, {"0.05": 80.0, "0.2": 87.9, "0.5": 87.0})
        ''
    """
    values = {float(t): float(v) for t, v in tune.items()}
    grid = sorted(values)
    if len(grid) < 2:
        return ""
    lo, hi = grid[0], grid[-1]
    if math.isclose(chosen, lo):
        return "lowest"
    if math.isclose(chosen, hi):
        return "highest"
    own = next((v for t, v in values.items() if math.isclose(t, chosen)), None)
    if own is None:
        return ""
    if same_score(own, values[hi]):
        return f"ties the highest ({hi:g})"
    if same_score(own, values[lo]):
        return f"ties the lowest ({lo:g})"
    return ""


def tuned_choices(m: dict[str, Any]) -> list[tuple[str, str, float, dict[str, float]]]:
    """Every validation choice of the study: ``(where, method, chosen, tuning)`` with
    ``where`` ``"<bench> <setting>"`` or :data:`BEST_CHANCE`."""
    tuned: list[tuple[str, str, float, dict[str, float]]] = []
    for bench, sets in m["benches"].items():
        for setting, g in sets.items():
            for name, tune in g["tuning"].items():
                if tune and name in g["temperatures"]:
                    tuned.append((f"{bench} {setting}", name, g["temperatures"][name], tune))
    bc = m.get("best_chance") or {}
    for name, tune in (bc.get("tuning") or {}).items():
        if tune and name in bc.get("temperatures", {}):
            tuned.append((BEST_CHANCE, name, bc["temperatures"][name], tune))
    return tuned


def grid_edges(m: dict[str, Any]) -> tuple[list[list[str]], int]:
    """Every validation choice at the lowest or highest value of its grid, or tied with
    the score there (``[where, method, chosen, edge, validation per value]`` rows,
    :func:`edge_of`), and how many choices were made in all."""
    tuned = tuned_choices(m)
    rows = []
    for where, name, chosen, tune in tuned:
        edge = edge_of(float(chosen), tune)
        if edge:
            curve = ", ".join(f"{t}: {v:.1f}" for t, v in tune.items())
            rows.append([where, name, f"{chosen:g}", edge, curve])
    return rows, len(tuned)


def grown_grids(m: dict[str, Any]) -> int:
    """How many tuning grids of the benches grew beyond their method's own grid
    (:func:`~.methods.grow_grid`): values outside the temperatures and Barlow Twins'
    lambdas."""
    own = {f"{t:g}" for t in (*TEMPERATURES, *BARLOW_LAMBDAS)}
    return sum(
        1
        for sets in m["benches"].values()
        for g in sets.values()
        for tune in g["tuning"].values()
        if set(tune) - own
    )


def edge_caveat(m: dict[str, Any], choices: Iterable[tuple[str, str]]) -> str:
    """The caveat of a claim row comparing ``choices`` (``(where, method)`` pairs): one
    clause per choice at or tied with an edge of its grid (:func:`edge_of`), with why
    its grid did not grow past that edge (:func:`why_not_grown`), or ``""``."""
    flagged = {(where, name): row for where, name, *_, row in _flag_rows(m)}
    seen: list[str] = []
    for where, name in choices:
        row = flagged.get((where, name))
        if row is None:
            continue
        chosen, edge, why = row
        if edge in ("lowest", "highest"):
            text = f"{where} {name}: {chosen} is the {edge} value of its grid ({why})"
        else:
            _, _, end, value = edge.split()
            text = (
                f"{where} {name}: {chosen} ties the validation score of the {end} grid "
                f"value {value} ({why})"
            )
        if text not in seen:
            seen.append(text)
    if not seen:
        return ""
    return (
        " Caveat (grid edge): "
        + "; ".join(seen)
        + ": a value beyond the grid might score higher on validation."
    )


def why_not_grown(where: str, name: str, edge: str, tune: dict[str, float]) -> str:
    """Why a choice flagged at ``edge`` (:func:`edge_of`) of its grid ``tune`` was not
    given room beyond it: the best-chance bench's pre-registered grid, the growth cap
    (:data:`~.methods.MAX_GROWTH` values beyond the method's own grid at that end), or
    the grown value's run not in the store."""
    if where == BEST_CHANCE:
        return "the pre-registered grid, not grown"
    own = BARLOW_LAMBDAS if name.startswith("Barlow") else TEMPERATURES
    grid = [float(t) for t in tune]
    if "lowest" in edge:
        beyond = sum(1 for t in grid if t < min(own) and not math.isclose(t, min(own)))
    else:
        beyond = sum(1 for t in grid if t > max(own) and not math.isclose(t, max(own)))
    if beyond >= MAX_GROWTH:
        return f"the growth cap, {MAX_GROWTH} values past the method's own grid"
    return "the grown value's run not in the store"


def _flag_rows(m: dict[str, Any]) -> list[tuple[str, str, tuple[str, str, str]]]:
    flagged = []
    for where, name, chosen, tune in tuned_choices(m):
        edge = edge_of(float(chosen), tune)
        if edge:
            flagged.append(
                (where, name, (f"{chosen:g}", edge, why_not_grown(where, name, edge, tune)))
            )
    return flagged
