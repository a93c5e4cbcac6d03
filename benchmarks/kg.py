"""FB15k-237 link prediction: SPACL vs InfoNCE over all entities under the same time budget.

Each method trains the same 1-N ComplEx link predictor (recipes
``configs/kg/fb15k237_{infonce,spacl}.yaml``) for ``--minutes`` of training time
(validation excluded), one after the other in this process; the epoch with the best
filtered validation MRR is evaluated on test (filtered MRR, Hits@1/3/10 over both
directions).  Writes ``benchmarks/results/kg.md``.

Full run (about 2 x 60 minutes of training plus evaluation)::

    python benchmarks/kg.py --minutes 60

Both at once, one core each (about 60 minutes plus evaluation)::

    python benchmarks/kg.py --minutes 60 --parallel --valid-subset 5000

Quick pipeline check::

    python benchmarks/kg.py --minutes 5 --valid-subset 3000

Step cost only (no training run, no results file; issue 19)::

    python benchmarks/kg.py --step-cost 7

trains both recipes with ``train.threads=1`` on the same first ``N`` chunks of 250
queries of the first epoch (order of seed 0), InfoNCE, SPACL and SPACL with the eager cut
(``compiled_cut=false``) alternating step by step, and prints each run's median step
time, the median time of SPACL's cut inside its step, and the ratios as a markdown
table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, header, write_result
from spacl.data.kg import load_kg
from spacl.tasks.kg import kg_config, train_kg

REPO = Path(__file__).resolve().parents[1]
RECIPES = {
    "infonce": REPO / "configs" / "kg" / "fb15k237_infonce.yaml",
    "spacl": REPO / "configs" / "kg" / "fb15k237_spacl.yaml",
}
#: the issue's targets (filtered test MRR, Hits@10) and the SPACL paper's numbers
TARGET_MRR, TARGET_H10 = 0.33, 0.51
PAPER = {"mrr": 0.413, "hits@10": 0.612}


def _run(job: tuple[str, list[str], str | None]) -> dict[str, Any]:
    """Train one method's recipe with overrides; the summary gains ``wall_seconds``."""
    method, overrides, root = job
    kg = load_kg("fb15k-237", root, unseen="include")
    start = time.perf_counter()
    summary = train_kg(kg_config(RECIPES[method], overrides), kg=kg, log=_tagged(method))
    summary["wall_seconds"] = time.perf_counter() - start
    return summary


def _tagged(method: str) -> Any:
    def log(message: str) -> None:
        print(f"[{method}] {message}", flush=True)

    return log


