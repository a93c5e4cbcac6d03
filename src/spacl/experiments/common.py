"""Shared machinery of ``spacl reproduce``: verdict rules, report writer, plots, study arms.

Every study (``hard_negatives``, ``alignment_study``, ``spacl_study``) measures a set of
numbers over several seeds, then states each paper claim next to the paper's number and
the number measured here, with a verdict computed by one of the rules below - never
written by hand.

Verdict rules (``mean`` and ``std`` over seeds; ``std`` is the sample standard deviation,
``ddof = 1``, and ``0`` with one seed; ``pooled = sqrt((std_a^2 + std_b^2) / 2)``;
``tol = max(pooled, min_gap)`` where ``min_gap >= 0`` is a per-claim absolute tolerance
that keeps a one-seed run from calling a rounding-level difference a result):

* :func:`compare` - claim ``E[a] > E[b]``: **reproduced** if ``mean_a - mean_b > tol``,
  **opposite** if ``mean_b - mean_a > tol``, else **not reproduced at this scale**.
* :func:`best_of` - claim "option ``k`` is the best": reproduced if ``k`` beats every
  other option by more than its ``tol``; opposite if every other option beats ``k`` by
  more than its ``tol`` (``k`` is the clear worst); else not reproduced at this scale.
* :func:`trend` - claim "the metric rises (falls) along the sweep": :func:`compare` of
  the last sweep value against the first (the endpoints carry the claim; the measured
  text shows every point).
* :func:`at_most` - claim "the values never exceed ``bound``" (a theorem's bound):
  reproduced if ``max <= bound``, opposite if ``min > bound``, else not at this scale.
* :func:`combine` - a claim made of several parts (settings, sweep rules): reproduced
  if every part is, opposite if every part is opposite, else not at this scale.
* :func:`at_least` - claim "the value is high (``>= threshold``)": reproduced if
  ``mean - std >= threshold``, opposite if ``mean + std < threshold``, else not at
  this scale.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "OPPOSITE",
    "REPRODUCED",
    "VERDICTS",
    "VERDICT_RULES",
    "Claim",
    "StudyReport",
    "Verdict",
    "at_least",
    "at_most",
    "best_of",
    "combine",
    "compare",
    "fmt",
    "git_commit",
    "make_arm",
    "mean_std",
    "new_figure",
    "pooled_std",
    "probe_metrics",
    "seed_list",
    "study_threads",
    "summarize",
    "train_shared",
    "trend",
]

REPRODUCED = "reproduced"
NOT_AT_SCALE = "not reproduced at this scale"
OPPOSITE = "opposite"
VERDICTS: tuple[str, ...] = (REPRODUCED, NOT_AT_SCALE, OPPOSITE)

#: the verdict rules as printed under every claims table
VERDICT_RULES = (
    "Verdicts are computed from the measured numbers (mean and sample std over seeds; "
    "`pooled = sqrt((std_a^2 + std_b^2)/2)`, `tol = max(pooled, min_gap)`): "
    "*ordering claims* (`a > b`) are **reproduced** when `mean_a - mean_b > tol`, "
    "**opposite** when `mean_b - mean_a > tol`, otherwise **not reproduced at this scale**; "
    "*best-option claims* need the claimed option to beat every other by more than `tol` "
    "(opposite: every other beats it); *trend claims* compare the last sweep value with "
    "the first; *combined claims* need every part to agree; *bound claims* are reproduced "
    "when every measured value is within the bound (opposite when none is); *level claims* "
    "(`>= threshold`) need `mean - std >= threshold` (opposite: `mean + std < threshold`). "
    "`min_gap` is stated with each claim."
)


# ---------------------------------------------------------------------------- statistics
def _values(values: Sequence[float] | Tensor, name: str = "values") -> list[float]:
    out = [float(v) for v in (values.tolist() if isinstance(values, Tensor) else values)]
    if not out:
        raise ValueError(f"{name} must hold at least one value, got none")
    return out


def mean_std(values: Sequence[float] | Tensor) -> tuple[float, float]:
    """``(mean, sample std)`` with ``ddof = 1``; the std of a single value is ``0``."""
    v = _values(values)
    m = math.fsum(v) / len(v)
    if len(v) < 2:
        return m, 0.0
    return m, math.sqrt(math.fsum((x - m) ** 2 for x in v) / (len(v) - 1))


def pooled_std(a: Sequence[float], b: Sequence[float]) -> float:
    """``sqrt((std_a^2 + std_b^2) / 2)`` with sample standard deviations."""
    return math.sqrt((mean_std(a)[1] ** 2 + mean_std(b)[1] ** 2) / 2.0)


def fmt(values: Sequence[float] | float, scale: float = 1.0, digits: int = 2) -> str:
    """``"mean ± std"`` of ``values * scale`` (a single number: just the number)."""
    if isinstance(values, (int, float)):
        return f"{float(values) * scale:.{digits}f}"
    m, s = mean_std([float(v) * scale for v in values])
    if len(values) < 2:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def summarize(records: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per-seed scalar records -> ``{metric: {"values": [...], "mean": m, "std": s}}``.

    Every record must hold the same keys (one record per seed).
    """
    if not records:
        raise ValueError("records must hold at least one per-seed record, got none")
    keys = list(records[0])
    for i, rec in enumerate(records):
        if list(rec) != keys:
            raise ValueError(f"record {i} has keys {sorted(rec)}, record 0 has {sorted(keys)}")
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        values = [float(r[key]) for r in records]
        m, s = mean_std(values)
        out[key] = {"values": values, "mean": m, "std": s}
    return out


