"""The scaffolding every ``spacl reproduce`` study shares, written once.

A study is data (its config and its claims table) plus three functions: the parts that
train and measure, the report sections, the plots.  :class:`StudyRun` holds what the
parts share (the report, the seeds, the timing, the log) and :func:`finish_study`
evaluates the claims table and writes the report::

    study = StudyRun.start("alignment", "Title", out_dir, command, config, seeds, quick)
    with study.part("main"):
        records = study.over_seeds("main", lambda seed: train_and_measure(seed), tau=0.5)
    ...
    return finish_study(study, metrics, claims, sections=..., plots=...)

``over_seeds`` runs one configuration for every seed, records one row per trained
model in ``results.json["runs"]`` (tagged with the part and the given settings) and
returns the per-seed records; :func:`group` summarises them
(:func:`spacl.studies.stats.summarize`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacl.studies.claim_table import ClaimSpec, evaluate_claims
from spacl.studies.report import StudyReport, git_commit
from spacl.studies.stats import summarize

__all__ = [
    "REGENERATED",
    "RUNS_STAMP",
    "StudyRun",
    "commit_kind",
    "committed_results",
    "distinct_runs",
    "finish_study",
    "group",
    "invocation_runs_stamp",
    "stored_results",
    "values",
]

#: the header line of a report rebuilt from its stored ``results.json`` (no model trained)
REGENERATED = "Regenerated from the stored results.json: no model trained, no test set read"
#: the header line that counts the commits the report's runs were trained at (the
#: invocation's own commit is the header's "Commit:")
RUNS_STAMP = "Runs' own commits:"


def commit_kind(commit: str | None) -> str:
    """What a run's recorded commit says of its code: ``"clean"`` (a commit, the code all
    in it), ``"modified_tree"`` (``<sha>+dirty``: code not all in the commit) or
    ``"no_commit"`` (none recorded, or ``"unknown"``)."""
    if not commit or commit == "unknown":
        return "no_commit"
    return "modified_tree" if str(commit).endswith("+dirty") else "clean"


def distinct_runs(runs: Sequence[Mapping[str, Any]]) -> int:
    """How many distinct trained runs ``runs`` (``results.json``'s ``runs``) holds.  A run
    is known by every stored field but ``part`` (the part of the study that lists it): its
    configuration tags, its seed and every value it measured.  Rows equal on all of them
    are one run listed by several parts (the alignment study's C'=10, tau = 0.5, B = 200
    point is its class sweep's, its temperature sweep's and its batch sweep's) and count
    once; rows of one configuration and seed that measured different values (equal
    epochs vs equal steps) are different runs.

    Example:
        >>> distinct_runs([{"part": "a", "seed": 0, "x": 1.0}, {"part": "b", "seed": 0, "x": 1.0},
        ...                {"part": "b", "seed": 0, "x": 2.0}])
        2
    """
    return len(
        {json.dumps({k: v for k, v in r.items() if k != "part"}, sort_keys=True) for r in runs}
    )


def invocation_runs_stamp(report: StudyReport) -> None:
    """The header line counting the commits of a study's runs when every run was trained
    by the one invocation that wrote the results (the alignment and hard-negatives
    studies: no run store, no run carries a commit of its own, so each run's commit is the
    invocation's), in the words of the SPACL study's line: how many at a clean commit, on
    a modified tree, with no recorded commit, and whether the seeds share one code
    version.  Replaces an earlier such line (a regenerated report keeps its stored
    stamps)."""
    commit = report.commit or git_commit()
    kind = commit_kind(commit)
    counts = {"clean": 0, "modified_tree": 0, "no_commit": 0}
    runs = distinct_runs(report.runs)
    counts[kind] = runs
    version = {
        "clean": "so every seed ran one code version",
        "modified_tree": "one invocation, but its code was not all in the commit",
        "no_commit": "so their code version is not known",
    }[kind]
    short = "unknown" if kind == "no_commit" else str(commit)[:7]
    repeats = len(report.runs) - runs
    rows = (
        f"the {runs} distinct runs (results.json's `runs` holds {len(report.runs)} rows, one "
        f"per seed and configuration of each part of the study; {repeats} of them repeat a "
        "run another part lists, equal in every stored field but the part's name "
        "(configuration, seed and every measured value), and are counted once)"
        if repeats
        else f"the {runs} runs (results.json's `runs`: one per seed and configuration)"
    )
    line = (
        f"{RUNS_STAMP} of {rows}, {counts['clean']} at a clean commit, {counts['modified_tree']} "
        f"on a modified tree, {counts['no_commit']} with no recorded commit: every run was "
        "trained by the one invocation that wrote these results, at its commit above "
        f"(`{short}{'+dirty' if kind == 'modified_tree' else ''}`), {version}"
    )
    report.stamps = [line, *(x for x in report.stamps if not x.startswith(RUNS_STAMP))]


def values(group_: Mapping[str, Any], key: str, scale: float = 1.0) -> list[float]:
    """Per-seed values of metric ``key`` in a :func:`group` (times ``scale``)."""
    return [float(v) * scale for v in group_[key]["values"]]


def group(records: Sequence[Mapping[str, float]], **extra: Any) -> dict[str, Any]:
    """:func:`~spacl.studies.stats.summarize` of per-seed records, plus ``extra``."""
    out: dict[str, Any] = summarize(records)
    out.update(extra)
    return out


@dataclass
class StudyRun:
    """What a study's parts share while it runs (see the module docstring)."""

    report: StudyReport
    seeds: list[int]
    say: Callable[[str], None]
    timing: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        name: str,
        title: str,
        out_dir: str | Path,
        command: str,
        config: dict[str, Any],
        seeds: Sequence[int],
        quick: bool,
        *,
        notes: Sequence[str] = (),
        started: float | None = None,
        log: Callable[[str], None] | None = None,
    ) -> StudyRun:
        """A run with its :class:`~spacl.studies.report.StudyReport` (seeds checked)."""
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds must hold at least one seed, got none")
        report = StudyReport(
            name,
            title,
            Path(out_dir),
            command,
            config,
            seeds,
            quick,
            data_notes=list(notes),
            started=started if started is not None else time.time(),
        )
        return cls(report, seeds, log or (lambda _msg: None))

    @classmethod
    def restore(cls, stored: Mapping[str, Any], out_dir: str | Path) -> StudyRun:
        """A finished study, rebuilt from its ``results.json`` (:func:`stored_results`) to
        write its report again into ``out_dir``: the same command, config, seeds, data
        notes, runs, timing, training commit, wall time and start (the header's Date:
        ``results.json["started"]``, "not recorded" where older results lack it, never
        derived from this invocation's clock); the header says it was regenerated and by
        which code (:data:`REGENERATED`)."""
        wall = float(stored["wall_time_s"])
        study = cls.start(
            str(stored["study"]),
            str(stored["title"]),
            out_dir,
            str(stored["command"]),
            dict(stored["config"]),
            stored["seeds"],
            bool(stored["quick"]),
            notes=list(stored["data"]),
        )
        report = study.report
        started = stored.get("started")
        report.started_at = str(started) if started else None
        report.runs = list(stored["runs"])
        report.commit, report.wall_time_s = str(stored["commit"]), wall
        report.threads = int(stored["threads"])
        previous = [x for x in stored.get("stamps", []) if not x.startswith(REGENERATED)]
        report.stamps = [*previous, f"{REGENERATED} (code at {git_commit()})"]
        study.timing = dict(stored["metrics"].get("timing", {}))
        return study

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time a part of the study (``metrics["timing"][name]``) and log its duration."""
        start = time.time()
        yield
        self.timing[name] = time.time() - start
        self.say(f"  {name}: {self.timing[name]:.0f} s")

    def run_parts(
        self, parts: Sequence[tuple[str, Callable[..., None]]], *args: Any
    ) -> dict[str, Any]:
        """Run every ``(name, part)`` in order, timed (:meth:`part`), as
        ``part(self, *args, metrics)``; return the metrics they filled."""
        metrics: dict[str, Any] = {}
        for name, fn in parts:
            with self.part(name):
                fn(self, *args, metrics)
        return metrics

    def over_seeds(
        self, part: str, fn: Callable[[int], Mapping[str, float]], **tags: Any
    ) -> list[dict[str, float]]:
        """``fn(seed)`` for every seed; each record also goes to ``results.json["runs"]``."""
        records = []
        for seed in self.seeds:
            record = dict(fn(seed))
            self.report.runs.append({"part": part, **tags, "seed": seed, **record})
            records.append(record)
        return records


def finish_study(
    study: StudyRun,
    metrics: dict[str, Any],
    claims: Sequence[ClaimSpec],
    *,
    sections: Callable[[StudyReport, dict[str, Any]], None],
    plots: Callable[[StudyReport, dict[str, Any]], None],
    invocation_runs: bool = False,
) -> dict[str, Any]:
    """Evaluate the claims table, add the sections and plots, write the report files.

    ``invocation_runs``: every run was trained by the invocation that wrote the results;
    the header counts their commits (:func:`invocation_runs_stamp`)."""
    if invocation_runs:
        invocation_runs_stamp(study.report)
    metrics["timing"] = study.timing
    study.report.metrics = metrics
    evaluate_claims(study.report, claims, metrics)
    sections(study.report, metrics)
    plots(study.report, metrics)
    return study.report.write()


def committed_results(name: str) -> Path | None:
    """The committed results of study ``name``: ``docs/results/NAME`` under the working
    directory, else under the source checkout spacl runs from
    (:func:`spacl.data.sources.source_checkout`), else ``None``: the lookup of ``spacl
    reproduce NAME --report-only`` without ``--from``."""
    from spacl.data.sources import source_checkout

    checkout = source_checkout()
    for root in [Path.cwd(), *([checkout] if checkout is not None else [])]:
        committed = root / "docs" / "results" / name
        if committed.is_dir():
            return committed
    return None


def stored_results(
    source: str | Path, study: str | None = None, metrics: Sequence[str] = ()
) -> dict[str, Any]:
    """The ``results.json`` of a finished study (``source``: the file or its directory).

    Raises ``FileNotFoundError`` with one line naming the path when it is missing, and
    ``ValueError`` naming it when it is not JSON, or not a study's results (an object
    holding every key of :data:`STORED_KEYS`, the ones a report is rebuilt from), or,
    given ``study``, another study's results, or when its ``metrics`` lack one of the
    sections ``metrics`` names (the ones that study's report reads)."""
    import json

    path = Path(source)
    path = path / "results.json" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored results.json to regenerate the report from")
    try:
        stored = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a JSON file ({err})") from None
    if not isinstance(stored, dict):
        raise ValueError(
            f"{path}: a study's results.json holds an object, got {type(stored).__name__}"
        )
    missing = [key for key in STORED_KEYS if key not in stored]
    if missing:
        raise ValueError(
            f"{path}: not a study's results.json, missing {', '.join(missing)} "
            "(written by `spacl reproduce NAME`)"
        )
    if study is not None and stored["study"] != study:
        raise ValueError(
            f"{path}: the results of the {stored['study']!r} study, not of {study!r} "
            f"(give --from the {study} study's results.json)"
        )
    lacking = [key for key in metrics if key not in (stored["metrics"] or {})]
    if lacking:
        raise ValueError(
            f"{path}: its metrics lack {', '.join(lacking)}, which the {stored['study']} "
            f"report reads (written by `spacl reproduce {stored['study']}`)"
        )
    return stored


#: the keys of a study's ``results.json`` that :meth:`StudyRun.restore` reads
STORED_KEYS = (
    "study",
    "title",
    "command",
    "config",
    "seeds",
    "quick",
    "data",
    "runs",
    "commit",
    "wall_time_s",
    "threads",
    "metrics",
)
