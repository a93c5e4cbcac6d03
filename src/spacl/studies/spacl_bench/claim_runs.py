"""The runs each claim of the SPACL study reads, and the commits they were trained at.

The study's runs span many invocations (one run store, resumed and grown), so the
header's whole-study count (:func:`spacl.studies.spacl_bench.provenance`) says little of
one claim.  :func:`claim_arms` lists, per claim key, the arms it compares and the
recorded commit of every run whose number it reads (each arm's seeds at its chosen
value; the best-chance arms; the open-intent and FB15k-237 seed runs; the diagnostics'
encoders, which record no commit), and :func:`provenance_rows` turns them into the
report's per-claim table: how many of those runs are at a clean commit, on a modified
tree, with no recorded commit, and whether an arm's seeds were trained at more than one
code version (more than one distinct recorded commit).  An arm with no runs says "no
runs read" (never "at one clean commit"), and :func:`missing_runs` names the arms whose
seeds the results name but whose runs the run rows lack (a truncated ``runs``): the
report is then partial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spacl.studies.spacl_bench.claims import BENCH_SETTINGS, PAPER_ABLATION
from spacl.studies.spacl_bench.methods import UNTRAINED
from spacl.studies.study import commit_kind

__all__ = [
    "NO_RUNS",
    "Arm",
    "arm_versions",
    "claim_arms",
    "missing_runs",
    "provenance_rows",
    "read_provenance",
]

Rows = Sequence[Mapping[str, Any]]
#: :func:`arm_versions`' answer for an arm with no runs (never counted clean)
NO_RUNS = "no runs read"


@dataclass(frozen=True)
class Arm:
    """One compared arm of a claim: its label, the recorded commit of each run read
    (``None``: none recorded), every commit its runs' processes recorded (a resumed
    run may span several; by default the runs' own), how many of its runs were
    resumed from a checkpoint with their earlier processes' commits not recorded (the
    run's record holds only its final process's: it may span an unknown commit), and
    the seeds the results name for it whose runs the run rows do not hold (a truncated
    ``runs``: their commits cannot be counted)."""

    label: str
    commits: tuple[str | None, ...]
    spans: tuple[str, ...] = field(default=())
    partly_unrecorded: int = 0
    missing: tuple[int, ...] = field(default=())

    @property
    def versions(self) -> list[str]:
        """The distinct recorded commits of the arm's runs (every process's)."""
        seen = [*self.spans, *(c for c in self.commits if commit_kind(c) != "no_commit")]
        return sorted({str(c) for c in seen})


def _tag(bench: str, setting: str) -> str:
    return f"{bench}_{setting.replace('-', '_')}"


def _rows_of(
    runs: Rows, bench: str, setting: str, name: str, group: Mapping[str, Any] | None
) -> tuple[tuple[str | None, ...], tuple[int, ...]]:
    """The commits of ``name``'s runs at the group's chosen value over its seeds, and
    the group's seeds that no run of ``runs`` holds there (sorted)."""
    if not group or group.get("tau") is None:
        return (), ()
    seeds = set(group.get("seeds") or [])
    tau = float(group["tau"])
    held = [
        r
        for r in runs
        if r.get("bench") == bench
        and r.get("setting") == setting
        and r.get("method") == name
        and r.get("tau") is not None
        and math.isclose(float(r["tau"]), tau)
        and r.get("seed") in seeds
    ]
    missing = sorted(seeds - {r.get("seed") for r in held})
    return tuple(r.get("commit") for r in held), tuple(missing)


def _arm(
    runs: Rows, where: tuple[str, str], label: str, name: str, group: Mapping[str, Any] | None
) -> Arm:
    """The arm ``label``: method ``name``'s runs at ``where`` (bench, setting) read by a
    claim, at the group's chosen value over its seeds (those the runs lack: ``missing``)."""
    commits, missing = _rows_of(runs, *where, name, group)
    return Arm(label, commits, missing=missing)


def _bench_arms(m: Mapping[str, Any], runs: Rows) -> dict[str, list[Arm]]:
    out: dict[str, list[Arm]] = {}
    ablations: dict[str, list[Arm]] = {f"ablation_{k}": [] for k in PAPER_ABLATION}
    ib_h: list[Arm] = []
    for where in BENCH_SETTINGS:
        g = m["benches"].get(where[0], {}).get(where[1])
        if g is None:
            continue
        tag = _tag(*where)
        base = _arm(runs, where, f"{tag} SPACL base", g["base_name"], g["spacl"]["base"])
        selected = _arm(
            runs, where, f"{tag} SPACL selected", g["selected_name"], g["spacl"]["selected"]
        )
        best = g.get("best_baseline")
        if best is not None:
            best_arm = _arm(runs, where, f"{tag} {best}", best, g["baselines"][best])
            out[f"paper_form_beats_best_baseline_{tag}"] = [base, best_arm]
            out[f"spacl_beats_best_baseline_{tag}"] = [selected, best_arm]
        if where[1] == "supervised" and "SupCon" in g["baselines"]:
            supcon = _arm(runs, where, f"{tag} SupCon", "SupCon", g["baselines"]["SupCon"])
            out[f"supervised_spacl_equivalent_to_supcon_{where[0]}"] = [selected, supcon]
        arms = g.get("ablations") or {}
        for short in PAPER_ABLATION:
            if short in arms:
                ablated = _arm(runs, where, f"{tag} {short}", arms[short]["name"], arms[short])
                ablations[f"ablation_{short}"] += [base, ablated]
        if "no_adversarial" in arms and "ib" in arms:
            hi, lo = arms["no_adversarial"], arms["ib"]
            ib_h += [
                _arm(runs, where, f"{tag} IB+H", hi["name"], hi),
                _arm(runs, where, f"{tag} IB", lo["name"], lo),
            ]
    out.update(ablations)
    out["ib_h_beats_ib"] = ib_h
    return out


def _best_chance_arms(m: Mapping[str, Any], runs: Rows) -> dict[str, list[Arm]]:
    """The best-chance claims' arms; the baseline of claim 23 is the better of
    SupCon+queue and HSCL on validation, as the claim's rule picks it."""
    arms = (m.get("best_chance") or {}).get("arms") or {}
    where = ("best_chance", "supervised")

    def arm(name: str) -> Arm:
        return _arm(runs, where, f"best chance {name}", name, arms.get(name))

    ran = {
        n: float(arms[n]["val"]["ncc"]["mean"])
        for n in ("SupCon+queue", "HSCL")
        if arms.get(n, {}).get("seeds")
    }
    better = max(ran, key=lambda n: ran[n]) if ran else "SupCon+queue"
    return {
        "best_chance_cut_helps": [arm("SPACL IB+H"), arm("SPACL IB")],
        "best_chance_full_beats_best_baseline": [arm("SPACL full"), arm(better)],
    }


def _diagnostics_arms(m: Mapping[str, Any]) -> dict[str, list[Arm]]:
    """The diagnostics retrain their encoders (SPACL's base, SimCLR) per seed and record
    no commit: every such run counts as one with no recorded commit."""
    seeds = len((m.get("diagnostics") or {}).get("seeds") or [])
    arms = [Arm(f"diagnostics {who} encoders", (None,) * seeds) for who in ("SPACL", "NT-Xent")]
    keys = (
        "lemma_2_4_negatives_saturate",
        "corollary_2_2_spacl_certifies_more",
        "theorem_2_1_spacl_farther_from_collapse",
    )
    return {key: arms for key in keys} if seeds else {}


def _store_arms(m: Mapping[str, Any]) -> dict[str, list[Arm]]:
    """The open-intent and FB15k-237 seed runs, from the commits their metrics record
    (``commits`` per ratio / per method; results written before they did lack them)."""
    out: dict[str, list[Arm]] = {}
    oi = (m.get("open_intent") or {}).get("commits") or {}
    for ratio, commits in oi.items():
        key = f"stackoverflow_f1_open_{int(100 * float(ratio))}"
        out[key] = [Arm(f"SPACL StackOverflow {ratio}", tuple(commits))]
    kg = m.get("kg_seeds") or {}
    per_method = kg.get("run_commits") or {}
    spans = kg.get("run_spans") or {}
    unrecorded = [str(run).split(" ")[0] for run in kg.get("resumed_unrecorded") or ()]

    def arm(method: str, label: str) -> Arm:
        commits = tuple(per_method.get(method) or ())
        return Arm(label, commits, tuple(spans.get(method) or ()), unrecorded.count(method))

    if per_method:
        out["fb15k237_mrr_beats_best_baseline"] = [
            arm("spacl", "FB15k-237 SPACL"),
            arm("infonce", "FB15k-237 InfoNCE"),
        ]
        out["fb15k237_cut_helps"] = [
            arm("spacl", "FB15k-237 SPACL"),
            arm("spacl_nocut", "FB15k-237 SPACL without the cut"),
        ]
    return out


def claim_arms(m: Mapping[str, Any], runs: Rows) -> dict[str, list[Arm]]:
    """Claim key -> the arms it compares, each with the commits of the runs it reads
    (``runs``: ``results.json["runs"]``); a claim whose runs are not known here (results
    written before they were recorded) is left out."""
    return {
        **_bench_arms(m, runs),
        **_best_chance_arms(m, runs),
        **_diagnostics_arms(m),
        **_store_arms(m),
    }


def arm_versions(arm: Arm) -> tuple[str, str]:
    """Whether the arm's seeds were trained at more than one code version, and why:
    ``("yes", "k commits")``, ``("no", "")`` (one clean commit), ``("not known",
    ...)`` (runs with no recorded commit, or one modified tree: its changes are not
    recorded), or ``("no runs read", "")`` (an arm with no runs: nothing to call
    clean)."""
    if not arm.commits:
        return NO_RUNS, ""
    versions = arm.versions
    missing = sum(commit_kind(c) == "no_commit" for c in arm.commits)
    partly = (
        f"{arm.partly_unrecorded} of {len(arm.commits)} run(s) resumed, their earlier "
        "processes' commits not recorded"
        if arm.partly_unrecorded
        else ""
    )
    if len(versions) > 1:
        return "yes", f"{len(versions)} commits" + (f"; {partly}" if partly else "")
    if missing:
        return "not known", f"{missing} of {len(arm.commits)} run(s) with no commit"
    if partly:
        return "not known", partly
    if versions and commit_kind(versions[0]) == "modified_tree":
        return "not known", "one modified tree"
    return "no", ""