# ------------------------------------------------------------------------------ verdicts
@dataclass(frozen=True)
class Verdict:
    """A verdict (one of :data:`VERDICTS`) and the rule with the numbers that decided it."""

    verdict: str
    rule: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def _check_gap(min_gap: float) -> float:
    if not isinstance(min_gap, (int, float)) or not math.isfinite(min_gap) or min_gap < 0:
        raise ValueError(f"min_gap must be a finite number >= 0, got {min_gap!r}")
    return float(min_gap)


def compare(
    higher: Sequence[float],
    lower: Sequence[float],
    *,
    min_gap: float = 0.0,
    names: tuple[str, str] = ("a", "b"),
) -> Verdict:
    """Claim ``E[higher] > E[lower]`` (module docstring); flip the arguments for ``<``."""
    a, b = _values(higher, names[0]), _values(lower, names[1])
    tol = max(pooled_std(a, b), _check_gap(min_gap))
    gap = mean_std(a)[0] - mean_std(b)[0]
    rule = (
        f"mean({names[0]}) - mean({names[1]}) = {gap:+.4g}, "
        f"tol = max(pooled std, min_gap={min_gap:g}) = {tol:.3g}"
    )
    if gap > tol:
        return Verdict(REPRODUCED, rule)
    if -gap > tol:
        return Verdict(OPPOSITE, rule)
    return Verdict(NOT_AT_SCALE, rule)


def best_of(
    samples: Mapping[Any, Sequence[float]], claimed: Any, *, min_gap: float = 0.0
) -> Verdict:
    """Claim: option ``claimed`` has the largest expected value (module docstring)."""
    if claimed not in samples or len(samples) < 2:
        raise ValueError(
            f"samples must hold the claimed option {claimed!r} and at least one other, "
            f"got options {list(samples)}"
        )
    gap_min = _check_gap(min_gap)
    mine = _values(samples[claimed], str(claimed))
    m = mean_std(mine)[0]
    wins, losses = [], []
    parts = []
    for key, other in samples.items():
        if key == claimed:
            continue
        o = _values(other, str(key))
        tol = max(pooled_std(mine, o), gap_min)
        gap = m - mean_std(o)[0]
        wins.append(gap > tol)
        losses.append(-gap > tol)
        parts.append(f"vs {key}: {gap:+.3g} (tol {tol:.2g})")
    rule = f"best-option claim for {claimed}: " + ", ".join(parts)
    if all(wins):
        return Verdict(REPRODUCED, rule)
    if all(losses):
        return Verdict(OPPOSITE, rule)
    return Verdict(NOT_AT_SCALE, rule)


