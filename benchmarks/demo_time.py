"""Time README's main job, ``spacl demo``, as a user meets it: cold, then warm.

Two fresh processes in a row in a fresh ``git clone`` of the checkout's commit (its
``src`` first on ``PYTHONPATH``, as README's editable install puts it; no bytecode, no
numba cache), the first cold, the second warm.  Writes
``benchmarks/results/demo_time.md`` with both wall times, the CPU time, the demo's own
total (its last line), the four trainings' times, the machine's load before (a busy
machine makes the time meaningless: the file says so) and the tree's commit.

Usage::

    python benchmarks/demo_time.py [--out benchmarks/results/demo_time.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import tempfile
from pathlib import Path

from cli_startup import cpu_model  # benchmarks/: the script's own folder is on sys.path
from recipe_time import ROOT, run_spacl, tree_state

OUT = ROOT / "benchmarks" / "results" / "demo_time.md"


def demo_lines(printed: str) -> tuple[str, list[str]]:
    """The demo's own total (its ``run directory: ... (total N s)`` line, the run
    directory left out) and its per-training timing lines (``name: S steps in T s``)."""
    total = re.search(r"\(total [\d.]+ s\)", printed)
    trainings = re.findall(r"^\s*(\w+: \d+ steps in [\d.]+ s)$", printed, flags=re.M)
    return (total.group(0) if total else ""), trainings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spacl-demo-") as tmp:
        clone = Path(tmp) / "spacl"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(clone / "src"),
            "SPACL_CACHE_DIR": str(Path(tmp) / "cache"),
        }
        cold_wall, cold_cpu, _ = run_spacl("demo", "--out", f"{tmp}/cold", env=env)
        warm_wall, warm_cpu, printed = run_spacl(
            "demo", "--out", f"{tmp}/warm", env=env, stderr=True
        )
    total, trainings = demo_lines(printed)
    lines = [
        "# `spacl demo`: wall time on 2 CPU cores",
        "",
        f"Command: `python benchmarks/demo_time.py` ({datetime.date.today()}, commit "
        f"{tree_state()}): `spacl demo` in a fresh `git clone` of that commit (its `src` "
        "first on `PYTHONPATH`, as README's editable install puts it), in two fresh "
        "processes in a row: the first cold (no bytecode, no numba cache), the second warm."
        + (
            "  Python writes no bytecode here (PYTHONDONTWRITEBYTECODE is set), so both "
            "runs compile the sources; what the cold run rebuilds is numba's cache of the "
            "cut's kernel."
            if os.environ.get("PYTHONDONTWRITEBYTECODE")
            else ""
        ),
        "",
        f"Machine: {os.cpu_count()} CPU cores ({cpu_model()}), torch's default threads; load "
        f"average (1 min) {load_before[0]:.2f} before (above about 0.5 something else was "
        "running and the times are overestimates).",
        "",
        "| run | wall time | CPU time |",
        "|---|---|---|",
        f"| cold (fresh clone) | {cold_wall:.2f} s | {cold_cpu:.2f} s |",
        f"| warm | {warm_wall:.2f} s | {warm_cpu:.2f} s |",
        "",
        f"The warm run's own total, as it printed it: {total}",
    ]
    if trainings:
        lines += ["", "Its trainings:", "", *(f"- `{t}`" for t in trainings)]
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())


if __name__ == "__main__":
    main()
