"""Evaluation during training, for every task: the state it happens in.

:func:`evaluating` is the state every evaluation during a run happens in, whatever the
task: the image task's online and final evaluation
(:class:`spacl.tasks.image.evaluation.ProbeSuite`), a KG run's validation MRR, a text
run's dev score.  Its modules are put in eval mode (each submodule's own mode restored
after), autograd is off (unless asked for: the linear probe trains), and the RNG states
are forked, so an evaluation never moves training's random streams: a run resumed from a
checkpoint equals the uninterrupted one whether or not an evaluation ran in between.  A
task supplies only what to score (the metrics of :mod:`spacl.evaluate`); the loop
(:class:`~spacl.engine.loop.TrainLoop`) decides when, and keeps the best epoch and the
patience.

:class:`Evaluator` is that hook as data, for every task: the task's scoring function,
the modules it reads, the metric that ranks epochs and where the metrics go.  The loop
calls :meth:`Evaluator.evaluate` at the plan's cadence (``plan.validate_every``), inside
:func:`evaluating`, and keeps the best epoch by ``key``; the evaluator holds no trainer
and calls nothing back but the functions it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["Evaluator", "evaluating"]


@contextmanager
def evaluating(*modules: nn.Module, autograd: bool = False) -> Iterator[None]:
    """The state of every evaluation during training (module docstring): ``modules`` in
    eval mode, autograd off (``autograd=True`` leaves it as it is), the CPU RNG state and
    that of every CUDA device holding a parameter of ``modules`` forked; on leaving, even
    by an error, every submodule's training flag is what it was.

    Example::

        with evaluating(model):
            score = evaluate_link_prediction(model, valid, num_relations, filter_index)
    """
    flags = [(m, m.training) for module in modules for m in module.modules()]
    cuda = sorted(
        {
            p.device.index or 0
            for module in modules
            for p in module.parameters()
            if p.device.type == "cuda"
        }
    )
    with (
        torch.random.fork_rng(devices=cuda),
        torch.set_grad_enabled(torch.is_grad_enabled() and autograd),
    ):
        try:
            for module in modules:
                module.eval()
            yield
        finally:
            for m, training in flags:
                m.training = training


@dataclass(frozen=True)
class Evaluator:
    """An evaluation during training, given as data (module docstring).

    Args:
        score: ``score(epoch, step)`` -> the metrics (``epoch`` 0-based, ``step`` the
            global step): the task's scoring function.
        modules: what ``score`` reads, put in the evaluation state (:func:`evaluating`).
        key: the metric the loop ranks epochs by (higher is better; ``None``: none, no
            best epoch is kept).
        log: ``log(epoch, metrics, record)``: where the metrics go (``record``: the
            epoch's record, which it may add to); ``None``: nowhere.
        autograd: leave autograd on (a probe that trains on frozen features).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(2, 1)
        >>> ev = Evaluator(lambda epoch, step: {"score": 1.0 + step}, (model,), key="score")
        >>> ev.evaluate(0, 4), ev.rank({"score": 2.0})
        ({'score': 5.0}, 2.0)
    """

    score: Callable[[int, int], Mapping[str, Any]]
    modules: Sequence[nn.Module] = ()
    key: str | None = None
    log: Callable[[int, dict[str, Any], dict[str, Any]], None] | None = None
    autograd: bool = False

    def evaluate(
        self, epoch: int, step: int, record: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The metrics after ``epoch`` at ``step``, scored under :func:`evaluating`, then
        handed to ``log`` with the epoch's ``record``."""
        with evaluating(*self.modules, autograd=self.autograd):
            metrics = dict(self.score(epoch, step))
        if self.log is not None:
            self.log(epoch, metrics, {} if record is None else record)
        return metrics

    def rank(self, metrics: Mapping[str, Any]) -> float | None:
        """The value epochs are ranked by (``None`` without a ``key``)."""
        return None if self.key is None else float(metrics[self.key])
