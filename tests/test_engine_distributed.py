"""Distributed exactness: 2 gloo processes with batch b == 1 process with batch 2b.

Every objective kind goes through the engine's real step (``Arm.train_step``: DDP,
differentiable all-gather, global-batch loss, optimiser, EMA) in float64; the loss,
the DDP-averaged parameter gradients and the updated weights of both ranks must match
the single-process run on the doubled batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spacl.engine import DistributedContext, load_checkpoint
from spacl.tasks.image import Trainer, load_config

pytestmark = pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed (gloo)"
)

BASE = [
    "data.name=synthetic",
    "data.synthetic.num_classes=4",
    "data.synthetic.dim=6",
    "data.synthetic.samples_per_class=10",
    "views.noise_sigma=0.3",
    "model.hidden_dims=[12]",
    "model.batchnorm=false",  # per-rank BatchNorm statistics would differ by design
    "model.feature_dim=6",
    "model.proj_dim=5",
    "train.batch_size=16",  # global batch: 8 per rank
    "train.precision=fp64",
    "train.progress=false",
    "optim.name=sgd",
    "optim.lr=0.5",
    "log.tensorboard=false",
]

CASES: dict[str, list[str]] = {
    "simclr_ema": ["objective.name=simclr", "model.momentum=0.5"],
    "supcon": ["objective.name=supcon"],
    "nscl": ["objective.name=nscl"],
    "hcl": ["objective.name=hcl", "objective.params.tau_plus=0.1"],
    "sampled_hard": ["objective.name=sampled_hard", "objective.params.num_negatives=3"],
    "cross_entropy": ["objective.name=cross_entropy"],
    "spacl": [
        "objective.name=spacl",
        "views.num_views=4",
        "views.keep_original=true",
        "model.momentum=0.9",
    ],
    "spacl_shared_class": [
        "objective.name=spacl",
        "views.num_views=3",
        "views.keep_original=true",
        "objective.params.positive_pool=class",
    ],
}
TOL = 1e-9  # float64; the requirement is 1e-6


def _step(ctx: DistributedContext, run_dir: Path) -> dict[str, dict]:
    out = {}
    for name, overrides in CASES.items():
        cfg = load_config(None, [*BASE, *overrides])
        trainer = Trainer(cfg, run_dir / name, ctx=ctx, quiet=True)
        arm = trainer.arms[0]
        batch = trainer.data.stream.batch(0, 0)
        assert len(batch) == 16 // ctx.world_size
        loss = arm.train_step(batch.views, batch.labels, 0)
        out[name] = {
            "loss": loss,
            "grads": {n: p.grad.detach().clone() for n, p in arm.model.named_parameters()},
            "weights": {n: p.detach().clone() for n, p in arm.model.named_parameters()},
            "target": {k: v.clone() for k, v in arm.target.state_dict().items()},
        }
    return out


def _worker(rank: int, world: int, init_file: str, run_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        ctx = DistributedContext(rank, world, 0, torch.device("cpu"), False)
        result = _step(ctx, Path(run_dir) / f"rank{rank}")
        torch.save(result, Path(run_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.dtype == torch.float64, what
    err = float((a - b).abs().max()) if a.numel() else 0.0
    assert err <= TOL, f"{what}: max |diff| = {err:.3e}"


def test_two_gloo_processes_equal_one_process_on_the_doubled_batch(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = _step(DistributedContext(), tmp_path / "single")
    finally:
        torch.set_num_threads(threads)
    for rank in range(2):
        dist_result = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        for name, ref in single.items():
            got = dist_result[name]
            assert abs(got["loss"] - ref["loss"]) <= TOL, f"{name} rank {rank}: loss"
            for part in ("grads", "weights", "target"):
                assert got[part].keys() == ref[part].keys()
                for key in ref[part]:
                    _close(got[part][key], ref[part][key], f"{name} rank {rank} {part} {key}")
    # the gradients are not trivially zero
    assert all(float(g.abs().max()) > 1e-6 for r in single.values() for g in r["grads"].values())


def test_spacl_train_under_torchrun_matches_one_process(tmp_path):
    """``torchrun ... -m spacl.cli train``: env-var process group, one shared run directory,
    and after several optimiser steps the same weights as a single process."""
    overrides = [
        *BASE,
        "objective.name=supcon",
        "model.momentum=0.5",
        "train.epochs=2",
        "train.threads=1",
        "eval.every_epochs=0",
        "eval.linear_probe=false",
        "eval.knn_k=3",
        f"out_dir={tmp_path / 'runs'}",
    ]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: ddp\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd += ["-m", "spacl.cli", "train", str(recipe), *overrides, "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run,) = list((tmp_path / "runs").iterdir())  # both ranks wrote into rank 0's directory
    assert run.name.startswith("ddp-")
    got = load_checkpoint(run / "checkpoints" / "last.pt")
    assert got["world_size"] == 2 and got["progress"]["global_step"] == 4

    threads = torch.get_num_threads()
    try:
        cfg = load_config(recipe, overrides)
        single = Trainer(cfg, tmp_path / "single", ctx=DistributedContext(), quiet=True)
        single.fit()
    finally:
        torch.set_num_threads(threads)
    ref = single.arms[0]
    for part, state in (("model", ref.model.state_dict()), ("target", ref.target.state_dict())):
        for key, value in state.items():
            _close(got["arms"]["main"][part][key], value, f"{part} {key}")
