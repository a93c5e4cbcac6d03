"""The fair protocol of the SPACL study (issue 11) and its crash-safe run store.

For every bench and setting, every method (baselines and SPACL choices alike):

1. sees the same view stream (the original plus 4 augmentations, drawn once per step
   and handed to every model: shared randomness), the same initial encoder per seed,
   the same optimiser (Adam, the bench's learning rate) and the same number of steps;
2. gets its temperature chosen from :data:`~.methods.TEMPERATURES` on the validation
   split by the criterion fixed in advance — the linear-probe accuracy on ``val`` of a
   probe fitted on ``train`` (seed 0; ties to the lower temperature);
3. is then trained with further seeds at that temperature; ``test`` accuracies are
   recorded for every run but never read by any choice.

Every finished run is appended to ``runs.jsonl`` at once (one JSON object per line), and
a rerun skips the runs already there: a crash loses at most the runs in flight.  Each
record holds the run's measured time (``seconds``: wall clock of its own training steps,
timed one by one, plus its evaluation; ``cpu_seconds``: the same in process CPU time,
which other users of a shared machine do not inflate) and the commit that trained it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from spacl.studies.common import SharedBatchSteps, fine_labels, make_arm, probe_metrics, run_steps
from spacl.studies.report import git_commit
from spacl.studies.spacl_bench.benches import Bench
from spacl.studies.spacl_bench.methods import UNTRAINED, Method
from spacl.tasks.image import Arm

__all__ = ["RunKey", "RunStore", "evaluate", "select_temperature", "train_models", "train_runs"]

log = logging.getLogger(__name__)
TRACE_EVERY = 10  # steps between kept-fraction samples


@dataclass(frozen=True)
class RunKey:
    """Identifies one trained model."""

    bench: str
    setting: str
    method: str
    tau: float
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "setting": self.setting,
            "method": self.method,
            "tau": self.tau,
            "seed": self.seed,
        }


class RunStore:
    """Append-only store of finished runs (``runs.jsonl``); survives a crash."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[RunKey, dict[str, Any]] = {}
        if self.path.exists():
            for number, line in enumerate(self.path.read_text().splitlines(), 1):
                if line.strip():
                    rec = self._record(line, number)
                    self.records[self._key(rec)] = rec

    def _record(self, line: str, number: int) -> dict[str, Any]:
        """Line ``number`` of the store as a run record; ``ValueError`` (one line naming
        the file and the line) where it is not JSON or lacks what identifies a run."""
        where = f"{self.path}, line {number}"
        try:
            rec = json.loads(line)
        except ValueError as err:
            raise ValueError(
                f"{where}: not a JSON run record ({err}); a damaged run store"
            ) from None
        if not isinstance(rec, dict):
            raise ValueError(
                f"{where}: a run record is a JSON object, got {type(rec).__name__}; a damaged "
                "run store"
            )
        try:
            self._key(rec)
        except KeyError as err:
            raise ValueError(
                f"{where}: the run record lacks {err} (a run is identified by bench, setting, "
                "method, tau and seed); a damaged run store"
            ) from None
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{where}: the run record's tau is not a number ({err}); a damaged run store"
            ) from None
        return dict(rec)

    @classmethod
    def of_records(cls, records: Sequence[dict[str, Any]]) -> RunStore:
        """A read-only store of ``records`` in memory (e.g. ``results.json``'s ``runs``
        rows), bound to no file: for reading, never :meth:`add`."""
        store = cls.__new__(cls)
        store.path = Path("/dev/null/no-run-store")
        store.records = {cls._key(r): r for r in records}
        return store

    @staticmethod
    def _key(rec: dict[str, Any]) -> RunKey:
        return RunKey(rec["bench"], rec["setting"], rec["method"], float(rec["tau"]), rec["seed"])

    def __contains__(self, key: RunKey) -> bool:
        return key in self.records

    def get(self, key: RunKey) -> dict[str, Any]:
        return self.records[key]

    def add(self, key: RunKey, record: dict[str, Any]) -> None:
        rec = {**key.as_dict(), **record}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps(rec) + "\n")
            handle.flush()
        self.records[key] = rec

    def select(self, **where: Any) -> list[dict[str, Any]]:
        return [r for r in self.records.values() if all(r[k] == v for k, v in where.items())]


def _arm(bench: Bench, method: Method, tau: float, seed: int) -> Arm:
    arm: Arm = make_arm(
        method.name,
        method.objective,
        method.build(tau, seed),
        bench.encoder(seed),
        lr=bench.lr,
        use_labels=method.uses_labels,
        weight_decay=1e-5,
        target_momentum=method.momentum,
        queue_size=method.queue_size,
        queue_dim=method.queue_dim,
    )
    return arm


