"""``spacl export`` of a text run: the open-intent detector as a folder that runs without spacl.

The folder (:func:`export_detector`) holds:

- ``encoder/``: a sentence-transformers model directory.  A fine-tuned run
  (``finetune.trainable_layers > 0``) writes all-MiniLM-L6-v2 with its top layers replaced
  by the run's trained ones; a head on the frozen encoder writes the model as it is.
- ``head.pt2``: the trained head as a ``torch.export`` program (runs with plain torch),
  for runs with a head; none for a fine-tuned run or ``objective.name=frozen`` (the
  features are then the encoder's embeddings).
- ``detector.json``: the class names, the unit class centres ``c_k``, the per-class
  thresholds ``t_k``, the name of the open class, and the head's input dtype.
- ``README.md``: the ~20 lines of sentence-transformers + torch that use it (the same
  code the tests run in a process that never imports spacl).

A ``detector.method`` run (ADB / DA-ADB) writes the encoder (its trained top layers
copied in, its token limit set to ``detector.max_tokens``) without its normalisation
(mean pooling only), ``head.pt2``, and in ``detector.json`` the centroids and radii
(:data:`USAGE_ADB`): open when the Euclidean distance to the nearest centroid is at least
its radius.

The decision of the other runs is :meth:`spacl.tasks.text.run.IntentDetector.predict`'s::

    z   = head(encoder.encode(texts, normalize_embeddings=True))   (no head: identity)
    d_k = 1 - <z / |z|, c_k>        (float64),     k* = argmin_k d_k
    label = class_names[k*]  if d_{k*} <= t_{k*}  else  "open"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from spacl._validation import check_export_folder
from spacl.evaluate.adb import ADBModel
from spacl.models.export import export_batch_program
from spacl.tasks.text.finetune import TopLayers
from spacl.tasks.text.run import OPEN, IntentDetector, load_intent_detector

#: what ``spacl export`` writes for a text run, for the --out check
_EXPORTED_AS = (
    "a text run",
    "the sentence-transformers encoder, head.pt2, detector.json, README.md",
)

__all__ = ["USAGE", "USAGE_ADB", "export_detector", "export_text_run"]

#: the code of the folder's README (``{folder}``: the folder's path), run by the tests
USAGE = '''import json, torch
from sentence_transformers import SentenceTransformer

folder = {folder!r}
meta = json.load(open(f"{{folder}}/detector.json"))
encoder = SentenceTransformer(f"{{folder}}/encoder", device="cpu")
head = torch.export.load(f"{{folder}}/head.pt2").module() if meta["head"] else None
centres = torch.tensor(meta["centres"], dtype=torch.float64)
thresholds = torch.tensor(meta["thresholds"], dtype=torch.float64)


@torch.no_grad()
def predict(texts):
    """(intent or meta["open_label"], cosine distance to the nearest class centre) per text."""
    x = encoder.encode(list(texts), convert_to_tensor=True, normalize_embeddings=True).cpu()
    z = head(x.to(getattr(torch, meta["head_dtype"]))) if head is not None else x
    z = torch.nn.functional.normalize(z.double(), dim=1)
    best, k = (1.0 - z @ centres.T).min(dim=1)
    names = meta["class_names"]
    return [
        (names[j] if s <= thresholds[j] else meta["open_label"], float(s))
        for s, j in zip(best.tolist(), k.tolist())
    ]
'''


def export_text_run(run_dir: str | Path, out: str | Path) -> Path:
    """:func:`export_detector` of the detector a text run directory saved."""
    check_export_folder(
        out, "a text run", "the sentence-transformers encoder, head.pt2, detector.json, README.md"
    )
    return export_detector(load_intent_detector(run_dir), out, source=str(run_dir))


def export_detector(det: IntentDetector, out: str | Path, *, source: str = "") -> Path:
    """Write ``det`` as a folder that sentence-transformers and torch run (module docstring).

    ``out`` must not exist or be an empty directory (nothing is overwritten).  Raises
    ``TypeError`` for a detector whose encoder is not all-MiniLM-L6-v2 (frozen, or
    fine-tuned on top of it): only a sentence-transformers model can be written.
    """
    out = check_export_folder(
        out, "a text run", "the sentence-transformers encoder, head.pt2, detector.json, README.md"
    )
    if isinstance(det.classifier, ADBModel):
        return _export_adb(det, det.classifier, out, source)
    model = _sentence_model(det)
    head = det.head
    has_head = not isinstance(head, nn.Identity)
    param = next(iter(head.parameters()), None)
    head_dtype = torch.float32 if param is None else param.dtype
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out / "encoder"))
    if has_head:
        _export_head(head, int(det.encoder.dim), head_dtype, out / "head.pt2")
    meta: dict[str, Any] = {
        "format": "spacl open-intent detector 1",
        "source_run": source,
        "objective": str(det.config.objective.name),
        "fine_tuned_layers": int(det.config.finetune.trainable_layers),
        "class_names": list(det.class_names),
        "centres": det.classifier.centres.double().tolist(),
        "thresholds": det.classifier.thresholds.double().tolist(),
        "open_label": OPEN,
        "score": "cosine distance to the nearest class centre, 1 - <z / |z|, c_k>",
        "head": "head.pt2" if has_head else None,
        "head_dtype": str(head_dtype).removeprefix("torch."),
    }
    (out / "detector.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "README.md").write_text(_readme(meta))
    return out


#: the README code of a ``detector.method`` run (ADB's balls on the pooled encoder)
USAGE_ADB = '''import json, torch
from sentence_transformers import SentenceTransformer

folder = {folder!r}
meta = json.load(open(f"{{folder}}/detector.json"))
encoder = SentenceTransformer(f"{{folder}}/encoder", device="cpu")  # mean pooling, no normalisation
head = torch.export.load(f"{{folder}}/head.pt2").module()
centroids = torch.tensor(meta["centroids"])
radii = torch.tensor(meta["radii"])


@torch.no_grad()
def predict(texts):
    """(intent or meta["open_label"], distance to the nearest centroid) per text."""
    x = encoder.encode(list(texts), convert_to_tensor=True).cpu().float()
    best, k = torch.cdist(head(x), centroids).min(dim=1)
    names = meta["class_names"]
    return [
        (names[j] if d < radii[j] else meta["open_label"], float(d))
        for d, j in zip(best.tolist(), k.tolist())
    ]
'''


def _export_adb(det: IntentDetector, boundary: ADBModel, out: Path, source: str) -> Path:
    """The folder of a ``detector.method`` run: the encoder (with the run's trained top
    layers) without its normalisation, cut to ``detector.max_tokens`` tokens, the head,
    the centroids and radii (module docstring; :data:`USAGE_ADB`)."""
    from spacl.models.text import load_sentence_transformer
    from spacl.tasks.text.states import FinetunedEncoder, PooledEncoder

    encoder = det.encoder
    if isinstance(encoder, FinetunedEncoder) and encoder.backbone.name == "all-MiniLM-L6-v2":
        full = _with_trained_layers(load_sentence_transformer("cpu"), encoder.top)
        what = f"its top {encoder.trainable_layers} layer(s) trained"
    elif isinstance(encoder, PooledEncoder) and encoder.name.startswith("all-MiniLM-L6-v2"):
        full, what = load_sentence_transformer("cpu"), "frozen"
    else:
        raise TypeError(f"only all-MiniLM-L6-v2 detectors can be exported, got {encoder!r}")
    pooled = type(full)(modules=[full[0], full[1]], device="cpu")  # no Normalize module
    max_tokens = det.config.detector.max_tokens
    if max_tokens is not None:  # the tokenizer's cut, as the run's
        pooled.max_seq_length = int(max_tokens)
    out.mkdir(parents=True, exist_ok=True)
    pooled.save(str(out / "encoder"))
    _export_head(det.head, int(det.encoder.dim), torch.float32, out / "head.pt2")
    meta: dict[str, Any] = {
        "format": "spacl open-intent detector 2 (ADB balls)",
        "source_run": source,
        "detector": str(det.config.detector.method),
        "trained_layers": int(det.config.detector.trainable_layers),
        "max_tokens": det.config.detector.max_tokens,
        "class_names": list(det.class_names),
        "centroids": boundary.centroids.tolist(),
        "radii": boundary.radii.tolist(),
        "open_label": OPEN,
        "score": "Euclidean distance to the nearest centroid; open when >= its radius",
        "head": "head.pt2",
    }
    (out / "detector.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "README.md").write_text(
        "# Open-intent detector exported by spacl\n\n"
        f"From the run `{source}` ({meta['detector']} on all-MiniLM-L6-v2, {what}, and a "
        f"trained head); {len(meta['class_names'])} known intents, anything else is "
        f"`{OPEN}`.  Needs `torch` and `sentence-transformers`, not spacl:\n\n"
        "```python\n" + USAGE_ADB.format(folder=".") + "```\n\n"
        "`predict([...])` gives, per text, the nearest known intent if the text lies inside "
        "that intent's ball (distance below its radius), else the open label, with the "
        "distance.\n"
    )
    return out


def _sentence_model(det: IntentDetector) -> Any:
    """The detector's encoder as a SentenceTransformer (fine-tuned layers copied in)."""
    from spacl.models.text import MiniLMEncoder, load_sentence_transformer
    from spacl.tasks.text.states import FinetunedEncoder

    encoder = det.encoder
    if isinstance(encoder, MiniLMEncoder):
        if not encoder.normalize:
            raise TypeError("the detector's encoder does not normalise: cannot export it")
        return load_sentence_transformer("cpu")
    if not isinstance(encoder, FinetunedEncoder) or encoder.backbone.name != "all-MiniLM-L6-v2":
        raise TypeError(f"only all-MiniLM-L6-v2 detectors can be exported, got encoder {encoder!r}")
    return _with_trained_layers(load_sentence_transformer("cpu"), encoder.top)


