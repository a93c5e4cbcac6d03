"""The one training loop: epochs and steps for every task (images, link prediction, text).

A task supplies the *body* of the loop, a :class:`LoopBody`: the batches of an epoch,
one optimiser step, what closes an epoch, a validation score, what a checkpoint keeps.
:class:`TrainLoop` drives it, the same for every task::

    while epochs remain (resuming at the saved (epoch, step)):
        begin_epoch (a fresh epoch), resume_epoch (one resumed mid-way)
        for batch in batches(epoch, start):
            step -> losses; position and loss sums advance
            log_step every plan.log_every steps; save every plan.checkpoint_every steps
            callbacks; stop at plan.max_steps, at plan.budget_seconds of training,
            or when a stop is requested (the step boundary)
        a whole epoch (or, with plan.close_partial_epoch, one cut short):
            save, unless this step was just saved: an error while closing the epoch
            (an unreadable test image in its evaluation, say) loses none of its steps
            end_epoch -> the epoch's record
            validate when due (every plan.validate_every epochs, the last epoch and an
            epoch cut short; never when plan.validate_every is None) -> score or None:
            the best score's snapshot is kept (the earliest on ties); plan.patience
            epochs without a better one stop training; a body whose validation scores
            nothing (None) keeps no epoch and has no patience
            position -> next epoch; save
        a stop requested while the epoch closed (its evaluation, say): stop at this
        epoch boundary, after the last epoch too; not where training ends here anyway
        (patience, plan.max_steps, the budget): the caller, who knows what follows, checks

After :meth:`TrainLoop.run` the body's best snapshot (if any) is in :attr:`TrainLoop.best`;
:meth:`TrainLoop.restore_best` loads it.  The loop's own state (:class:`Progress`, the
best score and its epoch, the training seconds) goes into a checkpoint through
:meth:`TrainLoop.state` and back through :meth:`TrainLoop.load_state`; the body adds
its own (model, optimiser, generators).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spacl.engine.evaluation import Evaluator

__all__ = ["Best", "LoopBody", "LoopPlan", "Progress", "StopRequested", "TrainLoop"]


@dataclass
class Progress:
    """Where training stands: the next batch is ``step_in_epoch`` of ``epoch`` (0-based)."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    finished: bool = False
    loss_sums: dict[str, float] = field(default_factory=dict)
    loss_count: int = 0
    #: the loop stopped before its last epoch (patience, ``max_steps`` or the budget) when
    #: it closed its last epoch: a resume trains no further
    stopped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "global_step": self.global_step,
            "finished": self.finished,
            "loss_sums": dict(self.loss_sums),
            "loss_count": self.loss_count,
            "stopped": self.stopped,
        }

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> Progress:
        """The inverse of :meth:`as_dict`."""
        return cls(
            int(saved["epoch"]),
            int(saved["step_in_epoch"]),
            int(saved["global_step"]),
            bool(saved["finished"]),
            {k: float(v) for k, v in saved["loss_sums"].items()},
            int(saved["loss_count"]),
            bool(saved.get("stopped", False)),  # a checkpoint written before the field
        )

    def mean_losses(self) -> dict[str, float]:
        """The mean of every loss over the steps of the current epoch so far."""
        return {k: v / max(1, self.loss_count) for k, v in self.loss_sums.items()}


@dataclass(frozen=True)
class LoopPlan:
    """How long and how the loop runs (module docstring).

    ``epochs``: epochs in all; ``max_steps``: stop after this many steps in all;
    ``log_every`` / ``checkpoint_every``: every so many steps (0: never);
    ``validate_every``: every so many epochs and after the last (0: only the last epoch
    and an epoch cut short; ``None``: never); ``patience``: stop after so many validated
    epochs without a better score (``None``: never); ``budget_seconds``: stop once
    training (validation excluded) has taken this long; ``close_partial_epoch``: an epoch
    cut short by ``max_steps`` or the budget is closed (recorded, validated) as a whole
    one is; ``steps_per_epoch``: when known, an epoch stopped at its last step counts as
    whole (closed and validated as one).
    """

    epochs: int
    max_steps: int | None = None
    log_every: int = 0
    checkpoint_every: int = 0
    validate_every: int | None = 0
    patience: int | None = None
    budget_seconds: float | None = None
    close_partial_epoch: bool = True
    steps_per_epoch: int | None = None


@dataclass
class Best:
    """The best validation so far: its score, its epoch (1-based) and the body's snapshot."""

    score: float
    epoch: int
    snapshot: Any


class StopRequested(Exception):
    """Raised by :meth:`TrainLoop.run` when ``stop_requested`` said so at a step boundary
    or an epoch's end, after the checkpoint there was saved."""

    def __init__(self, progress: Progress, run_dir: str | None = None) -> None:
        super().__init__(f"stopped at step {progress.global_step} (a checkpoint is saved)")
        self.progress = progress
        #: the run directory holding the checkpoint, when the task names it
        self.run_dir = run_dir
        #: the signal that asked for the stop, when known (set by ``StopOnSignal``)
        self.signum: int | None = None