def trend(
    sweep: Sequence[Sequence[float]],
    *,
    increasing: bool = True,
    min_gap: float = 0.0,
    labels: Sequence[Any] | None = None,
) -> Verdict:
    """Claim: the metric rises (``increasing``) or falls along the sweep (endpoint rule)."""
    if len(sweep) < 2:
        raise ValueError(f"sweep must hold at least 2 points, got {len(sweep)}")
    names = [str(x) for x in labels] if labels is not None else ["first", "last"]
    first, last = names[0], names[-1]
    if increasing:
        v = compare(sweep[-1], sweep[0], min_gap=min_gap, names=(last, first))
    else:
        v = compare(sweep[0], sweep[-1], min_gap=min_gap, names=(first, last))
    direction = "rising" if increasing else "falling"
    return Verdict(v.verdict, f"{direction}-trend claim (endpoints): {v.rule}")


def combine(parts: Mapping[str, Verdict]) -> Verdict:
    """All parts must agree (module docstring); the rule lists each part's verdict."""
    if not parts:
        raise ValueError("parts must hold at least one verdict, got none")
    verdicts = [v.verdict for v in parts.values()]
    rule = "; ".join(f"[{k}] {v.verdict}: {v.rule}" for k, v in parts.items())
    if all(v == REPRODUCED for v in verdicts):
        return Verdict(REPRODUCED, rule)
    if all(v == OPPOSITE for v in verdicts):
        return Verdict(OPPOSITE, rule)
    return Verdict(NOT_AT_SCALE, rule)


def at_most(values: Sequence[float], bound: float) -> Verdict:
    """Claim: every value is ``<= bound`` (module docstring)."""
    v = _values(values)
    rule = f"max = {max(v):.4g}, min = {min(v):.4g}, bound = {bound:.4g}"
    if max(v) <= bound:
        return Verdict(REPRODUCED, rule)
    if min(v) > bound:
        return Verdict(OPPOSITE, rule)
    return Verdict(NOT_AT_SCALE, rule)


def at_least(values: Sequence[float], threshold: float) -> Verdict:
    """Claim: the expected value is ``>= threshold`` (module docstring)."""
    m, s = mean_std(values)
    rule = f"mean = {m:.4g}, std = {s:.3g}, threshold = {threshold:.4g}"
    if m - s >= threshold:
        return Verdict(REPRODUCED, rule)
    if m + s < threshold:
        return Verdict(OPPOSITE, rule)
    return Verdict(NOT_AT_SCALE, rule)


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


