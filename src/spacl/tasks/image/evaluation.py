"""The image task's probe suite: frozen features of an arm, the online evaluation at the
end of an epoch, the final one at the end of a run.

:class:`ProbeSuite` holds what evaluation reads (the ``eval`` section, the run's data,
the device, where records and lines go) and is given the arms and the step to evaluate;
:class:`~spacl.tasks.image.trainer.Trainer` owns one and never gets called back.  The
online evaluation is the loop's validation through the engine's hook
(:class:`spacl.engine.evaluation.Evaluator`, its scoring function
:meth:`ProbeSuite.online`).  Each
arm is evaluated under the engine's :func:`~spacl.engine.evaluation.evaluating` (eval
mode, forked RNG), and only the main process evaluates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spacl.data import generator_for
from spacl.engine.evaluation import evaluating
from spacl.evaluate import evaluate_representation, extract_features
from spacl.evaluate.ncc import class_centres
from spacl.tasks.image.arm import Arm
from spacl.tasks.image.data import RunData

__all__ = ["ProbeSuite"]


@dataclass
class ProbeSuite:
    """The evaluation of a run's arms.

    Args:
        eval_cfg: the ``eval`` section (features, batch size, kNN, probe, geometry).
        seed: ``train.seed`` (the seeded subset of the online feature bank).
        data: the run's data (train / test evaluation sets, transform, class count).
        device: where kNN, the probe and geometry run (CUDA features stay there).
        log: receives one record per arm and evaluation (``metrics.jsonl``).
        say: receives the online evaluation's line per arm.
        is_main: only the main process evaluates.
        barrier: waits for every process after an evaluation (a no-op on one).
    """

    eval_cfg: Any
    seed: int
    data: RunData
    device: torch.device
    log: Callable[[dict[str, Any]], None]
    say: Callable[[str], None]
    is_main: bool = True
    barrier: Callable[[], None] = lambda: None

    def features(self, arm: Arm, *, bank_limit: int | None = None) -> tuple[torch.Tensor, ...]:
        """Frozen ``(train_f, train_y, test_f, test_y)`` of ``arm`` (fine labels); the
        training set cut to a seeded ``bank_limit`` examples when it is larger."""
        e = self.eval_cfg
        train = self.data.train_eval
        if bank_limit is not None and hasattr(train, "inputs") and len(train) > bank_limit:
            gen = generator_for(self.seed, "eval-bank")
            idx = torch.randperm(len(train), generator=gen)[:bank_limit].sort().values
            train = train[idx.to(train.inputs.device)]
        kw: dict[str, Any] = {
            "which": "features" if e.features == "backbone" else e.features,  # one output
            "batch_size": int(e.batch_size),
            "transform": self.data.eval_transform,
        }
        tr_f, tr_y = extract_features(arm.model, train, **kw)
        te_f, te_y = extract_features(arm.model, self.data.test_eval, **kw)
        if self.device.type == "cuda":  # kNN / probe / geometry on the GPU
            dev = self.device
            return tr_f.to(dev), tr_y.to(dev), te_f.to(dev), te_y.to(dev)
        return tr_f, tr_y, te_f, te_y

    def _metrics(self, features: tuple[torch.Tensor, ...], **options: Any) -> dict[str, float]:
        """:func:`~spacl.evaluate.evaluate_representation` of ``(train_f, train_y,
        test_f, test_y)`` with the run's kNN, geometry and class count (``options``: the
        probe's)."""
        e = self.eval_cfg
        return evaluate_representation(
            *features,
            knn_k=int(e.knn_k),
            knn_t=float(e.knn_t),
            geometry=bool(e.geometry),
            num_classes=self.data.num_classes,
            **options,
        )

    def online(self, arms: Sequence[Arm], epoch: int, step: int) -> dict[str, float]:
        """kNN, NCC and geometry of every arm (main process; no linear probe), logged;
        returned as ``{"<arm>/<metric>": value}`` (empty off the main process)."""
        scores: dict[str, float] = {}
        if self.is_main:
            for arm in arms:
                with evaluating(arm.model, autograd=True):  # the probe trains, here or below
                    features = self.features(arm, bank_limit=self.eval_cfg.max_train_samples)
                    metrics = self._metrics(features, linear=False)
                record = {"kind": "eval", "arm": arm.name, "epoch": epoch, "step": step}
                self.log({**record, **metrics})
                scores.update({f"{arm.name}/{k}": v for k, v in metrics.items()})
                self.say(
                    f"[{arm.name}] epoch {epoch + 1}: kNN {100 * metrics['knn_accuracy']:.2f}%  "
                    f"NCC {100 * metrics['ncc_accuracy']:.2f}%"
                )
        self.barrier()
        return scores

    def final(
        self, arms: Sequence[Arm], epoch: int, step: int
    ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
        """Linear probe, kNN, NCC and geometry of every arm (main process).

        Returns ``(metrics per arm, centres per arm)``: each arm's nearest-class-centre
        classifier (the float64 training means of ``eval.features``), which
        :meth:`Trainer.write_centres` stores for ``spacl predict`` (empty off the main
        process).
        """
        results: dict[str, dict[str, float]] = {}
        classifiers: dict[str, dict[str, Any]] = {}
        if self.is_main:
            e = self.eval_cfg
            for arm in arms:
                with evaluating(arm.model, autograd=True):
                    tr_f, tr_y, te_f, te_y = self.features(arm)
                    classes, centres = class_centres(tr_f, tr_y)
                    classifiers[arm.name] = {
                        "classes": classes.cpu(),
                        "centres": centres.cpu(),
                        "features": str(e.features),
                    }
                    metrics = self._metrics(
                        (tr_f, tr_y, te_f, te_y),
                        linear=bool(e.linear_probe),
                        probe_weight_decay=float(e.probe_weight_decay),
                        probe_max_iter=int(e.probe_max_iter),
                    )
                results[arm.name] = metrics
                record = {"kind": "final", "arm": arm.name, "epoch": epoch, "step": step}
                self.log({**record, **metrics})
        self.barrier()
        return results, classifiers
