"""Train the shipped open-intent recipe once, as a new user would, time it, and ask it.

``spacl train text/stackoverflow`` in a fresh ``git clone`` of the checkout's commit (its
``src`` first on ``PYTHONPATH``, as README's editable install puts it), in a
fresh process with a fresh embedding cache (the token states of MiniLM's frozen layers
are computed, as on a user's first run), then
``spacl predict`` on README's two sentences and two more.  Writes
``docs/results/open_intent/recipe_time.md`` with the wall and CPU time, the machine's load
before and after (a busy machine makes the time meaningless: the file says so), and what
``predict`` printed.

Usage::

    python benchmarks/recipe_time.py [--out docs/results/open_intent/recipe_time.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cli_startup import cpu_model  # benchmarks/: the script's own folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "text/stackoverflow"
SENTENCES = (
    "how do I sort a list in python",
    "How do I set up a virtual host in Apache?",
    "What's the weather like in Paris tomorrow?",
    "How do I change the theme of my wordpress blog?",
)


def tree_state() -> str:
    """The checkout's commit, and the tracked files changed since (if any)."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    commit = out.stdout.strip() or "unknown"
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "--name-only", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return commit + (f"; uncommitted changes to {', '.join(changed)}" if changed else "")


def run_spacl(*args: str, env: dict[str, str], stderr: bool = False) -> tuple[float, float, str]:
    """Run ``spacl ARGS`` in a fresh process: (wall s, CPU s of the child, stdout; with
    ``stderr``, stdout then stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spacl", *args], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"spacl {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + (done.stderr if stderr else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "results" / "open_intent" / "recipe_time.md"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spacl-recipe-") as tmp:
        clone = Path(tmp) / "spacl"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(clone / "src"),
            "SPACL_CACHE_DIR": str(Path(tmp) / "cache"),
        }
        run = Path(tmp) / "so"
        wall, cpu, _ = run_spacl("train", RECIPE, "--out", str(run), "--quiet", env=env)
        load_after = os.getloadavg()
        summary = json.loads((run / "summary.json").read_text())
        p_wall, _, printed = run_spacl("predict", str(run), *SENTENCES, env=env)
    test = summary["test"]
    lines = [
        "# The shipped detector recipe, trained once and timed (issue 37)",
        "",
        f"Command: `python benchmarks/recipe_time.py` ({datetime.date.today()}, commit "
        f"{tree_state()}): `spacl train {RECIPE}` in a fresh `git clone` of that commit (its "
        "`src` first on `PYTHONPATH`, as README's editable install puts it), in a fresh "
        "process with a fresh embedding cache, as on a user's first run, then `spacl "
        "predict` on four sentences.",
        "",
        f"Machine: {os.cpu_count()} CPU cores ({cpu_model()}), torch's default threads; load "
        f"average (1 min) {load_before[0]:.2f} before the training (above about 0.5 "
        "something else was running and the time is an overestimate), "
        f"{load_after[0]:.2f} after it (its own threads included).",
        "",
        f"- Wall time of `spacl train`: **{wall:.2f} s** ({cpu:.2f} s of CPU time); the run's "
        f"own `seconds` (data, token states, both stages, test): {summary['seconds']:.2f} s.",
        f"- Known classes (TEXTOIR seed 0, 25%): {', '.join(summary['known_classes'])}.",
        f"- Test: accuracy {test['accuracy']:.2f}, macro-F1 {test['macro_f1']:.2f}, F1-open "
        f"{test['f1_ood']:.2f}, F1-known {test['f1_ind']:.2f}, AUROC {test['auroc']:.2f} "
        f"(reject-all: macro-F1 {summary['reject_all']['macro_f1']:.2f}, F1-open "
        f"{summary['reject_all']['f1_ood']:.2f}).",
        "",
        f"`spacl predict RUN` on the four sentences printed ({p_wall:.2f} s, the model load "
        "included):",
        "",
        "```",
        printed.rstrip(),
        "```",
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print(args.out.read_text())


if __name__ == "__main__":
    main()