def step_cost(steps: int, root: str | None, spacl_overrides: list[str] | None = None) -> str:
    """Median ``kg_step`` time of the recipes on the same chunks, interleaved (markdown).

    Three runs step by step in one process: InfoNCE, SPACL as its recipe says and SPACL
    with the eager cut (``compiled_cut=false``; the same negatives, which the kept
    counts show).  ``spacl_overrides`` (``--set``) apply to both SPACL runs.  The first
    step of each run (the compiled cut's compilation) is left out of the medians.
    """
    import os
    import statistics

    from spacl.tasks.kg.train import kg_setup, kg_step

    torch.set_num_threads(1)
    kg = load_kg("fb15k-237", root, unseen="include")
    runs = {}
    plans = {
        "infonce": (RECIPES["infonce"], []),
        "spacl": (RECIPES["spacl"], list(spacl_overrides or [])),
        "spacl, eager cut": (
            RECIPES["spacl"],
            [*(spacl_overrides or []), "objective.params.compiled_cut=false"],
        ),
    }
    for name, (recipe, extra) in plans.items():
        cfg = kg_config(recipe, ["train.threads=1", "train.device=cpu", *extra])
        torch.manual_seed(int(cfg.train.seed))
        runs[name] = kg_setup(cfg, kg, lambda _: None)
    batch = int(runs["spacl"][0].cfg.train.batch_size)
    perm = torch.randperm(len(runs["spacl"][0].items), generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {m: [] for m in runs}
    cut_times = {m: time_cut(runs[m][0].objective) for m in ("spacl", "spacl, eager cut")}
    load = os.getloadavg()[0]
    for i in range(steps):
        for method, (run, train_index, _) in runs.items():
            chunk = run.items[perm[i * batch : (i + 1) * batch]]
            start = time.perf_counter()
            kg_step(run, train_index, chunk, 0, i)
            times[method].append(time.perf_counter() - start)
    med = {m: statistics.median(t[1:] or t) * 1e3 for m, t in times.items()}
    cut = {
        m: statistics.median(t[1:] or t) * 1e3 if t else float("nan") for m, t in cut_times.items()
    }
    kept = {}
    for m in ("spacl", "spacl, eager cut"):
        last = getattr(runs[m][0].objective, "last", None)
        kept[m] = float("nan") if last is None else last.kept_negatives
    compiled = bool(getattr(runs["spacl"][0].objective.cut, "compiled", False))
    return (
        f"Step cost, {steps} interleaved steps per run (medians without the first), 1 "
        f"thread, 1-minute load average {load:.1f} at the start; SPACL's recipe cut "
        f"{'compiled' if compiled else 'eager'}; kept negatives per query at the last step: "
        f"{kept['spacl']:.0f} (recipe), {kept['spacl, eager cut']:.0f} (eager cut):\n\n"
        "| InfoNCE ms / step | SPACL ms / step | of which the cut | SPACL / InfoNCE "
        "| SPACL eager cut ms / step | of which the cut | eager / InfoNCE |\n"
        "|---|---|---|---|---|---|---|\n"
        f"| {med['infonce']:.0f} | {med['spacl']:.0f} | {cut['spacl']:.0f} | "
        f"{med['spacl'] / med['infonce']:.2f}x | {med['spacl, eager cut']:.0f} | "
        f"{cut['spacl, eager cut']:.0f} | {med['spacl, eager cut'] / med['infonce']:.2f}x |"
    )


def time_cut(objective: Any) -> list[float]:
    """Record the seconds of each call of the objective's cut (``cut.select``)."""
    cut = getattr(objective, "cut", None)
    seconds: list[float] = []
    if cut is None or not hasattr(cut, "select"):
        return seconds
    inner = cut.select

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = inner(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
        return out

    cut.select = timed
    return seconds


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="training budget per method")
    parser.add_argument("--methods", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    parser.add_argument(
        "--valid-subset",
        type=int,
        default=None,
        help="validate on the first N valid triples during training",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="extra overrides (key=value; with --step-cost: of the SPACL recipe only)",
    )
    parser.add_argument("--json", default=None, help="also write the summaries here")
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="train the methods concurrently, splitting --threads between them",
    )
    parser.add_argument("--name", default="kg", help="results file benchmarks/results/NAME.md")
    parser.add_argument(
        "--step-cost",
        type=int,
        default=0,
        metavar="N",
        help="only time N interleaved training steps of each method and print the ratio",
    )
    return parser


def train_methods(
    methods: list[str],
    overrides: list[str],
    root: str | None,
    parallel: bool,
) -> dict[str, dict[str, Any]]:
    """Each method's summary, trained with ``overrides`` one after the other, or
    concurrently (one spawned process per method) when ``parallel``."""
    jobs = [(method, list(overrides), root) for method in methods]
    summaries: dict[str, dict[str, Any]] = {}
    if parallel:  # one process per method, the cores split between them
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(len(jobs), mp_context=context) as pool:
            for method, summary in zip(methods, pool.map(_run, jobs), strict=True):
                summaries[method] = summary
    else:
        for job in jobs:
            summaries[job[0]] = _run(job)
    return summaries


def _targets_line(summaries: dict[str, dict[str, Any]]) -> str:
    """Issue 7's targets, met or not per method, and the paper's numbers."""
    return (
        f"\nTargets (issue 7): test MRR >= {TARGET_MRR}, Hits@10 >= {TARGET_H10}; "
        + "; ".join(
            f"{m}: {'met' if s['test']['mrr'] >= TARGET_MRR and s['test']['hits@10'] >= TARGET_H10 else 'NOT met'}"  # noqa: E501
            for m, s in summaries.items()
        )
        + f".  The SPACL paper reports MRR {PAPER['mrr']} / Hits@10 {PAPER['hits@10']} "
        "(GPU, full training).\n"
    )


def report(
    summaries: dict[str, dict[str, Any]],
    minutes: float,
    threads: int,
    total_threads: int,
    parallel: bool,
) -> str:
    """The results file: the budget, one table row per method, the SPACL / InfoNCE
    comparison (both trained), the targets and the validation curves."""
    lines = [header("FB15k-237 link prediction: SPACL vs InfoNCE, same training budget")]
    if parallel:
        lines.append(
            f"The methods trained concurrently, one process each with {threads} torch "
            f"thread(s) (of {total_threads}).\n"
        )
    lines.append(
        f"Budget: {minutes:g} min of training per method (validation excluded), "
        f"{threads} torch thread(s) each.  Filtered ranking over both directions, ties counted as "
        "half (mean rank), 20,466 test triples (40,932 queries).  Best epoch by filtered "
        "validation MRR.\n"
    )
    lines.append(
        "| method | epochs | s / epoch | best epoch | valid MRR | test MRR | H@1 | H@3 | H@10 |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for method, s in summaries.items():
        t, v = s["test"], s["valid"]
        lines.append(
            f"| {method} | {s['epochs']:.2f} | {s['seconds_per_epoch']:.0f} | {s['best_epoch']} | "
            f"{v['mrr']:.4f} | {t['mrr']:.4f} | {t['hits@1']:.4f} | {t['hits@3']:.4f} | "
            f"{t['hits@10']:.4f} |"
        )
    if len(summaries) == 2:
        a, b = summaries["spacl"], summaries["infonce"]
        lines.append(
            f"\nSPACL / InfoNCE time per epoch: "
            f"{a['seconds_per_epoch'] / b['seconds_per_epoch']:.2f}x; test MRR difference "
            f"{a['test']['mrr'] - b['test']['mrr']:+.4f}."
        )
    lines.append(_targets_line(summaries))
    lines.append("Validation curve (filtered valid MRR after each evaluated epoch):\n")
    for method, s in summaries.items():
        curve = ", ".join(
            f"{r['epoch']}: {r['valid']['mrr']:.3f}" for r in s["history"] if "valid" in r
        )
        lines.append(f"- {method}: {curve}")
    lines.append("")
    lines.append("Recipes: " + ", ".join(f"`{p.relative_to(REPO)}`" for p in RECIPES.values()))
    return "\n".join(lines) + "\n"


def main() -> int:
    args = build_parser().parse_args()
    if args.step_cost:
        print(step_cost(args.step_cost, args.root, args.set))
        return 0
    torch.set_num_threads(args.threads)
    threads = max(1, args.threads // len(args.methods)) if args.parallel else args.threads
    overrides = [
        f"train.minutes={args.minutes}",
        f"train.threads={threads}",
        f"eval.valid_subset={args.valid_subset if args.valid_subset else 'null'}",
        *args.set,
    ]
    summaries = train_methods(args.methods, overrides, args.root, args.parallel)
    text = report(summaries, args.minutes, threads, args.threads, args.parallel)
    path = write_result(args.name, text)
    print(f"wrote {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2, default=str))
    assert path.parent == RESULTS_DIR
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
