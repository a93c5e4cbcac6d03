"""``spacl reproduce NAME``: run one of the laptop-scale studies that check the papers' claims.

NAME is one of:

  hard-negatives  SCL vs HSCL, UCL vs HUCL: neural vs dimensional collapse (SPEC §2)
  alignment       CL vs NSCL / SupCon / CE under shared randomness, CKA, RSA (SPEC §3)
  spacl           SPACL under one fair protocol vs SimCLR / SupCon / HCL / VarCon /
                  Barlow Twins / MaskCon on MNIST-5k and CLINC150 10-shot: every
                  option, the ablations, collapse diagnostics (§1)

Each study writes ``report.md`` (the paper's claim, the paper's number and the number
measured here side by side, with a verdict computed by a stated rule), PNG plots and
``results.json`` (every number, the config and the seeds) to ``--out`` (default
``runs/reproduce/NAME``; the committed results live in ``docs/results/NAME``).  A full
study's wall time is in its report's timing section.  The SPACL study trains several
hundred models: of the 656 trained runs in its committed run store, 420 recorded their time,
270 minutes in all, and 236 imported from earlier results recorded none, so a run from
nothing takes several hours on two cores (finished runs are kept under ``OUT/runs`` and
reused by a rerun).  It does not train what its claims 24-27 read: the StackOverflow
open-intent runs (``docs/results/open_intent``) and the nine FB15k-237 seed runs of
``benchmarks/kg_seeds.py`` (60 minutes of training each); without their stores those
rows say no verdict (runs missing).  ``--quick`` runs a reduced smoke version (used by
the tests) whose report states no verdict.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from spacl._validation import check_choice
from spacl.commands import check_directory_out

__all__ = ["STUDIES", "register", "run", "run_study"]

#: study name -> module under ``spacl.studies``
STUDIES: dict[str, str] = {
    "hard-negatives": "hard_negatives",
    "alignment": "alignment_study",
    "spacl": "spacl_bench",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="reproduce the papers' claims at laptop scale (report + plots + results.json)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=sorted(STUDIES), help="which study")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run of every stage (minutes on 2 cores; no verdict)",
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="number of seeds 0..N-1 (default 3; quick 1)"
    )
    parser.add_argument(
        "--out", default=None, help="output directory (default runs/reproduce/NAME)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1, see the report)"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root with text/clinc (default: the data roots listed by `spacl data`)",
    )
    parser.add_argument(
        "--cache-dir", default=None, help="embedding cache (default $SPACL_CACHE_DIR)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the report again from its stored results.json",
    )
    parser.add_argument(
        "--from",
        dest="source",
        default=None,
        help="with --report-only: the stored results.json or its directory (default "
        "docs/results/NAME under this directory, else under the source checkout, else "
        "--out)",
    )
    parser.set_defaults(func=run)


#: the studies whose report can be written again from their results.json alone
REGENERABLE = ("alignment", "hard-negatives", "spacl")


def regenerate_study(name: str, source: str | Path, out: str | Path) -> dict[str, Any]:
    """Write study ``name``'s report again from its stored results (nothing trained)."""
    import importlib

    check_choice(name, "name", REGENERABLE)
    module = importlib.import_module(f"spacl.studies.{STUDIES[name]}")
    try:
        results: dict[str, Any] = module.regenerate(Path(source), Path(out))
    except KeyError as err:  # a stored file damaged below the sections checked on reading
        raise ValueError(
            f"{source}: the stored {name} results lack {err}, which the report reads "
            f"(written by `spacl reproduce {name}`)"
        ) from None
    return results


def command_line(args: argparse.Namespace) -> str:
    """The canonical command line of ``args`` (recorded in the report)."""
    parts = ["spacl", "reproduce", args.name]
    if args.quick:
        parts.append("--quick")
    if args.seeds is not None:
        parts += ["--seeds", str(args.seeds)]
    if args.out is not None:
        parts += ["--out", str(args.out)]
    if args.threads != 1:
        parts += ["--threads", str(args.threads)]
    return " ".join(parts)


