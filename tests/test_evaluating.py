"""Every task's evaluation during training runs in one state, the engine's
:func:`~spacl.engine.evaluation.evaluating`: eval mode (each submodule's own flag back
after), autograd off, the RNG states forked (an evaluation never moves training's random
stream, so a resumed run equals the uninterrupted one)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from spacl.engine.evaluation import evaluating


def model() -> nn.Module:
    net = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.BatchNorm1d(4), nn.Linear(4, 2))
    net[2].eval()  # a submodule the owner keeps in eval mode (frozen statistics)
    return net


def flags(net: nn.Module) -> list[bool]:
    return [m.training for m in net.modules()]


def test_eval_mode_inside_and_every_flag_back_after() -> None:
    net = model()
    before = flags(net)
    assert before == [True, True, True, False, True]
    with evaluating(net):
        assert not any(flags(net))
        x = torch.ones(5, 3)
        assert torch.equal(net(x), net(x))  # dropout off: the same output twice
    assert flags(net) == before
    frozen = model().eval()
    with evaluating(frozen):
        pass
    assert not any(flags(frozen))  # a module evaluated in eval mode stays there


def test_flags_come_back_after_an_error() -> None:
    net = model()
    before = flags(net)
    with pytest.raises(RuntimeError, match="scoring failed"), evaluating(net):
        raise RuntimeError("scoring failed")
    assert flags(net) == before


def test_autograd_off_unless_asked_for() -> None:
    w = torch.ones(2, requires_grad=True)
    with evaluating():
        assert not torch.is_grad_enabled()
        assert not (w * 2).requires_grad
    assert torch.is_grad_enabled()
    with evaluating(autograd=True):  # the image task's linear probe trains
        assert (w * 2).requires_grad
    with torch.no_grad(), evaluating(autograd=True):
        assert not torch.is_grad_enabled()  # never turns autograd on


def test_the_random_stream_does_not_move() -> None:
    """Random draws inside (a sampled validation subset, dropout left on by a scorer)
    leave training's next draw as it was; without the fork it moves (the counter-example)."""
    net = model()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with evaluating(net):
        torch.rand(100)
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(0)
    torch.rand(100)
    assert not torch.equal(torch.rand(3), expected)


SRC = Path(__file__).resolve().parents[1] / "src" / "spacl"
VALIDATING = sorted(
    p for p in (SRC / "tasks").rglob("*.py") if "def validate(self, epoch" in p.read_text()
)


def calls_evaluating(function: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "evaluating"
        for n in ast.walk(function)
    )


def evaluating_methods() -> set[str]:
    """The names of the task classes' methods that enter :func:`evaluating` themselves
    (the image ``ProbeSuite.online``)."""
    return {
        f.name
        for p in (SRC / "tasks").rglob("*.py")
        for c in ast.walk(ast.parse(p.read_text()))
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if isinstance(f, ast.FunctionDef) and calls_evaluating(f)
    }


def engine_evaluated(path: Path) -> bool:
    """Whether the module builds the engine's Evaluator (imported from
    ``spacl.engine.evaluation``, under any name) for its loop's validation."""
    tree = ast.parse(path.read_text())
    names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "spacl.engine.evaluation"
        for alias in node.names
        if alias.name == "Evaluator"
    }
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
        for n in ast.walk(tree)
    )


def test_the_reader_finds_the_tasks_that_validate() -> None:
    """Every task's loop validates through the engine's Evaluator, which the loop calls:
    no body has a ``validate`` of its own, and the image, KG, fine-tuned text and ADB
    modules build the Evaluator."""
    names = {str(p.relative_to(SRC)) for p in VALIDATING}
    assert not names, names
    engine = {str(p.relative_to(SRC)) for p in (SRC / "tasks").rglob("*.py") if engine_evaluated(p)}
    expected = {"tasks/image/trainer.py", "tasks/kg/train.py", "tasks/text/finetune.py"}
    assert expected | {"tasks/text/adb.py"} <= engine
    assert "online" in evaluating_methods()


def test_the_engine_evaluator_enters_evaluating() -> None:
    """The engine's hook: the task's scoring function runs in the evaluation state and
    its metrics go to ``log`` with the epoch's record; ``key`` ranks the epochs."""
    from spacl.engine.evaluation import Evaluator

    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    seen: list[Any] = []

    def score(epoch: int, step: int) -> dict[str, float]:
        seen.append((model.training, torch.is_grad_enabled()))
        return {"acc": 0.5 + epoch, "step": float(step)}

    ev = Evaluator(score, (model,), key="acc", log=lambda e, m, r: r.update(m))
    record: dict[str, Any] = {}
    metrics = ev.evaluate(1, 7, record)
    assert seen == [(False, False)] and model.training
    assert record == metrics == {"acc": 1.5, "step": 7.0} and ev.rank(metrics) == 1.5
