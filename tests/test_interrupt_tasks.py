"""Ctrl-C / SIGTERM in a KG or a text run: a checkpoint at the step, one line, exit 130 / 143,
and a resume at that step that ends as the uninterrupted run (issue 38).  A text run is
several loops (a head, fine-tuned layers, ADB's two stages, a rule's held-out heads):
the stop lands in each kind, and the resume skips the loops that had completed."""

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


class Killed(BaseException):
    """A process killed outright: no handler runs, nothing is saved at the step."""


def killed_at_step(patch: pytest.MonkeyPatch, step: int) -> type[Killed]:
    """Make every engine loop die when it is about to run ``step`` (its global step count
    reaching ``step``), as a kill -9 would: the run keeps only its last checkpoint.
    ``patch.undo()`` or the context's end restores the loop."""
    original = TrainLoop._one_step

    def die_at_step(self: TrainLoop, batch: Any) -> None:
        if self.progress.global_step == step:
            raise Killed
        original(self, batch)

    patch.setattr(TrainLoop, "_one_step", die_at_step)
    return Killed


@pytest.mark.parametrize(
    ("objective", "signum"), [("infonce", signal.SIGINT), ("spacl", signal.SIGTERM)]
)
def test_a_kg_run_stopped_mid_epoch_resumes_at_the_step_to_the_uninterrupted_result(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    objective: str,
    signum: int,
) -> None:
    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=4)
    recipe["task"] = "kg"
    recipe["objective"] = {"name": objective, "temperature": 1.0}
    recipe["train"] = {**recipe["train"], "checkpoint_every": 0}  # type: ignore[dict-item]

    def cut_at_step(run: Path) -> None:
        assert [r["epoch"] for r in epoch_rows(run)] == [1]  # epoch 2 was cut at its step 2

    whole, run = stop_and_resume_by_cli(recipe, tmp_path, capsys, signum, cut_at_step)
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
    assert saved["loop"]["progress"]["global_step"] == 8 and saved["finished"]

    run = tmp_path / "killed"
    with pytest.MonkeyPatch.context() as patch:
        with pytest.raises(killed_at_step(patch, 5)):  # the last checkpoint is step 3's
            train_kg(recipe, log=None, run_dir=run)
    saved = read_task_checkpoint(run, "kg")
    assert saved["loop"]["progress"]["global_step"] == 4  # the epoch-1 end (step 3's came before)
    resumed = train_kg(recipe, log=None, run_dir=run, resume=True)
    assert resumed["test"] == whole["test"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in whole["history"]]


