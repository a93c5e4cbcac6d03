"""The fair SPACL study (issue 11): benches with headroom, one protocol for every method.

``python -m spacl.studies.spacl_bench --bench clinc150 --out DIR`` trains every stage
of :mod:`.stages` on one bench (resumable: finished runs live in ``DIR/runs/<bench>.jsonl``,
the same store ``spacl reproduce spacl --out DIR`` reads and completes) and writes
``DIR/runs/choices-<bench>.json``; :func:`run` (``spacl reproduce spacl``) runs every
bench and writes the report.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spacl.engine.device import set_threads
from spacl.studies.report import git_commit
from spacl.studies.spacl_bench.benches import BENCHES, load_bench
from spacl.studies.spacl_bench.claims import CLAIM_KEYS, claim_specs
from spacl.studies.spacl_bench.collect import collect_setting
from spacl.studies.spacl_bench.diagnostics import run_diagnostics
from spacl.studies.spacl_bench.edges import VAL_EXAMPLES, val_examples
from spacl.studies.spacl_bench.methods import (
    BARLOW_LAMBDAS,
    BASE,
    FACTORS,
    TEMPERATURES,
    UNTRAINED,
    spacl_method,
)
from spacl.studies.spacl_bench.protocol import RunKey, RunStore
from spacl.studies.spacl_bench.report import plots, sections, untimed_elsewhere
from spacl.studies.spacl_bench.stages import run_setting, summary
from spacl.studies.study import (
    RUNS_STAMP,
    StudyRun,
    commit_kind,
    committed_results,
    finish_study,
    stored_results,
)
from spacl.studies.verdicts import NOT_RUN

__all__ = ["CLAIM_KEYS", "CRITERIA", "METRIC_KEYS", "PROJ_DIMS", "SEEDS", "run", "run_bench"]

#: validation criterion per bench, fixed before any run: the paper's linear probe for
#: images; nearest class centre for CLINC150 (the issue names it; the frozen MiniLM
#: embeddings already give a strong linear probe)
CRITERIA: dict[str, str] = {"mnist5k": "linear", "clinc150": "ncc"}
PROJ_DIMS: dict[str, int] = {"mnist5k": 64, "clinc150": 128}
#: the most seeds a bench trains; the count used follows the project's rule from the
#: measured run time (5 where a run costs under a minute, else 3: stages.seed_count)
SEEDS: dict[str, tuple[int, ...]] = {"mnist5k": (0, 1, 2, 3, 4), "clinc150": (0, 1, 2, 3, 4)}


def run_bench(
    name: str,
    out_dir: str | Path,
    settings: Sequence[str] | None = None,
    *,
    smoke: bool = False,
) -> dict[str, Any]:
    """Every setting of bench ``name``; returns and writes the choices made.

    ``smoke=True`` trains one epoch with seeds 0 and 1: a check that everything runs,
    whose numbers support no verdict.
    """
    bench = load_bench(name)
    seeds = SEEDS[name]
    if smoke:
        bench.epochs, seeds = 1, (0, 1)
    out = Path(out_dir)
    store = RunStore(out / "runs" / f"{name}.jsonl")
    chosen: dict[str, Any] = {"_meta": {"commit": git_commit(), "smoke": smoke, "seeds": seeds}}
    for setting in settings or bench.settings:
        res = run_setting(bench, setting, store, seeds, PROJ_DIMS[name], CRITERIA[name])
        chosen[setting] = summary(res)
        (out / "runs" / f"choices-{name}.json").write_text(json.dumps(chosen, indent=2))
    return chosen


TITLE = "SPACL under one fair protocol: benches with headroom, every option, the paper's baselines"
METRIC_KEYS = ("benches", "diagnostics", "best_chance", "compute", "timing")


def _seeds_for(name: str, seeds: Sequence[int], quick: bool) -> list[int]:
    """Quick: the given seeds; else at least 5 candidates (the rule picks 5 or 3)."""
    seeds = [int(s) for s in seeds]
    if quick or len(seeds) >= 5:
        return seeds
    return seeds + [s for s in range(max(seeds) + 1, max(seeds) + 6)][: 5 - len(seeds)]


def _config(seeds: Sequence[int], quick: bool) -> dict[str, Any]:
    return {
        "study": {
            "criteria": CRITERIA,
            "proj_dims": PROJ_DIMS,
            "factors": FACTORS,
            "base": asdict(BASE),
            "temperatures": TEMPERATURES,
            "barlow_lambdas": BARLOW_LAMBDAS,
            "seeds": {n: _seeds_for(n, seeds, quick) for n in BENCHES},
        }
    }


def _run_bench(
    study: StudyRun, name: str, out: Path, seeds: Sequence[int], quick: bool, train: bool = True
) -> dict[str, Any]:
    """Every setting of bench ``name`` (resumable through its run store); its metrics."""
    bench = load_bench(name, quick)
    study.report.data_notes.append(bench.description)
    store = RunStore(out / "runs" / f"{name}.jsonl")
    bench_seeds = _seeds_for(name, seeds, quick)
    metrics: dict[str, Any] = {}
    for setting in bench.settings:
        res = run_setting(
            bench,
            setting,
            store,
            bench_seeds,
            PROJ_DIMS[name],
            CRITERIA[name],
            quick=quick,
            train=train,
        )
        metrics[setting] = collect_setting(store, res, PROJ_DIMS[name])
        study.report.runs += _run_rows(store.select(setting=setting))
    temps = metrics.get("self-supervised", {}).get("temperatures", {})
    base = spacl_method(BASE, "self-supervised", PROJ_DIMS[name]).name
    if name == "mnist5k" and base in temps and "SimCLR" in temps:
        cache = out / "runs" / "diagnostics.json"
        used = metrics["self-supervised"]["seeds"]
        metrics["_diagnostics"] = run_diagnostics(
            bench, temps, used, PROJ_DIMS[name], cache, train=train
        )
    return metrics


RUN_FIELDS = (
    "bench",
    "setting",
    "method",
    "tau",
    "seed",
    "val",
    "test",
    "seconds",
    "cpu_seconds",
    "commit",
)


def _run_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run records as ``results.json["runs"]`` rows (time and commit when recorded;
    the cut's last kept fraction where the run traced it, so a run store seeded from
    the rows, :func:`~.protocol.import_results`, loses none of what the report reads)."""
    rows = []
    for r in records:
        row = {k: r.get(k) for k in RUN_FIELDS if k in r or k in ("seconds",)}
        if r.get("kept_fraction"):
            row["kept_fraction_end"] = float(r["kept_fraction"][-1])
        rows.append(row)
    return rows


