"""The best-chance addendum's outcome, read where the pre-registered grid's edges are flagged.

The best-chance bench's pre-registered grid does not grow, so five of its choices sit at
an edge (claims 22 and 23 read them).  The addendum (:func:`~.best_chance.run_grown`,
issue 39, not pre-registered) grows every arm's grid by the benches' rule and applies the
pre-registered decision rule to the grown choices.  A caveat that says "a value beyond the
grid might score higher" while the report has already grown every grid says less than the
report knows: :func:`addendum_choice` states where each arm's choice went on its grown
grid, :func:`grown_outcome` what the claim's rule says there, and
:func:`best_chance_caveat` is the claim rows' caveat built from both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spacl.studies.spacl_bench.best_chance import MIN_GAP
from spacl.studies.spacl_bench.edges import (
    BEST_CHANCE,
    edge_of,
    near_edge,
    one_example,
    why_not_grown,
)
from spacl.studies.stats import welch
from spacl.studies.verdicts import compare

__all__ = [
    "BASELINES",
    "addendum_choice",
    "best_chance_caveat",
    "better_on_val",
    "grown_edge",
    "grown_outcome",
]

#: the baselines claim 23 picks the better of on validation
BASELINES = ("SupCon+queue", "HSCL")


def better_on_val(arms: Mapping[str, Any], names: tuple[str, ...] = BASELINES) -> str:
    """The arm of ``names`` with the best mean validation NCC over its seeds (the first
    name where none ran)."""
    score = {n: float(arms[n]["val"]["ncc"]["mean"]) for n in names if arms.get(n, {}).get("seeds")}
    return max(score, key=lambda n: score[n]) if score else names[0]


def _ncc(arms: Mapping[str, Any], name: str) -> list[float]:
    return [float(v) for v in arms.get(name, {}).get("test", {}).get("ncc", {}).get("values", [])]


def grown_outcome(arms: Mapping[str, Any], hi: str, lo: str, seeds: int) -> str:
    """The pre-registered decision rule (:func:`compare`, min_gap :data:`MIN_GAP`) on
    ``arms``' test NCC: ``"**opposite**: SPACL full - SupCon+queue = -11.08 points, p =
    0.000277 (tau 0.5 vs 0.05)"``, or the runs missing."""
    a, b = _ncc(arms, hi), _ncc(arms, lo)
    if len(a) < seeds or len(b) < seeds:
        return f"runs missing ({hi} {len(a)}, {lo} {len(b)} of {seeds} seeds)"
    v = compare(a, b, min_gap=MIN_GAP, names=(hi, lo))
    _, p = welch(a, b)
    gap = sum(a) / len(a) - sum(b) / len(b)
    taus = f"tau {arms[hi]['tau']:g} vs {arms[lo]['tau']:g}"
    return f"**{v.verdict}**: {hi} - {lo} = {gap:+.2f} points, p = {p:.3g} ({taus})"


def grown_edge(name: str, tau: float, tune: dict[str, float], unit: float | None = None) -> str:
    """``inside``, or the edge a grown choice still sits at or ties, and why it stayed;
    an inside choice within one validation example (``unit`` points) of an edge value's
    score is a near-tie, flagged by :func:`~.edges.near_edge`'s rule (the benches')."""
    edge = edge_of(tau, tune)
    if edge:
        return f"{edge} ({why_not_grown('addendum', name, edge, tune)})"
    near = [] if unit is None else near_edge(tau, tune, unit)
    if not near:
        return "inside"
    return "inside, **near-tie**: " + "; ".join(
        f"within one validation example ({unit:.3f} points) of the {end} value {value:g} "
        f"({own:.3f} vs {score:.3f}): the grid did not grow past it"
        for end, value, score, own in near
    )


def addendum_choice(m: Mapping[str, Any], name: str) -> str:
    """Where arm ``name``'s choice went on the addendum's grown grid: ``"the addendum
    grows it (0.05-3.12): 0.5 -> 1.25, inside"``; ``""`` where the addendum did not run
    the arm."""
    bc = m.get("best_chance") or {}
    grown = bc.get("grown") or {}
    g, tune = (grown.get("arms") or {}).get(name), (grown.get("tuning") or {}).get(name)
    if not g or not tune or g.get("tau") is None:
        return ""
    pre = (bc.get("arms") or {}).get(name, {}).get("tau")
    values = sorted(float(t) for t in tune)
    where = grown_edge(name, float(g["tau"]), tune, one_example(dict(m), BEST_CHANCE))
    moved = f"{pre:g} -> {g['tau']:g}" if pre is not None else f"{g['tau']:g}"
    return f"the addendum grows it ({values[0]:g}-{values[-1]:g}): {moved}, " + where.replace(
        "**", ""
    )


def _baseline_text(m: Mapping[str, Any], lo: str | None) -> str:
    """For claim 23 (``lo`` None: the better baseline on validation): which baseline the
    grown grids' validation picks, with both baselines' validation NCC there."""
    if lo is not None:
        return ""
    grown = ((m.get("best_chance") or {}).get("grown") or {}).get("arms") or {}
    ran = [n for n in BASELINES if grown.get(n, {}).get("seeds")]
    if len(ran) < 2:
        return ""
    picked = better_on_val(grown)
    scores = ", ".join(f"{n} {float(grown[n]['val']['ncc']['mean']):.1f}" for n in ran)
    return f"; on the grown grids validation still picks {picked} (validation NCC {scores})"


def best_chance_caveat(
    m: Mapping[str, Any], names: Iterable[str], hi: str, lo: str | None, claim: int
) -> str:
    """The caveat of best-chance claim ``claim`` comparing ``hi`` with ``lo`` (``None``:
    the better baseline on validation), for its arms ``names``: each choice at an edge of
    the pre-registered grid, where the addendum's grown grid moved it
    (:func:`addendum_choice`), and the claim's rule on the grown choices
    (:func:`grown_outcome`) beside the pre-registered verdict; ``""`` where no compared
    choice is at an edge.  Without the addendum's runs, the choices at an edge and that a
    value beyond the grid might score higher."""
    bc = m.get("best_chance") or {}
    flagged = []
    for name in names:
        tune = (bc.get("tuning") or {}).get(name) or {}
        tau = (bc.get("temperatures") or {}).get(name)
        edge = edge_of(float(tau), tune) if tune and tau is not None else ""
        if not edge:
            continue
        at = (
            f"the {edge} value of its pre-registered grid"
            if edge in ("lowest", "highest")
            else f"{edge.replace('ties', 'tied with')} of its pre-registered grid"
        )
        grown = addendum_choice(m, name)
        flagged.append(f"best chance {name}: {tau:g} is {at}" + (f"; {grown}" if grown else ""))
    if not flagged:
        return ""
    grown_arms = (bc.get("grown") or {}).get("arms") or {}
    if not grown_arms:
        return (
            " Caveat (grid edge): "
            + "; ".join(flagged)
            + ": the pre-registered grid does not grow, and a value beyond it might score "
            "higher on validation (no grown grid in these results)."
        )
    seeds = len(bc.get("seeds") or []) or 5
    outcome = grown_outcome(grown_arms, hi, lo or better_on_val(grown_arms), seeds)
    return (
        " Caveat (grid edge): "
        + "; ".join(flagged)
        + _baseline_text(m, lo)
        + f".  This claim keeps its pre-registered grid; the addendum (grown grids, not "
        f"pre-registered) applies claim {claim}'s rule to the grown choices: "
        + outcome.replace("**", "")
        + "."
    )
