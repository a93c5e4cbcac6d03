"""The fine-tuned encoder as a task of ``spacl train`` (issue 18, item 2).

A text recipe with ``finetune.trainable_layers: L > 0`` (the shipped
``text/stackoverflow_finetune_{spacl,spacl_selected,supcon,ce}``) runs
:func:`train_finetuned` instead of the frozen-encoder head of :mod:`spacl.tasks.text`:

1. the open-intent split of ``data.name`` at ``data.known_ratio`` (any open-intent
   dataset: stackoverflow, banking, oos...), as the frozen task;
2. the bottom ``6 - L`` layers of all-MiniLM-L6-v2 run once per text (their token states
   are cached in memory, :func:`~spacl.tasks.text_finetune.bottom_states`); the top ``L``
   layers are fine-tuned (:func:`~spacl.tasks.text_finetune.finetune`: Adam at
   ``optim.lr``, ``train.batch_size`` instances x ``views.num_views`` dropout views,
   ``train.epochs`` epochs, class-balanced batches of ``finetune.samples_per_class``
   per class, the objective's loss on every view);
   The whole fine-tune runs on ``train.device`` (``auto``: CUDA when available; the
   shipped recipes say ``cpu``): the bottom pass, the top layers, the loss; the cached
   states and the embeddings stay in host memory.
3. features = the fine-tuned encoder's L2-normalised embeddings (no projection head);
   the open classifier of ``ood.method`` (default: the fixed rule, ``quantile`` / ``class``
   / q 0.95), the other rules and ADB on test (not used for selection), as the frozen task.

CPU budget of the shipped recipes (a budget, not the paper's full fine-tune): the top 2
of 6 layers, 3 epochs (1,125 steps at StackOverflow 25% known: about 5-6 minutes on one
idle core).

``finetune.select_epoch``: ``last`` (default: the weights after the last epoch) or
``dev_accuracy`` (after every epoch the known-class dev accuracy of the nearest-centre
classifier, :func:`dev_accuracy_score`; the best epoch's weights are kept, the earliest
on ties: ADB's early-stopping criterion without a patience).  The run's summary then
holds ``epoch_dev_accuracy`` and ``selected_epoch``.  The auxiliary fine-tunes of the
rules that simulate open classes keep their last epoch.

The run directory holds what a later prediction needs (:mod:`spacl.tasks.text_run`):
the trained top layers' weights (``encoder.top``, with ``trainable_layers``), the class
centres, the thresholds and the class names.  ``spacl predict`` / ``spacl eval`` rebuild
the encoder from the frozen model's bottom layers and these weights.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from spacl.data.text import OpenIntentSplit
from spacl.evaluate.ood import OpenClassifier
from spacl.schema import resolve_device
from spacl.tasks.text_decision import run_metrics
from spacl.tasks.text_detector import (
    decide,
    ood_summary,
    open_text_run,
    split_of,
    write_detector_run,
)
from spacl.tasks.text_finetune import (
    FinetuneSettings,
    TopLayers,
    embed_states,
    finetune,
)
from spacl.tasks.text_states import Backbone, FinetunedEncoder, load_backbone

_logger = logging.getLogger(__name__)

__all__ = [
    "Backbone",
    "FinetunedEncoder",
    "dev_accuracy_score",
    "load_backbone",
    "settings_of",
    "train_finetuned",
]


def settings_of(cfg: DictConfig, objective: str | None = None) -> FinetuneSettings:
    """The fine-tuning settings of a text recipe (``objective`` replaces its name)."""
    return FinetuneSettings(
        objective or str(cfg.objective.name),
        epochs=int(cfg.train.epochs),
        batch_size=int(cfg.train.batch_size),
        lr=float(cfg.optim.lr),
        temperature=float(cfg.objective.temperature),
        num_views=int(cfg.views.num_views),
        seed=int(cfg.train.seed),
        max_steps=cfg.finetune.max_steps,
        samples_per_class=cfg.finetune.samples_per_class,
        params=dict(cfg.objective.params or {}),
    )


def train_finetuned(
    cfg: DictConfig,
    *,
    backbone: Backbone | None = None,
    split: OpenIntentSplit | None = None,
    log: Callable[[str], None] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """One fine-tuned open-intent run (module docstring); its summary, as ``train_ood``'s
    (plus ``steps``).  ``backbone`` replaces all-MiniLM-L6-v2 (tests), ``split`` the data."""
    from spacl.evaluate.ood import reject_all_metrics

    say = log or _logger.info
    run, stored = open_text_run(cfg, run_dir, resume, say)
    if stored is not None:
        return stored
    start = time.perf_counter()
    split = split or split_of(cfg)
    backbone = backbone or load_backbone(str(resolve_device(str(cfg.train.device))))
    layers = int(cfg.finetune.trainable_layers)
    initial = backbone.top(layers)
    states = backbone.states(split.train_texts + split.dev_texts + split.test_texts, layers)
    settings = settings_of(cfg)
    steps = [0]

    def tick(step: int, loss: float) -> None:
        steps[0] += 1
        if run is not None and steps[0] % 100 == 0:
            run.log({"kind": "step", "step": steps[0], "loss": loss})

    def aux(x: Tensor, y: Tensor, n: int) -> nn.Module:
        return finetune(initial, [states[int(i)] for i in x], y, n, settings, on_step=tick)[0]

    def project(top: nn.Module, x: Tensor) -> Tensor:
        assert isinstance(top, TopLayers)
        return embed_states(top, [states[int(i)] for i in x]).double()

    k, n = split.num_known, len(split.train_texts)
    b = n + len(split.dev_texts)
    top, losses, selection = _main_finetune(cfg, initial, states, split, settings, tick)
    main_steps = steps[0]
    features = tuple(
        embed_states(top, part).double() for part in (states[:n], states[n:b], states[b:])
    )
    idx = (torch.arange(n), torch.arange(n, b))  # the train / dev texts' cached states
    clf, extra = decide(cfg, split, idx, features, aux, project)  # type: ignore[arg-type]
    dev_closed = (clf.distances(features[1]).argmin(1) == split.dev_labels).double().mean()
    test = run_metrics(clf, features[2], split.test_labels, k)
    extra = {**extra, "losses": losses, "seconds": time.perf_counter() - start}
    extra.update(steps=main_steps, aux_steps=steps[0] - main_steps)
    extra.update(selection)
    extra["reject_all"] = reject_all_metrics(split.test_labels, k)
    dev_acc = 100.0 * float(dev_closed)
    summary = ood_summary(cfg, split, test, dev_acc, extra, 0, say)  # no text cached
    if run is not None:
        summary["run_dir"] = str(run.path)
        write_detector_run(run, _model_state(top, clf), clf, split, summary)
    return summary


def _main_finetune(
    cfg: DictConfig,
    initial: TopLayers,
    states: Sequence[Tensor],
    split: OpenIntentSplit,
    settings: FinetuneSettings,
    tick: Callable[[int, float], None],
) -> tuple[TopLayers, list[float], dict[str, Any]]:
    """The run's fine-tune on the train texts (``states`` = train, dev, test in order):
    ``(top, epoch losses, selection)``; under ``finetune.select_epoch=dev_accuracy`` the
    best epoch's weights, ``selection`` = ``epoch_dev_accuracy`` and ``selected_epoch``
    (1-based), else ``{}``."""
    k, n = split.num_known, len(split.train_texts)
    scores: list[float] = []
    score = None
    if str(cfg.finetune.select_epoch) == "dev_accuracy":
        dev = states[n : n + len(split.dev_texts)]
        score = dev_accuracy_score(states[:n], split.train_labels, dev, split.dev_labels, k, scores)
    top, losses = finetune(
        initial, states[:n], split.train_labels, k, settings, on_step=tick, score=score
    )
    if not scores:
        return top, losses, {}
    chosen = scores.index(max(scores)) + 1
    return top, losses, {"epoch_dev_accuracy": scores, "selected_epoch": chosen}


def dev_accuracy_score(
    train_states: Sequence[Tensor],
    train_labels: Tensor,
    dev_states: Sequence[Tensor],
    dev_labels: Tensor,
    num_known: int,
    record: list[float] | None = None,
) -> Callable[[TopLayers], float]:
    """The epoch score of ``finetune.select_epoch=dev_accuracy``: known-class dev accuracy.

    ``score(top)`` embeds the train and dev texts with ``top`` (eval mode), takes the
    class centres of the train embeddings (:func:`spacl.evaluate.ood.class_centres`, the
    open classifier's) and returns the percentage of dev texts whose nearest centre
    (cosine) is their class: the closed-set accuracy ADB's protocol early-stops on
    (Zhang et al., 2021), read from the nearest-centre classifier every method here
    shares.  Known classes only: no open-set example is seen.  Each value is appended
    to ``record``.
    """
    from spacl.evaluate.ood import class_centres

    def score(top: TopLayers) -> float:
        train_z = embed_states(top, train_states).double()
        dev_z = embed_states(top, dev_states).double()
        centres = class_centres(train_z, train_labels, num_known)
        nearest = (dev_z @ centres.T).argmax(1)  # unit rows: largest cosine
        value = 100.0 * float((nearest == dev_labels).double().mean())
        if record is not None:
            record.append(value)
        return value

    return score


def _model_state(top: TopLayers, clf: OpenClassifier) -> dict[str, Any]:
    """The checkpoint's model part: no head, the fine-tuned top layers (``encoder``)."""
    encoder = {
        "trainable_layers": len(top.layers),
        "top": {k: v.detach().cpu() for k, v in top.state_dict().items()},
    }
    return {"head": {}, "in_dim": int(clf.centres.shape[1]), "encoder": encoder}
