"""One trained model ("arm"): online encoder, target, objective, optimiser, schedule, scaler.

A run trains one arm, or several that share the data stream (SPEC §3 shared
randomness).  :meth:`Arm.compute_loss` is the whole forward computation of a step for
every objective kind; :meth:`Arm.train_step` adds the backward pass, clipping, the
optimiser and schedule steps and the EMA update.

Step kinds (see :mod:`spacl.tasks.image.objectives`):

* ``views`` — all ``B*V`` views go through the online encoder in one forward pass
  (``[B, V, d]`` projections); with an EMA target (``model.momentum > 0``) the target
  embeds the views too and the loss receives them as ``targets=`` (candidates).
* ``spacl`` — SPEC §1.2/1.5, fed as the objective's ``online`` attribute says:

  - ``"all_views"`` (default): ONE forward pass of all ``B*V`` views through the online
    encoder ``f`` (``[B, V, d]``, so BatchNorm sees one batch, as for the baselines);
    any view can be the anchor.  With a shared encoder (momentum 0) the pool is those
    same embeddings (``g = f``; the loss detaches them unless ``detach_candidates`` is
    off, in which case the gradient reaches every view, as in SimCLR); with an EMA
    target the pool is ``g``'s embeddings of the views, without gradient.
  - ``"anchor_view"``: the target ``g`` embeds the whole pool ``[B, 1+M]`` without
    gradient; anchors are chosen on those embeddings with ``objective.choose_anchor``;
    ``f`` runs on the anchor views only (``[B, d]``) and the loss scores ``f(a_i)``
    against ``g(C_i)`` — the paper's derived-encoder reading with an EMA target.

  The EMA update follows the optimiser step.

Distributed: embeddings are gathered across ranks (the online ones with the
differentiable gather), so the loss is the global-batch loss on every rank.

Negative queue (``objective.queue_size > 0``): the loss also receives the queue's rows as
``extra_negatives`` (``extra_negative_labels`` when it uses labels).  The step's
candidates — the target's embeddings of every view (the online ones, detached, with a
shared encoder), gathered over ranks, instance-major, with their labels — are pushed
after the optimiser step, so every rank holds the same queue; it is part of the arm's
checkpoint.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from spacl.engine.distributed import all_gather_nograd, all_gather_with_grad, is_distributed
from spacl.losses.registry import ObjectiveSpec
from spacl.mining.queue import NegativeQueue
from spacl.tasks.image.objectives import accepts_targets

__all__ = ["Arm", "NonFiniteLossError", "Precision"]


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN/inf loss or embedding; the run stops without saving."""


@dataclass(frozen=True)
class Precision:
    """Parameter dtype and autocast settings of a run."""

    param_dtype: torch.dtype = torch.float32
    autocast_dtype: torch.dtype | None = None  # bf16 / fp16 on CUDA
    device_type: str = "cpu"

    @property
    def uses_scaler(self) -> bool:
        return self.autocast_dtype == torch.float16

    @property
    def loss_dtype(self) -> torch.dtype:
        return torch.float64 if self.param_dtype == torch.float64 else torch.float32

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.autocast_dtype)


def _check_finite(x: Tensor, what: str, arm: str, step: int) -> None:
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise NonFiniteLossError(
            f"arm {arm!r}: {bad} non-finite value(s) in the {what} at step {step}"
        )


