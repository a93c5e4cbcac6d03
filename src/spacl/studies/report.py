"""The report writer of ``spacl reproduce``: claims table, sections, figures, provenance.

Report layout (``report.md``): a header with the command, the commit, the wall time and
the software; the claims table (section, paper's claim, paper's number, measured here,
verdict); the verdict rules; then the study's sections, tables and figures.
``results.json`` holds the same numbers and more: the config, the seeds, every metric
(``metrics``), one record per trained model (``runs``) and the claims with their rules.
Non-finite numbers are written as ``null`` and listed under ``non_finite`` (empty in a
healthy run).  Plots use matplotlib's object API with the Agg canvas (no global pyplot
state, no display).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from spacl.studies.verdicts import (
    FEW_SEEDS,
    MIN_SEEDS,
    NON_VERDICTS,
    RULE_TESTS,
    SMOKE,
    VERDICT_RULES,
    Verdict,
)

__all__ = ["Claim", "StudyReport", "git_commit", "new_figure", "utc_stamp"]


# ---------------------------------------------------------------------------- provenance
def git_commit(path: str | Path | None = None) -> str:
    """``<sha>`` of the checkout holding ``path`` (default: this package), or ``"unknown"``.

    ``+dirty`` is appended when the code that ran is not all in the commit: tracked files
    of the package or ``pyproject.toml`` differ from it, or the package directory holds
    files git does not track.  Reports and other outputs do not count (a study rewrites
    its own committed report while it runs).  Only reads git state
    (``--no-optional-locks``: not even the index is refreshed).
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    package = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        code = [str(package), str(package.parents[1] / "pyproject.toml")]
        dirty = subprocess.run(
            [
                "git",
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                *code,
            ],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty += subprocess.run(
            [
                "git",
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=all",
                "--",
                str(package),
            ],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def utc_stamp(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 UTC to the second (``2026-12-05T03:45:12Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _wall_note(command: str, mode: str) -> str:
    """What the header's wall time is: the ``mode`` (full or quick) run's, or, for an
    invocation that trained nothing (``--report-only``), the time to write the report
    from stored runs, the runs' own time being in the Compute section."""
    if "--report-only" not in command:
        return f"{mode}; that invocation's"
    return (
        "that invocation's, which wrote this report from stored runs and trained nothing; "
        "the runs' own time is in Compute"
    )


def _date_line(started_at: str | None) -> str:
    """The header's Date: the recorded start in UTC (the same on every machine), or that
    it was not recorded."""
    if not started_at:
        return (
            "not recorded (these results were written before results.json stored the start "
            "of the invocation that wrote them)"
        )
    day, clock = started_at.rstrip("Z").split("T")
    return f"{day} {clock[:5]} UTC (start of the invocation that wrote these results)"


# -------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Claim:
    """One row of the claims table."""

    key: str
    section: str
    claim: str
    paper: str
    measured: str
    verdict: str
    rule: str


def _jsonable(obj: Any, path: str, bad: list[str]) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, Tensor):
        obj = obj.tolist()
    if isinstance(obj, (int,)):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            bad.append(path)
            return None
        return obj
    if hasattr(obj, "item") and callable(obj.item) and not hasattr(obj, "__len__"):
        return _jsonable(obj.item(), path, bad)  # numpy scalars
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v, f"{path}.{k}", bad) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, f"{path}[{i}]", bad) for i, v in enumerate(obj)]
    if hasattr(obj, "tolist"):
        return _jsonable(obj.tolist(), path, bad)
    raise TypeError(f"{path}: cannot write a {type(obj).__name__} to results.json")


