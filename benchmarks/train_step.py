"""Training-step cost of SPACL vs SimCLR through the engine (issue 5).

Both arms are built by :func:`spacl.engine.build.build_arms` from the same config and
start from the same CIFAR-stem ResNet-18; each step is the engine's real
``Arm.train_step`` (forward, loss, backward, SGD step, LR schedule, EMA update):

* SimCLR: 2 augmented views, NT-Xent, shared encoder — one forward + backward of
  ``2B`` images.
* SPACL: ``M = 4`` (pool of ``1 + M = 5`` views), EMA target (momentum 0.99): the target
  embeds all ``5B`` views without gradient, the online encoder embeds only the ``B``
  anchor views (forward + backward), then the loss with farthest-point positives,
  adversarial negatives (the game's D/G steps included) and the relative cut.

Inputs are fixed random ``[B, V, 3, 32, 32]`` tensors (augmentation excluded, it is the
same data pipeline for both); timing is interleaved (order alternating every round),
median and fastest of ``--steps``.

    python benchmarks/train_step.py [--steps 6] [--batch 64] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, write_result
from spacl.engine import DistributedContext, load_config
from spacl.engine.arm import Arm
from spacl.engine.build import build_arms, resolve_precision

TARGET_RATIO = 1.4


def build(name: str, batch: int) -> Arm:
    """One engine arm on a CIFAR-stem ResNet-18 (same seed, hence the same init)."""
    if name == "simclr":
        overrides = ["objective.name=simclr", "objective.temperature=0.5", "data.num_views=2"]
    else:
        overrides = [
            "objective.name=spacl",
            "objective.temperature=0.1",
            "data.num_views=5",
            "data.keep_original=true",
            "model.momentum=0.99",
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
            "train.device=cpu",
            "train.precision=fp32",
            *overrides,
        ],
    )
    ctx = DistributedContext()
    (arm,) = build_arms(
        cfg,
        input_shape=(3, 32, 32),
        num_label_classes=10,
        precision=resolve_precision("fp32", ctx.device),
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
    arms = {"simclr": build("simclr", b), "spacl": build("spacl", b)}
    views = {
        "simclr": torch.rand(b, 2, 3, 32, 32, generator=gen),
        "spacl": torch.rand(b, 5, 3, 32, 32, generator=gen),
    }
    counter = {"simclr": 0, "spacl": 0}

    def stepper(name: str):
        def step() -> None:
            arms[name].train_step(views[name], labels, counter[name])
            counter[name] += 1

        return step

    started = time.time()
    samples = time_steps({n: stepper(n) for n in arms}, repeats=args.steps, warmup=2)
    med = {n: statistics.median(v) for n, v in samples.items()}
    low = {n: min(v) for n, v in samples.items()}
    ratio = med["spacl"] / med["simclr"]
    ratio_min = low["spacl"] / low["simclr"]
    rows = [
        "| method | views through the encoder per step | median ms / step | steps / s "
        "| vs SimCLR (median) | vs SimCLR (fastest step) |",
        "|---|---|---:|---:|---:|---:|",
        f"| SimCLR (2 views, shared encoder) | {2 * b} fwd+bwd | {1000 * med['simclr']:.0f} | "
        f"{1 / med['simclr']:.3f} | 1.00x | 1.00x |",
        f"| SPACL (M=4, EMA target) | {5 * b} target fwd (no grad) + {b} fwd+bwd | "
        f"{1000 * med['spacl']:.0f} | {1 / med['spacl']:.3f} | **{ratio:.2f}x** | "
        f"{ratio_min:.2f}x |",
    ]
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    text = "\n".join(
        [
            header("Training step: SPACL vs SimCLR (engine, CPU ResNet-18, 32x32)"),
            f"CIFAR-stem ResNet-18 + MLP head (128-d), batch {b}, float32, CPU; the engine's "
            f"full `Arm.train_step` (forward, loss, backward, SGD, schedule, EMA); "
            f"{args.steps} interleaved steps per method (order alternating) after 2 warm-up "
            f"steps each; {torch.get_num_threads()} thread(s); "
            f"{time.time() - started:.0f} s in all.",
            "",
            *rows,
            "",
            f"Target: SPACL step time <= {TARGET_RATIO}x SimCLR's — this run **{verdict}** it "
            f"({ratio:.2f}x median).  A count of forward passes with backward = 2 forwards "
            f"predicts ~{(5 + 3) / (2 * 3):.2f}x (SimCLR: {2 * b} images forward and backward; "
            f"SPACL: {5 * b} forward without gradient, {b} forward and backward); a forward "
            "pass without gradient costs less than one that records the graph.",
            "",
        ]
    )
    path = write_result("train_step", text)
    print(text)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
