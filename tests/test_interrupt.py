"""Ctrl-C / SIGTERM during training: a checkpoint at the next step boundary, one line,
exit 130 / 143 (the shell's 128 + signal), and a resume that ends where an uninterrupted
run ends (issue 38)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spacl.cli import main
from spacl.engine import StopRequested, read_metrics
from spacl.engine.interrupt import StopOnSignal
from spacl.engine.loop import TrainLoop
from spacl.tasks.image import Trainer, load_config
from test_engine_resume import OVERRIDES, TOTAL_STEPS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")
# only the interrupt writes a mid-run checkpoint: no step interval
FEW_CHECKPOINTS = [*(o for o in OVERRIDES if not o.startswith("train.checkpoint_every")),
                   "train.checkpoint_every=0"]  # fmt: skip
STOP_AT = 5  # mid-epoch (4 steps an epoch)


def signal_at(step: int, signum: int = signal.SIGINT) -> Any:
    def callback(trainer: Trainer, global_step: int) -> None:
        if global_step == step:
            os.kill(os.getpid(), signum)

    return callback


def train_rows(run: Path) -> list[tuple[str, int]]:
    return [
        (r["arm"], r["step"]) for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"
    ]


def every_row(run: Path) -> list[tuple[str, str, object, int]]:
    """``(kind, arm, epoch, step)`` of every row of ``metrics.jsonl`` (train, eval, epoch
    and final rows alike): a resumed run must hold each once, as an uninterrupted one."""
    return [
        (r["kind"], r.get("arm", ""), r.get("epoch"), r["step"])
        for r in read_metrics(run / "metrics.jsonl")
    ]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_checkpoints_at_the_step_and_resume_ends_as_an_uninterrupted_run(
    tmp_path: Path, signum: int
) -> None:
    cfg = load_config(None, FEW_CHECKPOINTS)
    whole = Trainer(cfg, tmp_path / "whole", quiet=True).fit()
    run = tmp_path / "stopped"
    with pytest.raises(StopRequested) as stop:
        Trainer(cfg, run, quiet=True, callbacks=[signal_at(STOP_AT, signum)]).fit()
    assert stop.value.progress.global_step == STOP_AT
    resumed = Trainer(cfg, run, resume=True, quiet=True)
    assert resumed.resumed_from == STOP_AT  # the checkpoint of the interrupted step
    result = resumed.fit()
    assert result.global_step == whole.global_step == TOTAL_STEPS
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (tmp_path / "whole" / "eval.json").read_text()
    )
    rows = train_rows(run)
    assert len(rows) == len(set(rows)) and rows == train_rows(tmp_path / "whole")
    every = every_row(run)
    assert len(every) == len(set(every)) and every == every_row(tmp_path / "whole")


def test_the_handlers_are_restored_and_a_second_signal_stops_at_once() -> None:
    before = signal.getsignal(signal.SIGINT)
    with StopOnSignal() as stop:
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_spacl_train_prints_one_line_and_exits_128_plus_the_signal_then_resumes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    status: int,
) -> None:
    original = TrainLoop.__init__

    def with_signal(self: TrainLoop, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)

        def kill(loop: TrainLoop) -> None:
            if loop.progress.global_step == STOP_AT:
                os.kill(os.getpid(), signum)

        self.callbacks.append(kill)

    from omegaconf import OmegaConf

    recipe, run = tmp_path / "recipe.yaml", tmp_path / "run"
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), recipe)
    monkeypatch.setattr(TrainLoop, "__init__", with_signal)
    assert main(["train", str(recipe), "--out", str(run), "--quiet"]) == status
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"step {STOP_AT}" in err
    assert f"spacl train {run} --resume" in err
    monkeypatch.setattr(TrainLoop, "__init__", original)
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    rows = train_rows(run)
    assert len(rows) == len(set(rows)) and max(step for _, step in rows) == TOTAL_STEPS


def test_sigterm_before_any_loop_is_a_keyboard_interrupt_that_exits_143() -> None:
    """``kill`` while a KG / text run loads its data: ``InterruptOnTerm`` raises a
    ``KeyboardInterrupt`` carrying the signal, whose exit status is the shell's 143."""
    from spacl.engine.interrupt import InterruptOnTerm, TerminatedBySignal, exit_status

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TerminatedBySignal) as stopped, InterruptOnTerm():
        os.kill(os.getpid(), signal.SIGTERM)
    assert isinstance(stopped.value, KeyboardInterrupt)
    assert exit_status(stopped.value.signum) == 143 and exit_status(None) == 130
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.usefixtures("python_sigint")  # SIGINT as in a terminal
def test_a_signal_while_an_image_run_loads_its_data_is_one_line_and_leaves_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    status: int,
) -> None:
    """Ctrl-C / ``kill`` before the first step (the data still loading): one line, the
    shell's status for the signal, and no run directory left behind."""
    from omegaconf import OmegaConf

    from spacl.tasks.image import trainer as trainer_module

    real = trainer_module.build_run_data

    def loading(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    recipe, run = tmp_path / "recipe.yaml", tmp_path / "run"
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), recipe)
    monkeypatch.setattr(trainer_module, "build_run_data", loading)
    capsys.readouterr()
    assert main(["train", str(recipe), "--out", str(run)]) == status
    err = capsys.readouterr().err.strip()
    assert err == (
        "spacl train: interrupted before a checkpoint was written (nothing to resume): "
        "run the same command again"
    )
    assert not run.exists()


