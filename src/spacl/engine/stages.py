"""Every task's checkpoints: the one writer, reader and signal stop of a run's loops.

:class:`Checkpointer` is the engine's one checkpointer, for images, link prediction and
text.  A run gives it ``write`` (where a checkpoint goes: the run directory's file, the
main process only...), the checkpoint it resumes from and the data it adds (its config,
its format, its counters), and runs each of its loops through :meth:`Checkpointer.run`.
Whenever a loop saves (every ``plan.checkpoint_every`` steps, when an epoch's steps are
done and again once it is closed, on a stop request, when the loop ends) the checkpointer
writes the loop's state (:meth:`TrainLoop.state`), the body's
(:meth:`StageBody.state_dict`) and the global random state; on resume it loads the three
back before the loop runs.  Inside ``with checkpointer:`` SIGINT and SIGTERM
(:class:`~spacl.engine.interrupt.StopOnSignal`) stop the loop at the next step boundary
with a checkpoint there, and the :class:`~spacl.engine.loop.StopRequested` that leaves
the block names the run directory.  No stop is lost and no task has to ask for that: a
stop requested by the time a loop's last checkpoint is written (the final save itself
included) raises there, before what follows the loop (a final evaluation), and one that
arrives later inside the block (between a text run's stages, say) raises as the block
ends.  No body saves itself: a body never sees the writer.

Two layouts, one writer:

- one loop (the image and KG runs): ``{**data, "loop", "progress", **body, "rng"}``;
  ``progress`` repeats the loop's position for readers of a run's checkpoint;
- several loops (``staged=True``: a text run trains in stages, one
  :class:`~spacl.engine.loop.TrainLoop` each: a head, or fine-tuned top layers, or
  ADB's two stages, and the held-out heads some decision rules train):
  ``{**data, "stages": [{"loop", "body", "rng", "complete"}, ...]}``, numbered in the
  order the run starts them (fixed by the recipe and the seed, so a resumed run starts
  them in the same order).  A stage that completed is not trained again on resume: its
  state is loaded and the run goes on as it did; the stage that was running continues
  at its saved step.

So a run stopped anywhere (Ctrl-C, ``kill``, a step interval's checkpoint before a
crash) and resumed ends as the uninterrupted run (tested for each task).

Example:
    >>> saved = []
    >>> stages = Checkpointer(saved.append, staged=True)
    >>> stages.count
    0
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

import torch

from spacl.engine.checkpoint import capture_rng_state, restore_rng_state
from spacl.engine.evaluation import Evaluator
from spacl.engine.interrupt import StopOnSignal, TerminatedBySignal
from spacl.engine.loop import LoopBody, LoopPlan, StepCallback, StopRequested, TrainLoop

__all__ = [
    "Checkpointer",
    "StageBody",
    "load_states",
    "run_stage",
    "states_of",
]


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
    """A loop body whose state a :class:`Checkpointer` checkpoint keeps: override
    :meth:`state_dict` and :meth:`load_state_dict` (tensors and plain containers)."""

    def state_dict(self) -> dict[str, Any]:
        """Everything the body needs to continue (weights, optimiser, generators...)."""
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The inverse of :meth:`state_dict`."""
        raise NotImplementedError


