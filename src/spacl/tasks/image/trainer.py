"""The image task's run: every objective (and several models at once) in the engine's loop.

:class:`Trainer` builds the data stream, the arms (one per model), the run directory
and the logger from a validated config, then :meth:`Trainer.fit` runs::

    for epoch e, for batch k of e (resuming at the saved (e, k)):
        every arm: forward (global-batch loss), finite check, backward, clip, step,
                   LR schedule, EMA update
        log every train.log_every steps; checkpoint every train.checkpoint_every steps
    end of epoch: online kNN / NCC / geometry every eval.every_epochs (the loop's
                  validation); checkpoint
    end of run:   checkpoint, linear probe + kNN + NCC + geometry, eval.json, summary.md

Checkpoints, resume and Ctrl-C / SIGTERM while training are the engine's checkpointer's
(:class:`~spacl.engine.stages.Checkpointer`): the loop's state, the arms' (the body's
``state_dict``) and the random state, with the run's config and model facts as data.  A
signal stops at the next step or epoch boundary, or before the final evaluation, with a
checkpoint there (:class:`~spacl.engine.loop.StopRequested`).  During the final evaluation the
process's own handlers act (Ctrl-C: ``KeyboardInterrupt``); the last step's checkpoint is
written by then, and ``spacl train`` says how to resume.

Resume is exact on the CPU: batch ``k`` of epoch ``e`` is a pure function of
``(seed, e, k)`` and the checkpoint holds every model, target, objective (with its
generators), optimiser, scheduler and scaler state plus the torch / CUDA / NumPy /
Python RNG states; evaluation runs under ``fork_rng`` so it never moves them.  The
evaluation itself (features, online and final) is in :mod:`spacl.tasks.image.evaluation`,
under the engine's :func:`~spacl.engine.evaluation.evaluating`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from spacl._progress import progress_enabled
from spacl.engine.checkpoint import (
    load_checkpoint,
    remove_stale_temporaries,
    restore_rng_state,
    save_checkpoint,
)
from spacl.engine.device import prepare_run
from spacl.engine.distributed import DistributedContext, init_from_env
from spacl.engine.evaluation import Evaluator
from spacl.engine.loop import LoopPlan, Progress, StopRequested, TrainLoop
from spacl.engine.rundir import MetricsLogger, RunDirectory, default_run_dir
from spacl.engine.stages import Checkpointer, StageBody
from spacl.schema_files import upgrade_renamed_keys
from spacl.tasks.image.arm import Arm, NonFiniteLossError, Precision
from spacl.tasks.image.build import build_arms, resolve_precision
from spacl.tasks.image.config import config_to_dict
from spacl.tasks.image.data import RunData, build_run_data
from spacl.tasks.image.evaluation import ProbeSuite
from spacl.tasks.image.summary import RunFacts, write_summary

_logger = logging.getLogger(__name__)

__all__ = ["CHECKPOINT_FORMAT", "TrainResult", "Trainer", "train"]

CHECKPOINT_FORMAT = 1

#: config keys that may differ between a run and its resumption
RESUMABLE_CHANGES = (
    "name",
    "out_dir",
    "train.max_steps",
    "train.progress",
    "train.log_every",
    "train.checkpoint_every",
    "train.device",
    "data.num_workers",
    "data.root",  # where the data is, not what it is: a moved folder (spacl eval data.root=)
    "eval",
    "log",
)

StepCallback = Callable[["Trainer", int], None]


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns."""

    run_dir: Path
    metrics: dict[str, dict[str, float]]  # final evaluation per arm
    global_step: int
    seconds: float


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


