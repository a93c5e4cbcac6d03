"""Checkpoints of a run made of several training loops, resumed at the step.

A text run trains in stages, one :class:`~spacl.engine.loop.TrainLoop` each: a head, or
fine-tuned top layers, or ADB's two stages, and the held-out heads some decision rules
train.  :class:`RunStages` numbers the loops in the order the run starts them (the
order is fixed by the recipe and the seed, so a resumed run starts them in the same
order) and keeps, in one checkpoint, every stage's state: the loop's
(:meth:`TrainLoop.state`), the body's (:meth:`StageBody.state_dict`) and the global
random state.  A stage that completed is not trained again on resume: its state is
loaded and the run goes on as it did; the stage that was running continues at its
saved step.  So a run stopped anywhere (Ctrl-C, ``kill``, a step interval's checkpoint
before a crash) and resumed ends as the uninterrupted run (tested for each text path).

Example:
    >>> saved = []
    >>> stages = RunStages(saved.append)
    >>> stages.count
    0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import torch

from spacl.engine.checkpoint import capture_rng_state, restore_rng_state
from spacl.engine.loop import LoopBody, LoopPlan, TrainLoop

__all__ = ["RunStages", "StageBody", "load_states", "run_stage", "states_of"]


def states_of(parts: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: part.state_dict()}`` of modules, optimisers and schedulers, and
    ``{name: part.get_state()}`` of ``torch.Generator`` s (``None`` stays ``None``)."""
    out: dict[str, Any] = {}
    for name, part in parts.items():
        if part is None:
            out[name] = None
        elif isinstance(part, torch.Generator):
            out[name] = part.get_state()
        else:
            out[name] = part.state_dict()
    return out


def load_states(parts: Mapping[str, Any], saved: Mapping[str, Any]) -> None:
    """The inverse of :func:`states_of`, into the same ``parts``."""
    for name, part in parts.items():
        if part is None:
            continue
        if isinstance(part, torch.Generator):
            part.set_state(saved[name])
        else:
            part.load_state_dict(saved[name])


class StageBody(LoopBody):
    """A loop body whose state a :class:`RunStages` checkpoint keeps: override
    :meth:`state_dict` and :meth:`load_state_dict` (tensors and plain containers)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything the body needs to continue (weights, optimiser, generators...)."""
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The inverse of :meth:`state_dict`."""
        raise NotImplementedError


class RunStages:
    """The training loops of one run, checkpointed together (module docstring).

    Args:
        write: called with the checkpoint (``{"stages": [...]}``) whenever a stage
            saves: every ``plan.checkpoint_every`` steps, after every epoch, on a stop
            request and when a stage completes.
        saved: a previous checkpoint's ``"stages"`` list, to resume from.
        stop_requested: checked by every loop at every step boundary
            (:class:`~spacl.engine.interrupt.StopOnSignal`).
        checkpoint_every: the step interval of every stage's loop (0: epoch ends only).
    """

    def __init__(
        self,
        write: Callable[[dict[str, Any]], None],
        saved: list[dict[str, Any]] | None = None,
        *,
        stop_requested: Callable[[], bool] | None = None,
        checkpoint_every: int = 0,
    ) -> None:
        self.write, self.stop_requested = write, stop_requested
        self.saved = list(saved or [])
        self.states: list[dict[str, Any]] = []
        self.checkpoint_every = int(checkpoint_every)

    @property
    def count(self) -> int:
        """How many stages this run has started."""
        return len(self.states)

    def steps_of(self, index: int) -> int:
        """The optimiser steps stage ``index`` has taken (in this process or before)."""
        return int(self.states[index]["loop"]["progress"]["global_step"])

    def run(self, body: StageBody, plan: LoopPlan) -> TrainLoop:
        """Run the next stage's loop (or load it, completed) and return it."""
        if self.checkpoint_every and not plan.checkpoint_every:
            plan = replace(plan, checkpoint_every=self.checkpoint_every)
        index = len(self.states)
        loop = TrainLoop(body, plan, stop_requested=self.stop_requested)
        self.states.append({})
        saved = self.saved[index] if index < len(self.saved) else None
        if saved is not None:
            loop.load_state(saved["loop"])
            body.load_state_dict(saved["body"])
            restore_rng_state(saved["rng"])
            if saved["complete"]:
                self.states[index] = saved
                return loop
        loop.on_save = lambda running: self._save(index, running, body, complete=False)
        loop.run()
        loop.on_save = None
        self._save(index, loop, body, complete=True)
        return loop

    def _save(self, index: int, loop: TrainLoop, body: StageBody, *, complete: bool) -> None:
        self.states[index] = {
            "loop": loop.state(),
            "body": body.state_dict(),
            "rng": capture_rng_state(),
            "complete": complete,
        }
        self.write({"stages": list(self.states)})


def run_stage(body: StageBody, plan: LoopPlan, stages: RunStages | None) -> TrainLoop:
    """``body`` under ``plan``: the next stage of ``stages`` (checkpointed), or a plain
    :class:`TrainLoop` when the run keeps no checkpoints."""
    return stages.run(body, plan) if stages is not None else TrainLoop(body, plan).run()
