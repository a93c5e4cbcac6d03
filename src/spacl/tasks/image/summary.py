"""``summary.md``: a short, human-readable report of a run (and the results table)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunFacts", "format_results_table", "write_summary"]

#: (column title, metric key, scale, format)
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("linear probe %", "linear_accuracy", 100.0, "{:.2f}"),
    ("kNN %", "knn_accuracy", 100.0, "{:.2f}"),
    ("NCC %", "ncc_accuracy", 100.0, "{:.2f}"),
    ("eff. rank", "geometry/effective_rank_singular", 1.0, "{:.1f}"),
    ("NC1", "geometry/nc1", 1.0, "{:.3f}"),
    ("NC2 ETF dev.", "geometry/nc2_etf_deviation", 1.0, "{:.3f}"),
)


def format_results_table(
    rows: list[tuple[str, dict[str, float]]], *, first_column: str = "model"
) -> str:
    """A Markdown table of the :data:`COLUMNS` present in any row (``-`` where missing)."""
    cols = [c for c in COLUMNS if any(c[1] in m for _, m in rows)]
    head = f"| {first_column} | " + " | ".join(c[0] for c in cols) + " |"
    sep = "|---|" + "---:|" * len(cols)
    lines = [head, sep]
    for name, metrics in rows:
        cells = []
        for _, key, scale, fmt in cols:
            value = metrics.get(key)
            cells.append("-" if value is None else fmt.format(scale * value))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _objective_text(arm: Any) -> str:
    return arm.spec.name + (" (labels)" if arm.use_labels else "")


@dataclass(frozen=True)
class RunFacts:
    """What ``summary.md`` says of a finished run beside its config and metrics."""

    path: Path  # the run directory
    data_name: str  # the loaded data's own name (e.g. ``digits-train``)
    steps: int
    epochs: int
    seconds: float
    device: str
    processes: int
    resumed_from: int | None = None
    command: str | None = None
    batch_size: int | None = None  # the global batch trained on, when not train.batch_size
    batch_note: str | None = None  # why (``RunData.batch_note``)


def _batch_text(cfg: Any, facts: RunFacts) -> str:
    """The batch the run trained on: ``train.batch_size``, or the smaller batch it was cut
    to (an image folder with fewer training images), saying why."""
    if facts.batch_size is None or facts.batch_size == int(cfg.train.batch_size):
        return str(cfg.train.batch_size)
    return f"{facts.batch_size} ({facts.batch_note or f'train.batch_size={cfg.train.batch_size}'})"


def write_summary(
    out: Path,
    cfg: Any,
    arms: list[Any],
    facts: RunFacts,
    metrics: dict[str, dict[str, float]],
) -> None:
    """Write ``summary.md`` (at ``out``) for a finished run: its data, model, optimiser and
    steps, then the final metrics of every arm (``arms``: their names and objectives)."""
    rows = [(f"{arm.name}: {_objective_text(arm)}", metrics.get(arm.name, {})) for arm in arms]
    lines = [
        f"# Run `{facts.path.name}`",
        "",
        f"- data: **{cfg.data.name}** ({facts.data_name}), {cfg.views.num_views} views, "
        f"labels: {cfg.data.label_kind}",
        f"- model: {cfg.model.backbone} + {cfg.model.head} head (dim {cfg.model.proj_dim}), "
        f"target momentum {cfg.model.momentum}",
        f"- optimiser: {cfg.optim.name}, lr {cfg.optim.lr} ({cfg.optim.lr_scaling} scaling), "
        f"{cfg.optim.schedule} schedule, batch {_batch_text(cfg, facts)}",
        f"- {facts.steps} step{'' if facts.steps == 1 else 's'}, {facts.epochs} epoch(s) "
        "completed, "
        f"{facts.seconds:.1f} s, device {facts.device}, {facts.processes} process(es), "
        f"precision {cfg.train.precision}",
    ]
    if facts.resumed_from is not None:
        lines.append(f"- resumed from the checkpoint at step {facts.resumed_from}")
    if facts.command:
        lines.append(f"- command: `{facts.command}`")
    lines += [
        "",
        f"## Final evaluation ({cfg.eval.features}, kNN k={cfg.eval.knn_k} t={cfg.eval.knn_t}; "
        "geometry on the test features)",
        "",
        format_results_table(rows),
        "",
        "## Files",
        "",
        "- `config.yaml`: the resolved config",
        "- `metrics.jsonl`: training / epoch / evaluation records",
        "- `checkpoints/last.pt`: the final checkpoint (load with `weights_only=True`)",
        "- `eval.json`: every final metric",
        "",
        "Re-evaluate: `spacl eval RUN`.  Resume: `spacl train RUN --resume`.  `RUN` is "
        f"this directory, written at `{facts.path.resolve()}` (it may be moved).",
        "",
    ]
    out.write_text("\n".join(lines))
