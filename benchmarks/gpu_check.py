"""A prepared check of spacl's CUDA paths, made to finish in under 8 minutes on one GPU.

Runs, and reports in one table (also written to ``benchmarks/results/gpu.md``):

1. the shipped ``cifar100/spacl_supervised`` and ``cifar100/supcon`` recipes through the
   real :class:`spacl.tasks.image.Trainer` for ``--steps`` optimiser steps (default 300) on
   synthetic 32x32 CIFAR-100-format data written to a temporary directory: the dataset
   on the GPU, batched GPU augmentation, bf16 autocast (``train.precision=bf16``), the
   encoder in channels-last memory format, checkpoints and the final evaluation;
2. a 1-process ``nccl`` process group: the engine's differentiable all-gather and a
   ``DistributedDataParallel`` step, compared with the plain step;
3. ``benchmarks/train_step.py``'s arms on the GPU (engine, CIFAR-stem ResNet-18, batch
   256, bf16) and SPACL's ablations: the fair-protocol ratio (SPACL default vs SimCLR on
   the same 5 views) against its 1.4x target, and per arm the device-busy time and the
   host syncs of one step;
4. the loss benchmark on CUDA: forward + backward of spacl's NT-Xent, SupCon and SPACL
   losses (the dynamic form, every view an anchor, its supervised form; the peers when
   installed) as a ratio to the similarity matmul; then SPACL with every view an anchor
   on CUDA against the same loss on the CPU (values and gradients, both forms).
5. the fine-tuned text task's device path (a tiny random BERT, ``transformers``): bottom
   states on the GPU cached on the host, SPACL / SupCon / cross-entropy fine-tuning steps
   on the GPU, eval embeddings equal to the same weights' on the CPU.
6. link prediction on the device: SPACL-KG and filtered InfoNCE through ``train_kg`` on a
   synthetic graph of 5,000 entities, and SPACL-KG's loss and gradients on the GPU equal
   to the CPU's (the cut's sort path against the CPU's long-row selection).

Without CUDA it prints why and exits 0 (nothing is run).  ``--dry-run`` runs every
section on the CPU at toy size (gloo instead of nccl), to check the script itself.

    python benchmarks/gpu_check.py [--steps 300] [--out benchmarks/results/gpu.md]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import pickle
import socket
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, header

#: SPACL / SimCLR step-time target (benchmarks/train_step.py)
TARGET_RATIO = 1.4
SKIP_MESSAGE = "gpu_check: CUDA is not available here; skipping the GPU check (nothing was run)."


@dataclass
class Row:
    check: str
    ok: bool
    detail: str
    seconds: float
    table: str = ""  # a section's own table, printed after the summary


@dataclass
class Scale:
    """Sizes of one run: the GPU defaults, or a toy CPU dry run."""

    device: str
    steps: int
    batch: int
    train_images: int
    test_images: int
    precision: str
    backend: str
    loss_batch: int
    repeats: int
    backbone_override: list[str]


def gpu_scale(steps: int) -> Scale:
    return Scale("cuda", steps, 256, 4096, 1024, "bf16", "nccl", 1024, 20, [])


def dry_scale() -> Scale:
    small = ["model.backbone=small_cnn", "model.channels=[8,16]", "model.feature_dim=16"]
    small += ["model.head_hidden_dim=32", "model.proj_dim=16"]
    return Scale("cpu", 2, 8, 200, 200, "fp32", "gloo", 64, 2, small)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@contextlib.contextmanager
def _timed(rows: list[Row], check: str) -> Iterator[dict[str, Any]]:
    """Run a section; record a row (a failure is a row too, with its error)."""
    start = time.perf_counter()
    out: dict[str, Any] = {"ok": True, "detail": ""}
    try:
        yield out
    except Exception as err:  # a check reports, it does not stop the others
        out["ok"] = False
        out["detail"] = f"FAILED: {type(err).__name__}: {err}".replace("\n", " ")[:300]
        traceback.print_exc()
    seconds = time.perf_counter() - start
    rows.append(Row(check, bool(out["ok"]), str(out["detail"]), seconds, out.get("table", "")))


# ------------------------------------------------------------------ 1. recipes


def write_synthetic_cifar100(root: Path, n_train: int, n_test: int, seed: int = 0) -> Path:
    """Random CIFAR-100 "python version" pickles whose class shifts the mean colour."""
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centres = rng.integers(40, 216, size=(100, 3, 1, 1))
    for split, n in (("train", n_train), ("test", n_test)):
        fine = rng.permutation(np.arange(n) % 100)  # balanced: geometry needs >= 2 per class
        noise = rng.normal(0.0, 40.0, size=(n, 3, 32, 32))
        imgs = np.clip(centres[fine] + noise, 0, 255).astype(np.uint8)
        obj = {
            "data": imgs.reshape(n, 3072),
            "fine_labels": fine.tolist(),
            "coarse_labels": (fine // 5).tolist(),
        }
        (folder / split).write_bytes(pickle.dumps(obj))
    meta = {
        "fine_label_names": [f"class{i}" for i in range(100)],
        "coarse_label_names": [f"super{i}" for i in range(20)],
    }
    (folder / "meta").write_bytes(pickle.dumps(meta))
    return root


@contextlib.contextmanager
def channels_last_models(enabled: bool) -> Iterator[None]:
    """Build every engine encoder in channels-last memory format (the engine has no
    option for it; the check wraps its model builder)."""
    from spacl.tasks.image import build

    original = build.build_base_model

    def wrapped(cfg: Any, input_shape: tuple[int, ...]) -> Any:
        model = original(cfg, input_shape)
        return model.to(memory_format=torch.channels_last) if enabled else model

    build.build_base_model = wrapped  # type: ignore[assignment]
    try:
        yield
    finally:
        build.build_base_model = original  # type: ignore[assignment]


def run_recipe(name: str, scale: Scale, work: Path) -> str:
    """Train a shipped CIFAR-100 recipe on synthetic data; the row's detail."""
    from spacl.tasks.image import Trainer, load_config

    steps_per_epoch = max(1, scale.train_images // scale.batch)
    epochs = math.ceil(scale.steps / steps_per_epoch)
    cfg = load_config(
        name,
        [
            f"data.root={work}",
            f"train.device={scale.device}",
            f"train.precision={scale.precision}",
            f"train.batch_size={scale.batch}",
            f"train.epochs={epochs}",
            f"train.max_steps={scale.steps}",
            "train.checkpoint_every=0",
            f"train.log_every={max(1, min(50, scale.steps // 4))}",
            "train.progress=false",
            "optim.warmup_epochs=1",
            "eval.every_epochs=0",
            f"eval.max_train_samples={scale.train_images}",
            "log.tensorboard=false",
            *scale.backbone_override,
        ],
    )
    with channels_last_models(scale.device == "cuda"):
        trainer = Trainer(cfg, work / name.replace("/", "-"), quiet=True, command="gpu_check")
        first = trainer.arms[0].model
        result = trainer.fit()
    records = [
        json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    losses = [r["loss"] for r in records if isinstance(r.get("loss"), float)]
    loss = losses[-1] if losses else math.nan
    if not math.isfinite(loss):
        raise RuntimeError(f"last logged loss is {loss}")
    if result.global_step != scale.steps:
        raise RuntimeError(f"ran {result.global_step} steps, expected {scale.steps}")
    layout = ""
    conv = next((m for m in first.modules() if isinstance(m, torch.nn.Conv2d)), None)
    if conv is not None:
        cl = conv.weight.is_contiguous(memory_format=torch.channels_last)
        layout = ", channels-last" if cl else ", contiguous"
    knn = 100.0 * result.metrics["main"].get("knn_accuracy", math.nan)
    return (
        f"{result.global_step} steps at batch {scale.batch} ({scale.precision}{layout}): "
        f"{result.global_step / max(result.seconds, 1e-9):.1f} steps/s incl. eval, "
        f"last loss {loss:.3f}, kNN {knn:.1f}%"
    )


# ------------------------------------------------------------------ 2. nccl


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_process_group(scale: Scale) -> str:
    """A 1-process group: all-gather with gradient and a DDP step equal the plain ones."""
    import torch.distributed as dist

    from spacl.engine.distributed import all_gather_with_grad

    device = torch.device(scale.device if scale.device == "cpu" else "cuda:0")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        scale.backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
    )
    try:
        x = torch.randn(8, 4, device=device, requires_grad=True)
        gathered = all_gather_with_grad(x)
        (gathered * 3).sum().backward()
        assert x.grad is not None
        if not (
            torch.equal(gathered.detach(), x.detach())
            and torch.allclose(x.grad, 3 * torch.ones_like(x))
        ):
            raise RuntimeError("all_gather_with_grad differs from the identity on 1 process")
        total = torch.tensor([2.0], device=device)
        dist.all_reduce(total)
        torch.manual_seed(0)
        plain = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
        )
        plain = plain.to(device)
        ddp_model = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(*[m for m in _copy(plain)]),
            device_ids=[0] if device.type == "cuda" else None,
        )
        inputs = torch.randn(32, 16, device=device)
        for model in (plain, ddp_model):
            model.zero_grad()
            model(inputs).square().mean().backward()
        diff = max(
            float((a.grad - b.grad).abs().max())  # type: ignore[operator]
            for a, b in zip(plain.parameters(), ddp_model.module.parameters(), strict=True)
        )
        if diff > 1e-6:
            raise RuntimeError(f"DDP gradients differ from the plain step by {diff:.2e}")
        return (
            f"{scale.backend}, world 1: all_gather_with_grad exact, all_reduce {float(total):.0f}, "
            f"DDP step = plain step (max grad diff {diff:.1e})"
        )
    finally:
        dist.destroy_process_group()


