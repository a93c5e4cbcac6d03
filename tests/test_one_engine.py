"""One engine for every task (issue 40): the tasks supply loop bodies, the engine runs them.

- no module under ``src/spacl/tasks`` defines a training loop (a ``for`` / ``while``
  whose body steps an optimiser or back-propagates), builds an optimiser or a schedule
  (``torch.optim.*(...)``) or resolves a device (``torch.device(...)``,
  ``cuda.is_available``): those are the engine's (:mod:`spacl.engine.loop`,
  :mod:`spacl.engine.optim`, :mod:`spacl.engine.device`);
- one tiny recipe of every task trains through :meth:`spacl.engine.loop.TrainLoop.run`
  (counted by a wrapper around it), and the engine's loop keeps its promises: early
  stopping with patience keeps the best epoch, a step-based checkpoint interval, a
  stop request checked at the step boundary.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spacl.engine import loop as engine_loop
from spacl.engine.loop import LoopBody, LoopPlan, StopRequested, TrainLoop

TASKS = Path(__file__).resolve().parents[1] / "src" / "spacl" / "tasks"


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain (``""`` when it is not one)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def engine_work_in(source: str) -> list[str]:
    """What in ``source`` belongs to the engine: ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith("torch.optim.") or name.startswith("optim."):
                found.append(f"{node.lineno}: optimiser or schedule {name}(...)")
            if name == "torch.device":
                found.append(f"{node.lineno}: device resolution torch.device(...)")
        if isinstance(node, ast.Attribute) and node.attr == "is_available":
            if _dotted(node).endswith("cuda.is_available"):
                found.append(f"{node.lineno}: device resolution cuda.is_available")
        if isinstance(node, (ast.For, ast.While)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                    if inner.func.attr == "backward" or _dotted(inner.func).endswith(
                        ("optimizer.step", "opt.step")
                    ):
                        found.append(f"{node.lineno}: a training loop (steps inside a loop)")
                        break
    return sorted(set(found))


def test_the_reader_sees_each_kind_of_engine_work() -> None:
    source = (
        "import torch\n"
        "def f(model, batches):\n"
        "    opt = torch.optim.Adam(model.parameters())\n"
        "    dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "    for b in batches:\n"
        "        model(b).sum().backward()\n"
        "        opt.step()\n"
    )
    found = engine_work_in(source)
    assert any("optimiser" in f for f in found) and any("training loop" in f for f in found)
    assert sum("device resolution" in f for f in found) == 2
    assert engine_work_in("def step(loss):\n    loss.backward()\n") == []


@pytest.mark.parametrize(
    "path", sorted(TASKS.rglob("*.py")), ids=lambda p: str(p.relative_to(TASKS))
)
def test_no_task_module_holds_a_loop_an_optimiser_or_a_device(path: Path) -> None:
    found = engine_work_in(path.read_text())
    assert not found, f"{path.name}: the engine's work in a task:\n" + "\n".join(found)


# ------------------------------------------------------------------ the loop itself


class Counting(LoopBody):
    """Epoch ``e``'s batches are ``0..n-1``; the validation scores follow ``scores``."""

    def __init__(self, n: int = 4, scores: tuple[float, ...] = ()) -> None:
        self.n, self.scores = n, list(scores)
        self.steps: list[tuple[int, int]] = []
        self.saves: list[int] = []
        self.weights = 0

    def batches(self, epoch: int, start: int) -> Iterator[int]:
        return iter(range(start, self.n))

    def step(self, batch: Any, loop: TrainLoop) -> float:
        self.steps.append((loop.progress.epoch, batch))
        self.weights += 1
        return float(batch)

    def validate(self, epoch: int, record: dict[str, Any], loop: TrainLoop) -> float | None:
        return self.scores[epoch] if self.scores else None

    def snapshot(self) -> int:
        return self.weights

    def load_best(self, snapshot: Any) -> None:
        self.weights = int(snapshot)

    def save(self, loop: TrainLoop) -> None:
        self.saves.append(loop.progress.global_step)


def test_patience_stops_and_the_best_epoch_is_kept_the_earliest_on_ties() -> None:
    body = Counting(n=2, scores=(1.0, 3.0, 3.0, 2.0, 5.0, 9.0))
    loop = TrainLoop(body, LoopPlan(epochs=6, validate_every=1, patience=2)).run()
    assert loop.best is not None and (loop.best.epoch, loop.best.score) == (2, 3.0)
    assert loop.progress.epoch == 4 and loop.stopped_early  # epochs 3 and 4: no better
    loop.restore_best()
    assert body.weights == 4  # the weights after epoch 2


def test_step_checkpoints_max_steps_and_a_partial_epoch() -> None:
    body = Counting(n=4)
    plan = LoopPlan(epochs=3, max_steps=6, checkpoint_every=4, close_partial_epoch=False)
    loop = TrainLoop(body, plan).run()
    assert body.saves == [4, 4]  # step 4, then the end of epoch 0 (step 4 as well)
    assert (loop.progress.epoch, loop.progress.step_in_epoch) == (1, 2)
    resumed = Counting(n=4)
    TrainLoop(resumed, LoopPlan(epochs=3), loop.progress).run()
    assert resumed.steps[0] == (1, 2) and len(resumed.steps) == 12 - 6


def test_a_stop_request_is_honoured_at_the_next_step_boundary_after_a_checkpoint() -> None:
    body = Counting(n=4)
    asked = iter([False, False, True])
    loop = TrainLoop(body, LoopPlan(epochs=2), stop_requested=lambda: next(asked))
    with pytest.raises(StopRequested, match="step 3"):
        loop.run()
    assert body.saves == [3] and loop.progress.global_step == 3


# ------------------------------------------------------- every task through the engine


@pytest.fixture
def loop_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The class names of the bodies :meth:`TrainLoop.run` ran, in order."""
    seen: list[str] = []
    real = engine_loop.TrainLoop.run

    def counted(self: TrainLoop) -> TrainLoop:
        seen.append(type(self.body).__name__)
        return real(self)

    monkeypatch.setattr(engine_loop.TrainLoop, "run", counted)
    return seen


@pytest.mark.usefixtures("one_thread")
def test_one_recipe_of_every_task_trains_through_the_engines_loop(
    tmp_path: Path, loop_runs: list[str]
) -> None:
    from test_same_results import (
        image_run,
        kg_run,
        text_detector_run,
        text_finetuned_run,
        text_head_run,
    )

    expected = {
        image_run: ["ImageSteps"],
        kg_run: ["KGSteps"],
        text_head_run: ["HeadSteps"],
        text_finetuned_run: ["FinetuneSteps"],
        text_detector_run: ["PretrainSteps", "BoundarySteps"],
    }
    for run, bodies in expected.items():
        loop_runs.clear()
        run(tmp_path / run.__name__)
        assert loop_runs == bodies, run.__name__
