"""Ctrl-C / SIGTERM where no training step follows (issue 38): during an epoch's
evaluation, during the final evaluation, and during ``spacl demo``.  Each ends in one
line and the shell's status for the signal; a run with a checkpoint says how to resume,
and the resume writes the eval.json an uninterrupted run writes."""

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
from spacl.engine import StopRequested, read_metrics
from spacl.engine.loop import LoopPlan, TrainLoop
from spacl.tasks.image import Trainer, load_config
from spacl.tasks.image.evaluation import ProbeSuite
from test_engine_resume import TOTAL_STEPS
from test_interrupt import FEW_CHECKPOINTS
from test_one_engine import Counting, looping

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
STEPS_PER_EPOCH = 4  # 3 epochs (an online evaluation after each), TOTAL_STEPS in all


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(recipe, its uninterrupted run directory)``, trained once by ``spacl train``."""
    root = tmp_path_factory.mktemp("late")
    recipe, whole = root / "recipe.yaml", root / "whole"
    OmegaConf.save(load_config(None, FEW_CHECKPOINTS), recipe)
    assert main(["train", str(recipe), "--out", str(whole), "--quiet"]) == 0
    return recipe, whole


def records(run: Path) -> list[tuple[Any, ...]]:
    """Every record of ``metrics.jsonl`` without its times, in order."""
    return [
        (r["kind"], r.get("arm"), r.get("epoch"), r.get("step"))
        for r in read_metrics(run / "metrics.jsonl")
    ]


def assert_one_resume_line(err: str, run: Path, step: int) -> None:
    assert err.count("\n") == 0, err
    assert f"step {step}" in err and f"spacl train {run} --resume" in err, err
    assert "nothing to resume" not in err and "Traceback" not in err


def assert_resumes_to_the_uninterrupted_run(run: Path, whole: Path) -> None:
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )
    assert records(run) == records(whole)  # each step, epoch and evaluation once


# --------------------------------------------------- hole 1: during the final evaluation


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
@pytest.mark.usefixtures("python_sigint")  # SIGINT as in a terminal
def test_a_signal_during_the_final_evaluation_says_the_run_is_saved_and_how_to_resume(
    uninterrupted: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    status: int,
) -> None:
    """Training is done and checkpointed when the final evaluation is interrupted: the
    line names ``--resume`` (running the same command again is refused), not "nothing
    to resume"; the resume evaluates and writes the uninterrupted eval.json."""
    recipe, whole = uninterrupted
    real = Trainer.final_evaluation

    def interrupted(self: Trainer) -> Any:
        os.kill(os.getpid(), signum)
        return real(self)

    run = tmp_path / "late"
    monkeypatch.setattr(Trainer, "final_evaluation", interrupted)
    capsys.readouterr()
    assert main(["train", str(recipe), "--out", str(run), "--quiet"]) == status
    assert_one_resume_line(capsys.readouterr().err.strip(), run, TOTAL_STEPS)
    assert (run / "checkpoints" / "last.pt").is_file() and not (run / "eval.json").exists()
    monkeypatch.setattr(Trainer, "final_evaluation", real)
    assert_resumes_to_the_uninterrupted_run(run, whole)


# ------------------------------------------------- hole 3: during an epoch's evaluation


@pytest.mark.parametrize(
    ("epoch", "signum", "status"),
    [(2, signal.SIGINT, 130), (2, signal.SIGTERM, 143), (0, signal.SIGINT, 130)],
)
def test_a_signal_during_an_epochs_evaluation_stops_at_that_epochs_end(
    uninterrupted: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    epoch: int,
    signum: int,
    status: int,
) -> None:
    """No step follows the last epoch's online evaluation: the stop is honoured at the
    epoch's end (checkpoint, one line, 128 + signal) before the final evaluation, which
    the resume then runs.  After an earlier epoch it stops there too, not a step later."""
    recipe, whole = uninterrupted
    real = ProbeSuite.online

    def interrupted(self: ProbeSuite, arms: Any, evaluated: int, step: int) -> dict[str, float]:
        if evaluated == epoch:
            os.kill(os.getpid(), signum)
        return real(self, arms, evaluated, step)

    run = tmp_path / "stopped"
    monkeypatch.setattr(ProbeSuite, "online", interrupted)
    capsys.readouterr()
    assert main(["train", str(recipe), "--out", str(run), "--quiet"]) == status
    step = (epoch + 1) * STEPS_PER_EPOCH
    assert_one_resume_line(capsys.readouterr().err.strip(), run, step)
    assert not (run / "eval.json").exists()
    assert max(r[3] for r in records(run) if r[0] == "train") == step
    monkeypatch.setattr(ProbeSuite, "online", real)
    assert_resumes_to_the_uninterrupted_run(run, whole)


def test_the_loop_honours_a_stop_at_an_epoch_end_unless_training_ends_there_early() -> None:
    """A stop asked while an epoch closes: :class:`StopRequested` once it is closed and
    saved, also after the last epoch.  Where training stops early anyway (patience), the
    loop returns as it would have: resuming there would train on."""

    class AskedWhileClosing(Counting):
        """Asks for a stop while closing epoch ``ask_at``."""

        def __init__(self, ask_at: int, n: int, scores: tuple[float, ...] = ()) -> None:
            super().__init__(n=n, scores=scores)
            self.ask_at, self.asked = ask_at, False

        def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
            self.asked = self.asked or epoch == self.ask_at
            return {}

    for ask_at in (0, 1):
        body = AskedWhileClosing(ask_at, n=4)
        loop = looping(body, LoopPlan(epochs=2), stop_requested=lambda b=body: b.asked)
        with pytest.raises(StopRequested, match=f"step {4 * (ask_at + 1)}"):
            loop.run()
        p = loop.progress
        assert (p.epoch, p.step_in_epoch, p.global_step) == (ask_at + 1, 0, 4 * (ask_at + 1))
        assert body.saves[-1] == p.global_step and len(body.steps) == p.global_step
    patient = AskedWhileClosing(1, n=2, scores=(3.0, 2.0, 1.0))
    plan = LoopPlan(epochs=3, validate_every=1, patience=1)
    loop = looping(patient, plan, stop_requested=lambda: patient.asked).run()
    assert loop.stopped_early and loop.progress.epoch == 2 and len(patient.steps) == 4


# --------------------------------------------------------------- hole 2: spacl demo


