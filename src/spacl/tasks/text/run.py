"""A finished open-intent run, used: "which intent is this sentence, or none of them?".

:func:`load_intent_detector` rebuilds the detector a text run directory saved
(:mod:`spacl.engine.rundir`): the frozen sentence encoder named by the config, the trained
head, and the open classifier (class centres, per-class thresholds on the cosine
distance to the nearest centre, class names).  A sentence gets the nearest class if its
distance is within that class's threshold, else ``open``.

A fine-tuned run (``finetune.trainable_layers > 0``, :mod:`spacl.tasks.text.task`)
keeps the trained top layers instead of a head: the encoder is then the frozen model's
bottom layers with those layers on top (:class:`~spacl.tasks.text.states.FinetunedEncoder`),
and the head the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from spacl.engine.device import resolve_device
from spacl.engine.rundir import read_task_checkpoint, run_config
from spacl.evaluate.adb import ADBModel
from spacl.evaluate.ood import OpenClassifier
from spacl.models.text import TextEncoder
from spacl.schema_files import named_field
from spacl.tasks.text.config import ood_config

__all__ = ["OPEN", "IntentDetector", "evaluate_text_run", "load_intent_detector"]

#: the name printed for a sentence of no known intent
OPEN = "open"


@dataclass
class IntentDetector:
    """Encoder + head + open classifier of a text run (module docstring).

    ``classifier``: the nearest-centre rule of the head + rule runs (cosine distances,
    per-class thresholds), or ADB's balls of a ``detector.method`` run (Euclidean
    distances, per-class radii); both give ``distances``, ``predict`` and ``ood_label``.
    """

    config: DictConfig
    encoder: TextEncoder
    head: nn.Module
    classifier: OpenClassifier | ADBModel
    class_names: list[str]

    def __repr__(self) -> str:  # what it is, not the config and the networks
        shown = ", ".join(repr(n) for n in self.class_names[:3])
        more = ", ..." if len(self.class_names) > 3 else ""
        return (
            f"IntentDetector({named_field(self.config)}"
            f"known_classes={len(self.class_names)} [{shown}{more}], "
            f"classifier={type(self.classifier).__name__}, open_label={OPEN!r})"
        )

    @torch.no_grad()
    def embed(self, texts: Sequence[str], batch_size: int = 128) -> Tensor:
        """``[N, d]`` head outputs (float64) of the texts, the space the detector works in."""
        if isinstance(texts, str):
            texts = [texts]
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"text {i} is empty: give a sentence to classify")
        x = self.encoder.encode(list(texts), batch_size=batch_size)
        return self.head(x.to(next(iter(self.head.parameters()), x).dtype)).double()

    def predict(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """``(intent name or "open", distance)`` per text; the distance is the score the
        decision rule thresholds (cosine distance to the nearest class centre, or the
        Euclidean distance to the nearest ADB centroid)."""
        z = self.embed(texts)
        d = self.classifier.distances(z)
        best, k = d.min(dim=1)
        label = self.classifier.predict(z)
        ood = self.classifier.ood_label
        return [
            (OPEN if int(lab) == ood else self.class_names[int(c)], float(s))
            for lab, c, s in zip(label, k, best, strict=True)
        ]


def load_intent_detector(run_dir: str | Path, encoder: Any = None) -> IntentDetector:
    """The detector of a text run directory; ``encoder`` replaces the configured one (for
    a fine-tuned run: the :class:`~spacl.tasks.text.states.Backbone` under the
    trained layers)."""
    raw = run_config(run_dir)
    if raw.get("task") != "text":
        raise ValueError(f"{run_dir} is a run of task {raw.get('task', 'image')!r}, not 'text'")
    state = read_task_checkpoint(run_dir, "text")
    if not state.get("finished"):  # stopped mid-training: the detector is not built yet
        raise ValueError(
            f"{run_dir} is an unfinished text run (its detector is built at the end): "
            f"continue it with: spacl train {run_dir} --resume"
        )
    cfg = ood_config(raw)  # the text schema, the loader load_recipe dispatches to
    if cfg.detector.method is not None:
        return _adb_detector(cfg, state, encoder)
    if int(cfg.finetune.trainable_layers) > 0:
        encoder = _finetuned_encoder(run_dir, state, encoder)
    elif encoder is None:
        from spacl.models.text import MiniLMEncoder

        encoder = MiniLMEncoder(device=str(cfg.encoder.device), progress=False)
    det = state["detector"]
    names = list(det["class_names"])
    head = _head(cfg, int(state["in_dim"]), len(names), state["head"])
    clf = OpenClassifier(det["centres"], det["thresholds"])
    return IntentDetector(cfg, encoder, head, clf, names)


def _adb_detector(cfg: DictConfig, state: dict[str, Any], encoder: Any) -> IntentDetector:
    """The detector of a ``detector.method`` run: pooled MiniLM (under the run's trained
    top layers, ``detector.trainable_layers > 0``), its head, ADB's balls.  ``encoder``:
    the pooled encoder, or with trained layers the backbone under them."""
    from spacl.tasks.text.adb_run import (
        adb_intent_parts,
        detector_backbone,
        pooled_encoder,
        top_layers_of,
    )
    from spacl.tasks.text.states import FinetunedEncoder

    if "adb_head" not in state:
        raise ValueError("a detector run, but its checkpoint has no detector head")
    head, boundary, names = adb_intent_parts(state, str(cfg.detector.method))
    if int(cfg.detector.trainable_layers) > 0:
        backbone = encoder if encoder is not None else detector_backbone(cfg)
        encoder = FinetunedEncoder(backbone, top_layers_of(state, backbone))
    elif encoder is None:
        max_tokens = cfg.detector.max_tokens
        encoder = pooled_encoder(
            str(cfg.encoder.device), None if max_tokens is None else int(max_tokens)
        )
    return IntentDetector(cfg, encoder, head, boundary, names)


def _finetuned_encoder(run_dir: str | Path, state: dict[str, Any], backbone: Any) -> TextEncoder:
    """The fine-tuned run's encoder: its saved top layers over the frozen bottom."""
    from spacl.tasks.text.states import FinetunedEncoder, load_backbone

    saved = state.get("encoder")
    if not isinstance(saved, dict) or "top" not in saved:
        raise ValueError(f"{run_dir}: a fine-tuned run, but its checkpoint has no encoder weights")
    backbone = backbone if backbone is not None else load_backbone("cpu")
    top = backbone.top(int(saved["trainable_layers"]))
    top.load_state_dict(saved["top"])
    return FinetunedEncoder(backbone, top)