class Arm:
    """Everything one model needs to train (see module docstring).

    Args:
        name: arm name (``"main"`` for a single-model run).
        spec, objective, use_labels: from :func:`spacl.tasks.image.objectives.build_objective`.
        model: the online ``ContrastiveModel`` (unwrapped).
        wrapped: ``model`` or its ``DistributedDataParallel`` wrapper (used for the
            forward passes with gradient).
        target: ``spacl.models.EMATarget`` following ``model``.
        optimizer, scheduler, scaler: the optimiser, an ``LRScheduler`` stepped once per
            optimiser step, and a ``torch.amp.GradScaler`` (disabled unless fp16).
        precision: dtypes and autocast.
        grad_clip: max gradient norm, or ``None``.
        momentum_schedule: ``constant`` or ``cosine`` (BYOL) for the EMA momentum.
        total_steps: steps of the whole run (for the cosine momentum schedule).
        queue: the arm's negative queue (``objective.queue_size``), or ``None``.
    """

    def __init__(
        self,
        name: str,
        spec: ObjectiveSpec,
        objective: nn.Module,
        use_labels: bool,
        model: nn.Module,
        wrapped: nn.Module,
        target: Any,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler,
        precision: Precision,
        *,
        grad_clip: float | None = None,
        momentum_schedule: str = "constant",
        total_steps: int = 1,
        queue: NegativeQueue | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.objective = objective
        self.use_labels = use_labels
        self.model = model
        self.wrapped = wrapped
        self.target = target
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scaler = scaler
        self.precision = precision
        self.grad_clip = grad_clip
        self.momentum_schedule = momentum_schedule
        self.total_steps = max(1, int(total_steps))
        self.queue = queue
        self._to_push: tuple[Tensor, Tensor | None] | None = None
        self._use_targets = (
            (not target.shared) and spec.step == "views" and accepts_targets(objective)
        )

    # ------------------------------------------------------------------ forward
    def _project(self, net: nn.Module, x: Tensor) -> Tensor:
        out = net(x)
        z = out.projections if hasattr(out, "projections") else out
        return z.to(self.precision.loss_dtype)

    def compute_loss(self, views: Tensor, labels: Tensor | None, step: int = 0) -> Tensor:
        """The global-batch loss of one step (``views [b, V, ...]`` of this rank)."""
        b, v = int(views.shape[0]), int(views.shape[1])
        flat = views.reshape(b * v, *views.shape[2:])
        y = all_gather_nograd(labels) if (labels is not None and self.use_labels) else None
        if self.spec.step == "spacl":
            return self._spacl_loss(views, y, step)
        with self.precision.autocast():
            z = self._project(self.wrapped, flat).reshape(b, v, -1)
        _check_finite(z, "embeddings", self.name, step)
        kwargs: dict[str, Any] = {"labels": y}
        if self._use_targets:
            with torch.no_grad(), self.precision.autocast():
                t = self._project(self.target.module, flat).reshape(b, v, -1)
            kwargs["targets"] = all_gather_nograd(t)
        online = all_gather_with_grad(z)
        kwargs.update(self._queue_kwargs(kwargs.get("targets", online), y))
        loss: Tensor = self.objective(online, **kwargs)
        return loss

    def _queue_kwargs(self, candidates: Tensor, y: Tensor | None) -> dict[str, Any]:
        """The queue's rows for the loss; remember this step's ``candidates [B, V, d]``
        (global batch) to push after the optimiser step (module docstring)."""
        if self.queue is None:
            return {}
        b, v = int(candidates.shape[0]), int(candidates.shape[1])
        rows = candidates.detach().reshape(b * v, -1)
        labels = None if y is None else y.repeat_interleave(v)
        self._to_push = (rows, labels)
        return self.queue.loss_kwargs(with_labels=y is not None)

    def _spacl_loss(self, views: Tensor, y: Tensor | None, step: int) -> Tensor:
        if getattr(self.objective, "online", "anchor_view") == "all_views":
            return self._spacl_all_views(views, y, step)
        b, v = int(views.shape[0]), int(views.shape[1])
        flat = views.reshape(b * v, *views.shape[2:])
        with torch.no_grad(), self.precision.autocast():
            pool = self._project(self.target.module, flat).reshape(b, v, -1)
        _check_finite(pool, "target embeddings", self.name, step)
        pool_all = all_gather_nograd(pool)
        anchor_all = self.objective.choose_anchor(pool_all)  # type: ignore[operator]
        rank = torch.distributed.get_rank() if is_distributed() else 0
        index = anchor_all[rank * b : (rank + 1) * b].to(views.device)
        anchor_views = views[torch.arange(b, device=views.device), index]
        with self.precision.autocast():
            anchors = self._project(self.wrapped, anchor_views)
        _check_finite(anchors, "anchor embeddings", self.name, step)
        loss: Tensor = self.objective(
            all_gather_with_grad(anchors),
            pool_all,
            labels=y,
            anchor_index=anchor_all,
            **self._queue_kwargs(pool_all, y),
        )
        return loss

    def _spacl_all_views(self, views: Tensor, y: Tensor | None, step: int) -> Tensor:
        """SPACL fed one online pass of every view (module docstring, ``"all_views"``)."""
        b, v = int(views.shape[0]), int(views.shape[1])
        flat = views.reshape(b * v, *views.shape[2:])
        with self.precision.autocast():
            z = self._project(self.wrapped, flat).reshape(b, v, -1)
        _check_finite(z, "embeddings", self.name, step)
        online = all_gather_with_grad(z)
        if self.target.shared:
            pool = online
        else:
            with torch.no_grad(), self.precision.autocast():
                t = self._project(self.target.module, flat).reshape(b, v, -1)
            _check_finite(t, "target embeddings", self.name, step)
            pool = all_gather_nograd(t)
        loss: Tensor = self.objective(online, pool, labels=y, **self._queue_kwargs(pool, y))
        return loss

    # ----------------------------------------------------------------- training
    def parameters(self) -> Iterator[nn.Parameter]:
        return (p for p in self.model.parameters() if p.requires_grad)

    def forward_backward(self, views: Tensor, labels: Tensor | None, step: int = 0) -> Tensor:
        """Zero the gradients, compute the loss, check it, back-propagate; return the loss."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.compute_loss(views, labels, step)
        value = loss.detach()
        if not bool(torch.isfinite(value)):
            raise NonFiniteLossError(f"arm {self.name!r}: loss is {float(value)} at step {step}")
        self.scaler.scale(loss).backward()
        return value

    def train_step(self, views: Tensor, labels: Tensor | None, step: int) -> float:
        """One optimiser step on this rank's batch; returns the (global) loss value.

        Raises :class:`NonFiniteLossError` before touching the weights if the loss or an
        embedding is NaN/inf.
        """
        value = self.forward_backward(views, labels, step)
        if self.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(list(self.parameters()), self.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.target.update(self.momentum_at(step + 1))
        if self.queue is not None and self._to_push is not None:
            self.queue.push(*self._to_push)
            self._to_push = None
        after = getattr(self.objective, "after_optimizer_step", None)
        if callable(after):
            after()
        return float(value)

    def momentum_at(self, step: int) -> float:
        """EMA momentum after ``step`` optimiser steps (constant or BYOL cosine)."""
        base = float(self.target.momentum)
        if self.target.shared or self.momentum_schedule == "constant":
            return base
        return (
            1.0
            - (1.0 - base)
            * (math.cos(math.pi * min(step, self.total_steps) / self.total_steps) + 1)
            / 2
        )

    def objective_stats(self) -> dict[str, float]:
        """Scalars the objective reports about its last call (SPACL: ``spacl/*``)."""
        last = getattr(self.objective, "last", None)
        log_dict = getattr(last, "log_dict", None)
        return dict(log_dict()) if callable(log_dict) else {}

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    # -------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "target": self.target.state_dict(),
            "objective": self.objective.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            **({} if self.queue is None else {"queue": self.queue.state_dict()}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        self.objective.load_state_dict(state["objective"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.queue is not None:
            if "queue" not in state:
                raise ValueError(
                    f"arm {self.name!r}: the checkpoint has no negative queue but the config "
                    "sets objective.queue_size"
                )
            self.queue.load_state_dict(state["queue"])