#: schema keys added after checkpoints were written: absent from a saved config, they
#: are not a difference while the current value is this default
ADDED_KEYS: dict[str, Any] = {"objective.queue_size": 0, "train.drop_last": True}


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Keys whose values differ, except those listed in :data:`RESUMABLE_CHANGES`
    (and :data:`ADDED_KEYS` missing from ``saved`` at their default)."""
    a, b = _flatten(saved), _flatten(current)
    diffs = []
    for key in sorted(set(a) | set(b)):
        if any(key == k or key.startswith(k + ".") for k in RESUMABLE_CHANGES):
            continue
        if key not in a and key in ADDED_KEYS and b.get(key) == ADDED_KEYS[key]:
            continue
        if a.get(key) != b.get(key):
            diffs.append(f"{key}: {a.get(key)!r} -> {b.get(key)!r}")
    return diffs


def _run_data(
    cfg: DictConfig, ctx: DistributedContext, precision: Precision, run_path: Path, fresh: bool
) -> RunData:
    """This rank's data of the run on its device, in the parameter dtype; a ``fresh`` run's
    main process records an image folder's split in ``run_path``, another run is held to
    the record.  Refused when the data holds less than one batch."""
    data = build_run_data(
        cfg,
        device=ctx.device,
        dtype=precision.param_dtype,
        rank=ctx.rank,
        world_size=ctx.world_size,
        run_dir=run_path if ctx.is_main or not fresh else None,
        record_split=fresh and ctx.is_main,
    )
    if len(data.stream) < 1:
        raise ValueError("config key 'train.batch_size': the data holds less than one batch")
    return data


def num_label_classes(label_kind: str, data: RunData) -> int:
    """The number of classes a classifier head predicts: the coarse classes of the
    training data under ``data.label_kind=coarse``, else the data's classes."""
    if label_kind == "coarse":
        coarse = getattr(data.train_eval, "coarse_labels", None)
        if coarse is None:
            raise ValueError("config key 'data.label_kind': the training data has no coarse labels")
        return int(coarse.max()) + 1
    return int(data.num_classes)


def _evaluator(
    cfg: DictConfig,
    data: RunData,
    ctx: DistributedContext,
    log: Callable[[dict[str, Any]], None],
    quiet: bool,
) -> ProbeSuite:
    """The run's evaluator (online and final) over ``data``, logging through ``log``,
    printing on the main process unless ``quiet``."""
    return ProbeSuite(
        cfg.eval,
        int(cfg.train.seed),
        data,
        ctx.device,
        log,
        messages(ctx.is_main and not quiet),
        is_main=ctx.is_main,
        barrier=ctx.barrier,
    )