def signal_in_loop(patch: pytest.MonkeyPatch, loop_index: int, step: int, signum: int) -> None:
    """The ``loop_index``-th engine loop built (0-based) sends ``signum`` to this process
    after its step ``step``."""
    original, built = TrainLoop.__init__, [0]

    def with_signal(self: TrainLoop, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        built[0] += 1
        if built[0] - 1 == loop_index:

            def kill(loop: TrainLoop) -> None:
                if loop.progress.global_step == step:
                    os.kill(os.getpid(), signum)

            self.callbacks.append(kill)

    patch.setattr(TrainLoop, "__init__", with_signal)


def stop_and_resume_by_cli(
    recipe: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    check_stopped: Any = None,
) -> tuple[Path, Path]:
    """``spacl train`` of ``recipe`` whole, then stopped by ``signum`` after the first
    loop's step ``STOP_AT`` (one line naming the step and the resume command, exit
    128 + ``signum``,
    no ``eval.json``; ``check_stopped(run)`` then) and resumed with ``--resume``: the
    same ``eval.json``.  Returns ``(whole, run)``."""
    path = tmp_path / "recipe.yaml"
    OmegaConf.save(OmegaConf.create(recipe), path)
    whole, run = tmp_path / "whole", tmp_path / "stopped"
    assert main(["train", str(path), "--out", str(whole), "--quiet"]) == 0
    with pytest.MonkeyPatch.context() as patch:
        signal_in_loop(patch, 0, STOP_AT, signum)
        capsys.readouterr()
        # the shell's status for the signal: 130 for SIGINT, 143 for SIGTERM
        assert main(["train", str(path), "--out", str(run), "--quiet"]) == 128 + signum
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"interrupted at step {STOP_AT}" in err and f"spacl train {run} --resume" in err
    assert not (run / "eval.json").exists()
    if check_stopped is not None:
        check_stopped(run)
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )
    return whole, run


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.usefixtures("python_sigint")  # SIGINT as in a terminal
def test_a_signal_while_a_kg_run_sets_up_is_one_line_and_leaves_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    status: int,
) -> None:
    """Ctrl-C / ``kill`` after the run directory holds its config and graph.pt but before
    the first step: one line, the shell's status for the signal, no directory left."""
    from spacl.tasks.kg import train as kg_train

    real = kg_train.kg_setup

    def setting_up(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    recipe = {**kg_recipe(cycle_graph(tmp_path / "toy")), "task": "kg"}
    path, run = tmp_path / "recipe.yaml", tmp_path / "run"
    OmegaConf.save(OmegaConf.create(recipe), path)
    monkeypatch.setattr(kg_train, "kg_setup", setting_up)
    capsys.readouterr()
    assert main(["train", str(path), "--out", str(run), "--quiet"]) == status
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacl train: interrupted before a checkpoint was written")
    assert "\n" not in err and not run.exists()


def topic_text_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **train: Any
) -> dict[str, Any]:
    """A head-on-a-frozen-encoder text recipe on a small topic set, the encoder faked;
    ``train``: the ``train`` keys beside batch 16 and no progress bar."""
    from spacl.tasks.text import task as text_task
    from test_ood import FakeEncoder, write_topic_dataset

    monkeypatch.setattr(text_task, "MiniLMEncoder", lambda **kwargs: FakeEncoder())
    return {
        "task": "text",
        "data": {"name": "topics", "root": str(write_topic_dataset(tmp_path / "topics")),
                 "known_ratio": 0.5},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "objective": {"name": "supcon", "temperature": 0.5},
        "train": {"batch_size": 16, "progress": False, **train},
    }  # fmt: skip


def metric_rows(run: Path) -> list[str]:
    return (run / "metrics.jsonl").read_text().splitlines()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_text_run_stopped_at_a_step_resumes_to_the_uninterrupted_result(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
) -> None:
    """``spacl train`` of a head on a frozen encoder: one line, 130, ``--resume``."""
    recipe = topic_text_recipe(tmp_path, monkeypatch, epochs=3, checkpoint_every=0)
    whole, run = stop_and_resume_by_cli(recipe, tmp_path, capsys, signum)
    assert metric_rows(run) == metric_rows(whole)  # each record once


