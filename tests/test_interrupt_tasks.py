"""Ctrl-C / SIGTERM in a KG run: a checkpoint at the step, one line, exit 130, and a
resume at that step that ends as the uninterrupted run (issue 38)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from spacl.cli import main
from spacl.engine.loop import TrainLoop
from test_kg_model import cycle_graph
from test_task_runs import kg_recipe

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")
STOP_AT = 6  # epoch 2, its step 2 of 4 (128 queries, 32 a step)


def epoch_rows(run: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == "epoch"]


def signal_in_loops(monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    """Every engine loop sends ``signum`` to this process after its step ``STOP_AT``."""
    original = TrainLoop.__init__

    def with_signal(self: TrainLoop, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)

        def kill(loop: TrainLoop) -> None:
            if loop.progress.global_step == STOP_AT:
                os.kill(os.getpid(), signum)

        self.callbacks.append(kill)

    monkeypatch.setattr(TrainLoop, "__init__", with_signal)


@pytest.mark.parametrize(
    ("objective", "signum"), [("infonce", signal.SIGINT), ("spacl", signal.SIGTERM)]
)
def test_a_kg_run_stopped_mid_epoch_resumes_at_the_step_to_the_uninterrupted_result(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    objective: str,
    signum: int,
) -> None:
    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=4)
    recipe["task"] = "kg"
    recipe["objective"] = {"name": objective, "temperature": 1.0}
    recipe["train"] = {**recipe["train"], "checkpoint_every": 0}  # type: ignore[dict-item]
    path = tmp_path / "recipe.yaml"
    OmegaConf.save(OmegaConf.create(recipe), path)
    whole, run = tmp_path / "whole", tmp_path / "stopped"
    assert main(["train", str(path), "--out", str(whole), "--quiet"]) == 0
    signal_in_loops(monkeypatch, signum)
    capsys.readouterr()
    assert main(["train", str(path), "--out", str(run), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"interrupted at step {STOP_AT}" in err and f"spacl train {run} --resume" in err
    assert not (run / "eval.json").exists()
    assert [r["epoch"] for r in epoch_rows(run)] == [1]  # epoch 2 was cut at its step 2
    monkeypatch.undo()
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )
    resumed, uninterrupted = epoch_rows(run), epoch_rows(whole)
    assert [r["epoch"] for r in resumed] == [1, 2, 3, 4]  # each epoch once
    assert [r["loss"] for r in resumed] == [r["loss"] for r in uninterrupted]
    assert [r["steps"] for r in resumed] == [4, 4, 4, 4]


def test_a_step_interval_checkpoint_is_a_mid_epoch_resume_point(tmp_path: Path) -> None:
    """A run killed outright (no handler runs) resumes from its last step checkpoint."""
    from spacl.engine.rundir import read_task_checkpoint
    from spacl.tasks.kg import train_kg

    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=2)
    recipe["train"] = {**recipe["train"], "checkpoint_every": 3}  # type: ignore[dict-item]
    whole = train_kg(recipe, log=None, run_dir=tmp_path / "whole")
    saved = read_task_checkpoint(tmp_path / "whole", "kg")
    assert saved["progress"]["global_step"] == 8 and saved["finished"]

    class Killed(BaseException):
        pass

    original = TrainLoop._one_step

    def die_after_step_5(self: TrainLoop, batch: Any) -> None:
        if self.progress.global_step == 5:
            raise Killed  # nothing saved here: the last checkpoint is step 3's
        original(self, batch)

    run = tmp_path / "killed"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainLoop, "_one_step", die_after_step_5)
        with pytest.raises(Killed):
            train_kg(recipe, log=None, run_dir=run)
    saved = read_task_checkpoint(run, "kg")
    assert saved["progress"]["global_step"] == 4  # the epoch-1 end (step 3's came before)
    resumed = train_kg(recipe, log=None, run_dir=run, resume=True)
    assert resumed["test"] == whole["test"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in whole["history"]]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_text_run_interrupted_says_so_in_one_line_and_starts_again_in_place(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
) -> None:
    """A text run keeps no mid-run checkpoint (minutes of work): Ctrl-C or ``kill`` give
    one line and exit 130; ``--resume`` is refused (nothing to continue); the same run
    directory then trains afresh, to the uninterrupted run's result."""
    from spacl.tasks.text import task as text_task
    from test_ood import FakeEncoder, write_topic_dataset

    monkeypatch.setattr(text_task, "MiniLMEncoder", lambda **kwargs: FakeEncoder())
    recipe = {
        "task": "text",
        "data": {
            "name": "topics",
            "root": str(write_topic_dataset(tmp_path / "topics")),
            "known_ratio": 0.5,
        },
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "objective": {"name": "supcon", "temperature": 0.5},
        "train": {"epochs": 3, "batch_size": 16, "progress": False},
    }
    path = tmp_path / "recipe.yaml"
    OmegaConf.save(OmegaConf.create(recipe), path)
    whole, run = tmp_path / "whole", tmp_path / "stopped"
    assert main(["train", str(path), "--out", str(whole), "--quiet"]) == 0
    with monkeypatch.context() as patch:
        signal_in_loops(patch, signum)
        capsys.readouterr()
        assert main(["train", str(path), "--out", str(run), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "keeps no mid-run checkpoint" in err and f"spacl train {run} again" in err
    assert main(["train", str(run), "--resume", "--quiet"]) == 2
    assert "no checkpoints/last.pt" in capsys.readouterr().err
    assert main(["train", str(run), "--quiet"]) == 0  # afresh, in place
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )
