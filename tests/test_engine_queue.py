"""The engine's negative queue: config checks, pushes, checkpoint, SIGKILL + resume exactness."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from spacl.engine import load_checkpoint
from spacl.tasks.image import Trainer, load_config

BASE = [
    "data.name=synthetic",
    "data.synthetic.num_classes=4",
    "data.synthetic.dim=6",
    "data.synthetic.samples_per_class=10",
    "views.noise_sigma=0.3",
    "model.hidden_dims=[12]",
    "model.feature_dim=6",
    "model.proj_dim=5",
    "train.batch_size=8",
    "train.progress=false",
    "eval.linear_probe=false",
    "eval.every_epochs=0",
    "eval.knn_k=3",
    "log.tensorboard=false",
]


def _trainer(tmp_path: Path, *extra: str) -> Trainer:
    cfg = load_config(None, [*BASE, *extra, f"out_dir={tmp_path}"])
    return Trainer(cfg, tmp_path / "run", quiet=True)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        (["objective.queue_size=-1"], "queue_size"),
        (["objective.name=barlow_twins", "objective.queue_size=8"], "queue_size"),
        (["objective.name=cross_entropy", "objective.queue_size=8"], "queue_size"),
    ],
)
def test_bad_queue_config_names_the_key(override, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, [*BASE, *override])


def test_queue_holds_the_last_targets_with_labels(tmp_path):
    trainer = _trainer(
        tmp_path, "objective.name=supcon", "objective.queue_size=20", "model.momentum=0.9"
    )
    arm = trainer.arms[0]
    assert arm.queue is not None and len(arm.queue) == 0
    batches = [trainer.data.stream.batch(0, k) for k in range(3)]
    for step, batch in enumerate(batches):
        before = arm.queue.embeddings.clone()
        with torch.no_grad():
            out = arm.target.module(batch.views.reshape(-1, *batch.views.shape[2:]))
        expected = out.projections if hasattr(out, "projections") else out
        arm.train_step(batch.views, batch.labels, step)
        b, v = batch.views.shape[:2]
        got = arm.queue.embeddings
        assert got.shape[0] == min(20, (step + 1) * b * v)
        # the newest rows are this step's targets (computed before the update), labelled
        assert torch.equal(got[-b * v :], expected.to(got.dtype))
        assert torch.equal(arm.queue.labels[-b * v :], batch.labels.repeat_interleave(v))
        if before.shape[0] + b * v <= 20:
            assert torch.equal(got[: before.shape[0]], before)


def test_queue_changes_the_loss_and_is_in_the_checkpoint(tmp_path):
    trainer = _trainer(tmp_path, "objective.name=simclr", "objective.queue_size=16")
    arm = trainer.arms[0]
    batch = trainer.data.stream.batch(0, 0)
    first = float(arm.compute_loss(batch.views, batch.labels).detach())
    arm.train_step(batch.views, batch.labels, 0)
    no_queue = _trainer(tmp_path / "plain", "objective.name=simclr")
    no_queue.arms[0].model.load_state_dict(arm.model.state_dict())
    with_q = float(arm.compute_loss(batch.views, batch.labels).detach())
    without = float(no_queue.arms[0].compute_loss(batch.views, batch.labels).detach())
    assert first == float(no_queue_first(tmp_path, batch))  # an empty queue: no change
    assert with_q > without  # 16 more negatives raise the InfoNCE denominator
    state = arm.state_dict()
    assert torch.equal(state["queue"]["rows"], arm.queue.rows)
    fresh = _trainer(tmp_path / "fresh", "objective.name=simclr", "objective.queue_size=16")
    fresh.arms[0].load_state_dict(state)
    assert torch.equal(fresh.arms[0].queue.embeddings, arm.queue.embeddings)


def no_queue_first(tmp_path: Path, batch) -> torch.Tensor:
    arm = _trainer(tmp_path / "first", "objective.name=simclr").arms[0]
    return arm.compute_loss(batch.views, batch.labels).detach()


# ------------------------------------------------------------------------ distributed
DIST_BASE = [
    "train.batch_size=16",
    "train.precision=fp64",
    "model.batchnorm=false",
    "optim.name=sgd",
    "optim.lr=0.5",
]
DIST_CASES = {
    "moco_supcon": ["objective.name=supcon", "objective.queue_size=20", "model.momentum=0.5"],
    "simclr_queue": ["objective.name=simclr", "objective.queue_size=12"],
    "maskcon_queue": ["objective.name=maskcon", "objective.queue_size=20", "model.momentum=0.5"],
    "barlow_twins": ["objective.name=barlow_twins"],
    "varcon": ["objective.name=varcon"],
}


def _two_steps(ctx, run_dir: Path) -> dict:
    from spacl.tasks.image import Trainer

    out = {}
    for name, extra in DIST_CASES.items():
        cfg = load_config(
            None,
            [*BASE, *DIST_BASE, *extra],
        )
        arm = Trainer(cfg, run_dir / name, ctx=ctx, quiet=True).arms[0]
        stream = Trainer(cfg, run_dir / (name + "s"), ctx=ctx, quiet=True).data.stream
        losses = [
            arm.train_step(stream.batch(0, k).views, stream.batch(0, k).labels, k) for k in (0, 1)
        ]
        out[name] = {
            "losses": losses,
            "queue": arm.queue.embeddings.clone() if arm.queue is not None else torch.zeros(0),
            "weights": {n: p.detach().clone() for n, p in arm.model.named_parameters()},
        }
    return out


def _dist_worker(rank: int, world: int, init_file: str, run_dir: str) -> None:
    import torch.distributed as dist

    from spacl.engine import DistributedContext

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        ctx = DistributedContext(rank, world, 0, torch.device("cpu"), False)
        torch.save(_two_steps(ctx, Path(run_dir) / f"rank{rank}"), Path(run_dir) / f"r{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(sys.platform == "win32", reason="needs torch.distributed (gloo)")
def test_two_gloo_ranks_hold_the_queue_of_one_process(tmp_path):
    import torch.multiprocessing as mp

    from spacl.engine import DistributedContext

    mp.spawn(_dist_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = _two_steps(DistributedContext(), tmp_path / "single")
    finally:
        torch.set_num_threads(threads)
    for rank in range(2):
        got = torch.load(tmp_path / f"r{rank}.pt", weights_only=True)
        for name, ref in single.items():
            assert (
                max(abs(a - b) for a, b in zip(got[name]["losses"], ref["losses"], strict=True))
                < 1e-9
            )
            assert torch.allclose(got[name]["queue"], ref["queue"], atol=1e-9, rtol=0)
            for key, w in ref["weights"].items():
                assert float((got[name]["weights"][key] - w).abs().max()) < 1e-9, (name, key)


# ----------------------------------------------------------------- SIGKILL + resume
RESUME = [
    *BASE,
    "views.num_views=3",
    "optim.name=adam",
    "optim.lr=0.01",
    "train.epochs=3",
    "train.checkpoint_every=1",
    "train.log_every=1",
    "arms=[{name: moco_supcon, momentum: 0.9, objective: {name: supcon, queue_size: 24}},"
    " {name: moco_spacl, momentum: 0.9, objective: {name: spacl, queue_size: 30}},"
    " {name: simclr_q, objective: {name: simclr, queue_size: 10}}]",
    "views.keep_original=true",
]
TOTAL = 12  # 4 steps (batch 8) x 3 epochs

CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from spacl.tasks.image import Trainer, load_config

run_dir, mode, overrides = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
cfg = load_config(None, overrides)
callbacks = []
if mode == "slow":
    def report(trainer, step):
        Path(str(run_dir) + ".step").write_text(str(step))
        time.sleep(0.2)
    callbacks.append(report)
Trainer(cfg, run_dir, resume=mode == "resume", quiet=True, callbacks=callbacks).fit()
"""


