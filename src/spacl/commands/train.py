"""``spacl train CONFIG [key=value ...]``: train from a YAML recipe, or resume a run.

CONFIG is a built-in recipe name (``mnist5k/spacl``; list them with ``spacl recipes``),
a recipe file (``my_recipe.yaml``), or an existing run directory (its ``config.yaml``
is used; ``--resume`` continues it).  Overrides are OmegaConf
dot-lists (``train.epochs=5 optim.lr=0.1``); the config is validated — unknown keys,
wrong types, impossible values, missing data paths — before anything is trained.
Under ``torchrun --nproc_per_node=N`` the process group is initialised from the
environment (gloo on the CPU, nccl on GPUs) and ``train.batch_size`` is the global batch.

Measured on two CPU cores: ``spacl train mnist5k/spacl train.epochs=1`` takes about a
minute (55-70 s), ``digits/*`` recipes seconds; ``cifar*`` / ``imagenet100`` recipes are
for GPUs.  ``--quiet`` turns off the progress bars and messages (the result still prints).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spacl.commands import check_directory_out, one_line

__all__ = [
    "format_task_summary",
    "interrupted_line",
    "register",
    "removed_if_nothing_saved",
    "resolve_run",
    "run",
    "saved_line",
]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a model from a YAML recipe (or resume a run)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config", help="recipe name (spacl recipes), YAML file, or a run directory to resume"
    )
    parser.add_argument("overrides", nargs="*", help="config overrides key=value (dot-list)")
    parser.add_argument(
        "--out", default=None, help="run directory (default: <out_dir>/<name>-<time>)"
    )
    parser.add_argument("--resume", action="store_true", help="continue from checkpoints/last.pt")
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or progress messages; warnings (a held-out split, a capped "
        "batch, skipped geometry) and errors still print",
    )
    parser.set_defaults(func=run)


def resolve_run(
    config: str, overrides: list[str], out: str | None, resume: bool
) -> tuple[Any, Path | None]:
    """``(loaded recipe, run directory or None)`` for the command-line arguments.

    The recipe is read by :func:`spacl.tasks.load_recipe` (every task, one lookup and
    layering rule).  A run directory as CONFIG means its ``config.yaml`` and itself as the
    output; an output directory that already holds a checkpoint needs ``--resume``.
    """
    from spacl.engine.rundir import RunDirectory, require_checkpoint
    from spacl.schema import as_layer
    from spacl.schema_files import read_run_config

    # the checks that need no torch first: a missing recipe, run or checkpoint answers at once
    source = Path(config)
    run_dir: Path | None = Path(out) if out else None
    if source.is_dir():
        run = RunDirectory(source)
        if not run.config.is_file():
            raise FileNotFoundError(
                f"{source} is a directory without config.yaml (not a run directory)"
            )
        recipe: Any = read_run_config(run.config)
        run_dir = run_dir or source
    else:
        if resume and out is None and not source.suffix and not source.exists():
            # `--resume` names a run directory: say that, not "no such recipe"
            from spacl.recipes import find_recipe

            if find_recipe(config) is None:
                raise FileNotFoundError(
                    f"no run directory at {config} to resume (--resume continues a run "
                    "directory that holds checkpoints/last.pt)"
                )
        as_layer(config)  # a missing or unreadable recipe: one line now, not after torch
        recipe = config
    if resume:
        require_checkpoint(run_dir)
    if run_dir is not None and RunDirectory(run_dir).last_checkpoint.is_file() and not resume:
        raise ValueError(
            f"{run_dir} already holds a run with a checkpoint; pass --resume to continue it, "
            "or choose another --out"
        )
    from spacl.tasks import registry  # the recipe's task schema (KG and text load torch)

    return registry.load_recipe(recipe, overrides), run_dir


def format_task_summary(summary: dict[str, Any]) -> str:
    """A ``task: kg`` / ``task: text`` run: its name, test metrics, the trivial baseline
    (reject-all, for open intent) and its run directory."""

    def row(metrics: dict[str, Any]) -> str:
        return "  ".join(
            f"{k} {v:.4f}" if isinstance(v, float) and abs(v) <= 1 else f"{k} {v:.2f}"
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "count"
        )

    lines = [f"{summary.get('name', 'run')} test: {row(summary.get('test', {}))}"]
    if summary.get("reject_all"):
        lines.append(f"reject-all baseline: {row(summary['reject_all'])}")
    if summary.get("run_dir"):
        lines.append(f"run directory: {summary['run_dir']}")
    return "\n".join(lines)


def _where(run_dir: str | Path | None) -> str:
    """``run_dir`` for a command line: absolute (it works from any directory), quoted."""
    return shlex.quote(str(Path(run_dir).resolve()) if run_dir is not None else "RUN")


def interrupted_line(stop: Any, run_dir: str | Path | None) -> str:
    """The one line of a run stopped by Ctrl-C / SIGTERM (a
    :class:`~spacl.engine.loop.StopRequested`): where it stopped, how to resume."""
    return (
        f"spacl train: interrupted at step {stop.progress.global_step}; checkpoint "
        f"saved, resume with: spacl train {_where(run_dir)} --resume"
    )


def saved_line(step: int | None, run_dir: str | Path) -> str:
    """The one line of a run interrupted outside a training step (its final evaluation,
    say) that holds a checkpoint: it is saved (at ``step``, when known), how to resume."""
    at = "" if step is None else f" at step {step}"
    return (
        f"spacl train: interrupted; the run is saved{at}, resume with: "
        f"spacl train {_where(run_dir)} --resume"
    )


def resume_hint(step: int, run_dir: str | Path | None) -> str:
    """What an error after a checkpoint adds: the work is saved, how to go on once the
    cause is fixed."""
    return (
        f"the run is saved at step {step}; once fixed, resume with: "
        f"spacl train {_where(run_dir)} --resume"
    )


#: what a run writes before its first step, besides an empty ``metrics.jsonl`` and
#: ``checkpoints/``: its config, an image-folder run's split record, a KG run's names
SKELETON_FILES = ("config.yaml", "split.json", "graph.pt")


def interrupted_early(
    err: BaseException,
    run_dir: str | Path | None = None,
    step: int | None = None,
    *,
    show: bool = True,
) -> int:
    """Ctrl-C / ``kill`` outside a training step: one line (when ``show``: the main
    process), the shell's status for the signal.

    The line depends on the run directory: one holding ``checkpoints/last.pt`` (a run
    interrupted in its final evaluation, or while a resume loads its data) is saved,
    at ``step`` when known, and the line says how to resume; otherwise (the data of a
    new run still loading) nothing is saved, :func:`removed_if_nothing_saved` has
    removed the skeleton the run wrote, and the line says to run the command again.
    ``run_dir``: the run directory when known, else the one
    :func:`removed_if_nothing_saved` found and left on ``err`` (``run_dir``)."""
    from spacl.engine.interrupt import exit_status
    from spacl.engine.rundir import RunDirectory

    where = run_dir if run_dir is not None else getattr(err, "run_dir", None)
    if where is not None and RunDirectory(where).last_checkpoint.is_file():
        line = saved_line(step, where)
    else:
        line = (
            "spacl train: interrupted before a checkpoint was written (nothing to resume): "
            "run the same command again"
        )
    if show:
        print(line, file=sys.stderr)
    return exit_status(getattr(err, "signum", None))


def _skeleton_only(path: Path) -> bool:
    """Whether the run directory ``path`` holds nothing but what a run writes before its
    first step: :data:`SKELETON_FILES`, an empty ``metrics.jsonl``, an empty
    ``checkpoints/``."""
    for entry in path.iterdir():
        if entry.name in SKELETON_FILES and entry.is_file():
            continue
        if entry.name == "metrics.jsonl" and entry.is_file() and not entry.stat().st_size:
            continue
        if entry.name == "checkpoints" and entry.is_dir() and not any(entry.iterdir()):
            continue
        return False
    return True


def _remove_skeleton(path: Path, created: bool) -> None:
    """Remove the skeleton of :func:`_skeleton_only`, and ``path`` itself if ``created``
    (best effort: another process of a distributed run may be removing it too)."""
    try:
        for name in (*SKELETON_FILES, "metrics.jsonl"):
            (path / name).unlink(missing_ok=True)
        if (path / "checkpoints").is_dir():
            (path / "checkpoints").rmdir()
        if created:
            path.rmdir()
    except OSError:
        pass


@contextmanager
def removed_if_nothing_saved(run_dir: Path | None, out_dir: Any = None) -> Iterator[None]:
    """On an error in the block (missing data, say), remove the run directory this command
    created when it holds only the skeleton a run writes first (:data:`SKELETON_FILES`,
    empty ``metrics.jsonl`` and ``checkpoints/``): a failed start leaves nothing behind.

    ``run_dir``: the run directory, if known (an existing, non-empty one is never touched);
    otherwise ``out_dir``, the parent a timestamped run directory is made in: the new
    entries there, written during the block, are the candidates.  Ctrl-C / ``kill``
    (``KeyboardInterrupt``) after such a new run directory wrote its checkpoint leaves
    its path on the exception (``run_dir``), for :func:`interrupted_early`.
    """
    start = time.time()
    known = run_dir is not None
    created = known and not run_dir.exists()  # type: ignore[union-attr]
    empty = known and run_dir.is_dir() and not any(run_dir.iterdir())  # type: ignore[union-attr]
    parent = Path(str(out_dir)).expanduser() if not known and out_dir else None
    parent_made = parent is not None and not parent.exists()
    before = set(parent.iterdir()) if parent is not None and parent.is_dir() else set()
    try:
        yield
    except (Exception, KeyboardInterrupt) as err:  # an error, or Ctrl-C / kill
        candidates: list[tuple[Path, bool]] = []
        if run_dir is not None and (created or empty):
            candidates.append((run_dir, created))
        elif parent is not None and parent.is_dir():
            candidates += [(p, True) for p in set(parent.iterdir()) - before]
        for path, made in candidates:
            config = path / "config.yaml"
            fresh = config.is_file() and config.stat().st_mtime >= start - 1
            if path.is_dir() and fresh and _skeleton_only(path):
                _remove_skeleton(path, made)
        saved = [p for p, _ in candidates if (p / "checkpoints" / "last.pt").is_file()]
        if run_dir is None and len(saved) == 1 and isinstance(err, KeyboardInterrupt):
            err.run_dir = saved[0]  # type: ignore[attr-defined]  # for interrupted_early
        if parent_made and parent is not None and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()  # the out_dir this run made for itself
        raise


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_directory_out(args.out, "--out")
    loaded, run_dir = resolve_run(args.config, list(args.overrides), args.out, args.resume)
    out_dir = loaded.config.get("out_dir")
    if run_dir is None and out_dir:  # a new run, made under out_dir: name the key
        check_directory_out(Path(str(out_dir)).expanduser(), "config key 'out_dir'")
    if loaded.task != "image":  # kg / text: their runners (docs/kg_and_text.md)
        return run_task(args, loaded, run_dir)
    return run_image(args, loaded, run_dir)


def run_task(args: argparse.Namespace, loaded: Any, run_dir: Path | None) -> int:
    """``spacl train`` of a KG or text recipe: its runner, its summary printed."""
    from spacl.engine import StopRequested
    from spacl.engine.interrupt import InterruptOnTerm, exit_status
    from spacl.tasks import run_loaded

    out_dir = loaded.config.get("out_dir")
    try:
        with InterruptOnTerm(), removed_if_nothing_saved(run_dir, out_dir):
            summary = run_loaded(loaded, out=run_dir, resume=args.resume, quiet=args.quiet)
    except StopRequested as stop:  # a KG run: checkpointed at the step
        print(interrupted_line(stop, stop.run_dir or run_dir), file=sys.stderr)
        return exit_status(stop.signum)
    except KeyboardInterrupt as err:  # outside a loop's step (loading, final evaluation)
        return interrupted_early(err, run_dir)
    print(format_task_summary(summary))
    return 0


def run_image(args: argparse.Namespace, loaded: Any, run_dir: Path | None) -> int:
    """``spacl train`` of an image recipe (any number of processes under torchrun)."""
    from spacl.engine import init_from_env
    from spacl.engine.interrupt import InterruptOnTerm
    from spacl.engine.rundir import default_run_dir
    from spacl.tasks.image import Trainer
    from spacl.tasks.image.summary import format_results_table

    cfg = loaded.config
    ctx = init_from_env(cfg.train.device)
    trainer: Trainer | None = None
    try:
        if run_dir is None:
            run_dir = default_run_dir(cfg)
        if ctx.enabled:  # every rank must use rank 0's directory
            import torch.distributed as dist

            holder = [str(run_dir)]
            dist.broadcast_object_list(holder, src=0)
            run_dir = Path(holder[0])
        # as typed, and where: its relative paths (data.root, --out) are from there
        words = getattr(args, "argv", ["train", *sys.argv[2:]])
        command = f"cd {shlex.quote(str(Path.cwd()))} && spacl " + shlex.join(words)
        named = [False]

        def name_the_run(trainer: Trainer, global_step: int) -> None:
            """The run directory, named once its first step is done: a run that fails
            before (an image that cannot be read) leaves nothing and names nothing."""
            if not named[0] and ctx.is_main and not args.quiet:
                print(f"run directory: {run_dir}", file=sys.stderr, flush=True)
            named[0] = True

        with InterruptOnTerm(), removed_if_nothing_saved(run_dir):  # a failed start
            trainer = Trainer(
                cfg,
                run_dir,
                resume=args.resume,
                ctx=ctx,
                quiet=args.quiet,
                command=command,
                callbacks=[name_the_run],
            )
            if args.resume and trainer.progress.finished and trainer.run.eval_json.is_file():
                finished = json.loads(trainer.run.eval_json.read_text())  # nothing to train
                if ctx.is_main:
                    print(
                        f"{run_dir}: finished at step {trainer.progress.global_step}; its "
                        f"results (spacl eval {shlex.quote(str(run_dir))} evaluates again):",
                        file=sys.stderr,
                    )
                    print(format_results_table(list(finished.items()), first_column="arm"))
                return 0
            if trainer.resumed_from is not None and ctx.is_main and not args.quiet:
                print(f"resuming at step {trainer.resumed_from}", file=sys.stderr, flush=True)
            result = fit_or_status(trainer, run_dir, ctx.is_main)
    except KeyboardInterrupt as err:  # Ctrl-C / kill while the data loads or it evaluates
        step = None if trainer is None else trainer.last_checkpoint_step
        return interrupted_early(err, run_dir, step, show=ctx.is_main)
    finally:
        ctx.shutdown()
    if isinstance(result, int):
        return result
    if ctx.is_main:
        rows = [(name, m) for name, m in result.metrics.items()]
        print(format_results_table(rows, first_column="arm"))
        print(
            f"\nrun directory: {result.run_dir}  "
            f"({result.global_step} step{'' if result.global_step == 1 else 's'}, "
            f"{result.seconds:.1f} s)"
        )
    return 0


def fit_or_status(trainer: Any, run_dir: Path, is_main: bool) -> Any:
    """``trainer.fit()``'s result; or, for a run that stopped, its one line and the exit
    status (an ``int``): 3 for a non-finite loss, the signal's for Ctrl-C / SIGTERM, 2 for
    an error met after a checkpoint (the run is saved; how to resume once fixed)."""
    from spacl.engine import StopRequested
    from spacl.engine.interrupt import exit_status
    from spacl.tasks.image import NonFiniteLossError

    try:
        return trainer.fit()
    except NonFiniteLossError as err:
        print(f"spacl train: stopped: {err}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError) as err:  # an unreadable test image, say
        saved = trainer.last_checkpoint_step
        if saved is None or not trainer.run.last_checkpoint.is_file() or not is_main:
            raise
        print(
            f"spacl train: error: {one_line(err)}; {resume_hint(saved, run_dir)}", file=sys.stderr
        )
        return 2
    except StopRequested as stop:
        if is_main:
            print(interrupted_line(stop, run_dir), file=sys.stderr)
        return exit_status(stop.signum)
