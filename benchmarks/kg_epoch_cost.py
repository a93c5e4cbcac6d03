"""The SPACL-KG training epoch against InfoNCE's, step by step in one process (issue 19).

Run: ``python benchmarks/kg_epoch_cost.py --epochs 2`` (FB15k-237 from ``SPACL_DATA_DIR``).

Both recipes (``configs/kg/fb15k237_{infonce,spacl}.yaml``, ``train.threads=1``) train
for ``--epochs`` whole epochs in this one process, their steps interleaved: step ``i`` of
each method runs on the same chunk of 250 queries (one permutation per epoch, seed 0),
the method that goes first alternating from step to step.  Each step is timed on its own
(``kg_step``: the objective, N3, backward, Adagrad), so both methods see the same
machine at the same moments (the host's speed drifts by tens of percent over minutes
here) and neither competes with the other for cores or memory bandwidth (unlike
``kg.py --parallel``).  No validation or test: the training epoch's cost only.  Writes
``benchmarks/results/kg_epoch_cost.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from _common import header, write_result
from kg import RECIPES, time_cut
from spacl.data.kg import load_kg
from spacl.tasks.kg.train import kg_config, kg_setup, kg_step

DESCRIPTION = (
    "Both recipes (`configs/kg/fb15k237_{infonce,spacl}.yaml`, `train.threads=1`) train "
    "whole epochs in one process, their steps interleaved: step i of each method runs on "
    "the same chunk of 250 queries (one permutation per epoch, seed 0), the method that "
    "goes first alternating from step to step, each step timed on its own (objective, N3, "
    "backward, Adagrad).  Both methods see the same machine at the same moments and "
    "neither competes with the other for cores or memory bandwidth (unlike "
    "`kg.py --parallel`).  No validation or test: the training epoch's cost only."
)


def measure(epochs: int, root: str | None) -> tuple[list[dict[str, float]], float]:
    """Per-epoch seconds of each method (and SPACL's cut and kept negatives); the load."""
    torch.set_num_threads(1)
    kg = load_kg("fb15k-237", root, unseen="include")
    runs = {}
    for name in ("infonce", "spacl"):
        cfg = kg_config(RECIPES[name], ["train.threads=1", "train.device=cpu"])
        torch.manual_seed(int(cfg.train.seed))
        runs[name] = kg_setup(cfg, kg, lambda _: None)
    cut_seconds = time_cut(runs["spacl"][0].objective)
    batch = int(runs["spacl"][0].cfg.train.batch_size)
    items = len(runs["spacl"][0].items)
    order = torch.Generator().manual_seed(0)
    load = os.getloadavg()[0]
    records = []
    for epoch in range(epochs):
        perm = torch.randperm(items, generator=order)
        seconds: dict[str, list[float]] = {m: [] for m in runs}
        kept: list[float] = []
        cut_start = len(cut_seconds)
        for step, start in enumerate(range(0, items, batch)):
            names = list(runs) if step % 2 == 0 else list(reversed(runs))
            for method in names:
                run, train_index, _ = runs[method]
                chunk = run.items[perm[start : start + batch]]
                began = time.perf_counter()
                kg_step(run, train_index, chunk, epoch, step)
                seconds[method].append(time.perf_counter() - began)
            last = getattr(runs["spacl"][0].objective, "last", None)
            kept.append(float("nan") if last is None else float(last.kept_negatives))
        records.append(
            {
                "epoch": epoch,
                "steps": len(seconds["spacl"]),
                "infonce": sum(seconds["infonce"]),
                "spacl": sum(seconds["spacl"]),
                "infonce_median_step": statistics.median(seconds["infonce"]),
                "spacl_median_step": statistics.median(seconds["spacl"]),
                "spacl_cut": sum(cut_seconds[cut_start:]),
                "kept": statistics.mean(kept),
            }
        )
        print(records[-1], flush=True)
    return records, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="whole training epochs")
    parser.add_argument("--root", default=None, help="data root (default: SPACL_DATA_DIR)")
    parser.add_argument("--note", default="", help="a sentence on the machine's state, printed")
    parser.add_argument("--name", default="kg_epoch_cost", help="benchmarks/results/NAME.md")
    args = parser.parse_args()
    records, load = measure(args.epochs, args.root)
    inf = sum(r["infonce"] for r in records)
    spa = sum(r["spacl"] for r in records)
    ratio = spa / inf
    lines = [
        header("FB15k-237: the SPACL-KG training epoch vs InfoNCE's, steps interleaved"),
        DESCRIPTION,
        "",
        f"1 torch thread; 1-minute load average {load:.1f} on {os.cpu_count()} CPUs at the "
        "start." + (f"  {args.note}" if args.note else ""),
        "",
        "| epoch | steps | InfoNCE s | SPACL s | of which SPACL's cut s | SPACL / InfoNCE "
        "| median step InfoNCE / SPACL ms | SPACL kept negatives per query |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['epoch']} | {r['steps']} | {r['infonce']:.0f} | {r['spacl']:.0f} | "
            f"{r['spacl_cut']:.0f} | {r['spacl'] / r['infonce']:.2f}x | "
            f"{r['infonce_median_step'] * 1e3:.0f} / {r['spacl_median_step'] * 1e3:.0f} | "
            f"{r['kept']:.0f} |"
            for r in records
        ),
        "",
        f"All {len(records)} epoch(s): InfoNCE {inf:.0f} s, SPACL {spa:.0f} s: **{ratio:.2f}x**.  "
        f"Target (issue 19): the SPACL-KG epoch <= 1.5x InfoNCE's: "
        f"{'met' if ratio <= 1.5 else '**NOT met**'}.",
        "",
    ]
    path = write_result(args.name, "\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