def provenance_rows(claims: Sequence[Any], m: Mapping[str, Any], runs: Rows) -> list[list[str]]:
    """One row per claim of ``claims`` (the report's, numbered in order): ``[claim number,
    key, runs read, clean, modified tree, no commit, seeds at more than one code
    version]``; the last names the arms whose seeds span several commits (yes) and those
    it cannot tell (not known), or says ``no`` for every arm.  (The first header is not
    ``#``: a ``#`` table is a claims table to the documents' number checks.)"""
    arms = claim_arms(m, runs)
    rows = []
    for i, claim in enumerate(claims, 1):
        compared = arms.get(claim.key)
        if not compared:
            rows.append([str(i), f"`{claim.key}`", "0", "—", "—", "—", "no runs read"])
            continue
        unique: dict[str, Arm] = {a.label: a for a in compared}
        commits = [c for a in unique.values() for c in a.commits]
        kinds = [commit_kind(c) for c in commits]
        said = {label: arm_versions(a) for label, a in unique.items()}
        parts = [
            f"{'**yes**' if answer == 'yes' else answer}: "
            + ", ".join(f"{k} ({why})" if why else k for k, (a, why) in said.items() if a == answer)
            for answer in ("yes", "not known", NO_RUNS)
            if any(a == answer for a, _ in said.values())
        ]
        gaps = [_missing_text(a) for a in unique.values() if a.missing]
        if gaps:
            parts.append("**seeds without runs** (not counted): " + ", ".join(gaps))
        cell = "; ".join(parts) or f"no: each of its {len(unique)} arm(s) at one clean commit"
        rows.append(
            [
                str(i),
                f"`{claim.key}`",
                f"{len(commits)} ({len(unique)} arm(s))",
                str(kinds.count("clean")),
                str(kinds.count("modified_tree")),
                str(kinds.count("no_commit")),
                cell,
            ]
        )
    return rows


def _missing_text(arm: Arm) -> str:
    """``"label (seeds 3, 4: named by the results, not in the runs)"``."""
    seeds = ", ".join(str(x) for x in arm.missing)
    return f"{arm.label} (seed(s) {seeds}: named by the results, not in the runs)"


def missing_runs(m: Mapping[str, Any], runs: Rows) -> list[str]:
    """Every compared arm (:func:`claim_arms`) whose seeds the results name but whose
    runs ``runs`` does not hold (a truncated or partial ``results.json["runs"]``), said
    as ``"label (seed(s) ...: named by the results, not in the runs)"``, each arm once;
    ``[]`` when every named seed's run is there."""
    seen: dict[str, str] = {}
    for arms in claim_arms(m, runs).values():
        for arm in arms:
            if arm.missing and arm.label not in seen:
                seen[arm.label] = _missing_text(arm)
    return list(seen.values())


def read_provenance(
    m: Mapping[str, Any], runs: Rows
) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """The commits of every trained run the report reads: the run store's (``runs``:
    ``results.json["runs"]``, the :data:`~.methods.UNTRAINED` rows left out), the
    diagnostics' encoders (retrained per seed, no commit recorded), the FB15k-237 seed
    runs and the open-intent runs (their stores' own records).  Returns the counts
    (``runs``, ``clean``, ``modified_tree``, ``no_commit``) and, per source, its label and
    how many runs it holds (sources with none left out)."""
    counts = {"runs": 0, "clean": 0, "modified_tree": 0, "no_commit": 0}
    parts: list[tuple[str, int]] = []

    def add(label: str, commits: Sequence[str | None]) -> None:
        if not commits:
            return
        parts.append((label, len(commits)))
        for commit in commits:
            counts["runs"] += 1
            counts[commit_kind(commit)] += 1

    add(
        "in the run store (results.json's `runs`)",
        [r.get("commit") for r in runs if r.get("method") not in UNTRAINED],
    )
    seeds = len((m.get("diagnostics") or {}).get("seeds") or [])
    add(
        f"diagnostics encoders (SPACL and NT-Xent, {seeds} seeds each, retrained without "
        "recording a commit)",
        [None] * (2 * seeds),
    )
    kg = (m.get("kg_seeds") or {}).get("run_commits") or {}
    add("FB15k-237 seed runs (kg_seeds.jsonl)", [c for cs in kg.values() for c in cs])
    oi = (m.get("open_intent") or {}).get("commits") or {}
    add(
        "open-intent runs (SPACL at StackOverflow, open_intent/runs.jsonl)",
        [c for cs in oi.values() for c in cs],
    )
    return counts, parts
