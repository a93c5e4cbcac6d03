"""Cost of a MoCo-style negative queue in spacl's losses, against the matmul floor.

Run: ``python benchmarks/negative_queue.py --threads 1``.  For anchors ``A = [2B, d]`` (two views
of ``B`` instances) and a queue ``Q = [K, d]`` of constant rows, the *extra* work a queue
brings is at least the similarity matmul of the extra candidates, forward and backward:
``(A @ Q^T).sum()`` with gradient to ``A`` (two ``2B x K x d`` matmuls).  This script
times ``loss(z, extra_negatives=Q) - loss(z)`` for NT-Xent and SupCon (labelled queue),
round-robin in one run with that floor, and reports the ratio (target: <= 1.3x at
``B = 256, d = 128, K = 4096``).  Values with the queue are checked against a float64
evaluation of the same loss first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from _common import header, write_result
from spacl.losses import NTXentLoss, SupConLoss


def _timer(fn: Callable[[torch.Tensor], torch.Tensor], src: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        x = src.detach().requires_grad_(True)
        fn(x).backward()

    return run


def bench_queue(k: int, z: torch.Tensor, labels: torch.Tensor, args: argparse.Namespace):
    """Check the values, then time the floor and both losses with and without a queue."""
    g = torch.Generator().manual_seed(k)
    b, d = int(z.shape[0]), int(z.shape[2])
    q = torch.nn.functional.normalize(torch.randn(k, d, generator=g), dim=1)
    ql = torch.randint(0, args.classes, (k,), generator=g)
    nt, sc = NTXentLoss(0.2), SupConLoss(0.1)
    checks = (
        (float(nt(z, extra_negatives=q)), float(nt(z.double(), extra_negatives=q.double()))),
        (
            float(sc(z, labels, extra_negatives=q, extra_negative_labels=ql)),
            float(sc(z.double(), labels, extra_negatives=q.double(), extra_negative_labels=ql)),
        ),
    )
    for got, want in checks:
        if abs(got - want) > 1e-5 * max(1.0, abs(want)):
            raise SystemExit(f"K={k}: a loss with the queue disagrees with float64: {got} {want}")
    anchors = torch.nn.functional.normalize(z.reshape(2 * b, d), dim=1)
    fns = {
        "floor": _timer(lambda a: (a @ q.T).sum(), anchors),
        "nt": _timer(lambda x: nt(x), z),
        "nt+q": _timer(lambda x: nt(x, extra_negatives=q), z),
        "sc": _timer(lambda x: sc(x, labels), z),
        "sc+q": _timer(lambda x: sc(x, labels, extra_negatives=q, extra_negative_labels=ql), z),
    }
    return _paired(fns, args.repeats)


def _paired(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median times, plus the queue costs as medians of per-round ratios.

    Every round times each callable once (round-robin); the queue cost of a round is
    ``(t(loss + queue) - t(loss)) / t(floor)`` from that round's own timings, so load
    changes between rounds cancel; the reported cost is the median over rounds.
    """
    for fn in fns.values():
        fn()
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    out = {name: statistics.median(v) for name, v in samples.items()}
    for loss in ("nt", "sc"):
        ratios = [
            (w - wo) / f
            for w, wo, f in zip(samples[loss + "+q"], samples[loss], samples["floor"], strict=True)
        ]
        out[loss + " cost"] = statistics.median(ratios)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queue", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--out", default="negative_queue")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    g = torch.Generator().manual_seed(0)
    b, d = args.batch, args.dim
    z = torch.randn(b, 2, d, generator=g)
    labels = torch.randint(0, args.classes, (b,), generator=g)
    rows = []
    for k in args.queue:
        times = bench_queue(k, z, labels, args)
        floor = times["floor"]
        nt_cost, sc_cost = times["nt cost"], times["sc cost"]
        print(
            f"K={k}: floor {floor * 1e3:.2f} ms, queue cost NT-Xent {nt_cost:.2f}x, "
            f"SupCon {sc_cost:.2f}x",
            flush=True,
        )
        rows.append((k, times, nt_cost, sc_cost))

    lines = [
        header("Negative queue cost vs the matmul floor of the extra candidates"),
        f"B={b} (2B = {2 * b} anchors), d={d}, float32, CPU.  floor = forward+backward of "
        "`(A @ Q^T).sum()` (gradient to A only); queue cost = (time(loss with the queue) - "
        "time(loss without)) / time(floor) within each round of a round-robin over the five "
        f"callables, median over {args.repeats} rounds (times in ms: medians).  "
        "SupCon's queue carries labels (same-class rows are positives).",
        "",
        "| K (queue) | floor (ms) | NT-Xent (ms) | NT-Xent + queue (ms) | **NT-Xent queue cost** "
        "| SupCon (ms) | SupCon + queue (ms) | **SupCon queue cost** |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, t, nt_cost, sc_cost in rows:
        lines.append(
            f"| {k} | {t['floor'] * 1e3:.2f} | {t['nt'] * 1e3:.2f} | {t['nt+q'] * 1e3:.2f} "
            f"| **{nt_cost:.2f}x** | {t['sc'] * 1e3:.2f} | {t['sc+q'] * 1e3:.2f} "
            f"| **{sc_cost:.2f}x** |"
        )
    lines += ["", "Target (issue 14): <= 1.3x at B = 256, d = 128, K = 4096.", ""]
    path = write_result(args.out, "\n".join(lines))
    print(path.read_text())


if __name__ == "__main__":
    main()
