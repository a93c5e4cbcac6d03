"""Ctrl-C / SIGTERM during training: a checkpoint at the next step boundary, one line,
exit 130, and a resume that ends where an uninterrupted run ends (issue 38)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from spacl.cli import main
from spacl.engine import StopRequested, Trainer, load_config, read_metrics
from spacl.engine.interrupt import StopOnSignal
from spacl.engine.loop import TrainLoop
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


def test_the_handlers_are_restored_and_a_second_signal_stops_at_once() -> None:
    before = signal.getsignal(signal.SIGINT)
    with StopOnSignal() as stop:
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_spacl_train_prints_one_line_and_exits_130_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = TrainLoop.__init__

    def with_signal(self: TrainLoop, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)

        def kill(loop: TrainLoop) -> None:
            if loop.progress.global_step == STOP_AT:
                os.kill(os.getpid(), signal.SIGINT)

        self.callbacks.append(kill)

    from omegaconf import OmegaConf

    recipe, run = tmp_path / "recipe.yaml", tmp_path / "run"
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), recipe)
    monkeypatch.setattr(TrainLoop, "__init__", with_signal)
    assert main(["train", str(recipe), "--out", str(run), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"step {STOP_AT}" in err
    assert f"spacl train {run} --resume" in err
    monkeypatch.setattr(TrainLoop, "__init__", original)
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    rows = train_rows(run)
    assert len(rows) == len(set(rows)) and max(step for _, step in rows) == TOTAL_STEPS


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
