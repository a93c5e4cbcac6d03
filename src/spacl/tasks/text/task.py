"""Open-intent detection as a task: a head on a frozen encoder, or the encoder fine-tuned.

The schema (:class:`OODConfig`, :func:`ood_config`) is in :mod:`spacl.tasks.text.config`.
:func:`train_ood` runs a text recipe: ``detector.method`` set: the ADB / DA-ADB detector
(:func:`spacl.tasks.text.adb_run.train_adb_run`); ``finetune.trainable_layers > 0``: the
encoder's top layers fine-tuned (:func:`train_finetuned`, below); otherwise the frozen
encoder and a trained head (the head itself: :mod:`spacl.tasks.text.frozen`).

Pipeline of one frozen-encoder run:

1. read the intent TSVs and apply the open-intent protocol
   (:func:`spacl.data.text.open_intent_split`: seeded known classes, unknown classes
   removed from train/dev and mapped to one OOD label in test);
2. embed every text once with the frozen encoder (all-MiniLM-L6-v2 by default),
   through the on-disk :class:`~spacl.models.text.EmbeddingCache`;
3. train a projection head ``h`` on the cached embeddings with one objective:

   - ``spacl``: :class:`spacl.losses.spacl.SPACLLoss` in supervised mode
     (the loss's defaults; the recipes set ``positive_pool: class``) on a candidate
     pool of ``V`` views per example made by :class:`~spacl.models.text.FeatureViews`
     (view 0 the embedding, the others dropout/noise augmentations: **Decision**, a
     frozen encoder has no input augmentation);
   - ``supcon``: :class:`spacl.losses.SupConLoss` on the same views;
   - ``cross_entropy``: a linear classifier on ``h``, cross-entropy on every view;
   - ``frozen``: no training, ``h`` = identity (the floor: raw MiniLM embeddings);

4. open classification on the head's unit-normalised outputs: nearest class centre
   (centres from train) with one rejection threshold fitted on known-class dev data,
   and the TEXTOIR metrics on test.

**The fine-tuned run** (:func:`train_finetuned`, issue 18; the shipped
``text/stackoverflow_finetune_*``): the open-intent split as above; the bottom ``6 - L``
layers of all-MiniLM-L6-v2 run once per text (token states cached in memory,
:class:`~spacl.tasks.text.states.Backbone`), the top ``L = finetune.trainable_layers``
layers are fine-tuned (:func:`spacl.tasks.text.finetune.finetune`: Adam at ``optim.lr``,
``train.batch_size`` instances x ``views.num_views`` dropout views, ``train.epochs``
epochs, class-balanced batches), everything on ``train.device``; the features are the
fine-tuned encoder's L2-normalised embeddings (no head) and the decision is the frozen
run's.  ``finetune.select_epoch=dev_accuracy`` keeps the epoch of best known-class dev
accuracy (:func:`spacl.tasks.text.finetune.dev_accuracy_score`; the summary then holds
``epoch_dev_accuracy`` and ``selected_epoch``).  Its run directory holds the trained top
layers' weights (``encoder.top``), the centres, thresholds and class names
(:mod:`spacl.tasks.text.run` rebuilds the encoder from them).

**Decision** (calibration, ``ood.method``; issue 18, argued in ``docs/kg_and_text.md``):
one rule fixed before any run, the default ``quantile`` (``scope: class``, q = 0.95):
the split-conformal 0.95-quantile of the known-class dev examples' distance to their
nearest centre, per assigned class with at least ``ood.min_class_count`` (100) dev
examples, pooled otherwise.  It rejects about 5% of known inputs in expectation,
whatever the head.  The other rules of :mod:`spacl.tasks.text.decision` and ADB's
boundaries (radii from dev) are reported on test beside it, marked as not used for
selection.  ``select`` (an option) picks a rule per run on a simulated open split of
*dev*; it was the default until issue 18 found it unstable from seed to seed.  (An
earlier version fixed ``held_out_classes`` after comparing test F1 on one reported
configuration: that choice used test data and is withdrawn.)  The summary also holds
the reject-all floor (``reject_all``) and the test FPR at 95% TPR.
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
from spacl.engine.device import resolve_device
from spacl.engine.stages import Checkpointer
from spacl.evaluate.ood import OpenClassifier, reject_all_metrics
from spacl.models.text import EmbeddingCache, MiniLMEncoder, TextEncoder
from spacl.tasks.text.adb_run import train_adb_run
from spacl.tasks.text.config import ood_config
from spacl.tasks.text.decision import run_metrics
from spacl.tasks.text.detector import (
    checkpointed_stages,
    decide,
    ood_summary,
    open_text_run,
    split_of,
    write_detector_run,
)
from spacl.tasks.text.finetune import (
    FinetuneSettings,
    TopLayers,
    dev_accuracy_score,
    embed_states,
    finetune,
    settings_of,
)
from spacl.tasks.text.frozen import project, train_head
from spacl.tasks.text.states import Backbone, load_backbone

#: the text task's logger (``spacl.tasks.text``, as before the package)
_logger = logging.getLogger("spacl.tasks.text")

__all__ = [
    "embed_split",
    "train_finetuned",
    "train_ood",
]


def embed_split(
    split: OpenIntentSplit,
    encoder: TextEncoder,
    cache: EmbeddingCache,
    batch_size: int = 128,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(train, dev, test)`` embeddings of an open-intent split, through the cache."""
    texts = split.train_texts + split.dev_texts + split.test_texts
    emb = cache.embed(encoder, texts, batch_size=batch_size)
    a, b = len(split.train_texts), len(split.train_texts) + len(split.dev_texts)
    return emb[:a], emb[a:b], emb[b:]


