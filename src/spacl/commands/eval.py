"""``spacl eval RUN_DIR [eval.key=value ...]``: evaluate a run's checkpoint on frozen features.

Loads ``RUN_DIR/config.yaml`` and ``RUN_DIR/checkpoints/last.pt`` (or ``--checkpoint``),
extracts features of the training and test sets, and reports the linear probe,
weighted kNN (k=200, t=0.1 by default), nearest class centre and geometry of every
arm.  Writes ``RUN_DIR/eval.json`` (``--no-write`` to skip).  Only ``eval.*`` keys may
be overridden (e.g. ``eval.features=projections eval.knn_k=20``), and ``data.root`` of an
image run: where its data is now, for a run or a folder that moved.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spacl.commands import moved_data_error, moved_data_root

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a trained run (linear probe, kNN, NCC, geometry)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", help="a run directory written by spacl train")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="eval.* overrides key=value, or data.root=DIR (a moved image folder)",
    )
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint file (default: checkpoints/last.pt)"
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--no-write", action="store_true", help="do not write RUN_DIR/eval.json")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spacl.engine.rundir import RunDirectory

    rd = RunDirectory(args.run_dir)
    for item in args.overrides:
        if not item.startswith(("eval.", "data.root=")):
            raise ValueError(
                f"spacl eval accepts only eval.* overrides and data.root=DIR (where the "
                f"run's data is now), got {item!r}"
            )
    task = str(rd.read_config_dict().get("task", "image"))  # not a run directory: one line
    if task in ("kg", "text"):
        return run_task_eval(args, task)
    from spacl.schema_files import read_run_config
    from spacl.tasks import registry
    from spacl.tasks.image import Trainer  # the image task, once the run is known to be one
    from spacl.tasks.image.summary import format_results_table

    cfg = registry.load_recipe(read_run_config(rd.config), list(args.overrides)).config
    ckpt = Path(args.checkpoint) if args.checkpoint else rd.last_checkpoint
    if not ckpt.is_file():
        raise FileNotFoundError(f"checkpoint {ckpt} does not exist (has the run saved one yet?)")
    from spacl.data.imagefolder import UnreadableImageError, in_trained_split

    try:
        trainer = Trainer(cfg, rd.path, read_only=True, checkpoint=ckpt, quiet=True)
        metrics = trainer.final_evaluation()
    except UnreadableImageError as err:  # a file of the run's own split: it must come back
        raise in_trained_split(err) from None
    if not args.no_write:
        rd.write_json(rd.eval_json, metrics)
        trainer.write_centres()
    if args.json:
        print(json.dumps(metrics, indent=2, sort_keys=True))
    else:
        print(format_results_table(list(metrics.items()), first_column="arm"))
        print(
            f"\n{rd.path}: step {trainer.progress.global_step}, features={cfg.eval.features}, "
            f"kNN k={cfg.eval.knn_k} t={cfg.eval.knn_t}",
            file=sys.stderr,
        )
    return 0


def run_task_eval(args: argparse.Namespace, task: str) -> int:
    """``spacl eval`` of a KG / text run: its checkpoint's test metrics, computed again."""
    from spacl.engine.rundir import RunDirectory

    if args.checkpoint:
        raise ValueError(f"spacl eval of a {task} run takes no --checkpoint (it has one)")
    root = moved_data_root(args.overrides, "eval")
    rd = RunDirectory(args.run_dir)
    try:
        if task == "kg":
            from spacl.tasks.kg.run import evaluate_kg_run

            metrics = evaluate_kg_run(rd.path, data_root=root)
        else:
            from spacl.tasks.text.run import evaluate_text_run

            metrics = evaluate_text_run(rd.path, data_root=root)
    except FileNotFoundError as err:  # the run's data is not where it was
        if root is not None:
            raise
        raise moved_data_error(err, "eval", args.run_dir) from None
    if not args.no_write:
        rd.write_json(rd.eval_json, metrics)
    if args.json:
        print(json.dumps(metrics, indent=2, sort_keys=True))
        return 0
    for name, values in metrics.items():
        shown = "  ".join(
            f"{k} {v:.4f}" for k, v in values.items() if isinstance(v, float) and k != "count"
        )
        print(f"{name}: {shown}")
    return 0