def seed_list(n: int) -> list[int]:
    """Seeds ``0 .. n-1`` (``ValueError`` unless ``n >= 1``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"--seeds must be an integer >= 1, got {n!r}")
    return list(range(n))


@contextmanager
def study_threads(threads: int | None) -> Iterator[None]:
    """Run with ``torch.set_num_threads(threads)`` (``None``: unchanged), restored after.

    **Decision**: the studies default to one thread - on a small machine shared with
    other processes, oversubscribed BLAS threads made steps 10x slower in our
    measurements, and one thread keeps the numbers bit-for-bit reproducible.
    """
    before = torch.get_num_threads()
    if threads is not None:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"--threads must be an integer >= 1, got {threads!r}")
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)

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
        """Add a row to the claims table (the verdict comes from a rule function)."""
        if any(c.key == key for c in self.claims):
            raise ValueError(f"claim key {key!r} used twice")
        row = Claim(key, section, claim, paper, measured, verdict.verdict, verdict.rule)
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
            f"- Commit: `{git_commit()}`",
            f"- Wall time: {wall:.0f} s ({mode}); seeds {self.seeds}; "
            f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
            f"{platform.machine()} CPU x{os.cpu_count()}",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.started))}",
        ]
        lines += [f"- Data: {note}" for note in self.data_notes]
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
        lines += ["", VERDICT_RULES, "", "Rules as applied, with the numbers:", ""]
        lines += [f"{i}. `{c.key}`: {c.rule}" for i, c in enumerate(self.claims, 1)]
        return "\n".join(lines) + "\n"

    def write(self) -> dict[str, Any]:
        """Write ``report.md`` and ``results.json``; return the results dict."""
        wall = time.time() - self.started
        bad: list[str] = []
        results = {
            "study": self.name,
            "title": self.title,
            "command": self.command,
            "commit": git_commit(),
            "wall_time_s": wall,
            "quick": self.quick,
            "seeds": list(self.seeds),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "config": self.config,
            "data": self.data_notes,
            "claims": [asdict(c) for c in self.claims],
            "metrics": self.metrics,
            "runs": self.runs,
            "figures": self.figures,
        }
        clean = _jsonable(results, "results", bad)
        clean["non_finite"] = bad
        (self.out_dir / "results.json").write_text(json.dumps(clean, indent=1) + "\n")
        text = "\n".join([self.header(wall), self.claims_table(), *self.blocks])
        (self.out_dir / "report.md").write_text(text)
        return dict(clean)


# ------------------------------------------------------------------------ shared training
def make_arm(
    name: str,
    objective: str,
    loss: nn.Module,
    model: nn.Module,
    *,
    lr: float,
    use_labels: bool,
    optimizer: str = "adam",
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    lr_lambda: Callable[[int], float] | None = None,
) -> Any:
    """A :class:`spacl.engine.Arm` (shared encoder target, fp32, CPU) for a study loop.

    ``objective`` names the engine's registry entry (``"spacl"`` selects the anchor +
    pool step, ``"cross_entropy"`` a classifier head the caller has put on ``model``);
    ``optimizer`` is ``"adam"`` or ``"sgd"`` (with ``momentum``); ``lr_lambda`` an
    optional per-step multiplier (constant by default).
    """
    from spacl.engine import OBJECTIVES, Arm, Precision
    from spacl.models import EMATarget

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    opt: torch.optim.Optimizer
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda or (lambda step: 1.0))
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    return Arm(
        name,
        OBJECTIVES[objective],
        loss,
        use_labels,
        model,
        model,
        EMATarget(model, 0.0),
        opt,
        schedule,
        scaler,
        Precision(),
    )


def train_shared(
    arms: Mapping[str, Any],
    stream: Any,
    epochs: int,
    on_epoch: Callable[[int], None] | None = None,
    label_fn: Callable[[Any], Tensor] | None = None,
) -> int:
    """Train every arm on the SAME batches (drawn once per step); return the step count.

    Shared randomness (SPEC §3): each batch of ``stream`` (a :class:`spacl.data.ViewStream`:
    instances and augmentation tensors) is drawn once and handed, as the same tensor, to
    every arm's ``train_step(views, labels, step)``; ``labels`` is ``label_fn(batch)``
    (default: the fine labels).

    ``on_epoch(e)`` is called before training (``e = 0``) and after every epoch.
    """
    if on_epoch is not None:
        on_epoch(0)
    step = 0
    for epoch in range(epochs):
        for batch in stream.epoch_batches(epoch):
            labels = batch.labels if label_fn is None else label_fn(batch)
            for arm in arms.values():
                arm.train_step(batch.views, labels, step)
            step += 1
        if on_epoch is not None:
            on_epoch(epoch + 1)
    return step


def probe_metrics(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    knn_k: int = 20,
) -> dict[str, float]:
    """Top-1 test accuracies (in ``[0, 1]``) of the frozen-feature classifiers.

    ``ncc`` nearest class centre (Euclidean), ``knn`` weighted kNN (cosine, ``t = 0.1``)
    and ``linear`` the L-BFGS logistic-regression probe of :mod:`spacl.evaluate`.
    """
    from spacl.evaluate import knn_accuracy, linear_probe, nearest_centre_accuracy

    ncc = nearest_centre_accuracy(train_features, train_labels, test_features, test_labels)
    knn = knn_accuracy(train_features, train_labels, test_features, test_labels, k=knn_k)
    probe = linear_probe(train_features, train_labels, test_features, test_labels, max_iter=200)
    return {"ncc": ncc, "knn": knn, "linear": probe.test_accuracy}