def _best_chance(study: StudyRun, out: Path, quick: bool, train: bool) -> dict[str, Any]:
    from spacl.studies.spacl_bench.best_chance import (
        FULL,
        QUICK,
        collect,
        collect_grown,
        run_best_chance,
        run_grown,
    )

    cfg = QUICK if quick else FULL
    store = RunStore(out / "runs" / "best_chance.jsonl")
    tuned = run_best_chance(store, cfg, quick=quick, train=train)
    # the addendum (grown grids, not pre-registered): its own runs, read by no claim
    grown = {} if quick else run_grown(store, cfg, train=train)
    study.report.runs += _run_rows(store.select(bench="best_chance"))
    study.report.data_notes.append(load_best_chance_description(cfg))
    metrics = collect(store, tuned, cfg)
    if grown:
        metrics["grown"] = collect_grown(store, grown, cfg)
    return metrics


def load_best_chance_description(cfg: Any) -> str:
    from spacl.studies.spacl_bench.best_chance import load_best_chance

    return load_best_chance(cfg).description


def _compute(metrics: dict[str, Any]) -> dict[str, Any]:
    """The compute time of the runs the report uses (measured per run when trained)."""
    benches = {
        f"{b} {s}": g["compute"] for b, sets in metrics["benches"].items() for s, g in sets.items()
    }
    total = sum(c["seconds"] for c in benches.values())
    total += metrics["best_chance"]["compute"]["seconds"]
    total += float((metrics.get("diagnostics") or {}).get("seconds", 0.0))
    untimed = sum(c["runs"] - c["timed_runs"] for c in benches.values())
    return {"per_setting": benches, "seconds": total, "untimed_runs": untimed}


