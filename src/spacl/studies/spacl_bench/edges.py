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

A tie is an equal validation score (:func:`~.methods.same_score`: to ``1e-9``, the same
number of validation examples right).  The selection rule counts nothing else as a tie,
and it stays as it ran; but a score one validation example away is noise of the same
kind, so :func:`near_ties` lists, beside the flags above, every interior choice whose
grid-edge value scores within one validation example (``100 / n_val`` points: the
scores are accuracies in %) of its own score, with both scores; :func:`edge_caveat`
states them in the claim rows too.  ``n_val`` per bench is read from the study's data
notes (:func:`val_examples`) into ``metrics["val_examples"]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from spacl.studies.spacl_bench.methods import (
    BARLOW_LAMBDAS,
    MAX_GROWTH,
    TEMPERATURES,
    same_score,
)

__all__ = [
    "BEST_CHANCE",
    "VAL_EXAMPLES",
    "edge_caveat",
    "edge_of",
    "grid_edges",
    "grown_grids",
    "near_edge",
    "near_ties",
    "one_example",
    "tuned_choices",
    "val_examples",
    "why_not_grown",
]

#: the ``where`` of the best-chance bench's choices
BEST_CHANCE = "best chance"
#: the metrics key of each bench's validation size (:func:`val_examples`)
VAL_EXAMPLES = "val_examples"
#: how each bench's data note opens (``bench -> prefix``), and its validation size there
_NOTE_NAMES = {"mnist5k": "MNIST-5k", "clinc150": "CLINC150", BEST_CHANCE: "best chance"}
_VAL_SIZE = re.compile(r"(\d+) (?:val|dev \(validation\)) /")


def val_examples(notes: Sequence[str]) -> dict[str, int]:
    """Each bench's number of validation examples, read from the study's data notes
    (``"... 3200 train / 800 val / 1000 test"``, CLINC150's ``"2250 dev (validation)"``);
    a bench whose note is missing is left out.

    Example:
        >>> val_examples(["MNIST-5k digits: 3200 train / 800 val / 1000 test"])
        {'mnist5k': 800}
    """
    out: dict[str, int] = {}
    for note in notes:
        for bench, prefix in _NOTE_NAMES.items():
            hit = _VAL_SIZE.search(note)
            if note.startswith(prefix) and hit:
                out[bench] = int(hit.group(1))
    return out


def one_example(m: dict[str, Any], where: str) -> float | None:
    """One validation example of ``where``'s bench in the scores' units (accuracy in %:
    ``100 / n_val``), or ``None`` where the bench's validation size is not known."""
    bench = BEST_CHANCE if where == BEST_CHANCE else where.split()[0]
    n = (m.get(VAL_EXAMPLES) or {}).get(bench)
    return 100.0 / float(n) if n else None


def near_edge(
    chosen: float, tune: dict[str, float], unit: float
) -> list[tuple[str, float, float, float]]:
    """The near-ties of an interior choice ``chosen`` of grid ``tune`` (value as text ->
    validation score): ``(end, edge value, edge score, own score)`` for each end
    (``"lowest"`` / ``"highest"``) whose score is within ``unit`` (one validation example)
    of the choice's own score without being a tie (:func:`edge_of` flags ties and choices
    at an edge; neither is a near-tie).

    Example:
        >>> near_edge(0.2, {"0.05": 80.0, "0.2": 87.9, "0.5": 87.8}, 0.125)
        [('highest', 0.5, 87.8, 87.9)]
        >>> near_edge(0.2, {"0.05": 80.0, "0.2": 87.9, "0.5": 87.7}, 0.125)
        []
    """
    if edge_of(chosen, tune):
        return []
    values = {float(t): float(v) for t, v in tune.items()}
    own = next((v for t, v in values.items() if math.isclose(t, chosen)), None)
    if own is None:
        return []
    grid = sorted(values)
    return [
        (end, edge, values[edge], own)
        for end, edge in (("lowest", grid[0]), ("highest", grid[-1]))
        if abs(own - values[edge]) <= unit + 1e-9
    ]


def near_ties(m: dict[str, Any]) -> list[list[str]]:
    """Every validation choice whose grid-edge value scores within one validation example
    of it (:func:`near_edge`): ``[where, method, chosen, its score, edge, edge value's
    score, difference, one example]`` rows, scores in %."""
    rows = []
    for where, name, chosen, tune in tuned_choices(m):
        unit = one_example(m, where)
        if unit is None:
            continue
        for end, edge, score, own in near_edge(float(chosen), tune, unit):
            rows.append(
                [
                    where,
                    name,
                    f"{chosen:g}",
                    f"{own:.3f}",
                    f"{end} value {edge:g}",
                    f"{score:.3f}",
                    f"{own - score:+.3f}",
                    f"{unit:.3f}",
                ]
            )
    return rows


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
    its grid did not grow past that edge (:func:`why_not_grown`), then one per choice
    within one validation example of an edge value (:func:`near_ties`), or ``""``."""
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
    near = near_ties(m)
    for where, name in choices:
        for _, _, chosen, own, edge, score, _, unit in (
            r for r in near if (r[0], r[1]) == (where, name)
        ):
            text = (
                f"{where} {name}: {chosen} (validation {own}) is within one validation "
                f"example ({unit} points) of the grid's {edge} ({score}), a near-tie the "
                "selection rule does not count as a tie (the grid did not grow)"
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
