"""Out-of-domain intent detection: frozen sentence encoder + trained projection head (SPEC §1).

The schema (:class:`OODConfig`, :func:`ood_config`) is in :mod:`spacl.tasks.text_config`.

Pipeline of one run (``train_ood(cfg)``):

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

**Decision** (calibration, ``ood.method``; issue 18, argued in ``docs/kg_and_text.md``):
one rule fixed before any run, the default ``quantile`` (``scope: class``, q = 0.95):
the split-conformal 0.95-quantile of the known-class dev examples' distance to their
nearest centre, per assigned class with at least ``ood.min_class_count`` (100) dev
examples, pooled otherwise.  It rejects about 5% of known inputs in expectation,
whatever the head.  The other rules of :mod:`spacl.tasks.text_decision` and ADB's
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

from spacl._progress import progress
from spacl.data.text import OpenIntentSplit
from spacl.evaluate.ood import (
    OpenClassifier,
    reject_all_metrics,
)
from spacl.models.heads import ProjectionHead
from spacl.models.text import (
    EmbeddingCache,
    FeatureViews,
    MiniLMEncoder,
    ResidualHead,
    TextEncoder,
)
from spacl.schema import resolve_device
from spacl.tasks.text_adb_run import train_adb_run
from spacl.tasks.text_config import OOD_OBJECTIVES, OODConfig, build_text_loss, ood_config
from spacl.tasks.text_decision import run_metrics
from spacl.tasks.text_detector import (
    decide,
    ood_summary,
    open_text_run,
    split_of,
    write_detector_run,
)
from spacl.tasks.text_finetune_run import train_finetuned

_logger = logging.getLogger(__name__)

__all__ = [
    "OOD_OBJECTIVES",
    "OODConfig",
    "embed_split",
    "ood_config",
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


def _optimizer(cfg: DictConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    lr, wd = float(cfg.optim.lr), float(cfg.optim.weight_decay)
    if cfg.optim.name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if cfg.optim.name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    return torch.optim.SGD(params, lr=lr, weight_decay=wd, momentum=0.9)


def _build_head(
    cfg: DictConfig, in_dim: int, num_known: int, device: torch.device
) -> tuple[nn.Module, nn.Module | None]:
    """The projection head of ``model.head`` and, for cross-entropy, its linear classifier."""
    head: nn.Module
    if cfg.model.head == "residual":
        head = ResidualHead(in_dim, int(cfg.model.hidden_dim)).to(device)
    else:
        head = ProjectionHead(
            in_dim, int(cfg.model.proj_dim), str(cfg.model.head), int(cfg.model.hidden_dim)
        ).to(device)
    name = str(cfg.objective.name)
    classifier = (
        nn.Linear(int(head.out_dim), num_known).to(device) if name == "cross_entropy" else None
    )
    return head, classifier


def _batch_loss(
    name: str,
    head: nn.Module,
    classifier: nn.Module | None,
    loss_fn: nn.Module | None,
    v: Tensor,
    yb: Tensor,
) -> Tensor:
    """The objective's loss on one batch of views ``v[b, V, d_in]``."""
    b, nv, d = v.shape
    z = head(v.reshape(b * nv, d)).reshape(b, nv, -1)
    assert loss_fn is not None
    if classifier is not None:
        logits = classifier(z.reshape(b * nv, -1))
        return loss_fn(logits.reshape(b, nv, -1), yb)
    return loss_fn(None, z, yb) if name == "spacl" else loss_fn(z, yb)


