"""Exact resume: SIGKILL at a random step (or in the middle of a checkpoint write), resume,
and end with weights bitwise equal to an uninterrupted run (CPU)."""

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

from spacl.engine import load_checkpoint, read_metrics

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")

# Two arms with every kind of state: Adam moments, warmup+cosine schedule, an EMA target,
# SPACL's generator / adversarial game (own Adam) and the tilted sampler's generator.
OVERRIDES = [
    "data.name=synthetic",
    "data.synthetic.num_classes=4",
    "data.synthetic.dim=8",
    "data.synthetic.samples_per_class=16",
    "views.num_views=4",
    "views.keep_original=true",
    "views.noise_sigma=0.3",
    "model.hidden_dims=[16]",
    "model.feature_dim=8",
    "model.proj_dim=8",
    "optim.name=adam",
    "optim.lr=0.01",
    "optim.warmup_epochs=1",
    "train.epochs=3",
    "train.batch_size=12",
    "train.checkpoint_every=1",
    "train.log_every=1",
    "train.progress=false",
    "eval.linear_probe=false",
    "eval.knn_k=5",
    "log.tensorboard=false",
    "arms=[{name: hard, objective: {name: sampled_hard, params: {num_negatives: 4}}},"
    " {name: spacl, momentum: 0.9, objective: {name: spacl, temperature: 0.2}}]",
]
TOTAL_STEPS = 12  # 52 training samples, batch 12: 4 steps x 3 epochs

CHILD = r"""
import io, json, sys, time
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
        time.sleep(0.1)
    callbacks.append(report)
if mode == "die_in_save":
    real_save, calls = torch.save, [0]
    def half_save(obj, handle):
        calls[0] += 1
        if calls[0] < 4:
            return real_save(obj, handle)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        handle.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
        handle.flush()
        Path(str(run_dir) + ".in_save").write_text("4")
        time.sleep(120)
    torch.save = half_save
Trainer(cfg, run_dir, resume=mode == "resume", quiet=True, callbacks=callbacks).fit()
"""


def _spawn(script: Path, run_dir: Path, mode: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, str(script), str(run_dir), mode, json.dumps(OVERRIDES)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()[-3000:]


def _wait_for(path: Path, proc: subprocess.Popen[bytes], predicate, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists():
            text = path.read_text()
            if text and predicate(text):
                return
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.stderr.read().decode()[-3000:]}")
        time.sleep(0.01)
    proc.kill()
    raise AssertionError(f"timed out waiting for {path}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _assert_same_state(a: dict, b: dict, where: str = "") -> None:
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), f"tensor differs at {where}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _training_records(run: Path) -> list[dict]:
    drop = {"elapsed", "seconds"}
    return [
        {k: v for k, v in r.items() if k not in drop} for r in read_metrics(run / "metrics.jsonl")
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run every child concurrently (2 cores): an uninterrupted reference, one run killed
    at a random step and one killed inside its 4th checkpoint write; resume both."""
    base = tmp_path_factory.mktemp("resume")
    script = base / "child.py"
    script.write_text(CHILD)
    kill_at = random.SystemRandom().randint(1, TOTAL_STEPS - 1)
    ref_dir, slow_dir, save_dir = (
        base / "reference",
        base / f"killed-{kill_at}",
        base / "die-in-save",
    )
    reference = _spawn(script, ref_dir, "full")
    slow = _spawn(script, slow_dir, "slow")
    dying = _spawn(script, save_dir, "die_in_save")
    info: dict = {"kill_at": kill_at, "dirs": (ref_dir, slow_dir, save_dir)}

    _wait_for(Path(str(slow_dir) + ".step"), slow, lambda t: int(t) >= kill_at)
    _kill(slow)
    info["interrupted"] = load_checkpoint(slow_dir / "checkpoints" / "last.pt")["progress"]
    resume_slow = _spawn(script, slow_dir, "resume")

    _wait_for(Path(str(save_dir) + ".in_save"), dying, lambda t: t == "4")
    _kill(dying)
    ckpt_dir = save_dir / "checkpoints"
    info["partial"] = [p.stat().st_size for p in ckpt_dir.glob(".last.pt.*.tmp")]
    info["previous"] = load_checkpoint(ckpt_dir / "last.pt")["progress"]  # weights_only load
    resume_save = _spawn(script, save_dir, "resume")

    for proc in (reference, resume_slow, resume_save):
        _finish(proc)
    info["stale_left"] = list(ckpt_dir.glob(".last.pt.*.tmp"))
    return info


def test_sigkill_at_a_random_step_then_resume_is_bitwise_exact(runs):
    kill_at = runs["kill_at"]
    ref_dir, run, _ = runs["dirs"]
    assert kill_at <= runs["interrupted"]["global_step"] < TOTAL_STEPS
    ref = load_checkpoint(ref_dir / "checkpoints" / "last.pt")
    got = load_checkpoint(run / "checkpoints" / "last.pt")
    assert got["progress"]["global_step"] == TOTAL_STEPS and got["progress"]["finished"]
    for key in ("arms", "rng", "progress"):
        _assert_same_state(ref[key], got[key], f"(killed at step {kill_at}) {key}")
    # the metrics log of the resumed run reads as if nothing had happened
    assert _training_records(run) == _training_records(ref_dir)


def test_kill_during_checkpoint_write_keeps_previous_checkpoint_loadable(runs):
    ref_dir, _, run = runs["dirs"]
    assert len(runs["partial"]) == 1 and runs["partial"][0] > 0  # the interrupted write
    assert runs["previous"]["global_step"] == 3  # the 3rd checkpoint, intact and loadable
    assert runs["stale_left"] == []  # the resumed run removed the stale temporary
    ref = load_checkpoint(ref_dir / "checkpoints" / "last.pt")
    got = load_checkpoint(run / "checkpoints" / "last.pt")
    _assert_same_state(ref["arms"], got["arms"], "arms")
    _assert_same_state(ref["rng"], got["rng"], "rng")
