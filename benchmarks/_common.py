"""Helpers shared by the benchmark scripts: interleaved timing and markdown output."""

from __future__ import annotations

import datetime as _dt
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def time_interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2, desc: str = "timing"
) -> dict[str, float]:
    """Median seconds of each callable, timed round-robin so machine noise hits all alike.

    A tqdm bar over the rounds is shown when stderr is a terminal.
    """
    from tqdm.auto import tqdm

    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    rounds = tqdm(range(repeats), desc=desc, unit="round", disable=not sys.stderr.isatty())
    for _ in rounds:
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(vals) for name, vals in samples.items()}


def require_extra(*modules: str, extra: str = "bench") -> None:
    """Exit with a message naming the extra to install when an optional module is missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(
            f"{Path(sys.argv[0]).name}: needs {', '.join(missing)} (optional); install the "
            f'\'{extra}\' extra: pip install -e ".[{extra}]"  (or pip install "spacl[{extra}]")'
        )


def header(title: str) -> str:
    """Markdown header with the command line and the environment of this run."""
    cmd = "python " + " ".join(["benchmarks/" + Path(sys.argv[0]).name, *sys.argv[1:]])
    return "\n".join(
        [
            f"# {title}",
            "",
            f"Command: `{cmd}`  ",
            f"Date: {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC; torch "
            f"{torch.__version__}, torch threads: {torch.get_num_threads()}, "
            f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
            "",
        ]
    )


def write_result(name: str, text: str) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(text)
    return path