def provenance(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many trained runs among ``rows`` were trained at a clean commit, on a modified
    tree (``+dirty``: code not all in the commit) or with no recorded commit (trained
    before runs recorded it).  The rows of :data:`~.methods.UNTRAINED` (the frozen
    encoder, the raw inputs: scored without training) are no trained run and are left
    out (:func:`untrained_rows` counts them)."""
    trained = [row for row in rows if row.get("method") not in UNTRAINED]
    counts = {"runs": len(trained), "clean": 0, "modified_tree": 0, "no_commit": 0}
    for row in trained:
        counts[commit_kind(row.get("commit"))] += 1
    return counts


def untrained_rows(rows: Sequence[dict[str, Any]]) -> int:
    """How many of ``rows`` are :data:`~.methods.UNTRAINED` rows (nothing trained)."""
    return sum(row.get("method") in UNTRAINED for row in rows)


def run(
    out_dir: str | Path,
    *,
    quick: bool = False,
    seeds: Sequence[int] = (0, 1, 2),
    command: str = "spacl reproduce spacl",
    log: Any = None,
    train: bool = True,
) -> dict[str, Any]:
    """``spacl reproduce spacl``: every bench and setting, then the report.

    ``train=False`` trains nothing and writes the report from the run store: claims whose
    runs are missing say so (a partial report).

    Finished runs are kept in ``out_dir/runs/<bench>.jsonl`` and reused by a rerun (a
    crash loses only the runs in flight).  ``quick``: a few hundred examples, one epoch,
    one value per tuned hyper-parameter: a smoke run whose report states no verdict.
    """
    out = Path(out_dir)
    study = StudyRun.start(
        "spacl", TITLE, out, command, _config(seeds, quick), seeds, quick, log=log
    )
    metrics: dict[str, Any] = {"benches": {}}
    with study.part("best_chance"):
        metrics["best_chance"] = _best_chance(study, out, quick, train)
    for name in BENCHES:
        with study.part(name):
            bench_metrics = _run_bench(study, name, out, seeds, quick, train)
        if "_diagnostics" in bench_metrics:
            metrics["diagnostics"] = bench_metrics.pop("_diagnostics")
        metrics["benches"][name] = bench_metrics
    metrics["open_intent"] = open_intent_metrics(out)
    metrics["kg_seeds"] = kg_seed_metrics(out)
    metrics[VAL_EXAMPLES] = val_examples(study.report.data_notes)
    metrics["compute"] = c = _compute(metrics)
    c["provenance"] = provenance(study.report.runs)
    _provenance_stamp(study, metrics)
    study.report.stamps.append(
        f"Compute of the runs used: {c['seconds'] / 60:.1f} min, the sum of each run's measured "
        f"time (its training steps + its evaluation; the wall time above is this invocation), "
        f"plus {c['untimed_runs']} run(s) imported from the earlier committed results.json "
        "without a recorded time"
        + (f"; not in that sum: {outside}" if (outside := untimed_elsewhere(metrics)) else "")
    )
    if not quick:
        _status_stamp(study, metrics)
    return finish_study(study, metrics, claim_specs(), sections=sections, plots=plots)


def _status_stamp(study: StudyRun, metrics: dict[str, Any]) -> None:
    """The header's ``Status: partial`` line (recomputed) when claims lack their runs, or
    when the results name seeds of a compared arm whose runs the run rows do not hold
    (a truncated ``runs``: the per-claim provenance cannot count them;
    :func:`~.claim_runs.missing_runs`)."""
    from spacl.studies.spacl_bench.claim_runs import missing_runs

    missing = sum(1 for s in claim_specs() if s.rule(metrics).verdict == NOT_RUN)
    gaps = missing_runs(metrics, study.report.runs)
    stamps = [x for x in study.report.stamps if not x.startswith("Status:")]
    why = []
    if missing:
        why.append(
            f"{missing} of {len(claim_specs())} claims have no verdict because their runs "
            "are missing (listed in each claim's rule)"
        )
    if gaps:
        why.append(
            f"{len(gaps)} compared arm(s) name seeds whose runs results.json's `runs` does "
            "not hold, so their provenance is not counted (marked **seeds without runs** in "
            "'Provenance of each claim's runs'): " + "; ".join(gaps)
        )
    if why:
        stamps.append("Status: **partial**: " + "; ".join(why))
    study.report.stamps[:] = stamps


#: the open-intent benchmark's pre-registered detector (docs/results/open_intent/
#: PREREGISTRATION.md: DA-ADB on MiniLM, its boundary rule): method and rule in its store
OPEN_INTENT_PREREGISTERED = ("da_adb", "boundary")


def open_intent_metrics(results_dir: str | Path) -> dict[str, Any]:
    """SPACL's StackOverflow F1-open per known ratio, from the open-intent benchmark's run
    store beside this study's results (``results_dir/../open_intent/runs.jsonl``, its
    pre-registered table runs, the boundary rule); ``{}`` when that store is absent.

    Beside it, from the same store and ratio: the reject-all F1-open of SPACL's seeds (every
    test input called open; :func:`_reject_all`) and the pre-registered detector's
    F1-open over its seeds (:data:`OPEN_INTENT_PREREGISTERED`)."""
    store = Path(results_dir).parent / "open_intent" / "runs.jsonl"
    if not store.is_file():
        return {}
    rows = [json.loads(x) for x in store.read_text().splitlines() if x.strip()]
    out: dict[str, Any] = {
        "source": "open_intent/runs.jsonl",
        "f1_open": {},
        "seeds": {},
        "commits": {},
        # each run's chosen epochs (spacl_bench.open_intent_edges), its schedule's
        # temperature and learning rate, and what the dev selection tuned (lr, methods)
        "epochs": {},
        "schedule": {},
        "lr_selection": open_intent_lr_selection(store.parent / "selection_runs.jsonl"),
    }
    for ratio in (0.25, 0.75):
        runs = sorted(
            (
                r
                for r in rows
                if r.get("phase") == "table"
                and r["method"] == "spacl"
                and r["dataset"] == "stackoverflow"
                and float(r["ratio"]) == ratio
            ),
            key=lambda r: int(r["seed"]),
        )
        out["f1_open"][str(ratio)] = [float(r["test"]["boundary"]["f1_ood"]) for r in runs]
        out["seeds"][str(ratio)] = [int(r["seed"]) for r in runs]
        out.setdefault("reject_all", {})[str(ratio)] = _reject_all(rows, ratio, runs)
        out.setdefault("preregistered", {})[str(ratio)] = _preregistered(rows, ratio)
        out["commits"][str(ratio)] = [_open_intent_commit(r) for r in runs]
        out["epochs"][str(ratio)] = [_open_intent_epochs(r) for r in runs]
        for key in ("temperature", "lr"):
            seen = {float(r["schedule"][key]) for r in runs if key in r.get("schedule", {})}
            out["schedule"].setdefault(key, {})[str(ratio)] = sorted(seen)
    return out


def _so_table(rows: Sequence[Mapping[str, Any]], ratio: float) -> list[Mapping[str, Any]]:
    """The store's StackOverflow table runs at known ``ratio``."""
    return [
        r
        for r in rows
        if r.get("phase") == "table"
        and r.get("dataset") == "stackoverflow"
        and float(r["ratio"]) == ratio
    ]