class LoopBody:
    """What a task supplies to :class:`TrainLoop`: override :meth:`batches` and
    :meth:`step`; the other hooks do nothing unless overridden.  A body does not save:
    its state is read by the engine's checkpointer
    (:class:`spacl.engine.stages.StageBody`)."""

    def batches(self, epoch: int, start: int) -> Iterable[Any]:
        """The batches of ``epoch`` (0-based) from its step ``start`` on."""
        raise NotImplementedError

    def step(self, batch: Any, loop: TrainLoop) -> float | Mapping[str, float]:
        """One optimiser step on ``batch``; its loss (or one per model, by name).
        ``loop.progress`` still says where the step starts."""
        raise NotImplementedError

    def begin_epoch(self, epoch: int, loop: TrainLoop) -> None:
        """Before the first batch of a fresh epoch (not of one resumed mid-way)."""

    def resume_epoch(self, epoch: int, start: int, loop: TrainLoop) -> None:
        """Before batch ``start`` of an epoch resumed mid-way (instead of
        :meth:`begin_epoch`): what the body sets at every epoch's start without drawing
        from anything a checkpoint restores, e.g. the model's training mode."""

    def log_step(self, losses: Mapping[str, float], loop: TrainLoop) -> None:
        """Every ``plan.log_every`` steps, after the step."""

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        """Close ``epoch``: its record (``seconds``: its training time)."""
        return {}

    def snapshot(self) -> Any:
        """What is kept of the best validated epoch (e.g. a copy of the weights)."""
        return None

    def load_best(self, snapshot: Any) -> None:
        """Load a :meth:`snapshot`."""

    def after_epoch(self, record: dict[str, Any], loop: TrainLoop) -> None:
        """After the epoch is closed, validated and the position moved to the next one."""


StepCallback = Callable[["TrainLoop"], None]


