"""The ADB / DA-ADB detector as a run of ``spacl train`` (``detector.method`` set).

A text recipe with ``detector.method: adb`` or ``da_adb`` (the shipped
``text/stackoverflow``, ``text/banking`` and ``text/oos`` detectors) runs
:func:`train_adb_run` instead of the head + rule of :mod:`spacl.tasks.text`:

1. the open-intent split of ``data.name`` at ``data.known_ratio`` with the known
   classes of ``data.protocol`` (``textoir``: TEXTOIR's draw for ``data.split_seed``);
2. with ``detector.trainable_layers = 0``, all-MiniLM-L6-v2's mean-pooled last layer,
   not normalised, for every text, through the on-disk embedding cache
   (:class:`~spacl.tasks.text.states.PooledEncoder`); with ``L > 0`` (TEXTOIR trains
   BERT's last layer; the shipped recipes train MiniLM's, ``L = 1``), the token states
   after the frozen bottom ``6 - L`` layers, computed once per text, and a trainable copy
   of the top ``L`` layers (:class:`~spacl.tasks.text.states.Backbone`); texts are cut
   to ``detector.max_tokens`` tokens when tokenised;
3. the two stages of :mod:`spacl.tasks.text.adb` with ``detector.*`` as the schedule and
   ``train.seed`` as its seed: the head and classifier early-stopped on known-class dev
   data, then ADB's boundaries on training-mode features;
4. the test metrics, scored once with the boundaries as the rule, and the reject-all floor.

The run directory holds the head's weights (and the trained top layers), the centroids,
the radii and the class names (``checkpoints/last.pt``), so ``spacl predict``,
``spacl eval`` and ``spacl.load`` rebuild the detector from the run alone
(:func:`spacl.tasks.text.run.load_intent_detector`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from spacl.data.text import OpenIntentSplit
from spacl.engine.device import resolve_device
from spacl.evaluate.adb import ADBModel
from spacl.evaluate.ood import open_intent_metrics, reject_all_metrics
from spacl.models.text import EmbeddingCache
from spacl.tasks.text.adb import ADBSchedule, Detector, OpenIntentNet, train_detector
from spacl.tasks.text.detector import checkpointed_stages, open_text_run, run_name, split_of
from spacl.tasks.text.finetune import TopLayers
from spacl.tasks.text.states import Backbone, CachedTexts, PooledEncoder, load_backbone

_logger = logging.getLogger(__name__)

__all__ = [
    "HeadFeatures",
    "adb_intent_parts",
    "detector_backbone",
    "few_steps_note",
    "pooled_encoder",
    "schedule_of",
    "top_layers_of",
    "train_adb_run",
]


def schedule_of(cfg: DictConfig) -> ADBSchedule:
    """The detector's schedule: ``detector.*`` with ``train.seed``."""
    det = cfg.detector
    return ADBSchedule(
        method=str(det.method),
        trainable_layers=int(det.trainable_layers),
        max_epochs=int(det.max_epochs),
        patience=int(det.patience),
        batch_size=int(det.batch_size),
        lr=float(det.lr),
        scale=float(det.scale),
        dropout=float(det.dropout),
        boundary_lr=float(det.boundary_lr),
        seed=int(cfg.train.seed),
    )


#: fewer optimiser steps an epoch than this: the head may stop before it learns
MIN_STEPS_PER_EPOCH = 8


