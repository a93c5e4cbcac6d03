"""``spacl demo``: SPACL vs SimCLR vs SupCon on the built-in 8x8 digits, on the CPU.

Trains four small encoders (an MLP on scikit-learn's 1,797 digits, 80/20 stratified
split) with the same data stream, views (the original + 4 augmentations), initialisation
and optimiser — SimCLR (NT-Xent over all views), SupCon (labels), SPACL self-supervised
(dynamic anchor, farthest-point hard positives, adversarial negatives and the literal
relative-threshold cut, one online pass of every view) and SPACL supervised
(``positive_pool="instance_class"``, every view an anchor, SupCon's mean over the
positives: the setting chosen on validation by ``spacl reproduce spacl``) — then
evaluates the frozen backbone
features: linear probe, weighted kNN (k=200, t=0.1), nearest class centre, and the
geometry (effective rank, NC1) of the test features.  Each model gets a normal run
directory under ``--out`` (default ``runs/demo-<time>``) with config, metrics,
checkpoint and summary; the table is also written to ``<out>/results.md``.

Takes about 45 s on two CPU cores (45.82 s in a fresh clone, 41.04 s warm,
``benchmarks/results/demo_time.md``; one thread by default: the models are tiny).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["DEMO_MODELS", "demo_config", "register", "run", "run_demo"]

#: every model sees the same 5 views (the original + 4 augmentations), as in the fair
#: protocol of ``spacl reproduce spacl``; temperatures are the ones that study chose on
#: MNIST-5k validation for each method
_VIEWS: dict[str, Any] = {"num_views": 5, "keep_original": True}
#: name -> (objective section, views overrides)
DEMO_MODELS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "simclr": ({"name": "simclr", "temperature": 0.2}, _VIEWS),
    "supcon": ({"name": "supcon", "temperature": 0.05}, _VIEWS),
    "spacl": ({"name": "spacl", "temperature": 0.05}, _VIEWS),
    "spacl_sup": (
        {
            "name": "spacl",
            "temperature": 0.1,
            "use_labels": True,
            "params": {
                "positive_pool": "instance_class",
                "positive_mode": "mean",
                "anchor_set": "every_view",
            },
        },
        _VIEWS,
    ),
}
#: EMA momentum of each model's target (0: the shared encoder, every model here)
DEMO_MOMENTUM = dict.fromkeys(DEMO_MODELS, 0.0)


def demo_config(name: str, epochs: int = 25, seed: int = 0, threads: int | None = 1) -> Any:
    """The validated config of demo model ``name`` (a key of :data:`DEMO_MODELS`).

    ``threads=1`` by default: the models are tiny, and one thread avoids the OpenMP
    oversubscription that makes small kernels 3-10x slower on busy machines.
    """
    from spacl.tasks import registry

    objective, views = DEMO_MODELS[name]
    base: dict[str, Any] = {
        "name": f"demo-{name}",
        "data": {"name": "digits", "test_fraction": 0.2},
        "views": {"augment": "image", "crop_scale": [0.5, 1.0], "flip": False, **views},
        "model": {
            "backbone": "mlp",
            "hidden_dims": [256],
            "feature_dim": 128,
            "head": "mlp",
            "proj_dim": 64,
            "momentum": DEMO_MOMENTUM[name],
        },
        "objective": objective,
        "optim": {"name": "adam", "lr": 2e-3, "weight_decay": 1e-5, "warmup_epochs": 1.0},
        "train": {
            "epochs": epochs,
            "batch_size": 256,
            "seed": seed,
            "device": "cpu",
            "precision": "fp32",
            "threads": threads,
            "log_every": 5,
        },
        "eval": {"every_epochs": 0, "knn_k": 200, "knn_t": 0.1},
        "log": {"tensorboard": False},
    }
    return registry.load_recipe(base).config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="train SPACL, SimCLR and SupCon on built-in digits (CPU, about 45 s) and compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default=None, help="output directory (default: runs/demo-<time>)")
    parser.add_argument("--epochs", type=int, default=25, help="epochs per model (default 25)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of data stream and initialisation"
    )
    parser.add_argument(
        "--models",
        default=",".join(DEMO_MODELS),
        help=f"comma-separated subset of {','.join(DEMO_MODELS)}",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: the models are tiny)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the table")
    parser.set_defaults(func=run)


def run_demo(
    out: str | Path | None = None,
    *,
    epochs: int = 25,
    seed: int = 0,
    models: tuple[str, ...] = tuple(DEMO_MODELS),
    threads: int | None = 1,
    quiet: bool = False,
) -> tuple[Path, dict[str, dict[str, float]], str]:
    """Train the demo models; return ``(output directory, metrics per model, table)``.

    Ctrl-C / SIGTERM while a model trains checkpoint it at the step and raise
    :class:`~spacl.engine.loop.StopRequested` naming its run directory (``run_dir``);
    the demo itself does not resume (``spacl demo`` starts again).
    """
    import torch

    from spacl.engine import StopRequested
    from spacl.tasks.image import Trainer
    from spacl.tasks.image.summary import format_results_table

    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"--epochs must be an integer >= 1, got {epochs!r}")
    unknown = [m for m in models if m not in DEMO_MODELS]
    if unknown or not models:
        raise ValueError(f"--models must name some of {list(DEMO_MODELS)}, got {list(models)}")
    out_dir = Path(out) if out else Path("runs") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    configs = {name: demo_config(name, epochs, seed, threads) for name in models}  # validate first
    results: dict[str, dict[str, float]] = {}
    started = time.time()
    threads_before = torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):
            for name, cfg in configs.items():
                t0 = time.time()
                if not quiet:
                    print(f"training {name} ...", file=sys.stderr, flush=True)
                try:
                    result = Trainer(cfg, out_dir / name, quiet=True, command="spacl demo").fit()
                except StopRequested as stop:  # Ctrl-C / SIGTERM: checkpointed at the step
                    stop.run_dir = str(out_dir / name)
                    raise
                results[name] = result.metrics["main"]
                if not quiet:
                    print(
                        f"  {name}: {result.global_step} steps in {time.time() - t0:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        torch.set_num_threads(threads_before)
    table = format_results_table(list(results.items()))
    seconds = time.time() - started
    report = [
        "# spacl demo: digits (8x8), MLP encoder, CPU",
        "",
        f"{epochs} epochs per model, batch 256, seed {seed}; frozen backbone features; "
        "geometry on the test split.",
        "",
        table,
        "",
        f"Total time {seconds:.1f} s.  Run directories: "
        + ", ".join(f"`{out_dir / n}`" for n in results),
        "",
    ]
    (out_dir / "results.md").write_text("\n".join(report))
    return out_dir, results, table


def interrupted(err: BaseException) -> int:
    """Ctrl-C / ``kill`` during the demo: one line (where the interrupted model's
    checkpoint is, when it wrote one; the demo does not resume) and the shell's status
    for the signal (130 for SIGINT, 143 for SIGTERM)."""
    from spacl.engine.interrupt import exit_status
    from spacl.engine.loop import StopRequested

    where = ""
    if isinstance(err, StopRequested) and err.run_dir is not None:
        step = err.progress.global_step
        where = f" ({Path(err.run_dir).name} at step {step}, its checkpoint in {err.run_dir})"
    print(
        f"spacl demo: interrupted{where}; the demo does not resume: run `spacl demo` again",
        file=sys.stderr,
    )
    return exit_status(getattr(err, "signum", None))


def run(args: argparse.Namespace) -> int:
    from spacl.commands import check_directory_out
    from spacl.engine.interrupt import InterruptOnTerm
    from spacl.engine.loop import StopRequested

    if args.out:
        check_directory_out(args.out, "--out")
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    t0 = time.time()
    try:
        with InterruptOnTerm():  # SIGTERM outside a training step: as Ctrl-C
            out_dir, _, table = run_demo(
                args.out,
                epochs=args.epochs,
                seed=args.seed,
                models=models,
                threads=args.threads,
                quiet=args.quiet,
            )
    except (StopRequested, KeyboardInterrupt) as err:
        return interrupted(err)
    print()
    print(table)
    print(f"\nrun directory: {out_dir}  (total {time.time() - t0:.1f} s)")
    return 0