class Trainer:
    """Train the arms of ``cfg`` and write the run directory (module docstring).

    Args:
        cfg: a validated config (:func:`spacl.tasks.image.load_config`).
        run_dir: the run directory (default: ``<out_dir>/<name>-<timestamp>``).
        resume: continue from ``run_dir/checkpoints/last.pt`` when it exists.
        ctx: the distributed context (default: from torchrun's environment variables).
        callbacks: called as ``callback(trainer, global_step)`` after every step.
        quiet: no progress bar and no printed messages.
        command: the command line, recorded in ``summary.md``.
        read_only: load a checkpoint for evaluation only: nothing in the run directory
            is written or truncated (``spacl eval``).
        checkpoint: the checkpoint to load (default ``run_dir/checkpoints/last.pt`` when
            resuming or reading).
    """

    def __init__(
        self,
        cfg: DictConfig,
        run_dir: str | Path | None = None,
        *,
        resume: bool = False,
        ctx: DistributedContext | None = None,
        callbacks: Sequence[StepCallback] = (),
        quiet: bool = False,
        command: str | None = None,
        read_only: bool = False,
        checkpoint: str | Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.ctx = ctx if ctx is not None else init_from_env(cfg.train.device)
        self.run = RunDirectory(run_dir if run_dir is not None else default_run_dir(cfg))
        self.callbacks = list(callbacks)
        self.quiet = quiet
        self.command = command
        self.precision = resolve_precision(cfg.train.precision, self.ctx.device)
        prepare_run(
            self.ctx.device,
            threads=cfg.train.threads,
            deterministic=cfg.train.deterministic,
            cudnn_benchmark=True,
        )
        _seed_everything(int(cfg.train.seed))
        # an image folder's split: recorded by a fresh run, held to the record otherwise
        fresh = not read_only and checkpoint is None
        fresh = fresh and not (resume and self.run.last_checkpoint.is_file())
        self.data: RunData = _run_data(cfg, self.ctx, self.precision, self.run.path, fresh)
        self.steps_per_epoch = len(self.data.stream)
        self.arms: list[Arm] = build_arms(
            cfg,
            input_shape=self.data.input_shape,
            num_label_classes=num_label_classes(cfg.data.label_kind, self.data),
            precision=self.precision,
            ctx=self.ctx,
            steps_per_epoch=self.steps_per_epoch,
        )
        self._progress = Progress()
        self._checkpointer: Checkpointer | None = None
        #: the checkpoint this run resumes from (loaded by the engine's checkpointer)
        self.saved: dict[str, Any] | None = None
        self.resumed_from: int | None = None
        self.last_checkpoint_step: int | None = None
        ckpt = Path(checkpoint) if checkpoint is not None else self.run.last_checkpoint
        if read_only or checkpoint is not None:
            self._load(ckpt, clean=not read_only)
        elif resume and ckpt.is_file():
            self._load(ckpt, resume=True)
        self.logger = MetricsLogger(
            self.run,
            enabled=self.ctx.is_main and not read_only,
            tensorboard=False if read_only else cfg.log.tensorboard,
        )
        self.evaluator = _evaluator(cfg, self.data, self.ctx, self.logger.log, quiet)
        if self.ctx.is_main and not read_only:
            self._open_records(cfg, fresh)
        self.started = time.time()

    def _open_records(self, cfg: DictConfig, fresh: bool) -> None:
        """Write the config and make ``metrics.jsonl`` this run's: cut back to the
        checkpoint when resuming (a finished, evaluated run keeps every record), emptied
        when training from scratch."""
        # the batch trained on, where it is not train.batch_size (a small image folder)
        note = self.data.batch_note
        self.run.write_config(cfg, None if note is None else {"train.batch_size": note})
        if self.resumed_from is not None:
            self.logger.truncate_for_resume(
                self.progress.global_step,
                self.progress.epoch,
                finished=self.progress.finished and self.run.eval_json.is_file(),
            )
        elif fresh:  # from scratch: a directory's earlier records are not this run's
            self.run.reset_metrics()

    @property
    def progress(self) -> Progress:
        """Where training stands: the running loop's position while it trains."""
        loop = None if self._checkpointer is None else self._checkpointer.loop
        return self._progress if loop is None else loop.progress

    # ------------------------------------------------------------------ helpers
    @property
    def total_steps(self) -> int:
        total = int(self.cfg.train.epochs) * self.steps_per_epoch
        if self.cfg.train.max_steps is not None:
            total = min(total, int(self.cfg.train.max_steps))
        return total

    # -------------------------------------------------------------- checkpoints
    def checkpoint_data(self) -> dict[str, Any]:
        """What the run adds to every checkpoint beside the loop's, the arms' and the
        random state (the engine's :class:`~spacl.engine.stages.Checkpointer` writes
        those): its format, config and model facts."""
        return {
            "format": CHECKPOINT_FORMAT,
            "config": config_to_dict(self.cfg),
            "model_info": self.model_info(),
            "world_size": self.ctx.world_size,
            "torch_version": str(torch.__version__),
        }

    def model_info(self) -> dict[str, Any]:
        """What :func:`spacl.load` needs besides the weights to use the encoder without data.

        ``input_shape`` (one input, no batch), ``num_classes`` and the evaluation
        normalisation (``mean`` / ``std`` per channel, or None).
        """
        norm = self.data.normalization
        return {
            "input_shape": list(self.data.input_shape),
            "num_classes": int(self.data.num_classes),
            "normalization": None
            if norm is None
            else {"mean": list(norm[0]), "std": list(norm[1])},
        }

    def write_checkpoint(self, state: dict[str, Any]) -> None:
        """Write ``state`` (the checkpointer's) to ``checkpoints/last.pt`` atomically (main
        process only; Ctrl-C and ``kill`` held until it is written)."""
        if self.ctx.is_main:
            save_checkpoint(state, self.run.last_checkpoint)
        self.last_checkpoint_step = int(state["progress"]["global_step"])
        self.ctx.barrier()

    def _load(self, path: Path, *, clean: bool = True, resume: bool = False) -> None:
        if clean:
            remove_stale_temporaries(path.parent)
        state = load_checkpoint(path, map_location=self.ctx.device)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"checkpoint {path} has format {state.get('format')!r}, "
                f"expected {CHECKPOINT_FORMAT}"
            )
        saved = config_to_dict(upgrade_renamed_keys(state["config"])[0])  # older runs
        diffs = config_differences(saved, config_to_dict(self.cfg))
        if diffs:
            raise ValueError(
                f"cannot resume {self.run.path}: the config differs from the checkpoint's in "
                + "; ".join(diffs)
            )
        names = {arm.name for arm in self.arms}
        if set(state["arms"]) != names:
            raise ValueError(
                f"checkpoint arms {sorted(state['arms'])} differ from the config's {sorted(names)}"
            )
        self._progress = Progress.from_dict(state["progress"])
        self.resumed_from = self.progress.global_step
        self.last_checkpoint_step = self.progress.global_step
        if resume:  # the engine's checkpointer loads it when training starts
            self.saved = state
        else:  # read for evaluation: the arms as saved
            load_arms(self.arms, state)
            restore_rng_state(state["rng"])

    # --------------------------------------------------------------------- loop
    def fit(self) -> TrainResult:
        """Train to the end (or ``train.max_steps``), evaluate, write the run directory."""
        try:
            self._train_loop()
        except StopRequested:
            self.logger.close()
            raise
        except NonFiniteLossError as err:
            where = (
                f"the last good checkpoint is {self.run.last_checkpoint} "
                f"(step {self.last_checkpoint_step})"
                if self.last_checkpoint_step is not None and self.run.last_checkpoint.is_file()
                else "no checkpoint had been written yet"
            )
            message = (
                f"{err}. Training stopped without saving; {where}. Lower optim.lr, set "
                "optim.grad_clip, or check the data for extreme values."
            )
            self.logger.log(
                {"kind": "error", "step": self.progress.global_step, "message": message}
            )
            self.logger.close()
            raise NonFiniteLossError(message) from None
        metrics = self.final_evaluation()
        seconds = time.time() - self.started
        if self.ctx.is_main:
            self.run.write_json(self.run.eval_json, metrics)
            self.write_centres()
            facts = RunFacts(
                self.run.path,
                self.data.name,
                self.progress.global_step,
                self.progress.epoch,
                seconds,
                str(self.ctx.device),
                self.ctx.world_size,
                self.resumed_from,
                self.command,
                self.data.batch_size,
                self.data.batch_note,
            )
            write_summary(self.run.summary, self.cfg, self.arms, facts, metrics)
        self.logger.close()
        self.ctx.barrier()
        return TrainResult(self.run.path, metrics, self.progress.global_step, seconds)

    def _train_loop(self) -> None:
        """The engine's loop (:class:`spacl.engine.loop.TrainLoop`) over
        :class:`ImageSteps`, checkpointed and resumed by the engine's
        :class:`~spacl.engine.stages.Checkpointer`; a last checkpoint where the loop
        stopped.  A stop requested by then (Ctrl-C while the last epoch evaluated, say)
        raises :class:`~spacl.engine.loop.StopRequested` there, before the final
        evaluation: the resume runs it."""
        cfg = self.cfg
        plan = LoopPlan(
            epochs=int(cfg.train.epochs),
            max_steps=None if cfg.train.max_steps is None else int(cfg.train.max_steps),
            log_every=int(cfg.train.log_every),
            checkpoint_every=int(cfg.train.checkpoint_every or 0),
            # online evaluation every eval.every_epochs epochs and after the last (0: never)
            validate_every=int(cfg.eval.every_epochs) or None,
            close_partial_epoch=False,
            steps_per_epoch=self.steps_per_epoch,
        )
        callbacks = [
            (lambda loop, cb=cb: cb(self, loop.progress.global_step)) for cb in self.callbacks
        ]
        body = ImageSteps(
            arms=self.arms,
            stream=self.data.stream,
            device=self.ctx.device,
            dtype=self.precision.param_dtype,
            coarse_labels=cfg.data.label_kind == "coarse",
            log=self.logger.log,
            started=self.started,
            bar=EpochBar(
                self.steps_per_epoch,
                int(cfg.train.epochs),
                self.ctx.is_main and not self.quiet and progress_enabled(cfg.train.progress),
            ),
            evaluator=self.evaluator,
        )
        self._checkpointer = Checkpointer(
            self.write_checkpoint, self.saved, data=self.checkpoint_data()
        )
        with self._checkpointer:  # Ctrl-C / SIGTERM: a checkpoint at the next step
            self._checkpointer.run(
                body,
                plan,
                callbacks=callbacks,
                evaluator=body.online_evaluator(),
            )

    # --------------------------------------------------------------- evaluation
    def final_evaluation(self) -> dict[str, dict[str, float]]:
        """Linear probe, kNN, NCC and geometry of every arm (main process;
        :meth:`spacl.tasks.image.evaluation.ProbeSuite.final`).

        Also keeps each arm's nearest-class-centre classifier (the float64 training
        means of ``eval.features``) in :attr:`centres`, which :meth:`write_centres`
        stores for ``spacl predict``.
        """
        p = self.progress
        results, self.centres = self.evaluator.final(self.arms, p.epoch, p.global_step)
        return results

    def write_centres(self) -> Path:
        """Write :attr:`centres` (after :meth:`final_evaluation`) and the class names (when
        the data has them) to ``RUN_DIR/centres.pt``."""
        names = self.data.class_names
        state = {"format": 1, "arms": self.centres, "class_names": list(names or [])}
        return save_checkpoint(state, self.run.centres)


def batch_labels(batch: Any, coarse: bool, device: torch.device) -> torch.Tensor:
    """The labels of ``batch`` the arms train on (``coarse``: ``data.label_kind=coarse``),
    on ``device``."""
    labels = batch.coarse_labels if coarse else batch.labels
    if labels is None:
        raise ValueError("config key 'data.label_kind': the batch has no coarse labels")
    return labels.to(device, non_blocking=True)


def messages(enabled: bool) -> Callable[[str], None]:
    """A run's message sink: INFO on the engine's logger when ``enabled`` (the main
    process of a run that is not quiet), else nothing."""

    def say(message: str) -> None:
        if enabled:
            _logger.info(message)

    return say


@dataclass(frozen=True)
class EpochBar:
    """How the image task's per-epoch progress bar looks: ``steps`` per epoch of
    ``epochs``, shown or not."""

    steps: int
    epochs: int
    show: bool

    def open(self, epoch: int, start: int) -> Any:
        """A tqdm bar over epoch ``epoch``'s steps, at step ``start``."""
        return tqdm(
            total=self.steps,
            initial=start,
            desc=f"epoch {epoch + 1}/{self.epochs}",
            disable=not self.show,
            leave=False,
            dynamic_ncols=True,
        )


def load_arms(arms: Sequence[Arm], state: Mapping[str, Any]) -> None:
    """Load every arm's state of an image checkpoint (``state["arms"]``, by name)."""
    for arm in arms:
        arm.load_state_dict(state["arms"][arm.name])


