"""What the studies' training loops share: seeds, threads, the engine arm of a study and
the same-batch loop.

The verdict rules are in :mod:`spacl.studies.verdicts` (the statistics beneath them in
:mod:`spacl.studies.stats`), the claim-table runner in :mod:`spacl.studies.claim_table`
and the report writer in :mod:`spacl.studies.report`; the studies import each from its
own module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.engine.device import threads as engine_threads
from spacl.engine.loop import LoopBody, LoopPlan, TrainLoop

__all__ = [
    "ModelSteps",
    "SharedBatchSteps",
    "fine_labels",
    "make_arm",
    "probe_metrics",
    "run_steps",
    "seed_list",
    "study_threads",
    "train_shared",
]


def seed_list(n: int) -> list[int]:
    """Seeds ``0 .. n-1`` (``ValueError`` unless ``n >= 1``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"--seeds must be an integer >= 1, got {n!r}")
    return list(range(n))


@contextmanager
def study_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` threads (``None``: unchanged; :func:`spacl.engine.device.threads`),
    the previous count restored after.

    **Decision**: the studies default to one thread - on a small machine shared with
    other processes, oversubscribed BLAS threads made steps 10x slower in our
    measurements, and one thread keeps the numbers bit-for-bit reproducible.
    """
    if threads is not None:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"--threads must be an integer >= 1, got {threads!r}")
    with engine_threads(threads):  # the engine's one setter of the thread count
        yield


# ------------------------------------------------------------------------ shared training
def make_arm(
    name: str,
    objective: str,
    loss: nn.Module,
    model: nn.Module,
    *,
    lr: float,
    use_labels: bool,
    optimizer: str = "adam",
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    lr_lambda: Callable[[int], float] | None = None,
    target_momentum: float = 0.0,
    queue_size: int = 0,
    queue_dim: int = 0,
) -> Any:
    """A :class:`spacl.tasks.image.Arm` (fp32, CPU) for a study loop.

    The target is the shared encoder (``target_momentum=0``) or its EMA copy.

    ``objective`` names the engine's registry entry (``"spacl"`` selects the anchor +
    pool step, ``"cross_entropy"`` a classifier head the caller has put on ``model``);
    ``optimizer`` is ``"adam"`` or ``"sgd"`` (with ``momentum``); ``lr_lambda`` an
    optional per-step multiplier (constant by default); ``queue_size > 0`` gives the arm a
    negative queue of that many past target embeddings of width ``queue_dim`` (the
    engine pushes every view of every instance, with labels when the arm uses them).
    """
    from spacl.engine.optim import build_optimizer, build_scheduler
    from spacl.models import EMATarget
    from spacl.tasks.image import OBJECTIVES, Arm, Precision

    check_choice(objective, "objective", sorted(OBJECTIVES))
    check_choice(optimizer, "optimizer", ("adam", "sgd"))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = build_optimizer(
        params, optimizer, lr, weight_decay=weight_decay, momentum=momentum, nesterov=False
    )
    schedule = build_scheduler(opt, lr_lambda or _constant)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    queue = None
    if queue_size > 0:
        from spacl.mining.queue import NegativeQueue

        queue = NegativeQueue(int(queue_size), int(queue_dim))
    return Arm(
        name,
        OBJECTIVES[objective],
        loss,
        use_labels,
        model,
        model,
        EMATarget(model, target_momentum),
        opt,
        schedule,
        scaler,
        Precision(),
        queue=queue,
    )


def _constant(step: int) -> float:
    """The constant learning-rate multiplier (a study arm's default schedule)."""
    return 1.0


class SharedBatchSteps(LoopBody):
    """The studies' body in the engine's loop: every arm's step on the same batch.

    Shared randomness (SPEC §3): each batch of ``epoch_batches(epoch)`` is drawn once and
    handed, as the same tensor, to every arm's ``train_step(views, labels, step)``;
    ``labels`` is ``label_fn(batch)``.  ``arm_step(key, arm, views, labels, step)``
    replaces the plain ``arm.train_step`` call (a study that times or traces each arm);
    ``on_epoch(e)`` is called after every epoch, ``e`` counting from 1.
    """

    def __init__(
        self,
        arms: Mapping[Any, Any],
        epoch_batches: Callable[[int], Iterable[Any]],
        label_fn: Callable[[Any], Tensor],
        *,
        on_epoch: Callable[[int], None] | None = None,
        arm_step: Callable[[Any, Any, Tensor, Tensor, int], None] | None = None,
    ) -> None:
        self.arms = dict(arms)
        self.epoch_batches = epoch_batches
        self.label_fn = label_fn
        self.on_epoch = on_epoch
        self.arm_step = arm_step

    def batches(self, epoch: int, start: int) -> Iterable[Any]:
        return self.epoch_batches(epoch)  # studies do not resume: start is 0

    def step(self, batch: Any, loop: TrainLoop) -> dict[str, float]:
        labels, step = self.label_fn(batch), loop.progress.global_step
        for key, arm in self.arms.items():
            if self.arm_step is None:
                arm.train_step(batch.views, labels, step)
            else:
                self.arm_step(key, arm, batch.views, labels, step)
        return {}

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        if self.on_epoch is not None:
            self.on_epoch(epoch + 1)
        return {}


class ModelSteps(LoopBody):
    """One model, one optimiser, one loss per batch (``loss_of(batch)``), in the engine's
    loop: a study's single encoder; ``on_epoch(e)`` after every epoch, from 1."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        epoch_batches: Callable[[int], Iterable[Any]],
        loss_of: Callable[[Any], Tensor],
        on_epoch: Callable[[int], None] | None = None,
    ) -> None:
        self.optimizer = optimizer
        self.epoch_batches = epoch_batches
        self.loss_of = loss_of
        self.on_epoch = on_epoch

    def batches(self, epoch: int, start: int) -> Iterable[Any]:
        return self.epoch_batches(epoch)

    def step(self, batch: Any, loop: TrainLoop) -> dict[str, float]:
        loss = self.loss_of(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {}

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        if self.on_epoch is not None:
            self.on_epoch(epoch + 1)
        return {}


def run_steps(body: LoopBody, epochs: int, max_steps: int | None = None) -> int:
    """Run ``body`` for ``epochs`` in the engine's loop (:class:`TrainLoop`), stopping
    after ``max_steps`` steps if given (the last, partial epoch still closed); return the
    step count."""
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 1):
        raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
    plan = LoopPlan(epochs=epochs, max_steps=max_steps, close_partial_epoch=True)
    return TrainLoop(body, plan).run().progress.global_step


def train_shared(
    arms: Mapping[str, Any],
    stream: Any,
    epochs: int,
    on_epoch: Callable[[int], None] | None = None,
    label_fn: Callable[[Any], Tensor] | None = None,
    max_steps: int | None = None,
) -> int:
    """Train every arm on the SAME batches (drawn once per step); return the step count.

    Shared randomness (SPEC §3): each batch of ``stream`` (a :class:`spacl.data.ViewStream`:
    instances and augmentation tensors) is drawn once and handed, as the same tensor, to
    every arm's ``train_step(views, labels, step)``; ``labels`` is ``label_fn(batch)``
    (default: the fine labels).  The engine's loop runs it (:class:`SharedBatchSteps`).

    ``on_epoch(e)`` is called before training (``e = 0``) and after every epoch.
    ``max_steps`` stops after that many steps (``epochs`` is then an upper bound; the
    last, partial epoch still gets its ``on_epoch`` call).
    """
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 1):
        raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
    if on_epoch is not None:
        on_epoch(0)
    body = SharedBatchSteps(arms, stream.epoch_batches, label_fn or fine_labels, on_epoch=on_epoch)
    return run_steps(body, epochs, max_steps)


def fine_labels(batch: Any) -> Tensor:
    """A batch's fine labels (the default ``label_fn`` of :func:`train_shared`)."""
    return batch.labels


def probe_metrics(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    knn_k: int = 20,
    linear: bool = True,
) -> dict[str, float]:
    """Top-1 test accuracies (in ``[0, 1]``) of the frozen-feature classifiers.

    ``ncc`` nearest class centre (Euclidean), ``knn`` weighted kNN (cosine, ``t = 0.1``)
    and ``linear`` the L-BFGS logistic-regression probe of :mod:`spacl.evaluate`
    (``linear=False`` leaves it out: the costliest of the three).
    """
    from spacl.evaluate import knn_accuracy, linear_probe, nearest_centre_accuracy

    ncc = nearest_centre_accuracy(train_features, train_labels, test_features, test_labels)
    knn = knn_accuracy(train_features, train_labels, test_features, test_labels, k=knn_k)
    if not linear:
        return {"ncc": ncc, "knn": knn}
    probe = linear_probe(train_features, train_labels, test_features, test_labels, max_iter=200)
    return {"ncc": ncc, "knn": knn, "linear": probe.test_accuracy}