def _with_trained_layers(model: Any, top: TopLayers) -> Any:
    """The sentence-transformers ``model`` with its top layers replaced by ``top.layers``."""
    layers = model[0].auto_model.encoder.layer
    trained_layers = top.layers
    start = len(layers) - len(trained_layers)
    for target, trained in zip(layers[start:], trained_layers, strict=True):
        target.load_state_dict(trained.state_dict())
    return model


def _export_head(head: nn.Module, in_dim: int, dtype: torch.dtype, path: Path) -> None:
    """``head`` (eval mode) as a ``torch.export`` program with a dynamic batch dimension."""
    program = export_batch_program(head.eval(), torch.zeros(2, in_dim, dtype=dtype))
    torch.export.save(program, str(path))


def _readme(meta: dict[str, Any]) -> str:
    what = (
        f"all-MiniLM-L6-v2 with its top {meta['fine_tuned_layers']} layers fine-tuned"
        if meta["fine_tuned_layers"]
        else "all-MiniLM-L6-v2 (frozen)" + (" and a trained head" if meta["head"] else "")
    )
    return (
        "# Open-intent detector exported by spacl\n\n"
        f"From the run `{meta['source_run']}` (objective `{meta['objective']}`): {what}; "
        f"{len(meta['class_names'])} known intents, anything else is "
        f"`{meta['open_label']}`.  Needs `torch` and `sentence-transformers`, not spacl:\n\n"
        "```python\n" + USAGE.format(folder=".") + "```\n\n"
        "`predict([...])` gives, per text, the nearest known intent if its cosine distance "
        "to that intent's centre is within the intent's threshold, else the open label, "
        "with the distance.\n"
    )