def run_study(
    name: str,
    out: str | Path,
    *,
    quick: bool = False,
    seeds: int | None = None,
    threads: int | None = 1,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    command: str | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Run study ``name`` (a key of :data:`STUDIES`) and return its results dict."""
    import importlib

    from spacl.studies.common import seed_list, study_threads

    check_choice(name, "name", sorted(STUDIES))
    seeds_ = seed_list(seeds if seeds is not None else (1 if quick else 3))
    module = importlib.import_module(f"spacl.studies.{STUDIES[name]}")
    kwargs: dict[str, Any] = {
        "quick": quick,
        "seeds": seeds_,
        "command": command or f"spacl reproduce {name}" + (" --quick" if quick else ""),
        "log": log,
    }
    if name == "hard-negatives":
        kwargs.update(data_root=data_dir, cache_dir=cache_dir)
    with study_threads(threads):
        results: dict[str, Any] = module.run(Path(out), **kwargs)
    return results


def run(args: argparse.Namespace) -> int:
    from spacl._progress import progress

    if args.out:
        check_directory_out(args.out, "--out")
    out = Path(args.out) if args.out else Path("runs") / "reproduce" / args.name
    started = time.time()
    if args.report_only:
        from spacl.studies.study import committed_results

        source = Path(args.source) if args.source else committed_results(args.name) or out
        if args.name not in REGENERABLE:
            raise ValueError(
                f"--report-only: the {args.name} study cannot yet write its report from "
                f"stored results alone (only: {', '.join(REGENERABLE)})"
            )
        results = regenerate_study(args.name, source, out)
        _print_verdicts(results, out, started)
        return 0
    # a live bar (elapsed time, parts finished) while the study runs; --quiet: none
    bar = progress(desc=f"reproduce {args.name}", unit="part", mode=False if args.quiet else None)

    def log(message: str) -> None:
        if not args.quiet:
            bar.write(message, file=sys.stderr)
        bar.update(1)

    log(f"spacl reproduce {args.name}{' (quick)' if args.quick else ''} -> {out}")
    from spacl.engine.interrupt import InterruptOnTerm, exit_status
    from spacl.engine.loop import StopRequested

    try:
        with InterruptOnTerm():  # kill / Slurm's SIGTERM: as Ctrl-C, one line
            results = run_study(
                args.name,
                out,
                quick=args.quick,
                seeds=args.seeds,
                threads=args.threads,
                data_dir=args.data_dir,
                cache_dir=args.cache_dir,
                command=command_line(args),
                log=log,
            )
    except (StopRequested, KeyboardInterrupt) as err:
        bar.close()
        print(interrupted_line(args.name, out), file=sys.stderr)
        return exit_status(getattr(err, "signum", None))
    bar.close()
    _print_verdicts(results, out, started)
    return 0


#: the studies whose finished runs a rerun reuses (kept under ``OUT/runs``)
REUSES_RUNS = ("spacl",)


def interrupted_line(name: str, out: Path) -> str:
    """The one line of an interrupted study: how to go on, and what a rerun keeps.

    Example:
        >>> interrupted_line("spacl", Path("out")).split("; ")[1]
        'run the same command again: the finished runs under out/runs are reused'
    """
    kept = (
        f"the finished runs under {out / 'runs'} are reused"
        if name in REUSES_RUNS
        else "this study starts again (it keeps no partial runs)"
    )
    return f"spacl reproduce: interrupted; run the same command again: {kept}"


def _print_verdicts(results: dict[str, Any], out: Path, started: float) -> None:
    width = max(len(c["key"]) for c in results["claims"])
    for claim in results["claims"]:
        print(f"{claim['key']:<{width}}  {claim['verdict']}")
    from spacl.studies.verdicts import VERDICTS

    counts = {v: sum(c["verdict"] == v for c in results["claims"]) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n or v == "reproduced")
    print(f"\n{summary}; report: {out / 'report.md'} ({time.time() - started:.0f} s)")
