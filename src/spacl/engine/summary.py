"""``summary.md``: a short, human-readable report of a run (and the results table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spacl.engine.trainer import Trainer

__all__ = ["format_results_table", "write_summary"]

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


def write_summary(trainer: Trainer, metrics: dict[str, dict[str, float]], seconds: float) -> None:
    """Write ``summary.md`` for a finished run."""
    cfg = trainer.cfg
    run = trainer.run
    rows = [
        (f"{arm.name}: {_objective_text(arm)}", metrics.get(arm.name, {})) for arm in trainer.arms
    ]
    lines = [
        f"# Run `{run.path.name}`",
        "",
        f"- data: **{cfg.data.name}** ({trainer.data.name}), {cfg.views.num_views} views, "
        f"labels: {cfg.data.label_kind}",
        f"- model: {cfg.model.backbone} + {cfg.model.head} head (dim {cfg.model.proj_dim}), "
        f"target momentum {cfg.model.momentum}",
        f"- optimiser: {cfg.optim.name}, lr {cfg.optim.lr} ({cfg.optim.lr_scaling} scaling), "
        f"{cfg.optim.schedule} schedule, batch {cfg.train.batch_size}",
        f"- {trainer.progress.global_step} steps, {trainer.progress.epoch} epoch(s) completed, "
        f"{seconds:.1f} s, device {trainer.ctx.device}, {trainer.ctx.world_size} process(es), "
        f"precision {cfg.train.precision}",
    ]
    if trainer.resumed_from is not None:
        lines.append(f"- resumed from the checkpoint at step {trainer.resumed_from}")
    if trainer.command:
        lines.append(f"- command: `{trainer.command}`")
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
        f"Re-evaluate: `spacl eval {run.path}`.  Resume: `spacl train {run.path} --resume`.",
        "",
    ]
    run.summary.write_text("\n".join(lines))
