"""Evaluation during training, for every task: the state it happens in.

:func:`evaluating` is the state every evaluation during a run happens in, whatever the
task: the image task's online and final evaluation
(:class:`spacl.tasks.image.evaluation.Evaluator`), a KG run's validation MRR, a text
run's dev score.  Its modules are put in eval mode (each submodule's own mode restored
after), autograd is off (unless asked for: the linear probe trains), and the RNG states
are forked, so an evaluation never moves training's random streams: a run resumed from a
checkpoint equals the uninterrupted one whether or not an evaluation ran in between.  A
task supplies only what to score (the metrics of :mod:`spacl.evaluate`); the loop
(:class:`~spacl.engine.loop.TrainLoop`) decides when, and keeps the best epoch and the
patience.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["evaluating"]


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
