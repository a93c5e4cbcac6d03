"""FB15k-237: SPACL vs InfoNCE over seeds at one training budget (issue 39, claim 26).

Each (method, seed) trains its recipe (``configs/kg/fb15k237_{infonce,spacl}.yaml``)
with ``train.seed=SEED``, ``train.minutes=MINUTES`` of training time (validation
excluded) and ``train.threads=THREADS``, validating on the first ``--valid-subset``
valid triples every epoch; the best epoch is evaluated on the whole valid set and on
test (filtered MRR, Hits@1/3/10, both directions).  The same budget, recipe and
validation for every run: only the objective and the seed differ.

Crash-safe and resumable: every run trains in its own run directory
(``runs/kg_seeds/METHOD-sSEED``, git-ignored), checkpointing every
``train.checkpoint_every`` steps and every epoch, with the training time used so far; a
rerun of this command resumes an unfinished run where its last checkpoint left it and
skips the finished ones.  A finished run appends one JSON line to the store
(``docs/results/spacl/kg_seeds.jsonl``, committed): method, seed, budget, threads,
epochs, best epoch, training seconds, the test and valid metrics, the code's commit as
this process started (``commit``; ``+dirty`` when the code differed from it), the commits
of every process that trained the run (``commits``: a resumed run spans several;
``commits_complete`` false when it resumed a checkpoint written before they were
recorded, as the first stored runs did), the host's core count and load at the end.
The SPACL report's FB15k-237 claim reads that store.

    python benchmarks/kg_seeds.py --seeds 0 1 2 --methods spacl infonce --minutes 60

``--methods spacl_nocut``: SPACL's recipe without the relative-threshold cut
(``objective.params.variant=no_negative_selection``), the ablation beside the claim.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {
    "infonce": ROOT / "configs" / "kg" / "fb15k237_infonce.yaml",
    "spacl": ROOT / "configs" / "kg" / "fb15k237_spacl.yaml",
    "spacl_nocut": ROOT / "configs" / "kg" / "fb15k237_spacl.yaml",
}
#: a method's overrides beyond the budget's: the no-cut ablation (SPEC §1.6, lambda_Q = 1)
METHOD_OVERRIDES = {"spacl_nocut": ["objective.params.variant=no_negative_selection"]}
STORE = ROOT / "docs" / "results" / "spacl" / "kg_seeds.jsonl"
RUNS = ROOT / "runs" / "kg_seeds"


def read_store(path: Path = STORE) -> list[dict[str, Any]]:
    """The finished runs' records (one JSON object per line)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _done(store: list[dict[str, Any]], method: str, seed: int, minutes: float) -> bool:
    return any(
        r["method"] == method and r["seed"] == seed and r["minutes"] == minutes for r in store
    )


def record_commit(run_dir: Path, commit: str, resume: bool) -> tuple[list[str], bool]:
    """Add this process's ``commit`` to the run's list (``run_dir/commits.json``: the code
    of every process that trained the run, in order; a resumed run spans them all) and
    return the list, and whether it is complete: ``False`` when the run resumes a
    checkpoint written before its processes' commits were recorded."""
    path = run_dir / "commits.json"
    known = path.is_file()
    commits: list[str] = json.loads(path.read_text()) if known else []
    commits.append(commit)
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(commits))
    return commits, known or not resume


def run_one(
    method: str,
    seed: int,
    minutes: float,
    threads: int,
    valid_subset: int,
    root: str | None,
    commit: str,
) -> dict[str, Any]:
    """Train (or resume) one run; its store record (``commit``: the code's, read when
    this process started, before any module was imported)."""
    from spacl.data.kg import load_kg
    from spacl.tasks.kg import kg_config, train_kg

    overrides = [
        f"train.seed={seed}",
        f"train.minutes={minutes}",
        f"train.threads={threads}",
        f"eval.valid_subset={valid_subset}",
        "train.progress=false",
        *METHOD_OVERRIDES.get(method, []),
    ]
    run_dir = RUNS / f"{method}-s{seed}-m{minutes:g}"
    resume = (run_dir / "checkpoints" / "last.pt").is_file()
    commits, complete = record_commit(run_dir, commit, resume)
    kg = load_kg("fb15k-237", root, unseen="include")
    started = time.perf_counter()
    summary = train_kg(
        kg_config(RECIPES[method], overrides),
        kg=kg,
        log=lambda message: print(f"[{method} s{seed}] {message}", flush=True),
        run_dir=run_dir,
        resume=resume,
    )
    return {
        "method": method,
        "seed": seed,
        "minutes": minutes,
        "threads": threads,
        "valid_subset": valid_subset,
        "epochs": summary["epochs"],
        "best_epoch": summary["best_epoch"],
        "train_seconds": summary["train_seconds"],
        "wall_seconds_this_process": time.perf_counter() - started,
        "resumed": resume,
        "test": summary["test"],
        "valid": summary["valid"],
        "commit": commit,
        "commits": commits,
        "commits_complete": complete,
        "cpus": os.cpu_count(),
        "load_1min_at_end": os.getloadavg()[0],
        "overrides": overrides,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["spacl", "infonce"], choices=RECIPES)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--valid-subset", type=int, default=5000)
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    args = parser.parse_args()
    from spacl.studies.report import git_commit

    commit = git_commit()  # the code this process runs (a later commit must not claim it)
    for seed in args.seeds:  # seed-major: a partial store holds both methods of a seed
        for method in args.methods:
            if _done(read_store(), method, seed, args.minutes):
                continue
            record = run_one(
                method, seed, args.minutes, args.threads, args.valid_subset, args.root, commit
            )
            STORE.parent.mkdir(parents=True, exist_ok=True)
            with STORE.open("a") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
            print(
                f"{method} seed {seed}: test MRR {record['test']['mrr']:.4f} H@10 "
                f"{record['test']['hits@10']:.4f} ({record['epochs']:.1f} epochs)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