def _head(cfg: DictConfig, in_dim: int, num_known: int, weights: dict[str, Tensor]) -> nn.Module:
    if cfg.objective.name == "frozen" or int(cfg.finetune.trainable_layers) > 0:
        return nn.Identity()
    from spacl.tasks.text.frozen import build_head

    head, _ = build_head(cfg, in_dim, num_known, resolve_device("cpu"))
    head.load_state_dict(weights)
    return head.eval()


def evaluate_text_run(
    run_dir: str | Path,
    encoder: TextEncoder | None = None,
    split: Any = None,
    *,
    data_root: str | None = None,
) -> dict[str, Any]:
    """Test metrics of a run's saved detector, re-computed from its checkpoint.

    The split is re-drawn from the config (same data, ``known_ratio`` and ``split_seed``:
    the same known classes; ``data_root``: where the data is now, if it moved since
    training); ``split`` replaces it (tests).
    """
    from spacl.evaluate.ood import open_intent_metrics, reject_all_metrics
    from spacl.models.text import EmbeddingCache
    from spacl.tasks.text.decision import run_metrics

    det = load_intent_detector(run_dir, encoder)
    cfg = det.config
    if data_root is not None:
        cfg.data.root = data_root
    if split is None:
        from spacl.tasks.text.detector import split_of

        split = split_of(cfg, run_dir)  # held to the run's record of what it carved
    if list(split.known_classes) != det.class_names:
        raise ValueError(f"{run_dir}: the data's known classes differ from the run's")
    tuned = int(cfg.finetune.trainable_layers) + int(cfg.detector.trainable_layers)
    if tuned > 0:  # fine-tuned weights: never cached
        x = det.encoder.encode(split.test_texts)
    else:
        x = EmbeddingCache(cfg.encoder.cache_dir).embed(det.encoder, split.test_texts)
    with torch.no_grad():
        z = det.head(x).double()
    k = split.num_known
    if isinstance(det.classifier, ADBModel):  # ADB's own score: distance minus radius
        pred, score = det.classifier.predict(z), det.classifier.open_score(z)
        test = open_intent_metrics(split.test_labels, pred, k, ood_scores=score)
    else:
        test = run_metrics(det.classifier, z, split.test_labels, k)
    return {"test": test, "reject_all": reject_all_metrics(split.test_labels, k)}