@torch.no_grad()
def evaluate(bench: Bench, model: nn.Module | None) -> dict[str, dict[str, float]]:
    """Linear probe, kNN and NCC of the frozen features: fitted on train, scored on val / test."""
    ftr, ytr = bench.features(model, "train")
    out = {}
    for split in ("val", "test"):
        f, y = bench.features(model, split)
        with torch.enable_grad():
            out[split] = probe_metrics(ftr, ytr, f, y, linear=bench.linear_probe)
    return out


def train_models(
    bench: Bench,
    setting: str,
    jobs: Sequence[tuple[Method, float]],
    seed: int,
    seconds: dict[tuple[str, float], list[float]] | None = None,
) -> tuple[dict[tuple[str, float], Arm], dict[tuple[str, float], list[float]], int]:
    """Train ``jobs`` together on the seed's stream; return the arms, kept-fraction traces
    (SPACL arms, every :data:`TRACE_EVERY` steps) and the step count.

    ``seconds``, if given, receives each arm's own training time ``[wall, cpu]`` (its steps
    only, timed one by one: jobs trained together do not share a clock).  A bench whose seeds redraw
    the training set trains on the seed's draw (:meth:`Bench.for_seed`)."""
    bench = bench.for_seed(seed)
    arms = {(m.name, t): _arm(bench, m, t, seed) for m, t in jobs}
    traces: dict[tuple[str, float], list[float]] = {k: [] for k in arms}
    clock = seconds if seconds is not None else {}
    for key in arms:
        clock[key] = [0.0, 0.0]
    coarse = setting == "weak"

    def timed_step(key: Any, arm: Arm, views: Tensor, labels: Tensor, step: int) -> None:
        """The arm's step on its own clock; its kept fraction every TRACE_EVERY steps."""
        start, cpu = time.perf_counter(), time.process_time()
        arm.train_step(views, labels, step)
        clock[key][0] += time.perf_counter() - start
        clock[key][1] += time.process_time() - cpu
        if step % TRACE_EVERY == 0:
            kept = arm.objective_stats().get("spacl/kept_fraction")
            if kept is not None:
                traces[key].append(kept)

    body = SharedBatchSteps(
        arms,
        lambda epoch: bench.stream(seed).epoch_batches(epoch),
        (lambda batch: batch.coarse_labels) if coarse else fine_labels,
        arm_step=timed_step,
    )
    step = run_steps(body, bench.epochs)
    return arms, traces, step


def train_runs(
    bench: Bench,
    setting: str,
    jobs: Sequence[tuple[Method, float]],
    seed: int,
    store: RunStore,
) -> None:
    """Train every ``(method, tau)`` not yet in ``store`` together on the seed's stream."""
    todo = [(m, t) for m, t in jobs if RunKey(bench.name, setting, m.name, t, seed) not in store]
    if not todo:
        return
    bench = bench.for_seed(seed)
    clock: dict[tuple[str, float], list[float]] = {}
    arms, traces, step = train_models(bench, setting, todo, seed, clock)
    for (name, tau), arm in arms.items():
        start, cpu = time.perf_counter(), time.process_time()
        metrics = evaluate(bench, arm.model)
        eval_s, eval_cpu = time.perf_counter() - start, time.process_time() - cpu
        train_s, cpu_s = clock[(name, tau)][0], clock[(name, tau)][1] + eval_cpu
        store.add(
            RunKey(bench.name, setting, name, tau, seed),
            {
                "steps": step,
                **metrics,
                "kept_fraction": traces[(name, tau)],
                "seconds": train_s + eval_s,
                "train_seconds": train_s,
                "cpu_seconds": cpu_s,
                "commit": git_commit(),
            },
        )
        log.info(
            "%s/%s %s tau=%g seed=%d: val %s (%.0f s)",
            bench.name,
            setting,
            name,
            tau,
            seed,
            {k: round(v, 4) for k, v in metrics["val"].items()},
            train_s + eval_s,
        )