@pytest.mark.parametrize("where", ["step", "final evaluation"])
@pytest.mark.usefixtures("python_sigint")  # SIGINT as in a terminal
def test_ctrl_c_during_spacl_demo_is_one_line_and_exit_130(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """Ctrl-C while a demo model trains (a checkpoint at the step) or evaluates: one line
    saying to run the demo again, exit 130, no traceback."""
    if where == "step":
        original = TrainLoop.__init__

        def with_signal(self: TrainLoop, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)

            def kill(loop: TrainLoop) -> None:
                if loop.progress.global_step == 2:
                    os.kill(os.getpid(), signal.SIGINT)

            self.callbacks.append(kill)

        monkeypatch.setattr(TrainLoop, "__init__", with_signal)
    else:
        real = Trainer.final_evaluation

        def interrupted(self: Trainer) -> Any:
            os.kill(os.getpid(), signal.SIGINT)
            return real(self)

        monkeypatch.setattr(Trainer, "final_evaluation", interrupted)
    out = tmp_path / "demo"
    capsys.readouterr()
    argv = ["demo", "--out", str(out), "--epochs", "1", "--models", "simclr", "--quiet"]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("spacl demo: interrupted") and "spacl demo" in err.split(":", 1)[1]
    if where == "step":
        assert "step 2" in err and str(out / "simclr") in err


# ----------------------------------------------------- the same holes in a KG run


@pytest.mark.parametrize("where", ["last validation", "test evaluation"])
@pytest.mark.usefixtures("python_sigint")  # SIGINT as in a terminal
def test_a_kg_run_interrupted_after_its_last_step_says_how_to_resume(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """Ctrl-C while a KG run validates its last epoch (the loop stops at the epoch end) or
    evaluates on the test set (``KeyboardInterrupt``; the run directory is the recipe's
    timestamped one, found by ``spacl train``): one line naming ``--resume``, exit 130,
    and the resume writes the uninterrupted eval.json."""
    from spacl.tasks.kg import train as kg_train
    from test_kg_model import cycle_graph
    from test_task_runs import kg_recipe

    recipe = {**kg_recipe(cycle_graph(tmp_path / "toy"), epochs=2), "task": "kg"}
    recipe["out_dir"] = str(tmp_path / "runs")
    path, whole = tmp_path / "recipe.yaml", tmp_path / "whole"
    OmegaConf.save(OmegaConf.create(recipe), path)
    assert main(["train", str(path), "--out", str(whole), "--quiet"]) == 0
    if where == "last validation":
        real_record = kg_train.KGSteps.record_valid

        def validating(self: Any, epoch: int, valid: Any, record: dict[str, Any]) -> None:
            if epoch == 1:
                os.kill(os.getpid(), signal.SIGINT)
            real_record(self, epoch, valid, record)

        monkeypatch.setattr(kg_train.KGSteps, "record_valid", validating)
    else:
        real_summary = kg_train._kg_summary

        def evaluating(*args: Any) -> Any:
            os.kill(os.getpid(), signal.SIGINT)
            return real_summary(*args)

        monkeypatch.setattr(kg_train, "_kg_summary", evaluating)
    capsys.readouterr()
    assert main(["train", str(path), "--quiet"]) == 130
    monkeypatch.undo()
    (run,) = (tmp_path / "runs").iterdir()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"spacl train {run} --resume" in err, err
    assert "nothing to resume" not in err and not (run / "eval.json").exists()
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )


def test_a_fresh_run_into_a_used_directory_starts_its_metrics_afresh(
    uninterrupted: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run from scratch (no resume) into a directory whose metrics.jsonl holds another
    run's records without a checkpoint (``spacl demo --out X`` twice, a Python loop):
    its metrics.jsonl holds its own records only, each once."""
    recipe, whole = uninterrupted
    run = tmp_path / "again"
    run.mkdir()
    (run / "metrics.jsonl").write_text((whole / "metrics.jsonl").read_text())
    Trainer(load_config(recipe), run, quiet=True).fit()
    assert records(run) == records(whole)


# ------------------------------------- during a loop's last checkpoint, for every task


class CountingStage(Counting):
    """:class:`Counting` as a checkpointed stage (its state: the weights)."""

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights}

    def load_state_dict(self, state: Any) -> None:
        self.weights = int(state["weights"])


def signal_at_final_save(patch: pytest.MonkeyPatch, signum: int, sent: list[int]) -> None:
    """Send ``signum`` while the engine's checkpointer writes the first loop's final
    checkpoint (the save that marks it complete); ``sent`` receives that save's step."""
    from spacl.engine.stages import Checkpointer

    real = Checkpointer._save

    def saving(
        self: Checkpointer, index: int, loop: TrainLoop, body: Any, *, complete: bool
    ) -> None:
        if complete and not sent:
            sent.append(loop.progress.global_step)
            os.kill(os.getpid(), signum)
        real(self, index, loop, body, complete=complete)

    patch.setattr(Checkpointer, "_save", saving)


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_the_engine_raises_a_stop_asked_during_a_loops_last_save_for_every_task(
    tmp_path: Path, signum: int, status: int
) -> None:
    """The checkpointer, not each task, acts on a stop: one asked while a loop's last
    checkpoint is written (no step follows) raises there, before what follows the loop;
    one asked between loops (a text run's stages), where no loop sees it, raises as the
    ``with`` block ends.  Either names the run directory, the step and the signal."""
    from spacl.engine.stages import Checkpointer

    written: list[dict[str, Any]] = []
    with pytest.MonkeyPatch.context() as patch:
        sent: list[int] = []
        signal_at_final_save(patch, signum, sent)
        with pytest.raises(StopRequested) as stop:
            with Checkpointer(written.append, run_dir=str(tmp_path)) as checkpointer:
                checkpointer.run(CountingStage(n=4), LoopPlan(epochs=2))
                pytest.fail("the loop's caller went on after the stop")  # pragma: no cover
    assert (stop.value.signum, stop.value.run_dir) == (signum, str(tmp_path))
    assert stop.value.progress.global_step == 8 and sent == [8]
    assert written[-1]["progress"]["global_step"] == 8  # the last save is complete

    after: list[str] = []
    with pytest.raises(StopRequested) as stop:
        with Checkpointer(written.append, staged=True, run_dir=str(tmp_path)) as stages:
            stages.run(CountingStage(n=3), LoopPlan(epochs=1))
            os.kill(os.getpid(), signum)  # between two stages: no loop checks it here
            after.append("the code between the stages runs")
    assert after and stop.value.signum == signum and stop.value.progress.global_step == 3
    assert written[-1]["stages"][-1]["complete"]


@pytest.mark.parametrize("task", ["kg", "text"])
def test_a_signal_during_a_runs_final_checkpoint_stops_it_with_the_resume_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    task: str,
) -> None:
    """Ctrl-C just after the last step, while the final checkpoint is written (an audit
    found a KG run then went on to its test evaluation and exited 0): exit 130, the one
    line naming the step and ``--resume``, no eval.json; the resume writes the
    uninterrupted run's eval.json."""
    if task == "kg":
        from test_kg_model import cycle_graph
        from test_task_runs import kg_recipe

        recipe: dict[str, Any] = {**kg_recipe(cycle_graph(tmp_path / "toy"), epochs=2)}
        recipe["task"] = "kg"
    else:
        from test_interrupt_tasks import topic_text_recipe

        recipe = topic_text_recipe(tmp_path, monkeypatch, epochs=2)
    path, whole, run = tmp_path / "recipe.yaml", tmp_path / "whole", tmp_path / "late"
    OmegaConf.save(OmegaConf.create(recipe), path)
    assert main(["train", str(path), "--out", str(whole), "--quiet"]) == 0
    sent: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        signal_at_final_save(patch, signal.SIGINT, sent)
        capsys.readouterr()
        assert main(["train", str(path), "--out", str(run), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert f"interrupted at step {sent[0]};" in err and f"spacl train {run} --resume" in err
    assert not (run / "eval.json").exists()
    assert main(["train", str(run), "--resume", "--quiet"]) == 0
    assert json.loads((run / "eval.json").read_text()) == json.loads(
        (whole / "eval.json").read_text()
    )


def test_the_console_script_ignores_ctrl_c_once_its_command_is_done(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the command's last line, a Ctrl-C would only raise inside the interpreter's
    exit hooks (a traceback after a finished run): the console script ignores it then;
    ``main(argv)`` called as a library leaves the caller's handler alone."""
    before = signal.getsignal(signal.SIGINT)
    try:
        assert main(["recipes"]) == 0
        assert signal.getsignal(signal.SIGINT) is before
        monkeypatch.setattr("sys.argv", ["spacl", "recipes"])
        assert main() == 0
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert "text/stackoverflow" in capsys.readouterr().out
