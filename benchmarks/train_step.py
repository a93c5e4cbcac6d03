"""Training-step cost of SPACL vs SimCLR through the engine (issue 5).

Both arms are built by :func:`spacl.tasks.image.build.build_arms` from the same config and
start from the same CIFAR-stem ResNet-18; each step is the engine's real
``Arm.train_step`` (forward, loss, backward, SGD step, LR schedule, EMA update):

* SimCLR with 2 and with 5 views (NT-Xent over all views), shared encoder;
* SPACL's default (``online="all_views"``: one forward + backward of all ``5B`` views,
  shared encoder, the loss with farthest-point positives, adversarial negatives — the
  game's D/G steps included — and the relative cut), with every view an anchor
  (``anchor_set="every_view"``), and with an EMA target (``5B`` target views without
  gradient, the ``B`` anchor views online).

Inputs are fixed random ``[B, V, 3, 32, 32]`` tensors (augmentation excluded, it is the
same data pipeline for both); timing is interleaved (order alternating every round),
median and fastest of ``--steps``.

    python benchmarks/train_step.py [--steps 6] [--batch 64] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, write_result
from spacl.engine import DistributedContext
from spacl.tasks.image import load_config
from spacl.tasks.image.arm import Arm
from spacl.tasks.image.build import build_arms, resolve_precision

TARGET_RATIO = 1.4


#: name -> (label, views per instance, config overrides)
ARMS: dict[str, tuple[str, int, list[str]]] = {
    "simclr2": ("SimCLR, 2 views (shared encoder)", 2, ["objective.name=simclr"]),
    "simclr5": ("SimCLR, 5 views (the fair protocol's baseline)", 5, ["objective.name=simclr"]),
    "spacl": (
        "SPACL default: 5 views, one online pass (online=all_views, shared)",
        5,
        ["objective.name=spacl"],
    ),
    "spacl_every": (
        "SPACL, every view an anchor (anchor_set=every_view)",
        5,
        ["objective.name=spacl", "objective.params.anchor_set=every_view"],
    ),
    "spacl_ema": (
        "SPACL, EMA target on the pool + online anchor view (online=anchor_view)",
        5,
        ["objective.name=spacl", "objective.params.online=anchor_view", "model.momentum=0.99"],
    ),
}


def build(
    name: str,
    batch: int,
    *,
    device: str = "cpu",
    precision: str = "fp32",
    extra: Sequence[str] = (),
    arms: dict[str, tuple[str, int, list[str]]] = ARMS,
) -> Arm:
    """One engine arm on a CIFAR-stem ResNet-18 (same seed, hence the same init).

    ``extra`` overrides come last (``benchmarks/gpu_check.py`` swaps the backbone for its
    dry run); ``arms`` may hold arms beyond :data:`ARMS` (the GPU check's ablations)."""
    _, views, more = arms[name]
    overrides = [
        "objective.temperature=0.2",
        f"views.num_views={views}",
        f"views.keep_original={'true' if name.startswith('spacl') else 'false'}",
        *more,
    ]
    cfg = load_config(
        None,
        [
            "data.name=synthetic",
            "model.backbone=resnet18",
            "model.cifar_stem=true",
            "model.head=mlp",
            "model.proj_dim=128",
            "optim.name=sgd",
            "optim.lr=0.1",
            f"train.batch_size={batch}",
            f"train.device={device}",
            f"train.precision={precision}",
            *overrides,
            *extra,
        ],
    )
    ctx = DistributedContext(
        device=torch.device("cuda", 0) if device == "cuda" else torch.device(device)
    )
    (arm,) = build_arms(
        cfg,
        input_shape=(3, 32, 32),
        num_label_classes=10,
        precision=resolve_precision(precision, ctx.device),
        ctx=ctx,
        steps_per_epoch=100,
    )
    return arm


def time_steps(
    fns: dict[str, Callable[[], None]], repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds of every timed call, round-robin with the order alternating each round."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            fns[name]()
            samples[name].append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per arm")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    b = args.batch
    labels = torch.arange(b) % 10
    arms = {n: build(n, b) for n in ARMS}
    views = {n: torch.rand(b, ARMS[n][1], 3, 32, 32, generator=gen) for n in ARMS}
    counter = dict.fromkeys(ARMS, 0)

    def stepper(name: str) -> Callable[[], None]:
        def step() -> None:
            arms[name].train_step(views[name], labels, counter[name])
            counter[name] += 1

        return step

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    started = time.time()
    samples = time_steps({n: stepper(n) for n in arms}, repeats=args.steps, warmup=2)
    med = {n: statistics.median(v) for n, v in samples.items()}
    rows = [
        "| method | median ms / step | vs SimCLR 2 views | vs SimCLR 5 views |",
        "|---|---:|---:|---:|",
    ]
    for n, (label, _, _) in ARMS.items():
        r2, r5 = med[n] / med["simclr2"], med[n] / med["simclr5"]
        rows.append(f"| {label} | {1000 * med[n]:.0f} | {r2:.2f}x | {r5:.2f}x |")
    fair = med["spacl"] / med["simclr5"]
    verdict = "meets" if fair <= TARGET_RATIO else "misses"
    text = "\n".join(
        [
            header("Training step: SPACL vs SimCLR (engine, CPU ResNet-18, 32x32)"),
            f"CIFAR-stem ResNet-18 + MLP head (128-d), batch {b}, float32, CPU; the engine's "
            f"full `Arm.train_step` (forward, loss, backward, SGD, schedule, EMA); "
            f"{args.steps} interleaved steps per method (order alternating) after 2 warm-up "
            f"steps each; {torch.get_num_threads()} thread(s); "
            f"{time.time() - started:.0f} s in all; 1-minute load average {load:.1f} on "
            f"{os.cpu_count()} CPUs when the timing started.",
            "",
            *rows,
            "",
            f"Target: the SPACL default step <= {TARGET_RATIO}x SimCLR's on the same 5 views "
            f"(the fair protocol) — this run **{verdict}** it ({fair:.2f}x median).  Against "
            "SimCLR on 2 views the cost is that of the 2.5x more images: the protocol gives "
            "every method the same 5 views.",
            "",
        ]
    )
    path = write_result("train_step", text)
    print(text)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
