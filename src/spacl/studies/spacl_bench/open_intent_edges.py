"""SPACL's StackOverflow runs (claims 24, 25): choices at an edge, and what was not tuned.

The open-intent benchmark (``docs/results/open_intent``) trains SPACL's form in two
stages, each with dev early stopping (patience 10, the earliest best epoch kept): the
representation on its known-class dev score, then ADB's boundary on its dev macro-F1.  A
stage that keeps its **first** epoch chose the lower edge of its epoch range (the dev
score never rose after one epoch: the schedule, not the method, may bound it; a smaller
learning rate, for one, might have let it rise); one that keeps its last allowed epoch
(``max_epochs``) chose the upper edge.  Neither edge can grow as a temperature grid does,
so each is flagged: in the claim rows (:func:`open_intent_caveat`) and in the report's
'Choices at a grid edge' (:func:`open_intent_edge_rows`), from the stored runs
(:func:`spacl.studies.spacl_bench.open_intent_metrics`).

The same caveat names the two choices no one made for SPACL: its temperature (one value
in every run, never varied) and its learning rate (the dev selection,
``selection_runs.jsonl``, tuned it for other methods only; SPACL got the one chosen there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "STAGES",
    "open_intent_caveat",
    "open_intent_edge_rows",
    "open_intent_edge_stamp",
    "open_intent_edges",
    "untuned_text",
]

#: the two early-stopped stages of a run, and what each stops on
STAGES = {
    "representation": "the representation (known-class dev score)",
    "boundary": "the boundary (dev macro-F1)",
}


def _ratios(oi: Mapping[str, Any]) -> list[str]:
    return sorted((oi.get("epochs") or {}), key=float)


def _pct(ratio: str) -> str:
    return f"{round(100 * float(ratio))}%"


def open_intent_edges(oi: Mapping[str, Any], ratio: str, stage: str) -> list[dict[str, Any]]:
    """The runs at ``ratio`` whose ``stage`` chose an edge of its epoch range: each as
    ``{"seed", "chosen", "run", "ties", "edge"}`` (``edge``: ``"first"`` or ``"last"``)."""
    found = []
    for run in (oi.get("epochs") or {}).get(ratio) or []:
        got = run.get(stage) or {}
        chosen, most = got.get("chosen"), got.get("max_epochs")
        edge = "first" if chosen == 1 else "last" if most and chosen == most else ""
        if edge:
            found.append({"seed": run["seed"], **got, "edge": edge})
    return found


def _upper_tie(run: Mapping[str, Any]) -> str:
    """Where a first-epoch choice ties the last epoch the run ran (``run``) on dev: the
    note that it ties the upper edge too (``", the last epoch it ran: it ties the upper
    edge too"``), else ``""``."""
    ties = [int(t) for t in run.get("ties") or []]
    last = run.get("run")
    if run.get("edge") != "first" or last is None or int(last) not in ties:
        return ""
    return (
        f" (epoch {int(last)} is the last epoch it ran: the choice ties the upper edge "
        "of its epochs too, so dev scored the stage's end no lower than its start)"
    )


def _run_text(run: Mapping[str, Any]) -> str:
    """``"s0: tied on dev with epoch 11 (epoch 11 is the last epoch it ran: ...)"``, or
    ``"s4"``."""
    ties = [str(t) for t in run.get("ties") or []]
    if not ties:
        return f"s{run['seed']}"
    return (
        f"s{run['seed']}: tied on dev with epoch{'s' if len(ties) > 1 else ''} "
        f"{', '.join(ties)}{_upper_tie(run)}"
    )


def _fmt(values: Sequence[float]) -> str:
    return " / ".join(f"{v:g}" for v in values) or "not recorded"


def untuned_text(oi: Mapping[str, Any], ratio: str) -> str:
    """What was not tuned for SPACL at ``ratio``: its temperature (the values its runs
    used; one, never varied) and its learning rate (against what the dev selection
    tuned, and for which methods)."""
    schedule = oi.get("schedule") or {}
    taus = (schedule.get("temperature") or {}).get(ratio) or []
    lrs = (schedule.get("lr") or {}).get(ratio) or []
    sel = oi.get("lr_selection") or {}
    chosen = sel.get("chosen") or {}
    if len(taus) == 1:
        tau = f"its temperature is {taus[0]:g} in every run, never varied"
    else:
        tau = f"its temperature: {_fmt(taus)} across its runs (no selection chose it)"
    if not sel:
        lr = f"its lr {_fmt(lrs)} (no dev selection of the lr is stored)"
    else:
        tuned = ", ".join(sel.get("methods") or [])
        grid = sel.get("lrs") or []
        span = f"{min(grid):g}-{max(grid):g}" if grid else "no values"
        same = lrs == [chosen.get("lr")]
        lr = (
            f"its lr {_fmt(lrs)} is "
            + (
                f"the one the dev selection chose for {chosen.get('method')}"
                if same
                else f"not the dev selection's ({chosen.get('lr'):g}, for {chosen.get('method')})"
            )
            + f" (open_intent/selection_runs.jsonl: {tuned} over lr {span}, "
            f"{sel.get('draws', 0)} draws each; SPACL not among them)"
        )
    return f"{tau}; {lr}: neither tuned for SPACL"


def open_intent_caveat(oi: Mapping[str, Any], ratio: str) -> str:
    """The caveat of claim row ``ratio`` (``"0.25"``): the temperature and learning rate
    not tuned for SPACL (:func:`untuned_text`), and per stage how many runs chose an edge
    of the epoch range, naming them; ``""`` where the runs record no epochs."""
    runs = (oi.get("epochs") or {}).get(ratio) or []
    if not runs:
        return ""
    parts = []
    for stage in STAGES:
        for edge, words in (
            ("first", f"the {stage}'s epoch 1, the lower edge of its epoch range"),
            ("last", f"the {stage}'s last allowed epoch, the upper edge of its epoch range"),
        ):
            hit = [r for r in open_intent_edges(oi, ratio, stage) if r["edge"] == edge]
            if hit or (stage == "representation" and edge == "first"):
                named = f" ({'; '.join(_run_text(r) for r in hit)})" if hit else ""
                parts.append(f"{len(hit)} of {len(runs)} runs kept {words}{named}")
    return (
        f" Caveat (not tuned; epoch edge): {untuned_text(oi, ratio)}; "
        + "; ".join(parts)
        + " (dev early stopping keeps the earliest best epoch; flagged in 'Choices at a "
        "grid edge')."
    )


def open_intent_edge_rows(oi: Mapping[str, Any]) -> list[list[str]]:
    """One row per run and stage at an edge of its epoch range: run, stage, epochs run,
    the epoch chosen, the edge (and the epochs whose dev score ties it)."""
    rows = []
    for ratio in _ratios(oi):
        for stage, what in STAGES.items():
            for r in open_intent_edges(oi, ratio, stage):
                ties = r.get("ties") or []
                edge = (
                    "**lower edge**: its first epoch"
                    if r["edge"] == "first"
                    else "**upper edge**: its last allowed epoch"
                ) + (
                    f" (tied with epoch(s) {', '.join(map(str, ties))}){_upper_tie(r)}"
                    if ties
                    else ""
                )
                rows.append(
                    [
                        f"StackOverflow {_pct(ratio)} s{r['seed']}",
                        what,
                        str(r["run"]),
                        str(r["chosen"]),
                        edge,
                    ]
                )
    return rows


def open_intent_edge_stamp(oi: Mapping[str, Any]) -> str:
    """The header's clause: per stage, how many StackOverflow runs chose an edge of their
    epoch range; ``""`` where the runs record no epochs."""
    total = sum(len(v) for v in (oi.get("epochs") or {}).values())
    if not total:
        return ""
    first, *rest = (
        sum(len(open_intent_edges(oi, ratio, stage)) for ratio in _ratios(oi)) for stage in STAGES
    )
    others = " and ".join(
        f"{n} the {stage}'s" for n, stage in zip(rest, list(STAGES)[1:], strict=True)
    )
    return (
        f"; StackOverflow (claims 24-25): of {total} SPACL runs, {first} kept the "
        f"representation's epoch at an edge of its epoch range and {others}, SPACL's "
        "temperature and lr not tuned for it"
    )