def test_resume_without_a_checkpoint_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omegaconf import OmegaConf

    recipe, empty = tmp_path / "recipe.yaml", tmp_path / "never-trained"
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), recipe)
    assert main(["train", str(recipe), "--out", str(empty), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no checkpoints/last.pt" in err
    assert not (empty / "metrics.jsonl").exists()  # nothing was started


def test_resume_of_a_missing_run_directory_names_the_run_not_a_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spacl train runs/typo --resume``: a run directory that is not there is named as
    one (a built-in recipe name with --resume keeps its own message)."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", "runs/typo", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "spacl train: error: no run directory at runs/typo to resume (--resume continues "
        "a run directory that holds checkpoints/last.pt)"
    )
    assert main(["train", "digits/supcon", "--resume"]) == 2
    assert "no checkpoints/last.pt" in capsys.readouterr().err


def test_resume_of_a_started_run_without_a_checkpoint_is_refused_by_cli_and_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run directory holding only what a run writes first (config.yaml, an empty
    metrics.jsonl and checkpoints/): ``spacl train RUN --resume`` and
    ``spacl.run_recipe(..., resume=True)`` both refuse it in one line, and start nothing."""
    from omegaconf import OmegaConf

    import spacl

    started = tmp_path / "started"
    (started / "checkpoints").mkdir(parents=True)
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), started / "config.yaml")
    (started / "metrics.jsonl").write_text("")
    assert main(["train", str(started), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no checkpoints/last.pt" in err
    with pytest.raises(FileNotFoundError, match=r"no checkpoints/last\.pt"):
        spacl.run_recipe(started / "config.yaml", out=started, resume=True)
    with pytest.raises(FileNotFoundError, match="no --out"):
        spacl.run_recipe(started / "config.yaml", resume=True)
    assert not (started / "metrics.jsonl").read_text()  # nothing was started


@pytest.mark.parametrize("recipe", ["digits/simclr", "kg/fb15k237_infonce", "text/stackoverflow"])
def test_every_task_checkpoints_at_a_step_interval_by_default(recipe: str) -> None:
    """An hour of training never depends on an epoch end: each task's default writes a
    step checkpoint (``train.checkpoint_every`` > 0)."""
    from spacl.tasks import load_recipe

    assert int(load_recipe(recipe).config.train.checkpoint_every) > 0


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_to_a_real_spacl_train_process_resumes_to_the_uninterrupted_eval(
    tmp_path: Path, signum: int, status: int
) -> None:
    """The Must show of issue 38 as a user meets it: ``spacl train`` in its own process
    group, SIGINT to the group (what a terminal's Ctrl-C sends; SIGTERM: ``kill``,
    ``timeout``, Slurm) at a step reached, exit 130 (143) and one line; ``--resume``
    then writes the eval.json an uninterrupted run writes,
    and metrics.jsonl holds each step once."""
    import subprocess
    import time

    from omegaconf import OmegaConf

    # 40 epochs of 4 steps: time to be interrupted
    overrides = [
        *(o for o in FEW_CHECKPOINTS if not o.startswith("train.epochs")),
        "train.epochs=40",
    ]
    recipe = tmp_path / "recipe.yaml"
    OmegaConf.save(load_config(None, overrides), recipe)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "spacl", "train", str(recipe), "--quiet"]
    run = tmp_path / "stopped"
    child = subprocess.Popen(
        [*command, "--out", str(run)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        metrics = run / "metrics.jsonl"
        if metrics.is_file() and len(train_rows(run)) >= 6:  # a few steps in
            os.killpg(child.pid, signum)
            break
        time.sleep(0.05)
    _, err = child.communicate(timeout=120)
    assert child.returncode == status, err[-2000:]
    assert err.strip().count("\n") == 0 and f"spacl train {run} --resume" in err
    stopped_at = max(step for _, step in train_rows(run))
    assert 0 < stopped_at < 160
    resumed = subprocess.run(
        [sys.executable, "-m", "spacl", "train", str(run), "--resume", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    whole = subprocess.run(
        [*command, "--out", str(tmp_path / "whole")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert whole.returncode == 0, whole.stderr[-2000:]
    rows = train_rows(run)
    assert len(rows) == len(set(rows)) and rows == train_rows(tmp_path / "whole")
    # no row of any kind twice (a repeated epoch, eval or final row was not checked)
    every = every_row(run)
    assert len(every) == len(set(every)) and every == every_row(tmp_path / "whole")
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (tmp_path / "whole" / "eval.json").read_text()
    )


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_study_says_in_one_line_how_to_go_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    status: int,
) -> None:
    """``spacl reproduce`` under Ctrl-C or ``kill``: one line, the shell's status for the
    signal, and what a rerun keeps (SIGTERM once ended the process with no message)."""
    import spacl.commands.reproduce as reproduce

    def interrupted(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the signal's handler raises before this ends

    monkeypatch.setattr(reproduce, "run_study", interrupted)
    # Ctrl-C's own handler, as in a terminal (a test worker, pytest-xdist's, sets another)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for name, kept in (("spacl", "runs are reused"), ("alignment", "starts again")):
            capsys.readouterr()
            out = tmp_path / name
            assert main(["reproduce", name, "--quick", "--quiet", "--out", str(out)]) == status
            lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
            assert lines[-1].startswith("spacl reproduce: interrupted; run the same command again")
            assert kept in lines[-1] and "Traceback" not in "\n".join(lines)
    finally:
        signal.signal(signal.SIGINT, previous)