def _kept_ends(
    metrics: dict[str, Any], runs: list[dict[str, Any]]
) -> dict[tuple[str, str, str, float, int], float]:
    """The last kept fraction of every run a results file summarises per seed (its
    groups' ``kept_fraction_end``, where it holds one value per seed): the benches'
    groups, and the arms of a bench with one setting (the best-chance bench, whose
    metrics sit under its bench name; its setting read from its ``runs`` rows)."""
    ends: dict[tuple[str, str, str, float, int], float] = {}  # key_of_seed -> end
    where_groups: list[tuple[str, str, list[tuple[str, dict[str, Any]]]]] = []
    for bench, sets in metrics["benches"].items():
        for setting, g in sets.items():
            groups = [(n, x) for n, x in g["baselines"].items()]
            groups += [
                (g["base_name"], g["spacl"]["base"]),
                (g["selected_name"], g["spacl"]["selected"]),
            ]
            groups += [(x["name"], x) for x in g["ablations"].values()]
            where_groups.append((bench, setting, groups))
    for bench, m in metrics.items():
        settings = {r["setting"] for r in runs if r["bench"] == bench}
        if isinstance(m, dict) and isinstance(m.get("arms"), dict) and len(settings) == 1:
            where_groups.append((bench, settings.pop(), list(m["arms"].items())))
    for bench, setting, groups in where_groups:
        for name, x in groups:
            kept, seeds = x.get("kept_fraction_end") or [], x.get("seeds") or []
            if x.get("tau") is None or len(kept) != len(seeds):
                continue  # a trace for only some seeds: which ones is not recorded
            for seed, end in zip(seeds, kept, strict=True):
                ends[key_of_seed((bench, setting, name, float(x["tau"])), int(seed))] = end
    return ends


def key_of_seed(where: tuple[str, str, str, float], seed: int) -> tuple[str, str, str, float, int]:
    """``(bench, setting, method, tau, seed)``."""
    return (where[0], where[1], where[2], where[3], seed)


def _import_diagnostics(metrics: dict[str, Any], out_dir: str | Path) -> None:
    """The diagnostics cache (``runs/diagnostics.json``) from a results file's per-seed
    diagnostics, with the temperatures they were made at (kept if a cache exists)."""
    diag = metrics.get("diagnostics") or {}
    cache = Path(out_dir) / "runs" / "diagnostics.json"
    if cache.exists() or not diag.get("seeds"):
        return
    done = {
        str(seed): {
            **{who: {k: v[i] for k, v in keys.items()} for who, keys in diag["encoders"].items()},
            "temperatures": diag["temperatures"],
        }
        for i, seed in enumerate(diag["seeds"])
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(done, indent=1))


def import_results(path: str | Path, out_dir: str | Path, keep: Any) -> int:
    """Seed the run stores from an earlier committed ``results.json`` (its ``runs`` rows).

    Only rows with ``keep(row)`` true are taken, each marked ``origin`` (that file's
    commit) and keeping the time (``seconds``, ``cpu_seconds``) and the ``commit`` its
    row recorded, so a regenerated report counts and dates them as before; option runs
    get their kept-fraction trace back from the metrics, the other runs the trace's last
    value where the row or the metrics hold it per seed; the diagnostics cache is written
    from the metrics' per-seed diagnostics.  Rows
    already in a store are left alone.  Returns the number added.
    """
    results = json.loads(Path(path).read_text())
    origin = f"results.json@{results.get('commit', 'unknown')}"
    traces: dict[tuple[str, str, str, float], list[float]] = {}
    for bench, sets in results["metrics"]["benches"].items():
        for setting, g in sets.items():
            tau0 = float(g["temperatures"][g["base_name"]])  # options ran at the base's tau
            for name, opt in g["options"].items():
                traces[(bench, setting, name, tau0)] = opt["kept_fraction"]
    ends = _kept_ends(results["metrics"], results["runs"])
    _import_diagnostics(results["metrics"], out_dir)
    added = 0
    stores: dict[str, RunStore] = {}
    for row in results["runs"]:
        if not keep(row):
            continue
        store = stores.setdefault(
            row["bench"], RunStore(Path(out_dir) / "runs" / f"{row['bench']}.jsonl")
        )
        key = RunKey(row["bench"], row["setting"], row["method"], float(row["tau"]), row["seed"])
        if key in store:
            continue
        untrained = row["method"] in UNTRAINED
        where = (row["bench"], row["setting"], row["method"], float(row["tau"]))
        trace = traces.get(where, []) if row["seed"] == 0 else []
        end = row.get("kept_fraction_end", ends.get(key_of_seed(where, int(row["seed"]))))
        if not trace and end is not None:
            trace = [float(end)]  # the last value only
        measured = {k: row[k] for k in ("seconds", "cpu_seconds", "commit") if row.get(k)}
        store.add(
            key,
            {
                "steps": 0 if untrained else -1,  # -1: trained, step count not recorded
                "val": row["val"],
                "test": row["test"],
                "kept_fraction": trace,
                "origin": origin,
                **measured,  # the run's own time and commit, where its row recorded them
            },
        )
        added += 1
    return added


def select_temperature(
    store: RunStore, bench: str, setting: str, method: Method, criterion: str = "linear"
) -> float:
    """The temperature with the best validation ``criterion`` (seed 0; ties: the lower)."""
    best: tuple[float, float] | None = None
    for tau in sorted(method.temperatures):
        rec = store.get(RunKey(bench, setting, method.name, tau, 0))
        score = float(rec["val"][criterion])
        if best is None or score > best[1]:
            best = (tau, score)
    assert best is not None
    return best[0]