def new_figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (5.0, 3.6)) -> Any:
    """``(figure, axes)`` on the Agg canvas (no pyplot state); axes is a list, row-major."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


@dataclass
class StudyReport:
    """Collects a study's claims, numbers, sections and figures; writes the report files.

    Args:
        name: study name (``hard-negatives`` ...), also ``results.json["study"]``.
        title: the report's title.
        out_dir: where ``report.md``, ``results.json`` and the PNGs go (created).
        command: the command line that produced the study.
        config: every setting of the study (written to ``results.json``).
        seeds: the seeds every configuration was trained with.
        quick: whether this is the reduced ``--quick`` version.
    """

    name: str
    title: str
    out_dir: Path
    command: str
    config: dict[str, Any]
    seeds: list[int]
    quick: bool = False
    data_notes: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    #: extra ``- Key: value`` header lines (e.g. the compute of stored runs, a partial status)
    stamps: list[str] = field(default_factory=list)
    #: a regenerated report keeps the training's commit and wall time (None: this run's)
    commit: str | None = None
    wall_time_s: float | None = None
    threads: int | None = None
    #: the families of claims whose tests were Holm-corrected together (one line each)
    families: list[str] = field(default_factory=list)
    #: the comparison tests that claims share (the same samples tested by two claims,
    #: counted in each claim's family; one line each)
    shared_tests: list[str] = field(default_factory=list)
    #: the start of the invocation that wrote the results, UTC (ISO 8601,
    #: ``results.json["started"]``, the header's Date); set from :attr:`started` when not
    #: given.  A report regenerated from stored results keeps the stored one, ``None``
    #: where the results predate it (Date: not recorded), never this invocation's time
    started_at: str | None = None

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.started_at is None:
            self.started_at = utc_stamp(self.started)

    # -- content ------------------------------------------------------------------------
    def claim(
        self,
        key: str,
        section: str,
        claim: str,
        paper: str,
        measured: str,
        verdict: Verdict,
    ) -> Claim:
        """Add a row to the claims table (the verdict comes from a rule function).

        A verdict must come from a rule of :data:`~spacl.studies.verdicts.RULE_TESTS`
        (one with a failing counter-example test), or be a non-verdict.  The budget rule
        (:mod:`spacl.studies.verdicts`): a ``quick`` report states
        :data:`~spacl.studies.verdicts.SMOKE`, one with fewer than
        :data:`~spacl.studies.verdicts.MIN_SEEDS` seeds
        :data:`~spacl.studies.verdicts.FEW_SEEDS`; the rule's own outcome and
        numbers stay in the rule text.
        """
        if any(c.key == key for c in self.claims):
            raise ValueError(f"claim key {key!r} used twice")
        if verdict.verdict not in NON_VERDICTS and not verdict.from_rule:
            raise ValueError(
                f"claim {key!r}: verdict {verdict.verdict!r} was not computed by a rule "
                f"function of spacl.studies.verdicts (by={verdict.by!r}) or its rule has "
                f"no counter-example test"
                f" (RULE_TESTS: {sorted(RULE_TESTS)})"
            )
        outcome, rule = verdict.verdict, verdict.rule
        if self.quick and outcome != SMOKE:
            outcome, rule = SMOKE, f"(withheld: quick budget; the rule gives {outcome}) {rule}"
        elif len(self.seeds) < MIN_SEEDS and outcome not in NON_VERDICTS:
            outcome = FEW_SEEDS
            rule = f"(withheld: {len(self.seeds)} seed(s); the rule gives {verdict.verdict}) {rule}"
        row = Claim(key, section, claim, paper, measured, outcome, rule)
        self.claims.append(row)
        return row

    def text(self, markdown: str) -> None:
        """Append a markdown block."""
        self.blocks.append(markdown.strip() + "\n")

    def section(self, heading: str, markdown: str = "") -> None:
        """Append a ``##`` section (optionally with text)."""
        self.blocks.append(f"## {heading}\n\n" + (markdown.strip() + "\n" if markdown else ""))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> None:
        """Append a markdown table (cells are converted with ``str``)."""
        lines = ["| " + " | ".join(str(h) for h in header) + " |"]
        lines.append("|" + "---|" * len(header))
        for row in rows:
            if len(row) != len(header):
                raise ValueError(
                    f"table row {list(row)} has {len(row)} cells, header {len(header)}"
                )
            lines.append("| " + " | ".join(str(c) for c in row) + " |")
        self.blocks.append("\n".join(lines) + "\n" + (f"\n{note.strip()}\n" if note else ""))

    def figure(self, filename: str, caption: str, fig: Any) -> Path:
        """Save ``fig`` as ``out_dir/filename`` (PNG, 110 dpi) and reference it."""
        if not filename.endswith(".png") or "/" in filename:
            raise ValueError(f"figure filename must be a plain *.png name, got {filename!r}")
        path = self.out_dir / filename
        fig.savefig(path, dpi=110)
        self.figures.append(filename)
        self.blocks.append(f"![{caption}]({filename})\n\n*{caption}*\n")
        return path

    # -- output -------------------------------------------------------------------------
    def header(self, wall: float) -> str:
        mode = "quick (reduced; for tests)" if self.quick else "full"
        lines = [
            f"# {self.title}",
            "",
            f"- Command: `{self.command}`",
            f"- Commit: `{self.commit or git_commit()}` (of the invocation that wrote these "
            "results; a report written from stored runs states the runs' own commits "
            "below)",
            f"- Wall time: {wall:.0f} s ({_wall_note(self.command, mode)}); seeds {self.seeds}; "
            f"torch {torch.__version__}, {self.threads or torch.get_num_threads()} thread(s), "
            f"{platform.machine()} CPU x{os.cpu_count()}",
            f"- Date: {_date_line(self.started_at)}",
        ]
        lines += [f"- Data: {note}" for note in self.data_notes]
        lines += [f"- {stamp}" for stamp in self.stamps]
        return "\n".join(lines) + "\n"

    def claims_table(self) -> str:
        lines = [
            "## Claims: the paper vs this run",
            "",
            "| # | section | paper's claim | paper's number | measured here | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for i, c in enumerate(self.claims, 1):
            cells = [str(i), c.section, c.claim, c.paper, c.measured, f"**{c.verdict}**"]
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        families = (
            "Families of tests (Holm's correction within each): " + "; ".join(self.families)
            if self.families
            else "Families of tests: none; every claim is decided by its own test(s)"
        )
        shared = (
            [
                "",
                "Tests shared between claims (the same test on the same samples, counted in the "
                "family of each claim that runs it): " + "; ".join(self.shared_tests) + ".",
            ]
            if self.shared_tests
            else []
        )
        lines += [
            "",
            VERDICT_RULES,
            "",
            families + ".",
            *shared,
            "",
            "Rules as applied, with the numbers:",
            "",
        ]
        lines += [f"{i}. `{c.key}`: {c.rule}" for i, c in enumerate(self.claims, 1)]
        return "\n".join(lines) + "\n"

    def write(self) -> dict[str, Any]:
        """Write ``report.md`` and ``results.json``; return the results dict."""
        wall = time.time() - self.started if self.wall_time_s is None else self.wall_time_s
        bad: list[str] = []
        results = {
            "study": self.name,
            "title": self.title,
            "command": self.command,
            "commit": self.commit or git_commit(),
            "wall_time_s": wall,
            "started": self.started_at,
            "quick": self.quick,
            "seeds": list(self.seeds),
            "torch": torch.__version__,
            "threads": self.threads or torch.get_num_threads(),
            "config": self.config,
            "data": self.data_notes,
            "claims": [asdict(c) for c in self.claims],
            "metrics": self.metrics,
            "runs": self.runs,
            "figures": self.figures,
            "stamps": self.stamps,
            "families": self.families,
            "shared_tests": self.shared_tests,
        }
        clean = _jsonable(results, "results", bad)
        clean["non_finite"] = bad
        (self.out_dir / "results.json").write_text(json.dumps(clean, indent=1) + "\n")
        text = "\n".join([self.header(wall), self.claims_table(), *self.blocks])
        (self.out_dir / "report.md").write_text(text)
        return dict(clean)
