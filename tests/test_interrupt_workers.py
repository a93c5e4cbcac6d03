"""A signal to the whole process group (``timeout``, systemd, Slurm, a terminal's Ctrl-C)
while an image-folder run reads with ``DataLoader`` workers: the workers leave it to the
main process, which checkpoints at the step boundary, prints one line and exits 128 +
signal; ``--resume`` then finishes with each step logged once (issue 38)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spacl.engine import read_metrics
from test_own_images import corrupt, write_folder

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")


def train_steps(run: Path) -> list[int]:
    metrics = run / "metrics.jsonl"
    if not metrics.is_file():
        return []
    return [r["step"] for r in read_metrics(metrics) if r["kind"] == "train"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_group_with_loader_workers_checkpoints_and_resumes(
    tmp_path: Path, signum: int
) -> None:
    """The own-images recipe as shipped (its default ``DataLoader`` workers); before the
    workers ignored the signals, SIGTERM to the group killed them and the run died in a
    53-line traceback with no checkpoint written."""
    root = tmp_path / "imgs"
    write_folder(root, per_class=8)
    # 24 images, 20% held out, batch 6: a few steps an epoch, a metrics row at every step
    args = [
        f"data.root={root}",
        "data.image_size=16",
        "train.batch_size=6",
        "train.epochs=6",
        "train.log_every=1",
    ]
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "spacl", "train", "imagefolder/supcon", *args, "--quiet"]
    child = subprocess.Popen(
        [*command, "--out", str(run)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and child.poll() is None:
        if train_steps(run):  # the workers are up and a step in
            os.killpg(child.pid, signum)
            break
        time.sleep(0.05)
    _, err = child.communicate(timeout=180)
    assert child.returncode == 128 + signum, err[-2000:]
    assert err.strip().count("\n") == 0 and f"spacl train {run} --resume" in err, err[-2000:]
    assert (run / "checkpoints" / "last.pt").is_file()
    stopped = train_steps(run)
    resumed = subprocess.run(
        [sys.executable, "-m", "spacl", "train", str(run), "--resume", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = train_steps(run)
    assert len(steps) == len(set(steps)) and len(steps) > len(stopped)
    assert (run / "eval.json").is_file()


@pytest.mark.parametrize("where", ["train", "test"])
def test_an_unreadable_image_with_loader_workers_exits_instead_of_hanging(
    tmp_path: Path, where: str
) -> None:
    """The shipped own-images recipe, its default workers, a truncated image met while
    training (``train``) or at the first evaluation (``test``): one line, exit 2, and the
    process ends.  Before the exit hook (:func:`spacl.engine.interrupt.end_workers_at_exit`)
    it printed that line and then waited forever on its workers, which ignore SIGTERM."""
    root = tmp_path / "imgs"
    files = write_folder(root, per_class=8)
    # a file of the 20% held out is met at the first evaluation; any other while training
    corrupt(files[-1] if where == "test" else files[0], "truncated")
    args = [f"data.root={root}", "data.image_size=16", "train.batch_size=6", "train.epochs=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "spacl", "train", "imagefolder/supcon", *args, "--quiet"]
    try:
        done = subprocess.run(
            [*command, "--out", str(tmp_path / "run")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"spacl train hung after: {err.stderr!r}") from err
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert "unreadable image" in lines[-1] and "truncated" in lines[-1], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