def _reject_all(
    rows: Sequence[Mapping[str, Any]], ratio: float, runs: Sequence[Mapping[str, Any]]
) -> list[float | None]:
    """Per SPACL run (``runs``), the F1-open of calling every test input open on that
    seed's test set: the ``reject_all`` score a table run of the same seed and ratio
    stores (the test set and its known classes are the seed's, whatever the method);
    ``None`` where no run of that seed stores it."""
    by_seed = {
        int(r["seed"]): float(r["reject_all"]["f1_ood"])
        for r in _so_table(rows, ratio)
        if "reject_all" in r
    }
    return [by_seed.get(int(r["seed"])) for r in runs]


def _preregistered(rows: Sequence[Mapping[str, Any]], ratio: float) -> dict[str, Any]:
    """The pre-registered detector's test F1-open (:data:`OPEN_INTENT_PREREGISTERED`) at
    ``ratio``, per seed in seed order: ``{"method", "rule", "seeds", "f1_open"}``."""
    method, rule = OPEN_INTENT_PREREGISTERED
    runs = sorted(
        (r for r in _so_table(rows, ratio) if r["method"] == method and rule in r["test"]),
        key=lambda r: int(r["seed"]),
    )
    return {
        "method": method,
        "rule": rule,
        "seeds": [int(r["seed"]) for r in runs],
        "f1_open": [float(r["test"][rule]["f1_ood"]) for r in runs],
    }