def _decide(
    cfg: DictConfig,
    split: OpenIntentSplit,
    inputs: tuple[Tensor, Tensor],
    features: tuple[Tensor, Tensor, Tensor],
    device: torch.device,
    stages: Checkpointer | None = None,
) -> tuple[OpenClassifier, dict[str, Any]]:
    """The open classifier of ``ood.method`` (:func:`.detector.decide`): an auxiliary
    head, where the rule needs one, is trained as the run's head (a stage of ``stages``)."""
    return decide(
        cfg,
        split,
        inputs,
        features,
        train_head=lambda x, y, n: train_head(cfg, x, y, n, device, stages)[0],
        project=lambda head, x: project(head, x, device),
    )


def train_ood(
    config: Any,
    *,
    overrides: Sequence[str] = (),
    encoder: TextEncoder | None = None,
    split: OpenIntentSplit | None = None,
    log: Callable[[str], None] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Run one open-intent experiment from a recipe; return its summary.

    With ``finetune.trainable_layers > 0`` the encoder's top layers are fine-tuned
    instead (:func:`spacl.tasks.text.task.train_finetuned`; ``encoder`` is then
    not used).

    With ``run_dir`` (or ``out_dir`` in the recipe, as its parent) the run writes a run
    directory (:mod:`spacl.engine.rundir`): the head and the detector (class centres,
    thresholds, class names) in ``checkpoints/last.pt``, for ``spacl eval`` and
    ``spacl predict``; ``resume`` on a finished run returns its stored summary.

    ``encoder`` replaces the configured one (tests pass a tiny fake encoder); ``split``
    replaces reading the data.  Returns ``test`` metrics (``accuracy``, ``macro_f1``,
    ``f1_ood``, ``f1_ind``, ``auroc``, ``fpr_at_95_tpr``, percent; the last two are
    ``None`` when test has no OOD or only OOD examples), the ``rule`` used, ``rules_test``
    (the other rules and ADB on test, not used for selection), ``reject_all`` (the
    floor: every input rejected), with ``ood.method=select`` every rule's dev
    ``selection`` score,
    ``dev_accuracy`` (known classes, no rejection),
    ``known_classes``, ``losses`` and ``seconds``.  The result line goes to ``log``
    (default: the ``spacl.tasks.text`` logger, INFO); ``train.progress`` shows tqdm
    bars over the head's epochs and the encoding (``None``: when stderr is a terminal).
    """
    cfg = ood_config(config, overrides)
    say = log or _logger.info
    if cfg.detector.method is not None:  # ADB / DA-ADB (issue 37)
        return train_adb_run(
            cfg, split=split, encoder=encoder, log=log, run_dir=run_dir, resume=resume
        )
    if int(cfg.finetune.trainable_layers) > 0:  # the fine-tuned encoder (issue 18)
        return train_finetuned(cfg, split=split, log=log, run_dir=run_dir, resume=resume)
    run, stored, saved = open_text_run(cfg, run_dir, resume, say, str(cfg.train.device))
    if stored is not None:
        return stored
    start = time.perf_counter()
    if split is None:  # a fresh run records what it carved, a resumed one is held to it
        split = split_of(cfg, run.path if run else None, record=saved is None, say=say)
    if encoder is None:
        encoder = MiniLMEncoder(device=str(cfg.encoder.device), progress=cfg.train.progress)
    cache = EmbeddingCache(cfg.encoder.cache_dir)
    train_x, dev_x, test_x = embed_split(split, encoder, cache, int(cfg.encoder.batch_size))
    device = resolve_device(str(cfg.train.device))
    k = split.num_known
    with checkpointed_stages(run, saved, cfg, {}) as stages:
        head, losses = train_head(cfg, train_x, split.train_labels, k, device, stages)
        rows = int(cfg.eval.batch_size)
        train_z, dev_z, test_z = (project(head, x, device, rows) for x in (train_x, dev_x, test_x))
        inputs, features = (train_x, dev_x), (train_z, dev_z, test_z)
        clf, extra = _decide(cfg, split, inputs, features, device, stages)
    dev_closed = (clf.distances(dev_z).argmin(1) == split.dev_labels).double().mean()
    test = run_metrics(clf, test_z, split.test_labels, k)
    extra = {**extra, "losses": losses, "seconds": time.perf_counter() - start}
    extra["reject_all"] = reject_all_metrics(split.test_labels, k)
    summary = ood_summary(cfg, split, test, 100.0 * float(dev_closed), extra, cache.encoded, say)
    if run is not None:
        summary["run_dir"] = str(run.path.resolve())  # never relative to the cwd
        state = {"head": {k: v.cpu() for k, v in head.state_dict().items()}}
        write_detector_run(run, {**state, "in_dim": int(train_x.shape[1])}, clf, split, summary)
    return summary


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
    say = log or _logger.info
    run, stored, saved = open_text_run(cfg, run_dir, resume, say, str(cfg.train.device))
    if stored is not None:
        return stored
    start = time.perf_counter()
    split = split or split_of(cfg, run.path if run else None, record=saved is None, say=say)
    backbone = backbone or load_backbone(str(resolve_device(str(cfg.train.device))))
    layers = int(cfg.finetune.trainable_layers)
    initial = backbone.top(layers)
    states = backbone.states(split.train_texts + split.dev_texts + split.test_texts, layers)
    settings = settings_of(cfg)
    steps = {"steps": 0}  # every loop's steps, the main fine-tune's and the rule's heads'

    def tick(step: int, loss: float) -> None:
        steps["steps"] += 1
        if run is not None and steps["steps"] % 100 == 0:
            run.log({"kind": "step", "step": steps["steps"], "loss": loss})

    def aux(x: Tensor, y: Tensor, n: int) -> nn.Module:
        texts = [states[int(i)] for i in x]
        return finetune(initial, texts, y, n, settings, on_step=tick, stages=stages)[0]

    def project_top(top: nn.Module, x: Tensor) -> Tensor:
        assert isinstance(top, TopLayers)
        return embed_states(top, [states[int(i)] for i in x]).double()

    k, n = split.num_known, len(split.train_texts)
    b = n + len(split.dev_texts)
    with checkpointed_stages(run, saved, cfg, steps) as stages:
        top, losses, selection = _main_finetune(cfg, initial, states, split, settings, tick, stages)
        main_steps = stages.steps_of(0) if stages is not None else steps["steps"]
        features = tuple(
            embed_states(top, part).double() for part in (states[:n], states[n:b], states[b:])
        )
        idx = (torch.arange(n), torch.arange(n, b))  # the train / dev texts' cached states
        clf, extra = decide(cfg, split, idx, features, aux, project_top)  # type: ignore[arg-type]
    dev_closed = (clf.distances(features[1]).argmin(1) == split.dev_labels).double().mean()
    test = run_metrics(clf, features[2], split.test_labels, k)
    extra = {**extra, "losses": losses, "seconds": time.perf_counter() - start}
    extra.update(steps=main_steps, aux_steps=steps["steps"] - main_steps)
    extra.update(selection)
    extra["reject_all"] = reject_all_metrics(split.test_labels, k)
    dev_acc = 100.0 * float(dev_closed)
    summary = ood_summary(cfg, split, test, dev_acc, extra, 0, say)  # no text cached
    if run is not None:
        summary["run_dir"] = str(run.path.resolve())  # never relative to the cwd
        write_detector_run(run, _model_state(top, clf), clf, split, summary)
    return summary


def _main_finetune(
    cfg: DictConfig,
    initial: TopLayers,
    states: Sequence[Tensor],
    split: OpenIntentSplit,
    settings: FinetuneSettings,
    tick: Callable[[int, float], None],
    stages: Checkpointer | None = None,
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
        score = dev_accuracy_score(states[:n], split.train_labels, dev, split.dev_labels, k)
    top, losses = finetune(
        initial,
        states[:n],
        split.train_labels,
        k,
        settings,
        on_step=tick,
        score=score,
        stages=stages,
        scores=scores,
    )
    if not scores:
        return top, losses, {}
    chosen = scores.index(max(scores)) + 1
    return top, losses, {"epoch_dev_accuracy": scores, "selected_epoch": chosen}


def _model_state(top: TopLayers, clf: OpenClassifier) -> dict[str, Any]:
    """The checkpoint's model part: no head, the fine-tuned top layers (``encoder``)."""
    encoder = {
        "trainable_layers": len(top.layers),
        "top": {k: v.detach().cpu() for k, v in top.state_dict().items()},
    }
    return {"head": {}, "in_dim": int(clf.centres.shape[1]), "encoder": encoder}
