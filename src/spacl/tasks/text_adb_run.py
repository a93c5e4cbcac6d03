"""The ADB / DA-ADB detector as a run of ``spacl train`` (``detector.method`` set).

A text recipe with ``detector.method: adb`` or ``da_adb`` (the shipped
``text/stackoverflow``, ``text/banking`` and ``text/oos`` detectors) runs
:func:`train_adb_run` instead of the head + rule of :mod:`spacl.tasks.text`:

1. the open-intent split of ``data.name`` at ``data.known_ratio`` with the known
   classes of ``data.protocol`` (``textoir``: TEXTOIR's draw for ``data.split_seed``);
2. all-MiniLM-L6-v2's mean-pooled last layer, not normalised, for every text, through
   the on-disk embedding cache (:class:`~spacl.tasks.text_states.PooledEncoder`);
3. the two stages of :mod:`spacl.tasks.text_adb` with ``detector.*`` as the schedule and
   ``train.seed`` as its seed: the head and classifier early-stopped on known-class dev
   data, then ADB's boundaries on training-mode features;
4. the test metrics, scored once with the boundaries as the rule, and the reject-all floor.

The run directory holds the head's weights, the centroids, the radii and the class
names (``checkpoints/last.pt``), so ``spacl predict`` / ``spacl eval`` / ``spacl.load``
rebuild the detector from the run alone (:func:`adb_intent_detector`).
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
from spacl.evaluate.adb import ADBModel
from spacl.evaluate.ood import open_intent_metrics, reject_all_metrics
from spacl.models.text import EmbeddingCache, _load_sentence_transformer
from spacl.schema import resolve_device
from spacl.tasks.text_adb import ADBSchedule, Detector, OpenIntentNet, train_detector
from spacl.tasks.text_detector import open_text_run, run_name, split_of
from spacl.tasks.text_states import CachedTexts, PooledEncoder

_logger = logging.getLogger(__name__)

__all__ = ["HeadFeatures", "adb_intent_parts", "pooled_encoder", "schedule_of", "train_adb_run"]


def schedule_of(cfg: DictConfig) -> ADBSchedule:
    """The detector's schedule: ``detector.*`` with ``train.seed``."""
    det = cfg.detector
    return ADBSchedule(
        method=str(det.method),
        trainable_layers=0,
        max_epochs=int(det.max_epochs),
        patience=int(det.patience),
        batch_size=int(det.batch_size),
        lr=float(det.lr),
        scale=float(det.scale),
        dropout=float(det.dropout),
        boundary_lr=float(det.boundary_lr),
        seed=int(cfg.train.seed),
    )


def pooled_encoder(device: str = "cpu") -> PooledEncoder:
    """all-MiniLM-L6-v2's mean-pooled last layer (the ``text`` extra), offline, on
    ``device`` (``auto``: CUDA when available)."""
    st = _load_sentence_transformer(str(resolve_device(device)))
    return PooledEncoder(st[0].auto_model, st.preprocess, "all-MiniLM-L6-v2")


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
    net.load_state_dict(state["adb_head"])
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
    run, stored = open_text_run(cfg, run_dir, resume, say)
    if stored is not None:
        return stored
    start = time.perf_counter()
    split = split if split is not None else split_of(cfg)
    encoder = encoder if encoder is not None else pooled_encoder(str(cfg.encoder.device))
    cache = EmbeddingCache(cfg.encoder.cache_dir)
    size = int(cfg.encoder.batch_size)
    vectors = [
        cache.embed(encoder, texts, size)
        for texts in (split.train_texts, split.dev_texts, split.test_texts)
    ]
    labels = (split.train_labels, split.dev_labels, split.test_labels)
    train, dev, test = (CachedTexts.pooled(v, y) for v, y in zip(vectors, labels, strict=True))
    k = split.num_known
    det = train_detector(None, train, dev, k, schedule_of(cfg))
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
        "encoded_texts": cache.encoded,
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
        summary["run_dir"] = str(run.path)
        _write_run(run, det, split, int(vectors[0].shape[1]), summary)
    return summary


def _write_run(run: Any, det: Detector, split: OpenIntentSplit, in_dim: int, summary: dict) -> None:
    for epoch, loss in enumerate(summary["losses"]):
        run.log({"kind": "epoch", "epoch": epoch, "loss": loss})
    detector = {
        "centroids": det.boundary.centroids.cpu(),
        "radii": det.boundary.radii.cpu(),
        "class_names": list(split.known_classes),
    }
    head = {key: value.cpu() for key, value in det.net.state_dict().items()}
    run.save({"adb_head": head, "in_dim": in_dim, "detector": detector, "finished": True})
    evaluation = {key: summary[key] for key in ("test", "reject_all", "dev_accuracy")}
    run.log({"kind": "final", **evaluation})
    run.finish(evaluation, summary)