def _spawn(script: Path, run_dir: Path, mode: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, str(script), str(run_dir), mode, json.dumps(RESUME)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]


def _same(a, b, where=""):
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), f"tensor differs at {where}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _step(marker: Path) -> int:
    """The step the child last wrote; -1 before the first, or while the child is
    rewriting the file (``write_text`` truncates first: a read can see it empty)."""
    try:
        text = marker.read_text().strip()
    except FileNotFoundError:
        return -1
    return int(text) if text.isdigit() else -1


@pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")
def test_sigkill_then_resume_with_queues_is_bitwise_exact(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    kill_at = random.SystemRandom().randint(2, TOTAL - 2)
    ref_dir, run_dir = tmp_path / "reference", tmp_path / f"killed-{kill_at}"
    reference = _spawn(script, ref_dir, "full")
    slow = _spawn(script, run_dir, "slow")
    marker = Path(str(run_dir) + ".step")
    deadline = time.time() + 240
    while _step(marker) < kill_at:
        if slow.poll() is not None:
            raise AssertionError(slow.stderr.read().decode()[-3000:])  # type: ignore[union-attr]
        if time.time() > deadline:
            slow.kill()
            raise AssertionError("timed out")
        time.sleep(0.01)
    os.kill(slow.pid, signal.SIGKILL)
    slow.wait(timeout=30)
    interrupted = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert 0 < len(interrupted["arms"]["moco_supcon"]["queue"]["rows"])
    resumed = _spawn(script, run_dir, "resume")
    _finish(reference)
    _finish(resumed)
    ref = load_checkpoint(ref_dir / "checkpoints" / "last.pt")
    got = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert got["progress"]["global_step"] == TOTAL
    for key in ("arms", "rng", "progress"):
        _same(ref[key], got[key], f"(killed at step {kill_at}) {key}")
    assert int(got["arms"]["moco_spacl"]["queue"]["count"]) == 30  # full after 12 steps