def _copy(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(model)


# ------------------------------------------------------------------ 3. step ratio


#: the ablations beside train_step.py's arms: which SPACL part costs what on the device
ABLATION_ARMS: dict[str, tuple[str, int, list[str]]] = {
    f"spacl_{variant}": (
        f"SPACL default, variant={variant}",
        5,
        ["objective.name=spacl", f"objective.params.variant={variant}"],
    )
    for variant in ("no_adversarial", "no_negative_selection", "ib")
}


def _step_arms() -> dict[str, tuple[str, int, list[str]]]:
    from train_step import ARMS

    return {**ARMS, **ABLATION_ARMS}


def _arm(name: str, scale: Scale) -> Any:
    from train_step import build

    with channels_last_models(scale.device == "cuda"):
        return build(
            name,
            scale.batch,
            device=scale.device,
            precision=scale.precision,
            extra=scale.backbone_override,
            arms=_step_arms(),
        )


def _device_profile(
    fn: Callable[[], None], device: str, steps: int = 3
) -> tuple[float, int, Counter[str]]:
    """(device-busy ms per step, host syncs per step, the syncs' sites) of ``fn``; NaN,
    -1 and no sites on the CPU.

    Busy time is the kernels' summed self time under :mod:`torch.profiler`; a sync is a
    synchronising call CUDA's sync debug mode reports (``.item()``, ``nonzero``, a
    host copy), its site the Python line that made it (``file:line``)."""
    if not device.startswith("cuda"):
        return math.nan, -1, Counter()
    import warnings

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    busy_us = sum(
        getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        for e in prof.key_averages()
    )
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    sites = Counter(
        f"{Path(w.filename).parent.name}/{Path(w.filename).name}:{w.lineno}"
        for w in caught
        if "synchroniz" in str(w.message)
    )
    return busy_us / 1000 / steps, sum(sites.values()), sites


#: SPACL's profiler regions (SPACLLoss.forward), the rows of the step breakdown
REGIONS = ("spacl/loss", "spacl/mine", "spacl/game", "spacl/cut")


def _region_times(
    fn: Callable[[], None], device: str, steps: int = 3
) -> dict[str, tuple[float, float]]:
    """Per SPACL region: (host ms, device ms) per step of ``fn`` under
    :mod:`torch.profiler` (inclusive times; device ms NaN on the CPU)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        _sync(device)
    # on a GPU a region is also a device-side annotation of the same name (no host time,
    # its span on the stream): read the host event, with the kernels it launched
    host_events: dict[str, Any] = {}
    for e in prof.key_averages():
        if e.key in REGIONS and (
            e.key not in host_events or e.cpu_time_total > host_events[e.key].cpu_time_total
        ):
            host_events[e.key] = e
    out = {}
    for key, e in host_events.items():
        dev = getattr(e, "device_time_total", getattr(e, "cuda_time_total", math.nan))
        out[key] = (e.cpu_time_total / 1000 / steps, dev / 1000 / steps if cuda else math.nan)
    return out


def run_step_ratio(scale: Scale) -> tuple[bool, str, str]:
    """train_step.py's arms (and SPACL's ablations) on the device: the fair-protocol ratio
    (SPACL default vs SimCLR on the same 5 views, target <= 1.4x) and, per arm, how much
    of the step the device is busy and how often the host waits for it."""
    from train_step import TARGET_RATIO, time_steps

    b, device = scale.batch, scale.device
    arms_spec = _step_arms()
    gen = torch.Generator().manual_seed(0)
    labels = (torch.arange(b) % 10).to(device)
    arms = {n: _arm(n, scale) for n in arms_spec}
    views = {
        n: torch.rand(b, v, 3, 32, 32, generator=gen).to(device)
        for n, (_, v, _) in arms_spec.items()
    }
    counter = dict.fromkeys(arms, 0)

    def stepper(name: str) -> Callable[[], None]:
        def run() -> None:
            arms[name].train_step(views[name], labels, counter[name])
            counter[name] += 1
            _sync(device)

        return run

    fns = {n: stepper(n) for n in arms}
    samples = time_steps(fns, repeats=max(2, scale.repeats), warmup=3)
    med = {n: statistics.median(v) for n, v in samples.items()}
    lines = [
        "| arm | median ms / step | vs SimCLR 2 views | vs SimCLR 5 views "
        "| device busy ms / step | host syncs / step |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    sync_sites: dict[str, Counter[str]] = {}
    for n, (label, _, _) in arms_spec.items():
        busy, syncs, sync_sites[n] = _device_profile(fns[n], device)
        r2, r5 = med[n] / med["simclr2"], med[n] / med["simclr5"]
        busy_cell = "n/a" if math.isnan(busy) else f"{busy:.1f}"
        sync_cell = "n/a" if syncs < 0 else str(syncs)
        lines.append(
            f"| {label} | {1000 * med[n]:.1f} | {r2:.2f}x | {r5:.2f}x | {busy_cell} | {sync_cell} |"
        )
    if sync_sites["spacl"]:
        lines += [
            "",
            "Where the host waits in one step (CUDA's sync debug mode, by Python line):",
            "",
            "| site | SimCLR 5 views | SPACL default |",
            "|---|---:|---:|",
        ]
        for site in sorted(sync_sites["simclr5"].keys() | sync_sites["spacl"].keys()):
            lines.append(
                f"| {site} | {sync_sites['simclr5'][site]} | {sync_sites['spacl'][site]} |"
            )
    lines += [
        "",
        "Where SPACL's step goes (profiler regions, inclusive, per step; the profiler's "
        "own overhead included, so read the shares):",
        "",
        "| arm | region | host ms | device ms |",
        "|---|---|---:|---:|",
    ]
    for n in ("spacl", "spacl_ema"):
        times = _region_times(fns[n], device)
        for region in (r for r in REGIONS if r in times):
            host, dev = times[region]
            dev_cell = "n/a" if math.isnan(dev) else f"{dev:.2f}"
            lines.append(f"| {arms_spec[n][0]} | {region} | {host:.2f} | {dev_cell} |")
    ratio = med["spacl"] / med["simclr5"]
    ok = ratio <= TARGET_RATIO or device == "cpu"
    net = "ResNet-18" if device == "cuda" else "small CNN"
    detail = (
        f"{net} batch {b}, {scale.precision}: SimCLR 5 views {1000 * med['simclr5']:.1f} ms, "
        f"SPACL default {1000 * med['spacl']:.1f} ms per step: **{ratio:.2f}x** (target <= "
        f"{TARGET_RATIO}x, the fair protocol of benchmarks/train_step.py); every arm below"
    )
    return ok, detail, "\n".join(lines)


# ------------------------------------------------------------------ 4. losses


def run_losses(scale: Scale) -> str:
    from spacl.losses import NTXentLoss, SupConLoss
    from spacl.losses.spacl import SPACLLoss

    device = "cuda" if scale.device == "cuda" else "cpu"
    b, d = scale.loss_batch, 128
    gen = torch.Generator().manual_seed(0)
    z0 = torch.randn(b, d, generator=gen).to(device).requires_grad_(True)
    z1 = torch.randn(b, d, generator=gen).to(device).requires_grad_(True)
    pool = torch.randn(b, 5, d, generator=gen).to(device).requires_grad_(True)
    labels = (torch.arange(b) % 10).to(device)
    nt, sc = NTXentLoss(0.5), SupConLoss(0.1)
    sp = SPACLLoss(temperature=0.1, num_positives=2, share=0.95, num_adversarial=1).to(device)
    every = SPACLLoss(0.1, anchor_set="every_view").to(device)
    every_sup = SPACLLoss(0.1, **EVERY_VIEW_SUPERVISED).to(device)  # type: ignore[arg-type]
    rows = torch.arange(b, device=device)

    def spacl_step() -> torch.Tensor:  # as in README: anchor on the pool, online anchors
        a = sp.choose_anchor(pool.detach())
        return sp(pool[rows, a], pool, labels=None, anchor_index=a)

    fns: dict[str, Callable[[], torch.Tensor]] = {
        "matmul": lambda: (torch.cat([z0, z1]) @ torch.cat([z0, z1]).T).sum(),
        "NT-Xent": lambda: nt(z0, z1),
        "SupCon": lambda: sc(torch.stack([z0, z1], 1), labels),
        "SPACL": lambda: spacl_step(),
        "SPACL every view": lambda: every(None, pool),
        "SPACL every view, supervised": lambda: every_sup(None, pool, labels),
    }
    with contextlib.suppress(ImportError):
        from lightly.loss import NTXentLoss as LightlyNTXent

        lightly_nt = LightlyNTXent(temperature=0.5)
        fns["lightly NT-Xent"] = lambda: lightly_nt(z0, z1)
    with contextlib.suppress(ImportError):
        from pytorch_metric_learning.losses import SupConLoss as PmlSupCon

        pml_sc, lab2 = PmlSupCon(temperature=0.1), labels.repeat(2)
        fns["pml SupCon"] = lambda: pml_sc(torch.cat([z0, z1]), lab2)

    def fwd_bwd(fn: Callable[[], torch.Tensor]) -> None:
        for t in (z0, z1, pool):
            t.grad = None
        value = fn()
        if not bool(torch.isfinite(value)):
            raise RuntimeError("non-finite loss")
        value.backward()

    for fn in fns.values():
        for _ in range(3):
            fwd_bwd(fn)
    samples: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(scale.repeats):
        for n, fn in fns.items():
            _sync(device)
            start = time.perf_counter()
            fwd_bwd(fn)
            _sync(device)
            samples[n].append(time.perf_counter() - start)
    med = {n: statistics.median(v) for n, v in samples.items()}
    parts = [f"{n} {med[n] / med['matmul']:.1f}x" for n in fns if n != "matmul"]
    return f"B={b}, d={d}, fwd+bwd vs matmul ({1e3 * med['matmul']:.2f} ms): " + ", ".join(parts)


#: the supervised every-view form of the shipped recipes
EVERY_VIEW_SUPERVISED = {
    "anchor_set": "every_view",
    "positive_pool": "instance_class",
    "positive_mode": "mean",
    "detach_candidates": False,
}


def run_every_view_parity(scale: Scale) -> tuple[bool, str]:
    """SPACL with every view an anchor on ``scale.device`` against the same loss on the CPU.

    Two copies of one loss (the same generator weights, optimiser states and noise
    stream), the same pool ``[256, 5, 128]`` with labels: the per-anchor values and the
    pool's gradient after one training-mode forward + backward (one game round each),
    self-supervised and in the supervised form.  Passes when every value and gradient
    entry agrees to 1e-3 (float32 matmuls of two devices; a row whose cut decision sits
    on a near-tie would show here as a large difference).
    """
    from spacl.losses.spacl import SPACLLoss

    device = "cuda" if scale.device == "cuda" else "cpu"
    gen = torch.Generator().manual_seed(1)
    b, v, d = 256, 5, 128
    pool = torch.randn(b, 1, d, generator=gen) + 0.7 * torch.randn(b, v, d, generator=gen)
    labels = torch.arange(b) % 10
    worst = 0.0
    parts = []
    forms = (
        ("self-supervised", {"anchor_set": "every_view"}),
        ("supervised", EVERY_VIEW_SUPERVISED),
    )
    for name, options in forms:
        base = SPACLLoss(0.1, embedding_dim=d, reduction="none", **options)  # type: ignore[arg-type]
        results = []
        for where, loss in (("cpu", base), (device, _copy(base).to(device))):
            x = pool.to(where).requires_grad_(True)
            value = loss(None, x, labels.to(where) if name == "supervised" else None)
            (grad,) = torch.autograd.grad(value.sum(), x)
            results.append((value.detach().cpu().double(), grad.cpu().double()))
        (v0, g0), (v1, g1) = results
        diff = max(float((v0 - v1).abs().max()), float((g0 - g1).abs().max()))
        worst = max(worst, diff)
        parts.append(f"{name} max |diff| {diff:.1e}")
    return worst <= 1e-3, f"{device} vs cpu, B={b} V={v} d={d}: " + ", ".join(parts)


# ------------------------------------------------------------------ 5. text fine-tune


def _tiny_bert(device: str) -> tuple[torch.nn.Module, Callable[[list[str]], dict[str, Any]]]:
    """A 4-layer random BERT (transformers) and a whitespace tokenizer, on ``device``."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = transformers.BertModel(cfg, add_pooling_layer=False).to(device)

    def tokenize(texts: list[str]) -> dict[str, Any]:
        ids = [[1] + [sum(map(ord, w)) % 60 + 3 for w in t.split()] + [2] for t in texts]
        t = max(len(x) for x in ids)
        input_ids = torch.zeros(len(ids), t, dtype=torch.long)
        mask = torch.zeros(len(ids), t, dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    return model, tokenize


def run_text_finetune(scale: Scale) -> str:
    """The fine-tuned text task's device path: bottom states computed on the device and
    cached on the host, the top layers, loss and classifier trained on the device, eval
    embeddings equal to the same weights' on the CPU."""
    import copy

    try:
        import transformers  # noqa: F401
    except ImportError:
        return "not run: transformers is not installed (pip install '.[text]')"
    from spacl.tasks.text.finetune import (
        FinetuneSettings,
        TopLayers,
        bottom_states,
        embed_states,
        finetune,
    )

    device = scale.device
    model, tokenize = _tiny_bert(device)
    texts = [f"intent {i % 4} text {i} " + "word " * (i % 5) for i in range(32)]
    labels = torch.arange(32) % 4
    states = bottom_states(model, tokenize, texts, num_frozen=2)
    reference = bottom_states(copy.deepcopy(model).cpu(), tokenize, texts, num_frozen=2)
    bottom_gap = max(float((a - b).abs().max()) for a, b in zip(states, reference, strict=True))
    if states[0].device.type != "cpu" or bottom_gap > 1e-3:
        raise RuntimeError(f"bottom states: device {states[0].device}, gap {bottom_gap:.2e}")
    initial = TopLayers(list(model.encoder.layer)[2:])
    parts = [f"bottom states gap {bottom_gap:.1e}"]
    for objective in ("spacl_selected", "supcon", "cross_entropy"):
        settings = FinetuneSettings(objective, batch_size=8, lr=1e-3, seed=0, max_steps=4)
        top, losses = finetune(initial, states, labels, 4, settings)
        if next(top.parameters()).device.type != torch.device(device).type:
            raise RuntimeError(f"{objective}: the top layers left {device}")
        if not all(math.isfinite(v) for v in losses):
            raise RuntimeError(f"{objective}: non-finite loss {losses}")
        z = embed_states(top, states)
        z_cpu = embed_states(copy.deepcopy(top).cpu(), states)
        gap = float((z - z_cpu).abs().max())
        if gap > 1e-3:
            raise RuntimeError(f"{objective}: {device} vs CPU embeddings differ by {gap:.2e}")
        parts.append(f"{objective} loss {losses[-1]:.3f}, {device} vs CPU gap {gap:.1e}")
    return "; ".join(parts)


# ------------------------------------------------------------------ 6. KG


def write_synthetic_kg(root: Path, entities: int, relations: int = 8) -> Path:
    """Triple files of a learnable graph: relation ``r`` maps ``i`` to ``(5 i + 3 r + 1)
    mod E``; 5% of the triples held out, half valid, half test."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [
        (i, r, (5 * i + 3 * r + 1) % entities) for i in range(entities) for r in range(relations)
    ]
    order = np.random.default_rng(0).permutation(len(rows))
    held = max(len(rows) // 40, 2)
    split = {"train": order[: -2 * held], "valid": order[-2 * held : -held], "test": order[-held:]}
    for name, idx in split.items():
        lines = [f"e{rows[i][0]}\tr{rows[i][1]}\te{rows[i][2]}" for i in idx]
        (root / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return root


def run_kg(scale: Scale) -> str:
    """Link prediction on the device: SPACL-KG and filtered InfoNCE trained by
    ``train_kg`` on a synthetic graph of more than 4096 entities (the long rows of the
    cut), and SPACL-KG's loss and gradients on the device equal to the CPU's (float64,
    no game: the cut's sort path against the CPU's long-row selection)."""
    from spacl.losses.kg import LinkSPACLLoss
    from spacl.tasks.kg import train_kg

    device = scale.device
    cuda = device == "cuda"
    n_entities = 5000 if cuda else 300
    parts = []
    with tempfile.TemporaryDirectory(prefix="spacl-gpu-kg-") as tmp:
        root = write_synthetic_kg(Path(tmp) / "graph", n_entities)
        for objective in ("spacl", "infonce"):
            cfg = {
                "data": {"name": "synthetic-kg", "root": str(root), "unseen": "error"},
                "model": {"dim": 128 if cuda else 16, "init_scale": 0.1},
                "objective": {"name": objective, "temperature": 1.0},
                "optim": {"name": "adam", "lr": 0.01, "n3": 1e-3},
                "train": {
                    "epochs": 2,
                    "batch_size": 1024 if cuda else 64,
                    "device": device,
                },
                "eval": {"every_epochs": 1},
            }
            summary = train_kg(cfg, log=None)
            mrr = float(summary["valid"]["mrr"])
            if not math.isfinite(mrr) or mrr <= 0:
                raise RuntimeError(f"{objective}: valid MRR {mrr}")
            parts.append(
                f"{objective} {summary['seconds_per_epoch']:.1f} s/epoch, valid MRR {mrr:.3f}"
            )
    gen = torch.Generator().manual_seed(0)
    b, d = (512, 64) if cuda else (32, 8)
    query = torch.randn(b, d, generator=gen, dtype=torch.float64)
    entities = torch.randn(n_entities if cuda else 4200, d, generator=gen, dtype=torch.float64)
    positives = torch.zeros(b, entities.shape[0], dtype=torch.bool)
    positives[torch.arange(b), torch.randint(entities.shape[0], (b,), generator=gen)] = True
    results = []
    for where in (device, "cpu"):
        q = query.to(where).requires_grad_(True)
        e = entities.to(where).requires_grad_(True)
        loss_fn = LinkSPACLLoss(1.0, variant="no_adversarial").to(where)
        loss = loss_fn(q, e, positives.to(where))
        loss.backward()
        assert q.grad is not None and e.grad is not None
        results.append((float(loss), q.grad.cpu(), e.grad.cpu()))
    (v0, q0, e0), (v1, q1, e1) = results
    gap = max(abs(v0 - v1), float((q0 - q1).abs().max()), float((e0 - e1).abs().max()))
    if gap > 1e-9:
        raise RuntimeError(f"SPACL-KG loss on {device} vs CPU differs by {gap:.2e}")
    parts.append(f"E={entities.shape[0]} SPACL-KG loss + grads {device} vs CPU gap {gap:.1e}")
    return "; ".join(parts)


# ------------------------------------------------------------------ main


def format_table(rows: list[Row], scale: Scale, total: float) -> str:
    lines = [
        "| check | result | detail | seconds |",
        "|---|---|---|---:|",
        *[
            f"| {r.check} | {'ok' if r.ok else '**FAILED**'} | {r.detail} | {r.seconds:.1f} |"
            for r in rows
        ],
    ]
    device = torch.cuda.get_device_name(0) if scale.device == "cuda" else "CPU (dry run)"
    sections = [f"\n### {r.check}\n\n{r.table}" for r in rows if r.table]
    return "\n".join(
        [*lines, "", f"Device: {device}; total {total:.0f} s; {sum(r.ok for r in rows)}/"
         f"{len(rows)} checks passed.", *sections]
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps per recipe")
    parser.add_argument(
        "--out", default=None, help="markdown output (default: benchmarks/results/gpu.md)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="toy sizes on the CPU (checks the script only)"
    )
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if not args.dry_run and not torch.cuda.is_available():
        print(SKIP_MESSAGE)
        return 0
    scale = dry_scale() if args.dry_run else gpu_scale(args.steps)
    if scale.device == "cuda":
        torch.backends.cudnn.benchmark = True
    rows: list[Row] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spacl-gpu-check-") as tmp:
        work = write_synthetic_cifar100(Path(tmp), scale.train_images, scale.test_images)
        for recipe in ("cifar100/spacl_supervised", "cifar100/supcon"):
            with _timed(rows, f"recipe {recipe}") as out:
                out["detail"] = run_recipe(recipe, scale, work)
    with _timed(rows, f"1-process {scale.backend}") as out:
        out["detail"] = run_process_group(scale)
    with _timed(rows, "SPACL / SimCLR step time") as out:
        out["ok"], out["detail"], out["table"] = run_step_ratio(scale)
    with _timed(rows, "losses on " + scale.device) as out:
        out["detail"] = run_losses(scale)
    with _timed(rows, "SPACL every view on " + scale.device + " = CPU") as out:
        out["ok"], out["detail"] = run_every_view_parity(scale)
    with _timed(rows, "text fine-tune on " + scale.device) as out:
        out["detail"] = run_text_finetune(scale)
    with _timed(rows, "KG link prediction on " + scale.device) as out:
        out["detail"] = run_kg(scale)
    table = format_table(rows, scale, time.perf_counter() - started)
    print(table)
    if not args.dry_run or args.out:
        path = Path(args.out) if args.out else RESULTS_DIR / "gpu.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header("GPU check (benchmarks/gpu_check.py)") + "\n" + table + "\n")
        print(f"wrote {path}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