def _train_head(
    cfg: DictConfig,
    x: Tensor,
    y: Tensor,
    num_known: int,
    device: torch.device,
) -> tuple[nn.Module, list[float]]:
    seed = int(cfg.train.seed)
    torch.manual_seed(seed)
    name = str(cfg.objective.name)
    if name == "frozen":
        return nn.Identity(), []
    head, classifier = _build_head(cfg, int(x.shape[1]), num_known, device)
    loss_fn = build_text_loss(cfg, seed)
    if loss_fn is not None:
        loss_fn.to(device)
    params = list(head.parameters()) + (list(classifier.parameters()) if classifier else [])
    if not params:
        raise ValueError("config key 'model.head'='identity' leaves nothing to train")
    optimizer = _optimizer(cfg, params)
    views = FeatureViews(int(cfg.views.num_views), float(cfg.views.dropout), float(cfg.views.sigma))
    gen = torch.Generator().manual_seed(seed)
    batch = int(cfg.train.batch_size)
    losses: list[float] = []
    x, y = x.to(device), y.to(device)
    head.train()
    bar = progress(
        total=int(cfg.train.epochs), desc=f"{name} head", mode=cfg.train.progress, unit="epoch"
    )
    for _epoch in range(int(cfg.train.epochs)):
        perm = torch.randperm(x.shape[0], generator=gen).to(device)
        total, steps = 0.0, 0
        for i in range(0, x.shape[0], batch):
            idx = perm[i : i + batch]
            if idx.numel() < 2:
                continue
            v = views(x[idx], gen)  # [b, V, d_in]
            loss = _batch_loss(name, head, classifier, loss_fn, v, y[idx])
            if not bool(torch.isfinite(loss)):
                raise ValueError(f"non-finite {name} loss at epoch {_epoch}, step {steps}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            steps += 1
        losses.append(total / max(steps, 1))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    bar.close()
    head.eval()
    return head, losses


@torch.no_grad()
def _project(head: nn.Module, x: Tensor, device: torch.device, batch_size: int = 4096) -> Tensor:
    n = batch_size
    out = torch.cat([head(x[i : i + n].to(device)).cpu() for i in range(0, x.shape[0], n)])
    return out.double()


def _decide(
    cfg: DictConfig,
    split: OpenIntentSplit,
    inputs: tuple[Tensor, Tensor],
    features: tuple[Tensor, Tensor, Tensor],
    device: torch.device,
) -> tuple[OpenClassifier, dict[str, Any]]:
    """The open classifier of ``ood.method`` (:func:`.text_detector.decide`): an auxiliary
    head, where the rule needs one, is trained as the run's head."""
    return decide(
        cfg,
        split,
        inputs,
        features,
        train_head=lambda x, y, n: _train_head(cfg, x, y, n, device)[0],
        project=lambda head, x: _project(head, x, device),
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
    instead (:func:`spacl.tasks.text_finetune_run.train_finetuned`; ``encoder`` is then
    not used).

    With ``run_dir`` (or ``out_dir`` in the recipe, as its parent) the run writes a run
    directory (:mod:`spacl.tasks.rundir`): the head and the detector (class centres,
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
    run, stored = open_text_run(cfg, run_dir, resume, say)
    if stored is not None:
        return stored
    start = time.perf_counter()
    if split is None:
        split = split_of(cfg)
    if encoder is None:
        encoder = MiniLMEncoder(device=str(cfg.encoder.device), progress=cfg.train.progress)
    cache = EmbeddingCache(cfg.encoder.cache_dir)
    train_x, dev_x, test_x = embed_split(split, encoder, cache, int(cfg.encoder.batch_size))
    device = resolve_device(str(cfg.train.device))
    k = split.num_known
    head, losses = _train_head(cfg, train_x, split.train_labels, k, device)
    rows = int(cfg.eval.batch_size)
    train_z, dev_z, test_z = (_project(head, x, device, rows) for x in (train_x, dev_x, test_x))
    clf, extra = _decide(cfg, split, (train_x, dev_x), (train_z, dev_z, test_z), device)
    dev_closed = (clf.distances(dev_z).argmin(1) == split.dev_labels).double().mean()
    test = run_metrics(clf, test_z, split.test_labels, k)
    extra = {**extra, "losses": losses, "seconds": time.perf_counter() - start}
    extra["reject_all"] = reject_all_metrics(split.test_labels, k)
    summary = ood_summary(cfg, split, test, 100.0 * float(dev_closed), extra, cache.encoded, say)
    if run is not None:
        summary["run_dir"] = str(run.path)
        state = {"head": {k: v.cpu() for k, v in head.state_dict().items()}}
        write_detector_run(run, {**state, "in_dim": int(train_x.shape[1])}, clf, split, summary)
    return summary