class Checkpointer:
    """The checkpoints of a run's loops (module docstring).

    Args:
        write: stores a checkpoint (``None``: a run that keeps none; no signal is then
            caught either, Ctrl-C is Python's ``KeyboardInterrupt``).
        saved: the checkpoint to resume from, as ``write`` received it (a staged one may
            be given as its ``"stages"`` list alone).
        data: what the task adds to every checkpoint: a mapping, or a callable returning
            one at each save.
        staged: several loops in one checkpoint (module docstring), else exactly one.
        checkpoint_every: the step interval of every loop whose plan sets none (0: epoch
            ends only).
        run_dir: named by a :class:`StopRequested` leaving ``with checkpointer:``.
        stop_requested: checked by every loop at every step boundary (default: inside
            ``with checkpointer:``, a SIGINT or SIGTERM received).
    """

    def __init__(
        self,
        write: Callable[[dict[str, Any]], object] | None,
        saved: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        data: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        staged: bool = False,
        checkpoint_every: int = 0,
        run_dir: str | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ) -> None:
        self.write, self.data, self.staged = write, data, staged
        self.saved = self._saved_stages(saved)
        self.states: list[dict[str, Any]] = []
        self.checkpoint_every = int(checkpoint_every)
        self.run_dir = run_dir
        self.stop_requested = stop_requested
        self._signals: StopOnSignal | None = None
        #: the loop running (or run last), its state loaded: where training stands
        self.loop: TrainLoop | None = None

    def _saved_stages(self, saved: Any) -> list[dict[str, Any]]:
        if saved is None:
            return []
        if self.staged:
            return list(saved["stages"] if isinstance(saved, Mapping) else saved)
        loop = saved.get("loop")
        if loop is None:  # a checkpoint written before it kept the loop's whole state
            loop = {"progress": saved["progress"], "train_seconds": 0.0, "best": None}
        return [{"loop": loop, "body": saved, "rng": saved["rng"], "complete": False}]

    # ----------------------------------------------------------------- signals
    def __enter__(self) -> Checkpointer:
        if self.write is not None and self.stop_requested is None:
            self._signals = StopOnSignal().__enter__()
            self.stop_requested = self._signals.requested
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        signals, self._signals = self._signals, None
        if signals is not None:  # the previous handlers first: no signal falls in between
            signals.__exit__(kind, error, trace)
            asked, self.stop_requested = signals.requested(), None
        else:
            asked = self.stop_asked()
        pending = error is None and asked  # requested inside the block, acted on by no loop
        if pending:
            error = self._pending_stop(None if signals is None else signals.received)
        if isinstance(error, StopRequested) and self.run_dir is not None:
            error.run_dir = self.run_dir
        if pending:
            assert error is not None
            raise error

    def _pending_stop(self, signum: int | None) -> BaseException:
        """What a stop requested inside the block that no loop acted on raises as the block
        ends: :class:`StopRequested` at the last loop's position (a loop saves when it
        ends, so its checkpoint is written), or, before any loop ran (no checkpoint),
        what the signal raises outside the block (``KeyboardInterrupt``)."""
        if self.loop is not None:
            stop = StopRequested(self.loop.progress)
            stop.signum = signum
            return stop
        if signum is None or signum == signal.SIGINT:
            return KeyboardInterrupt()
        return TerminatedBySignal(signum)

    def stop_asked(self) -> bool:
        """Whether a stop was requested (a signal received inside the block)."""
        return self.stop_requested is not None and self.stop_requested()

    # ------------------------------------------------------------------- loops
    @property
    def count(self) -> int:
        """How many loops (stages) this run has started."""
        return len(self.states)

    def steps_of(self, index: int) -> int:
        """The optimiser steps stage ``index`` has taken (in this process or before)."""
        return int(self.states[index]["loop"]["progress"]["global_step"])

    def saved_progress(self) -> dict[str, Any] | None:
        """The position of the last loop of the checkpoint resumed from (``None``: none)."""
        return dict(self.saved[-1]["loop"]["progress"]) if self.saved else None

    def run(
        self,
        body: StageBody,
        plan: LoopPlan,
        *,
        callbacks: Sequence[StepCallback] = (),
        evaluator: Evaluator | None = None,
    ) -> TrainLoop:
        """Run the next loop (or load it, a completed stage) and return it.

        On resume the loop, the body and the random state are loaded first.  Once the
        loop ends it is saved (a stage always, to mark it complete; one loop when steps
        went unsaved or it finished).  A stop requested by the end of that save (while
        the loop closed its last epoch, during the save itself, or after a
        ``plan.max_steps`` stop) raises :class:`StopRequested` there, for every task,
        before what follows the loop (a final evaluation): the resume runs it.
        ``evaluator``: the loop's validation (:class:`~spacl.engine.evaluation.Evaluator`)."""
        if self.checkpoint_every and not plan.checkpoint_every and self.write is not None:
            plan = replace(plan, checkpoint_every=self.checkpoint_every)
        index = len(self.states)
        loop = TrainLoop(
            body,
            plan,
            callbacks=callbacks,
            stop_requested=self.stop_requested,
            evaluator=evaluator,
        )
        self.states.append({})
        self.loop = loop
        saved = self.saved[index] if index < len(self.saved) else None
        if saved is not None:
            loop.load_state(saved["loop"])
            loop.saved_step = loop.progress.global_step  # what is saved already
            body.load_state_dict(saved["body"])
            restore_rng_state(saved["rng"])
            if self.staged and saved["complete"]:
                self.states[index] = dict(saved)
                return loop
        if self.write is not None:
            loop.on_save = lambda running: self._save(index, running, body, complete=False)
        loop.run()
        loop.on_save = None
        p = loop.progress
        if self.write is not None and (
            self.staged or loop.saved_step != p.global_step or p.finished
        ):
            self._save(index, loop, body, complete=True)
        if self.stop_asked():  # by the end of the last save: no stop is dropped
            raise StopRequested(p)
        return loop

    def last(self) -> dict[str, Any]:
        """The last checkpoint written (or loaded), in its layout (for a final record)."""
        return self._layout()

    def _save(self, index: int, loop: TrainLoop, body: StageBody, *, complete: bool) -> None:
        self.states[index] = {
            "loop": loop.state(),
            "body": body.state_dict(),
            "rng": capture_rng_state(),
            "complete": complete,
        }
        assert self.write is not None
        self.write(self._layout())

    def _layout(self) -> dict[str, Any]:
        data = self.data() if callable(self.data) else dict(self.data or {})
        if self.staged:
            return {**data, "stages": list(self.states)}
        (state,) = self.states
        loop = state["loop"]
        return {
            **data,
            "loop": loop,
            "progress": loop["progress"],
            **state["body"],
            "rng": state["rng"],
        }


def run_stage(
    body: StageBody,
    plan: LoopPlan,
    stages: Checkpointer | None,
    evaluator: Evaluator | None = None,
) -> TrainLoop:
    """``body`` under ``plan``: the next stage of ``stages`` (checkpointed), or a plain
    :class:`TrainLoop` when the run keeps no checkpoints; ``evaluator``: its validation."""
    if stages is None:
        return TrainLoop(body, plan, evaluator=evaluator).run()
    return stages.run(body, plan, evaluator=evaluator)