class ImageSteps(StageBody):
    """The image task's body in the engine's loop: the stream's batches of an epoch (from
    the saved step on), every arm's step on the same views, the train and epoch records,
    the online evaluation as the loop's validation (when the plan says: every
    ``eval.every_epochs`` epochs and after the last; it scores no epoch to keep, so
    there is no best epoch and no patience) and what a checkpoint keeps of it (every
    arm's state; the engine's checkpointer writes it).

    Given data and the run's :class:`~spacl.tasks.image.evaluation.ProbeSuite`, never the
    trainer itself, nor anything that saves.
    """

    def __init__(
        self,
        *,
        arms: Sequence[Arm],
        stream: Any,
        device: torch.device,
        dtype: torch.dtype,
        coarse_labels: bool,
        log: Callable[[dict[str, Any]], None],
        started: float,
        bar: EpochBar,
        evaluator: ProbeSuite,
    ) -> None:
        self.arms = list(arms)
        self.stream = stream
        self.device, self.dtype = device, dtype
        self.coarse_labels = coarse_labels
        self.log = log
        self.started = started
        self.epoch_bar = bar
        self.evaluator = evaluator
        self.bar: Any = None

    def batches(self, epoch: int, start: int) -> Iterator[Any]:
        self.bar = self.epoch_bar.open(epoch, start)
        try:
            yield from self.stream.epoch_batches(epoch, start)
        finally:
            self.bar.close()

    def step(self, batch: Any, loop: TrainLoop) -> dict[str, float]:
        views = batch.views.to(self.device, dtype=self.dtype, non_blocking=True)
        labels = batch_labels(batch, self.coarse_labels, self.device)
        step = loop.progress.global_step
        losses = {arm.name: arm.train_step(views, labels, step) for arm in self.arms}
        self.bar.update(1)
        self.bar.set_postfix({k: f"{v:.4f}" for k, v in losses.items()}, refresh=False)
        return losses

    def log_step(self, losses: Mapping[str, float], loop: TrainLoop) -> None:
        """One ``train`` record per arm: loss, learning rate, momentum, its statistics."""
        step = loop.progress.global_step
        for arm in self.arms:
            self.log(
                {
                    "kind": "train",
                    "arm": arm.name,
                    "step": step,
                    "epoch": loop.progress.epoch,
                    "loss": losses[arm.name],
                    "lr": arm.lr,
                    "momentum": arm.momentum_at(step),
                    "elapsed": time.time() - self.started,
                    **arm.objective_stats(),
                }
            )

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        """Log the epoch's mean losses."""
        p = loop.progress
        for arm in self.arms:
            mean = p.loss_sums.get(arm.name, 0.0) / max(1, p.loss_count)
            self.log(
                {
                    "kind": "epoch",
                    "arm": arm.name,
                    "epoch": epoch,
                    "step": p.global_step,
                    "loss_mean": mean,
                    "seconds": seconds,
                }
            )
        return {}

    def online_evaluator(self) -> Evaluator:
        """The loop's validation (the engine's
        :class:`~spacl.engine.evaluation.Evaluator`): the online evaluation of every arm
        (kNN, NCC, geometry; main process;
        :meth:`ProbeSuite.online <spacl.tasks.image.evaluation.ProbeSuite.online>`, each arm
        under :func:`~spacl.engine.evaluation.evaluating`), which writes its records and
        lines; no key (several arms, no model selection)."""
        online, arms = self.evaluator.online, self.arms
        return Evaluator(lambda epoch, step: online(arms, epoch, step), autograd=True)

    def state_dict(self) -> dict[str, Any]:
        """Every arm's state (model, target, objective, optimiser, schedule, scaler)."""
        return {"arms": {arm.name: arm.state_dict() for arm in self.arms}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_arms(self.arms, state)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - seeds the legacy global RNG users may use
    torch.manual_seed(seed)


def train(
    cfg: DictConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    quiet: bool = False,
    callbacks: Sequence[StepCallback] = (),
) -> TrainResult:
    """Build a :class:`Trainer` and run it (the API behind ``spacl train``)."""
    return Trainer(cfg, run_dir, resume=resume, quiet=quiet, callbacks=callbacks).fit()