def _open_intent_epochs(row: Mapping[str, Any]) -> dict[str, Any]:
    """An open-intent run's early-stopping choices: per stage (the representation, on its
    known-class dev score; the boundary, on its dev macro-F1) the chosen epoch (1-based,
    the earliest best), the epochs run, the other epochs whose dev score ties the chosen
    one's, and the stage's most epochs."""
    rec, schedule = row.get("record") or {}, row.get("schedule") or {}

    def stage(best: str, run: str, scores: str, most: str) -> dict[str, Any]:
        chosen = int(rec[best])
        values = [float(x) for x in rec.get(scores) or []]
        ties = [
            i
            for i, x in enumerate(values, 1)
            if i != chosen and chosen <= len(values) and abs(x - values[chosen - 1]) <= 1e-9
        ]
        return {
            "chosen": chosen,
            "run": int(rec[run]),
            "ties": ties,
            "max_epochs": int(schedule[most]) if most in schedule else None,
        }

    return {
        "seed": int(row["seed"]),
        "representation": stage("best_epoch", "epochs", "dev_scores", "max_epochs"),
        "boundary": stage(
            "boundary_best_epoch", "boundary_epochs", "boundary_dev_f1", "boundary_max_epochs"
        ),
    }


def open_intent_lr_selection(path: str | Path) -> dict[str, Any]:
    """What the open-intent benchmark's dev selection (``selection_runs.jsonl``) tuned:
    its methods and learning rates, and its choice by its rule (the highest mean
    pseudo-open dev macro-F1 over the draws, per method, learning rate and rule);
    ``{}`` where the file is absent."""
    path = Path(path)
    if not path.is_file():
        return {}
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    scores: dict[tuple[str, float, str], list[float]] = {}
    for r in rows:
        for rule, got in (r.get("pseudo_open") or {}).items():
            key = (str(r["method"]), float(r["options"]["lr"]), str(rule))
            scores.setdefault(key, []).append(float(got["macro_f1"]))
    if not scores:
        return {}
    (method, lr, rule), best = max(scores.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
    return {
        "source": "open_intent/selection_runs.jsonl",
        "methods": sorted({k[0] for k in scores}),
        "lrs": sorted({k[1] for k in scores}),
        "draws": max(len(v) for v in scores.values()),
        "chosen": {"method": method, "lr": lr, "rule": rule, "macro_f1": sum(best) / len(best)},
    }


def _open_intent_commit(row: Mapping[str, Any]) -> str | None:
    """An open-intent run's commit as the study's runs record it (``+dirty`` where the
    run's ``dirty`` flag says its tree was modified), ``None`` where it recorded none."""
    commit = row.get("commit")
    if not commit or commit == "unknown":
        return None
    dirty = row.get("dirty") and not str(commit).endswith("+dirty")
    return str(commit) + ("+dirty" if dirty else "")


#: the FB15k-237 claim's training budget (minutes of training per run, the recipes')
KG_MINUTES = 60.0
#: the FB15k-237 seed runs read: SPACL, InfoNCE and SPACL without the cut (the ablation)
KG_METHODS = ("spacl", "infonce", "spacl_nocut")


def kg_seed_metrics(results_dir: str | Path) -> dict[str, Any]:
    """FB15k-237 filtered test MRR / Hits@10 per method over seeds at the
    :data:`KG_MINUTES` budget, from the store of ``benchmarks/kg_seeds.py`` beside this
    study's results (``results_dir/kg_seeds.jsonl``); ``{}`` when that store is absent."""
    store = Path(results_dir) / "kg_seeds.jsonl"
    if not store.is_file():
        return {}
    rows = [json.loads(x) for x in store.read_text().splitlines() if x.strip()]
    rows = sorted(
        (r for r in rows if float(r["minutes"]) == KG_MINUTES), key=lambda r: int(r["seed"])
    )
    out: dict[str, Any] = {"source": "kg_seeds.jsonl", "minutes": KG_MINUTES}
    for key in ("mrr", "hits@10"):
        out[key] = {
            m: [float(r["test"][key]) for r in rows if r["method"] == m] for m in KG_METHODS
        }
    out["seeds"] = {m: [int(r["seed"]) for r in rows if r["method"] == m] for m in KG_METHODS}
    out["epochs"] = {m: [float(r["epochs"]) for r in rows if r["method"] == m] for m in KG_METHODS}
    # the validation-chosen epoch, 1-based, counting the one the budget cut short (so it
    # may exceed "epochs", the steps done over an epoch's steps): spacl_bench.budget_edge;
    # a method with a row that lacks it has a shorter list, which that module leaves out
    out["best_epoch"] = {
        m: [int(r["best_epoch"]) for r in rows if r["method"] == m and "best_epoch" in r]
        for m in KG_METHODS
    }
    out["threads"] = sorted({int(r["threads"]) for r in rows})
    # the validation triples each run ranked every epoch (eval.valid_subset; none: all)
    out["valid_subset"] = sorted({int(r.get("valid_subset") or 0) for r in rows})
    loads = [float(r["load_1min_at_end"]) for r in rows if r.get("load_1min_at_end") is not None]
    out["load_at_end"] = [min(loads), max(loads)] if loads else []
    # per method, each run's (final process's) commit and every commit its processes
    # recorded: the per-claim provenance of the report
    out["run_commits"] = {
        m: [r.get("commit") for r in rows if r["method"] == m] for m in KG_METHODS
    }
    out["run_spans"] = {
        m: sorted({str(c) for r in rows if r["method"] == m for c in r.get("commits") or []})
        for m in KG_METHODS
    }
    counted = provenance(rows)
    out["dirty_or_unknown"] = counted["modified_tree"] + counted["no_commit"]
    out.update(kg_provenance(rows))
    return out


def kg_provenance(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The commits the seed runs span: ``runs``; ``commits`` (short hashes, every process
    of every run where recorded, else the run's final process's); ``resumed`` (the runs
    resumed from a checkpoint, ``"method sSEED"``); ``resumed_unrecorded`` (of those, the
    runs whose earlier processes' commits were not recorded: their record holds only the
    final process's commit)."""
    commits: set[str] = set()
    resumed, unrecorded = [], []
    for r in rows:
        spans = r.get("commits") or ([r["commit"]] if r.get("commit") else [])
        commits.update(str(c)[:7] + ("+dirty" if str(c).endswith("+dirty") else "") for c in spans)
        if r.get("resumed"):
            resumed.append(f"{r['method']} s{r['seed']}")
            if not r.get("commits") or not r.get("commits_complete", False):
                unrecorded.append(f"{r['method']} s{r['seed']}")
    return {
        "runs": len(rows),
        "commits": sorted(commits),
        "resumed": resumed,
        "resumed_unrecorded": unrecorded,
    }


def regenerate(source: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write the report of the stored results in ``source`` (a ``results.json`` or its
    directory) again into ``out_dir``: the claims, sections and plots from the stored
    metrics by the current code, nothing trained (``spacl reproduce spacl
    --report-only``).  Two stores beside the results are read again where present, so a
    seed added to them since reaches the report: the open-intent benchmark's
    ``../open_intent/runs.jsonl`` and FB15k-237's ``kg_seeds.jsonl``; where absent (a
    ``results.json`` copied alone), the copies of them that ``results.json`` stores are
    used, and the report is the same."""
    stored = stored_results(source, "spacl", metrics=METRIC_KEYS)
    study = StudyRun.restore(stored, out_dir)
    metrics = dict(stored["metrics"])
    where = Path(source) if Path(source).is_dir() else Path(source).parent
    selected_tuning(metrics, stored["runs"])
    metrics["open_intent"] = open_intent_metrics(where) or metrics.get("open_intent") or {}
    metrics["kg_seeds"] = kg_seed_metrics(where) or metrics.get("kg_seeds") or {}
    # each bench's validation size (the near-tie margin), from the stored data notes
    metrics[VAL_EXAMPLES] = val_examples(list(stored["data"]))
    # counted again by the current rule (trained runs only; older results counted the
    # untrained rows among the runs with no recorded commit)
    metrics["compute"] = {**metrics["compute"], "provenance": provenance(study.report.runs)}
    _provenance_stamp(study, metrics)
    if not stored["quick"]:
        _status_stamp(study, metrics)
    return finish_study(study, metrics, claim_specs(), sections=sections, plots=plots)


def _provenance_stamp(study: StudyRun, metrics: Mapping[str, Any]) -> None:
    """The header line counting the commits of every trained run the report reads
    (:func:`~.claim_runs.read_provenance`: the run store's, the diagnostics' encoders, the
    FB15k-237 and open-intent seed runs; they span many invocations, and the header's
    "Commit:" is only the one that wrote the results), and the rows that train nothing."""
    from spacl.studies.spacl_bench.claim_runs import read_provenance

    p, parts = read_provenance(metrics, study.report.runs)
    untrained = untrained_rows(study.report.runs)
    held = "; ".join(f"{n} {label}" for label, n in parts)
    resumed = len((metrics.get("kg_seeds") or {}).get("resumed_unrecorded") or ())
    counted = (
        f" ({resumed} of them resumed from a checkpoint, counted by their final process's "
        "commit: their earlier processes' commits were not recorded)"
        if resumed
        else ""
    )
    stamps = [x for x in study.report.stamps if not x.startswith(RUNS_STAMP)]
    stamps.insert(
        0,
        (
            f"{RUNS_STAMP} of the {p['runs']} trained runs this report reads ({held}), "
            f"{p['clean']} at a clean commit{counted}, {p['modified_tree']} on a modified "
            "tree, "
            f"{p['no_commit']} with no recorded commit "
            f"(trained before runs recorded it); besides them, {untrained} untrained "
            f"baseline row(s) ({' / '.join(UNTRAINED)}: scored without training, no run of "
            "any commit).  Each run's commit is in results.json's `runs`; per claim (its "
            "runs clean / on a modified tree / with no commit, and whether an arm's seeds "
            "span code versions) in 'Provenance of each claim's runs'; see Compute"
        ),
    )
    study.report.stamps = stamps


def selected_tuning(metrics: dict[str, Any], runs: Sequence[dict[str, Any]]) -> None:
    """Add SPACL's validation-chosen setting to each setting's ``tuning`` where results
    written before it was recorded there lack it: its grid search replayed
    (:func:`~.stages.tune_over_grid`, nothing trained) on the stored seed-0 ``runs``
    rows, kept only when it gives the recorded choice."""
    from spacl.studies.spacl_bench.stages import option_choices, tune_over_grid

    store = RunStore.of_records(runs)
    for bench, sets in metrics["benches"].items():
        for setting, g in sets.items():
            name = g["selected_name"]
            if name in g["tuning"] or name not in g["temperatures"]:
                continue
            method = next(
                (
                    m
                    for c in option_choices(setting)
                    if (m := spacl_method(c, setting, PROJ_DIMS[bench])).name == name
                ),
                None,
            )
            if method is None:
                continue
            crit = g["criterion"]
            chosen, grid = tune_over_grid(store, bench, setting, method, crit, lambda *_: None)
            if chosen is None or chosen != g["temperatures"][name]:
                continue
            g["tuning"][name] = {
                f"{t:g}": 100.0 * float(store.get(RunKey(bench, setting, name, t, 0))["val"][crit])
                for t in grid
            }


def run_diagnostics_only(out_dir: str | Path) -> dict[str, Any]:
    """SPEC §1.1 diagnostics on MNIST-5k (self-supervised), at the tuned temperatures the
    run store holds, for the setting's seeds (5 candidates); cached in ``runs/``."""
    from spacl.studies.spacl_bench.stages import run_setting

    out = Path(out_dir)
    bench = load_bench("mnist5k")
    store = RunStore(out / "runs" / "mnist5k.jsonl")
    setting = "self-supervised"
    res = run_setting(bench, setting, store, SEEDS["mnist5k"], PROJ_DIMS["mnist5k"], train=False)
    cache = out / "runs" / "diagnostics.json"
    seeds = list(SEEDS["mnist5k"])
    return run_diagnostics(bench, res.temperatures, seeds, PROJ_DIMS["mnist5k"], cache)


#: the committed results of this study (relative to the repository root)
COMMITTED = Path("docs") / "results" / "spacl"


def report_only(out_dir: str | Path, source: str | Path | None = None) -> dict[str, Any]:
    """``--report-only``: the report from the run store ``out_dir/runs/*.jsonl`` (nothing
    trained; a partial report where runs are missing), or, with no run store there, the
    report regenerated from a stored ``results.json`` (:func:`regenerate`): ``source``,
    else ``out_dir/results.json``, else the committed :data:`COMMITTED`, found as ``spacl
    reproduce spacl --report-only`` finds it (:func:`~spacl.studies.study.committed_results`:
    under the working directory, else under the source checkout).  ``FileNotFoundError``
    (one line) when there is neither."""
    out = Path(out_dir)
    if any((out / "runs").glob("*.jsonl")):
        command = f"python -m spacl.studies.spacl_bench --bench all --report-only --out {out_dir}"
        return run(out, command=command, train=False, seeds=SEEDS["mnist5k"])
    committed = committed_results(COMMITTED.name)
    if source is not None:
        where = Path(source)
    elif (out / "results.json").is_file():
        where = out
    elif committed is not None and (committed / "results.json").is_file():
        where = committed
    else:
        raise FileNotFoundError(
            f"{out / 'runs'}: no run store, and no results.json to regenerate the report from "
            f"(looked in {out} and in {COMMITTED} under the working directory and the source "
            "checkout; give one with --from)"
        )
    logging.info("no run store in %s: regenerating the report from %s", out / "runs", where)
    return regenerate(where, out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--bench", choices=[*sorted(BENCHES), "best_chance", "diagnostics", "all"], required=True
    )
    parser.add_argument("--out", default="docs/results/spacl")
    parser.add_argument("--setting", action="append")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="1 epoch, 2 seeds: no verdict")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the whole study's report.md / results.json (whatever "
        "--bench) from the run store OUT/runs/ (partial where runs are missing); with no "
        "run store there, regenerate it from a stored results.json instead (--from, else "
        "OUT/results.json, else the committed docs/results/spacl under the working "
        "directory or the source checkout), as `spacl reproduce spacl --report-only` does",
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="RESULTS_JSON",
        help="with --report-only and no run store: the stored results.json (or its "
        "directory) to regenerate the report from",
    )
    parser.add_argument(
        "--seed-store-from",
        metavar="RESULTS_JSON",
        help="first seed the run stores (OUT/runs/, not committed) from this results.json's "
        "runs, keeping runs already stored: a fresh clone continues the committed study and "
        "trains only what it lacks (e.g. the values a grid grows by)",
    )
    args = parser.parse_args(argv)
    set_threads(args.threads)  # the engine's one setter of the thread count
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.seed_store_from:
        from spacl.studies.spacl_bench.protocol import import_results

        added = import_results(args.seed_store_from, args.out, keep=lambda row: True)
        logging.info("seeded the run stores with %d runs from %s", added, args.seed_store_from)
    if args.report_only:
        try:
            report_only(args.out, args.source)
        except (FileNotFoundError, ValueError) as err:
            parser.exit(2, f"spacl_bench --report-only: {err}\n")
        except KeyError as err:  # a run record damaged below what identifies a run
            parser.exit(
                2,
                f"spacl_bench --report-only: a run record under {Path(args.out) / 'runs'} "
                f"lacks {err}, which the report reads (a damaged run store)\n",
            )
        return
    if args.bench == "diagnostics":
        run_diagnostics_only(args.out)
        return
    if args.bench == "all":
        command = f"python -m spacl.studies.spacl_bench --bench all --out {args.out}"
        run(args.out, command=command, seeds=SEEDS["mnist5k"])
        return
    if args.bench == "best_chance":
        from spacl.studies.spacl_bench.best_chance import QUICK, run_best_chance, run_grown

        store = RunStore(Path(args.out) / "runs" / "best_chance.jsonl")
        if args.smoke:
            run_best_chance(store, QUICK, quick=True)
        else:
            run_best_chance(store)
            run_grown(store)  # the addendum: grown grids, not pre-registered
        return
    run_bench(args.bench, args.out, args.setting, smoke=args.smoke)


if __name__ == "__main__":
    main()