def _stopped_and_resumed(
    train: Any, tmp_path: Path, loop_index: int, step: int
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """``train(run_dir, resume)`` whole, then stopped at ``(loop_index, step)`` and resumed."""
    from spacl.engine.loop import StopRequested

    whole = train(tmp_path / "whole", False)
    run = tmp_path / f"stopped-{loop_index}-{step}"
    with pytest.MonkeyPatch.context() as patch:
        signal_in_loop(patch, loop_index, step, signal.SIGINT)
        with pytest.raises(StopRequested) as stop:
            train(run, False)
    assert stop.value.run_dir == str(run) and stop.value.progress.global_step == step
    return whole, train(run, True), run


@pytest.mark.parametrize(("loop_index", "step"), [(0, 5), (1, 2)])
def test_a_detector_run_stopped_in_either_stage_resumes_to_the_uninterrupted_result(
    tmp_path: Path, loop_index: int, step: int
) -> None:
    """DA-ADB with a trained top layer: stage 1 (the layer and head) or stage 2 (the
    boundaries, stage 1 then loaded, not retrained)."""
    from spacl.tasks.text import train_ood
    from test_text_adb_run import _recipe
    from test_text_finetune import tiny_backbone, tiny_split

    split = tiny_split(num_known=3, per_class=8)
    recipe = _recipe(tmp_path, "da_adb")
    recipe["detector"] = {**recipe["detector"], "trainable_layers": 1, "lr": 3e-3,  # type: ignore[dict-item]
                          "max_epochs": 6, "batch_size": 8}  # fmt: skip
    recipe["train"] = {**recipe["train"], "checkpoint_every": 0}  # type: ignore[dict-item]

    def backbone() -> Any:  # as load_backbone gives it: the model in eval mode
        loaded = tiny_backbone()
        loaded.model.eval()  # type: ignore[attr-defined]
        return loaded

    def train(run_dir: Path, resume: bool) -> dict[str, Any]:
        return train_ood(
            recipe, encoder=backbone(), split=split, log=None, run_dir=run_dir, resume=resume
        )

    whole, resumed, _ = _stopped_and_resumed(train, tmp_path, loop_index, step)
    assert resumed["test"] == whole["test"] and resumed["dev_accuracy"] == whole["dev_accuracy"]
    if loop_index == 0:  # an unfinished run has no detector yet, and says how to finish it
        from spacl.engine.loop import StopRequested
        from spacl.tasks.text.run import load_intent_detector

        run = tmp_path / "again"
        with pytest.MonkeyPatch.context() as patch:
            signal_in_loop(patch, 0, step, signal.SIGINT)
            with pytest.raises(StopRequested):
                train(run, False)
        with pytest.raises(ValueError, match=r"unfinished text run.*--resume"):
            load_intent_detector(run, backbone())
    for key in ("epochs", "best_epoch", "dev_scores", "boundary_dev_f1"):
        assert resumed["record"][key] == whole["record"][key], key


def test_a_fine_tuned_run_stopped_in_a_rules_held_out_loop_resumes_to_the_same_result(
    tmp_path: Path,
) -> None:
    """Fine-tuned top layers (loop 0, completed before the stop: loaded, not retrained),
    then ``ood.method=held_out_classes``' held-out fine-tune (loop 1), stopped at its
    step 2; a step-interval checkpoint (every 2 steps) on the way."""
    from spacl.engine.rundir import read_task_checkpoint
    from spacl.tasks.text.task import train_finetuned
    from test_text_finetune import _finetune_cfg, tiny_backbone, tiny_split

    split = tiny_split()
    cfg = _finetune_cfg(
        tmp_path, "finetune.max_steps=null", "train.epochs=2", "train.checkpoint_every=2",
        "ood.method=held_out_classes", "finetune.select_epoch=dev_accuracy",
    )  # fmt: skip

    def train(run_dir: Path, resume: bool) -> dict[str, Any]:
        return train_finetuned(
            cfg, backbone=tiny_backbone(), split=split, run_dir=run_dir, resume=resume
        )

    whole, resumed, run = _stopped_and_resumed(train, tmp_path, 1, 2)
    assert resumed["test"] == whole["test"] and resumed["rule"] == whole["rule"]
    assert resumed["steps"] == whole["steps"] and resumed["aux_steps"] == whole["aux_steps"]
    assert resumed["epoch_dev_accuracy"] == whole["epoch_dev_accuracy"]
    assert read_task_checkpoint(run, "text")["finished"]


def test_a_run_directory_stopped_before_its_first_checkpoint_starts_afresh(
    tmp_path: Path,
) -> None:
    """Nothing to lose or continue there: ``spacl train RUN`` (no ``--resume``) reuses it;
    a directory with a checkpoint, or with files but no run config, is refused."""
    from spacl.engine.rundir import RunDirectory
    from spacl.tasks.kg import kg_config

    cfg = kg_config(kg_recipe(tmp_path / "toy"))
    early = tmp_path / "early"
    RunDirectory.open_task_run(cfg, "kg", "x", early, resume=False)  # config.yaml only
    (early / "metrics.jsonl").write_text("")
    assert RunDirectory.open_task_run(cfg, "kg", "x", early, resume=False) is not None
    RunDirectory(early, "kg").save({"epoch": 0})
    with pytest.raises(ValueError, match="not empty; pass --resume"):
        RunDirectory.open_task_run(cfg, "kg", "x", early, resume=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty; pass --resume"):
        RunDirectory.open_task_run(cfg, "kg", "x", other, resume=False)
