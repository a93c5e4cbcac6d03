"""The trainer's evaluation: frozen features of an arm, the online evaluation at the end
of an epoch and the final one at the end of a run.

:class:`~spacl.engine.trainer.Trainer` calls these through its methods
(:meth:`~spacl.engine.trainer.Trainer.features`, ``online_evaluation``,
``final_evaluation``).  Each runs under ``fork_rng`` so it never moves the training RNG
states (resume stays exact), and only the main process evaluates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from spacl.data import generator_for
from spacl.engine.arm import Arm
from spacl.evaluate import evaluate_representation, extract_features
from spacl.evaluate.ncc import class_centres

if TYPE_CHECKING:
    from spacl.engine.trainer import Trainer

__all__ = ["arm_features", "evaluate_final", "evaluate_online"]


def arm_features(
    trainer: Trainer, arm: Arm, *, bank_limit: int | None = None
) -> tuple[torch.Tensor, ...]:
    """Frozen ``(train_f, train_y, test_f, test_y)`` of ``arm`` (fine labels)."""
    e = trainer.cfg.eval
    train = trainer.data.train_eval
    if bank_limit is not None and hasattr(train, "inputs") and len(train) > bank_limit:
        gen = generator_for(int(trainer.cfg.train.seed), "eval-bank")
        idx = torch.randperm(len(train), generator=gen)[:bank_limit].sort().values
        train = train[idx.to(train.inputs.device)]
    kw: dict[str, Any] = {
        "which": e.features,
        "batch_size": int(e.batch_size),
        "transform": trainer.data.eval_transform,
    }
    tr_f, tr_y = extract_features(arm.model, train, **kw)
    te_f, te_y = extract_features(arm.model, trainer.data.test_eval, **kw)
    if trainer.ctx.device.type == "cuda":  # kNN / probe / geometry on the GPU
        dev = trainer.ctx.device
        return tr_f.to(dev), tr_y.to(dev), te_f.to(dev), te_y.to(dev)
    return tr_f, tr_y, te_f, te_y


def _metrics(
    trainer: Trainer, features: tuple[torch.Tensor, ...], **options: Any
) -> dict[str, float]:
    """:func:`~spacl.evaluate.evaluate_representation` of ``(train_f, train_y, test_f,
    test_y)`` with the run's kNN, geometry and class count (``options``: the probe's)."""
    e = trainer.cfg.eval
    return evaluate_representation(
        *features,
        knn_k=int(e.knn_k),
        knn_t=float(e.knn_t),
        geometry=bool(e.geometry),
        num_classes=trainer.data.num_classes,
        **options,
    )


def evaluate_online(trainer: Trainer, epoch: int) -> None:
    """kNN, NCC and geometry of every arm (main process; no linear probe)."""
    if trainer.ctx.is_main:
        e = trainer.cfg.eval
        for arm in trainer.arms:
            with torch.random.fork_rng(devices=[]):
                features = trainer.features(arm, bank_limit=e.max_train_samples)
                metrics = _metrics(trainer, features, linear=False)
            trainer.logger.log(
                {
                    "kind": "eval",
                    "arm": arm.name,
                    "epoch": epoch,
                    "step": trainer.progress.global_step,
                    **metrics,
                }
            )
            trainer._say(
                f"[{arm.name}] epoch {epoch + 1}: kNN {100 * metrics['knn_accuracy']:.2f}%  "
                f"NCC {100 * metrics['ncc_accuracy']:.2f}%"
            )
    trainer.ctx.barrier()


def evaluate_final(
    trainer: Trainer,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """Linear probe, kNN, NCC and geometry of every arm (main process).

    Returns ``(metrics per arm, centres per arm)``: each arm's nearest-class-centre
    classifier (the float64 training means of ``eval.features``), which
    :meth:`Trainer.write_centres` stores for ``spacl predict`` (empty off the main
    process).
    """
    results: dict[str, dict[str, float]] = {}
    classifiers: dict[str, dict[str, Any]] = {}
    if trainer.ctx.is_main:
        e = trainer.cfg.eval
        for arm in trainer.arms:
            with torch.random.fork_rng(devices=[]):
                tr_f, tr_y, te_f, te_y = trainer.features(arm)
                classes, centres = class_centres(tr_f, tr_y)
                classifiers[arm.name] = {
                    "classes": classes.cpu(),
                    "centres": centres.cpu(),
                    "features": str(e.features),
                }
                metrics = _metrics(
                    trainer,
                    (tr_f, tr_y, te_f, te_y),
                    linear=bool(e.linear_probe),
                    probe_weight_decay=float(e.probe_weight_decay),
                    probe_max_iter=int(e.probe_max_iter),
                )
            results[arm.name] = metrics
            trainer.logger.log(
                {
                    "kind": "final",
                    "arm": arm.name,
                    "epoch": trainer.progress.epoch,
                    "step": trainer.progress.global_step,
                    **metrics,
                }
            )
    trainer.ctx.barrier()
    return results, classifiers
