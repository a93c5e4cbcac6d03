"""Time how long ``spacl`` takes to answer the commands that must start fast (< 1 s).

Each command runs in a fresh process (``spacl --help``, ``spacl recipes``, ``spacl
data`` and every sub-command's ``--help``), ``--tries`` times; the median wall time is
the one kept (the first try may pay for a cold file cache).  Writes
``benchmarks/results/cli_startup.md`` with every try, the machine and its load.
``tests/test_cli_startup.py`` imports :func:`commands` and :func:`median_time` and holds
the same bound.

Usage::

    python benchmarks/cli_startup.py [--tries 5] [--out benchmarks/results/cli_startup.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the bound every command is held to (seconds, median of the tries)
LIMIT_S = 1.0


def spacl_command() -> list[str]:
    """The ``spacl`` console script next to this Python, or ``python -m spacl``."""
    script = Path(sys.executable).with_name("spacl")
    if script.is_file():
        return [str(script)]
    found = shutil.which("spacl")
    return [found] if found else [sys.executable, "-m", "spacl"]


def commands() -> list[list[str]]:
    """``--help``, ``recipes``, ``data`` and every sub-command's ``--help``."""
    sys.path.insert(0, str(ROOT / "src"))
    from spacl.cli import COMMANDS

    return [["--help"], ["recipes"], ["data"]] + [[name, "--help"] for name, _, _ in COMMANDS]


def time_once(argv: list[str]) -> float:
    """Wall time (s) of one ``spacl ARGV`` in a fresh process; a non-zero exit raises."""
    start = time.perf_counter()
    done = subprocess.run([*spacl_command(), *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"spacl {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return wall


def median_time(argv: list[str], tries: int = 3) -> tuple[float, list[float]]:
    """``(median, every try)`` of ``tries`` runs of ``spacl ARGV``."""
    walls = [time_once(argv) for _ in range(tries)]
    return statistics.median(walls), walls


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.platform()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/cli_startup.md")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for argv in commands():
        median, walls = median_time(argv, args.tries)
        rows.append((argv, median, walls))
        print(f"spacl {' '.join(argv)}: {median:.3f} s", file=sys.stderr)
    load_after = os.getloadavg()
    slowest = max(median for _, median, _ in rows)
    lines = [
        "# `spacl` start-up: time to answer each fast command",
        "",
        f"Written by `python benchmarks/cli_startup.py --tries {args.tries}` on "
        f"{datetime.date.today().isoformat()}: each command in a fresh process, "
        f"{args.tries} tries, the median kept.  Machine: {platform.machine()}, "
        f"{os.cpu_count()} CPU cores ({cpu_model()}), "
        f"Python {platform.python_version()}; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after (the cores are shared: other work was running).",
        "",
        f"Bound (tests/test_cli_startup.py): median under {LIMIT_S:g} s for every command.  "
        f"Slowest here: {slowest:.3f} s.",
        "",
        "| command | median (s) | tries (s) |",
        "|---|---:|---|",
    ]
    for argv, median, walls in rows:
        tries = ", ".join(f"{w:.3f}" for w in walls)
        lines.append(f"| `spacl {' '.join(argv)}` | {median:.3f} | {tries} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0 if slowest < LIMIT_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