class TrainLoop:
    """Runs a :class:`LoopBody` under a :class:`LoopPlan` (module docstring).

    Args:
        body: the task's loop body.
        plan: epochs, step limits, logging, checkpoints, validation.
        progress: where to start (a resumed run's; default: the beginning).
        callbacks: called as ``callback(loop)`` after every step.
        stop_requested: checked at every step boundary; when it returns true a
            checkpoint is saved (``on_save``) and :meth:`run` raises
            :class:`StopRequested`.  Checked again once an epoch is closed and saved (its
            validation may be long, and none of its steps follows the last epoch's),
            unless training stops there
            anyway: then :meth:`run` returns, and the caller checks before what follows.
        clock: the time source of ``plan.budget_seconds`` and the epochs' seconds.
        on_save: writes a checkpoint of the loop (every ``plan.checkpoint_every`` steps,
            when an epoch's steps are done and again once it is closed, and when a stop
            is requested): the engine's checkpointer
            (:class:`spacl.engine.stages.Checkpointer`), never the body.
        evaluator: the validation when due (:class:`spacl.engine.evaluation.Evaluator`:
            the task's scoring function as data, its metrics logged, the epochs ranked by
            its ``key``); without one, no validation and no best epoch.
    """

    def __init__(
        self,
        body: LoopBody,
        plan: LoopPlan,
        progress: Progress | None = None,
        *,
        callbacks: Sequence[StepCallback] = (),
        stop_requested: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        on_save: Callable[[TrainLoop], None] | None = None,
        evaluator: Evaluator | None = None,
    ) -> None:
        self.body, self.plan = body, plan
        self.progress = progress if progress is not None else Progress()
        self.callbacks = list(callbacks)
        self.stop_requested = stop_requested
        self.clock = clock
        self.best: Best | None = None
        self.train_seconds = 0.0
        self.stopped_early = False
        self._epoch_started: float | None = None  # the running epoch's start (clock)
        #: the global step of the last checkpoint (``None``: none yet in this process)
        self.saved_step: int | None = None
        #: writes a checkpoint (the run's :class:`spacl.engine.stages.Checkpointer`)
        self.on_save = on_save
        self.evaluator = evaluator

    # ------------------------------------------------------------------ state
    def seconds(self) -> float:
        """Training time so far (validation excluded), the running epoch's part included:
        what a checkpoint written mid-epoch keeps, so that a resumed run's
        ``plan.budget_seconds`` counts every trained second once."""
        running = 0.0 if self._epoch_started is None else self.clock() - self._epoch_started
        return self.train_seconds + running

    def state(self) -> dict[str, Any]:
        """The loop's part of a checkpoint (the best snapshot included)."""
        best = self.best
        return {
            "progress": self.progress.as_dict(),
            "train_seconds": self.seconds(),
            "best": None
            if best is None
            else {"score": best.score, "epoch": best.epoch, "snapshot": best.snapshot},
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.progress = Progress.from_dict(state["progress"])
        self.train_seconds = float(state["train_seconds"])
        best = state["best"]
        self.best = (
            None
            if best is None
            else Best(float(best["score"]), int(best["epoch"]), best["snapshot"])
        )

    def restore_best(self) -> None:
        """Load the best validated epoch's snapshot into the body (if one was kept)."""
        if self.best is not None:
            self.body.load_best(self.best.snapshot)

    # ------------------------------------------------------------------- loop
    def _out_of_steps(self) -> bool:
        limit = self.plan.max_steps
        return limit is not None and self.progress.global_step >= limit

    def run(self) -> TrainLoop:
        """Train to the end of the plan (or an early stop); returns ``self``."""
        plan, p = self.plan, self.progress
        # a loop that stopped (or spent its budget) before it was saved trains no further
        # on resume: the uninterrupted run would not have
        stop = p.stopped or self._out_of_steps() or self._budget_spent()
        while not stop and p.epoch < plan.epochs:
            epoch, start = p.epoch, p.step_in_epoch
            if start == 0:
                self.body.begin_epoch(epoch, self)
            else:
                self.body.resume_epoch(epoch, start, self)
            epoch_started = self._epoch_started = self.clock()
            cut = False
            batches = iter(self.body.batches(epoch, start))
            try:
                for batch in batches:
                    self._one_step(batch)
                    if self._out_of_steps() or self._out_of_time(epoch_started):
                        stop = cut = True
                        break
            finally:
                close = getattr(batches, "close", None)
                if close is not None:  # a generator's cleanup runs now, not at collection
                    close()
            seconds = self.clock() - epoch_started
            self.train_seconds += seconds
            self._epoch_started = None
            whole = not cut or (
                plan.steps_per_epoch is not None and p.step_in_epoch >= plan.steps_per_epoch
            )
            if not whole and not plan.close_partial_epoch:
                break
            if self.saved_step != p.global_step:  # closing the epoch may fail: keep its steps
                self._save()
            stop = self._close_epoch(epoch, seconds, not whole, cut=stop)
            if not stop and self._stop_asked():  # closed and saved: the epoch boundary
                raise StopRequested(p)
        p.finished = p.epoch >= plan.epochs
        self.stopped_early = stop and not p.finished
        return self

    def _one_step(self, batch: Any) -> None:
        p, plan = self.progress, self.plan
        out = self.body.step(batch, self)
        losses = {"loss": float(out)} if isinstance(out, (int, float)) else dict(out)
        p.global_step += 1
        p.step_in_epoch += 1
        for name, value in losses.items():
            p.loss_sums[name] = p.loss_sums.get(name, 0.0) + value
        p.loss_count += 1
        if plan.log_every and p.global_step % plan.log_every == 0:
            self.body.log_step(losses, self)
        if plan.checkpoint_every and p.global_step % plan.checkpoint_every == 0:
            self._save()
        for callback in self.callbacks:
            callback(self)
        if self._stop_asked():
            self._save()
            raise StopRequested(p)

    def _stop_asked(self) -> bool:
        return self.stop_requested is not None and self.stop_requested()

    def _save(self) -> None:
        if self.on_save is not None:
            self.on_save(self)
        self.saved_step = self.progress.global_step

    def _budget_spent(self) -> bool:
        budget = self.plan.budget_seconds
        return budget is not None and self.train_seconds >= budget

    def _out_of_time(self, epoch_started: float) -> bool:
        budget = self.plan.budget_seconds
        if budget is None:
            return False
        return self.train_seconds + self.clock() - epoch_started >= budget

    def _validate(self, epoch: int, record: dict[str, Any]) -> float | None:
        """The evaluator's score of ``epoch`` (its metrics logged); ``None`` without one."""
        if self.evaluator is None:
            return None
        metrics = self.evaluator.evaluate(epoch, self.progress.global_step, record)
        return self.evaluator.rank(metrics)

    def _close_epoch(self, epoch: int, seconds: float, partial: bool, *, cut: bool) -> bool:
        """End ``epoch`` (``partial``: cut short before its last step; ``cut``: the loop stops
        after it, at ``max_steps`` or the budget), validate when due, move on, save (the
        stop recorded in the progress); whether the loop stops here (``cut`` or patience)."""
        plan, p = self.plan, self.progress
        record = self.body.end_epoch(epoch, seconds, self)
        number = epoch + 1
        every = plan.validate_every
        due = every is not None and (
            (every > 0 and number % every == 0) or number == plan.epochs or partial
        )
        stop = cut
        score = self._validate(epoch, record) if due else None
        if score is not None:
            if self.best is None or score > self.best.score:
                self.best = Best(score, number, self.body.snapshot())
            elif plan.patience is not None and number - self.best.epoch >= plan.patience:
                stop = True
        p.epoch, p.step_in_epoch = number, 0
        p.loss_sums, p.loss_count = {}, 0
        p.stopped = stop and number < plan.epochs
        self.body.after_epoch(record, self)
        self._save()
        return stop