def few_steps_note(num_train: int, batch_size: int) -> str | None:
    """A one-line note when ``num_train`` texts make fewer than
    :data:`MIN_STEPS_PER_EPOCH` steps an epoch at ``batch_size``, with the batch size
    that gives that many; ``None`` otherwise (every TEXTOIR setting: 1,000+ texts).

    Early stopping counts epochs: at 120 texts and batch 128 an epoch is one step, and a
    head at lr 1e-4 was still at chance (loss ln 3, dev 1/3) when its patience ran out.
    """
    steps = -(-num_train // batch_size)
    if steps >= MIN_STEPS_PER_EPOCH:
        return None
    better = max(1, num_train // MIN_STEPS_PER_EPOCH)
    return (
        f"note: {num_train} training texts make {steps} step(s) an epoch at "
        f"detector.batch_size={batch_size}; early stopping counts epochs, so the head may "
        f"stop before it learns: try detector.batch_size={better}"
    )


def pooled_encoder(device: str = "cpu", max_tokens: int | None = None) -> PooledEncoder:
    """all-MiniLM-L6-v2's mean-pooled last layer (the ``text`` extra), offline, on
    ``device`` (``auto``: CUDA when available), texts cut to ``max_tokens`` tokens
    (``None``: the model's 256; part of the cache name otherwise)."""
    backbone = load_backbone(str(resolve_device(device)), max_tokens)
    name = "all-MiniLM-L6-v2" + ("" if max_tokens is None else f"-max{max_tokens}tokens")
    return PooledEncoder(backbone.model, backbone.tokenize, name)


def detector_backbone(cfg: DictConfig) -> Backbone:
    """The frozen encoder under a detector's trained top layers (``detector.*``)."""
    return load_backbone(str(resolve_device(str(cfg.encoder.device))), _max_tokens(cfg))


def _max_tokens(cfg: DictConfig) -> int | None:
    value = cfg.detector.max_tokens
    return None if value is None else int(value)


def top_layers_of(state: dict[str, Any], backbone: Backbone) -> TopLayers:
    """The trained top layers a detector run saved, on ``backbone`` (pooled output, not
    normalised: the head's input)."""
    saved = state.get("encoder")
    if not isinstance(saved, dict) or "top" not in saved:
        raise ValueError("a detector run with trained layers, but its checkpoint has none")
    top = backbone.top(int(saved["trainable_layers"]))
    top.load_state_dict(saved["top"])
    top.normalize = False
    return top.eval()


class HeadFeatures(nn.Module):
    """The trained head as a module of pooled vectors: ``forward(x) = net.features(x)``."""

    def __init__(self, net: OpenIntentNet) -> None:
        super().__init__()
        self.net = net.eval()

    def forward(self, x: Tensor) -> Tensor:
        return self.net.features(x, None)


def adb_intent_parts(
    state: dict[str, Any], method: str
) -> tuple[HeadFeatures, ADBModel, list[str]]:
    """``(head, boundary, class names)`` from a run checkpoint of :func:`train_adb_run`."""
    det = state["detector"]
    names = list(det["class_names"])
    k = len(names)
    net = OpenIntentNet(None, k, method, width=int(state["in_dim"]))
    net.load_state_dict(state["adb_head"])  # the head without any top layers
    boundary = ADBModel(det["centroids"], det["radii"], torch.arange(k), k)
    return HeadFeatures(net), boundary, names


def _test_metrics(det: Detector, test: CachedTexts, k: int) -> dict[str, float]:
    z, _, _ = det.scores(test)
    score = det.boundary.open_score(z)
    return open_intent_metrics(test.labels, det.boundary.predict(z), k, ood_scores=score)


def train_adb_run(
    cfg: DictConfig,
    *,
    split: OpenIntentSplit | None = None,
    encoder: Any = None,
    log: Callable[[str], None] | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """One detector run (module docstring); returns its summary (``test``, ``reject_all``,
    ``dev_accuracy``, ``known_classes``, the stages' ``record``, ``seconds``)."""
    say = log or _logger.info
    # the detector's loops train where its encoder runs
    run, stored, saved = open_text_run(cfg, run_dir, resume, say, str(cfg.encoder.device))
    if stored is not None:
        return stored
    start = time.perf_counter()
    if split is None:  # a fresh run records what it carved, a resumed one is held to it
        split = split_of(cfg, run.path if run else None, record=saved is None, say=say)
    schedule = schedule_of(cfg)
    note = few_steps_note(len(split.train_texts), schedule.batch_size)
    if note:
        say(note)
    if schedule.trainable_layers > 0:
        say(
            f"computing the frozen layers' token states of {_count(split)} texts once, then "
            f"training the top {schedule.trainable_layers} layer(s) and the head "
            f"(at most {schedule.max_epochs} epochs, early stopping on dev)"
        )
        (train, dev, test), top, encoded = _token_states(cfg, split, encoder, schedule)
    else:
        (train, dev, test), encoded = _pooled_states(cfg, split, encoder)
        top = None
    k = split.num_known
    with checkpointed_stages(run, saved, cfg, {}) as stages:
        det = train_detector(top, train, dev, k, schedule, say, stages)
    _, dev_nearest, _ = det.scores(dev)
    summary: dict[str, Any] = {
        "name": run_name(cfg),
        "detector": str(cfg.detector.method),
        "protocol": str(cfg.data.protocol),
        "known_ratio": split.known_ratio,
        "split_seed": split.seed,
        "known_classes": list(split.known_classes),
        "test": _test_metrics(det, test, k),
        "dev_accuracy": 100.0 * float((dev_nearest == split.dev_labels).double().mean()),
        "reject_all": reject_all_metrics(split.test_labels, k),
        "record": det.record,
        "losses": list(det.record["train_losses"]),  # type: ignore[call-overload]
        "encoded_texts": encoded,
        "seconds": time.perf_counter() - start,
        "config": OmegaConf.to_container(cfg),
    }
    test_m, floor = summary["test"], summary["reject_all"]
    say(
        f"{summary['name']} known={split.known_ratio:.0%} seed={split.seed}: "
        f"acc {test_m['accuracy']:.2f} F1 {test_m['macro_f1']:.2f} "
        f"F1-open {test_m['f1_ood']:.2f} F1-known {test_m['f1_ind']:.2f} "
        f"(reject-all: F1 {floor['macro_f1']:.2f} F1-open {floor['f1_ood']:.2f}), "
        f"{summary['seconds']:.0f} s"
    )
    if run is not None:
        summary["run_dir"] = str(run.path.resolve())  # never relative to the cwd
        _write_run(run, det, split, int(det.net.dense.in_features), summary)
    return summary


def _pooled_states(
    cfg: DictConfig, split: OpenIntentSplit, encoder: Any
) -> tuple[list[CachedTexts], int]:
    """The pooled outputs of the split's texts through the embedding cache, and how many
    texts were encoded (not found in the cache)."""
    encoder = (
        encoder
        if encoder is not None
        else pooled_encoder(str(cfg.encoder.device), _max_tokens(cfg))
    )
    cache = EmbeddingCache(cfg.encoder.cache_dir)
    size = int(cfg.encoder.batch_size)
    parts = _parts(split)
    sets = [CachedTexts.pooled(cache.embed(encoder, x, size), y) for x, y in parts]
    return sets, cache.encoded


def _token_states(
    cfg: DictConfig, split: OpenIntentSplit, backbone: Backbone | None, schedule: ADBSchedule
) -> tuple[list[CachedTexts], TopLayers, int]:
    """The bottom layers' token states of the split's texts (computed once, not cached on
    disk), a trainable copy of the top layers, and how many texts were encoded."""
    backbone = backbone if backbone is not None else detector_backbone(cfg)
    layers = schedule.trainable_layers
    parts = _parts(split)
    sets = [CachedTexts.from_states(backbone.states(x, layers), y) for x, y in parts]
    return sets, backbone.top(layers), _count(split)


def _count(split: OpenIntentSplit) -> int:
    return len(split.train_texts) + len(split.dev_texts) + len(split.test_texts)


def _parts(split: OpenIntentSplit) -> list[tuple[list[str], Tensor]]:
    return [
        (list(split.train_texts), split.train_labels),
        (list(split.dev_texts), split.dev_labels),
        (list(split.test_texts), split.test_labels),
    ]


def _write_run(run: Any, det: Detector, split: OpenIntentSplit, in_dim: int, summary: dict) -> None:
    for epoch, loss in enumerate(summary["losses"]):
        run.log({"kind": "epoch", "epoch": epoch, "loss": loss})
    detector = {
        "centroids": det.boundary.centroids.cpu(),
        "radii": det.boundary.radii.cpu(),
        "class_names": list(split.known_classes),
    }
    weights = det.net.state_dict()
    head = {key: value.cpu() for key, value in weights.items() if not key.startswith("top.")}
    state: dict[str, Any] = {"adb_head": head, "in_dim": in_dim, "detector": detector}
    if det.net.top is not None:  # the trained top layers, loaded by top_layers_of
        top = {key: value.detach().cpu() for key, value in det.net.top.state_dict().items()}
        state["encoder"] = {"trainable_layers": len(det.net.top.layers), "top": top}
    run.save({**state, "finished": True})
    evaluation = {key: summary[key] for key in ("test", "reject_all", "dev_accuracy")}
    run.log({"kind": "final", **evaluation})
    run.finish(evaluation, summary)
