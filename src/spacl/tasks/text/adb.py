"""ADB and DA-ADB on a sentence encoder: TEXTOIR's two-stage open-intent detectors.

Both detectors (Zhang, Xu, Lin, AAAI 2021 "Deep Open Intent Classification with Adaptive
Decision Boundary"; Zhang, Xu, Zhao, Lin, TASLP 2023 "Learning Discriminative
Representations and Decision Boundaries for Open Intent Detection") as TEXTOIR runs them
(github.com/thuiar/TEXTOIR, ``open_intent_detection``), on all-MiniLM-L6-v2:

**Network** (TEXTOIR's ``BERT`` / ``BERT_Disaware``): the encoder's token states, the
top ``trainable_layers`` transformer layers trainable and the rest frozen (TEXTOIR's
``freeze_bert_parameters``: BERT-base's last layer and pooler; here the frozen bottom runs
once per text, :func:`spacl.tasks.text.finetune.bottom_states`), mean pooling over the
tokens, then a head ``z = dropout(relu(W h + b))`` (``W`` square): ``z`` is the
feature the boundaries live on.

**Stage 1, representation** (:func:`pretrain`), on the known classes' training texts:

- ``adb``: cross-entropy of a linear classifier on ``z``;
- ``da_adb``: the distance-aware cosine classifier.  At the start of every epoch the
  class centroids ``c_k`` of the eval-mode features of the training texts are computed;
  a feature is scaled by ``exp(d_2 - d_1)`` (its distances to the second-nearest and
  the nearest centroid), squashed to norm ``|x| / (1 + |x|)`` and compared by cosine
  with the class weights, times ``scale`` (4): ``logits = s (|x| / (1 + |x|)) x̂ ŵ_k^T``
  (:func:`distance_aware_logits`), cross-entropy on those;
- ``spacl`` (not TEXTOIR's: SPACL's representation under the same schedule and rule):
  :class:`spacl.losses.SPACLLoss` in the paper's supervised form on ``SPACL_VIEWS`` (5)
  dropout passes of the head per text (L2-normalised, temperature 0.1), no classifier;
  early stopping on the dev accuracy of the nearest training class mean.

AdamW (``lr`` 2e-5 in TEXTOIR, weight decay 0.01 except biases and LayerNorm weights),
linear warm-up over the first 10% of ``max_epochs`` worth of steps then linear decay,
batch 128.  After every epoch the closed-set classifier is scored on the known-class dev
texts (accuracy for ``adb``, macro-F1 for ``da_adb``, TEXTOIR's criteria); the best
epoch's weights are kept and training stops after ``patience`` epochs without a better
score.

**Stage 2, boundaries** (:func:`fit_boundaries`): centroids = class means of the
eval-mode training features of the kept weights; radii ``Delta_k = softplus(r_k)``,
``r ~ N(0, 1)``, minimise ADB's boundary loss ``mean_i |d_i - Delta_{y_i}|`` (the sum of
its two hinge terms, :func:`spacl.evaluate.adb.boundary_loss`) by Adam at
``boundary_lr`` (0.05) over the training texts' features **in training mode** (dropout
on, fresh every epoch, as ``ADBManager.train``), batch 128; after every epoch the
macro-F1 of the open classifier on the known-class dev texts picks the best radii
(patience as above).  An input is open when its distance to the nearest centroid is at
least that centroid's radius (:class:`spacl.evaluate.adb.ADBModel`).

Differences from TEXTOIR, all stated where results are reported: the encoder
(all-MiniLM-L6-v2, 6 layers, 384 dimensions, for BERT-base's 12 / 768); the frozen
bottom runs in eval mode once per text (TEXTOIR's frozen layers run in train mode, with
dropout, every step); DA-ADB's boundary step uses the centroids of the kept weights
(TEXTOIR keeps those computed at the start of the best epoch, before its updates);
training batches are drawn in random order and then grouped by length (less padding,
:func:`length_batches`) where TEXTOIR shuffles only.

Example:
    >>> schedule = ADBSchedule(method="da_adb", seed=0)        # doctest: +SKIP
    >>> net = OpenIntentNet(backbone.top(1), num_known=5, method="da_adb")
    >>> fit = pretrain(net, train, dev, schedule)               # CachedTexts bundles
    >>> boundary = fit_boundaries(net, train, dev, schedule)    # an ADBModel
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spacl._validation import check_choice
from spacl.engine.evaluation import Evaluator
from spacl.engine.loop import LoopPlan, TrainLoop
from spacl.engine.optim import WarmupLinear, build_optimizer, build_scheduler
from spacl.engine.stages import Checkpointer, StageBody, load_states, run_stage, states_of
from spacl.evaluate.adb import ADBModel, boundary_loss
from spacl.evaluate.ood import f1_per_class
from spacl.tasks.text.finetune import TopLayers
from spacl.tasks.text.loss import text_loss
from spacl.tasks.text.states import CachedTexts, length_batches

__all__ = [
    "ADB_METHODS",
    "BOUNDARY_SEED_OFFSET",
    "ADBSchedule",
    "BoundarySteps",
    "Detector",
    "OpenIntentNet",
    "PretrainResult",
    "PretrainSteps",
    "distance_aware_logits",
    "epoch_order",
    "fit_boundaries",
    "pretrain",
    "train_detector",
]

#: the two detectors: ADB (linear classifier) and DA-ADB (distance-aware cosine classifier)
ADB_METHODS = ("adb", "da_adb", "spacl")
#: dropout views per instance of the ``spacl`` method (view 0 included, SimCSE-style)
SPACL_VIEWS = 5
#: the boundary stage's generator (radii initialisation, batch order) is seeded with
#: ``schedule.seed + BOUNDARY_SEED_OFFSET``, apart from the first stage's seed
BOUNDARY_SEED_OFFSET = 1


@dataclass(frozen=True)
class ADBSchedule:
    """One training schedule, the same for every detector it is given to."""

    method: str
    trainable_layers: int = 1
    max_epochs: int = 100
    patience: int = 10
    batch_size: int = 128
    lr: float = 2e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    scale: float = 4.0  # DA-ADB's cosine scale
    temperature: float = 0.1  # the spacl method's loss
    dropout: float = 0.1
    boundary_lr: float = 0.05
    boundary_max_epochs: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        check_choice(self.method, "method", ADB_METHODS)
        for name in ("max_epochs", "patience", "batch_size", "boundary_max_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("lr", "scale", "boundary_lr", "temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if not 0.0 <= self.warmup < 1.0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"warmup and dropout must be in [0, 1), got {self.warmup!r}, {self.dropout!r}"
            )


def distance_aware_logits(
    features: Tensor, centroids: Tensor, weight: Tensor, scale: float
) -> Tensor:
    """DA-ADB's classifier: ``s (|x| / (1 + |x|)) x̂ ŵ^T`` with ``x = exp(d_2 - d_1) z``.

    ``d_1``, ``d_2``: the distances of ``z`` to its nearest and second-nearest of the
    ``centroids[K, d]`` (``K >= 2``); ``weight[K, d]`` the class weights.  With a single
    known class the scale factor is 1.
    """
    if centroids.shape[0] >= 2:
        two = torch.cdist(features, centroids).topk(2, dim=1, largest=False).values
        x = torch.exp(two[:, 1] - two[:, 0]).unsqueeze(1) * features
    else:
        x = features
    norm = x.norm(dim=1, keepdim=True)
    squashed = (norm / (1.0 + norm)) * (x / norm.clamp_min(torch.finfo(x.dtype).tiny))
    return scale * squashed @ F.normalize(weight, dim=1).t()


class OpenIntentNet(nn.Module):
    """Trainable top layers (or none), mean pooling, TEXTOIR's head, a closed-set classifier."""

    def __init__(
        self,
        top: TopLayers | None,
        num_known: int,
        method: str,
        *,
        width: int | None = None,
        scale: float = 4.0,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        check_choice(method, "method", ADB_METHODS)
        if num_known < 1:
            raise ValueError(f"num_known must be >= 1, got {num_known}")
        if (top is None) == (width is None):
            raise ValueError(
                "pass the trainable top layers or, for a head on pooled vectors, width"
            )
        self.top = top
        if top is not None:
            top.normalize = False
        d = self._width(top) if top is not None else int(width)  # type: ignore[arg-type]
        self.dense = nn.Linear(d, d)
        self.dropout = nn.Dropout(dropout)
        self.method = method
        self.scale = float(scale)
        self.classifier = nn.Linear(d, num_known, bias=method == "adb")
        if method == "da_adb":  # TEXTOIR's CosNorm_Classifier initialisation
            bound = 1.0 / math.sqrt(d)
            nn.init.uniform_(self.classifier.weight, -bound, bound)
        self.centroids: Tensor
        self.register_buffer("centroids", torch.zeros(num_known, d))

    @staticmethod
    def _width(top: TopLayers) -> int:
        for p in top.parameters():
            return int(p.shape[-1])
        raise ValueError("top has no parameters")

    def features(self, states: Tensor, mask: Tensor | None) -> Tensor:
        """``[B, d]`` head features (dropout active in training mode) of token states and
        their mask, or of pooled vectors (``mask=None``, no top layers)."""
        if self.top is not None:
            if mask is None:
                raise ValueError("the top layers need the token mask")
            states = self.top.pooled(states, mask)
        return self.dropout(F.relu(self.dense(states)))

    def logits(self, features: Tensor) -> Tensor:
        """Closed-set logits of the method's classifier."""
        if self.method == "adb":
            return self.classifier(features)
        return distance_aware_logits(features, self.centroids, self.classifier.weight, self.scale)


@torch.no_grad()
def embed(
    net: OpenIntentNet, texts: CachedTexts, *, train_mode: bool = False, batch_size: int = 512
) -> Tensor:
    """``[N, d]`` head features of every text, in eval mode (or with dropout on)."""
    was = net.training
    net.train(train_mode)
    order = torch.argsort(texts.lengths, stable=True)
    out = torch.empty(len(texts), net.dense.out_features)
    try:
        for rows in order.split(batch_size):
            out[rows] = net.features(*texts.batch(rows)).float()
    finally:
        net.train(was)
    return out


def class_means(features: Tensor, labels: Tensor, num_known: int) -> Tensor:
    """``[K, d]`` class means (a class without examples gets a zero row)."""
    sums = features.new_zeros(num_known, features.shape[1]).index_add(0, labels, features)
    counts = torch.bincount(labels, minlength=num_known).clamp_min(1).to(features.dtype)
    return sums / counts.unsqueeze(1)


def _macro_f1(y_true: Tensor, y_pred: Tensor, num_classes: int) -> float:
    """Macro-F1 in percent over the classes present in ``y_true`` or ``y_pred`` (as
    scikit-learn's ``f1_score(average="macro")``, TEXTOIR's dev score)."""
    f1 = f1_per_class(y_true, y_pred, num_classes)
    present = torch.bincount(torch.cat((y_true, y_pred)), minlength=num_classes) > 0
    return 100.0 * float(f1[present].mean())


def _closed_score(
    net: OpenIntentNet, train: CachedTexts, dev: CachedTexts, num_known: int
) -> float:
    """The early-stopping score, percent: TEXTOIR's dev accuracy (ADB) or macro-F1
    (DA-ADB) of the classifier; for ``spacl``, the dev accuracy of the nearest train
    class mean (the representation has no classifier)."""
    with torch.no_grad():
        if net.method == "spacl":
            means = class_means(embed(net, train), train.labels, num_known)
            pred = torch.cdist(embed(net, dev), means).argmin(dim=1)
            return 100.0 * float((pred == dev.labels).double().mean())
        pred = net.logits(embed(net, dev)).argmax(dim=1)
    if net.method == "adb":
        return 100.0 * float((pred == dev.labels).double().mean())
    return _macro_f1(dev.labels, pred, num_known)


def _optimizer(
    net: OpenIntentNet, schedule: ADBSchedule, steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """TEXTOIR's AdamW (no weight decay on biases and LayerNorm weights: the engine's
    ``exclude_bias_and_norm`` groups) and its linear warm-up then linear decay over
    ``steps`` (the engine's optimiser and schedule)."""
    opt = build_optimizer(
        net,
        "adamw",
        schedule.lr,
        weight_decay=schedule.weight_decay,
        exclude_bias_and_norm=True,
    )
    return opt, build_scheduler(opt, WarmupLinear(steps, schedule.warmup))


def _spacl_loss(schedule: ADBSchedule) -> nn.Module:
    """SPACL in the paper's supervised form (the ``text_finetune`` row of the registry:
    ``positive_pool="instance_class"``, ``detach_candidates=False``), seeded."""
    loss = text_loss(
        "spacl", {}, temperature=schedule.temperature, seed=schedule.seed, finetuned=True
    )
    assert loss is not None
    return loss


def _stage_one_loss(
    net: OpenIntentNet, train: CachedTexts, rows: Tensor, contrastive: nn.Module | None
) -> Tensor:
    """Cross-entropy of the classifier, or SPACL on ``SPACL_VIEWS`` dropout views."""
    states, mask = train.batch(rows)
    labels = train.labels[rows]
    if contrastive is None:
        return F.cross_entropy(net.logits(net.features(states, mask)), labels)
    views = torch.stack([net.features(states, mask) for _ in range(SPACL_VIEWS)], dim=1)
    loss: Tensor = contrastive(None, F.normalize(views, dim=-1), labels)
    return loss


@dataclass
class PretrainResult:
    """What stage 1 did: the dev score after every epoch, the kept epoch (1-based), time."""

    dev_scores: list[float] = field(default_factory=list)
    train_losses: list[float] = field(default_factory=list)
    best_epoch: int = 0
    seconds: float = 0.0

    @property
    def epochs(self) -> int:
        return len(self.dev_scores)


def epoch_order(
    order: list[Tensor],
    train: CachedTexts,
    batch_size: int,
    gen: torch.Generator,
    start: int,
) -> list[Tensor]:
    """The running epoch's length-grouped batches of ``train``: a fresh epoch
    (``start == 0``) draws a new order from ``gen``; a resumed one keeps ``order``, the
    checkpoint's."""
    return length_batches(train.lengths, batch_size, gen) if start == 0 else order


class PretrainSteps(StageBody):
    """Stage 1 in the engine's loop: DA-ADB's centroids at the start of every epoch,
    length-grouped batches in a seeded order, one AdamW step (and the schedule's); the
    dev score after every epoch (the best epoch's weights kept, ``patience``)."""

    def __init__(
        self,
        net: OpenIntentNet,
        data: tuple[CachedTexts, CachedTexts],
        schedule: ADBSchedule,
        steps: int,
        log: Callable[[str], None] | None,
    ) -> None:
        self.net, (self.train, self.dev), self.schedule, self.log = net, data, schedule, log
        self.num_known = int(net.classifier.out_features)
        self.gen = torch.Generator().manual_seed(schedule.seed)
        torch.manual_seed(schedule.seed)  # dropout masks
        self.opt, self.lr_schedule = _optimizer(net, schedule, max(1, steps))
        self.contrastive = _spacl_loss(schedule) if net.method == "spacl" else None
        self.result = PretrainResult()
        self.total, self.count = 0.0, 0
        self.order: list[Tensor] = []  # the running epoch's batches

    def begin_epoch(self, epoch: int, loop: TrainLoop) -> None:
        if self.net.method == "da_adb":
            means = class_means(embed(self.net, self.train), self.train.labels, self.num_known)
            self.net.centroids.copy_(means)
        self.net.train()
        self.total, self.count = 0.0, 0

    def resume_epoch(self, epoch: int, start: int, loop: TrainLoop) -> None:
        self.net.train()  # the centroids and the sums are the checkpoint's

    def batches(self, epoch: int, start: int) -> Iterator[Tensor]:
        self.order = epoch_order(self.order, self.train, self.schedule.batch_size, self.gen, start)
        return iter(self.order[start:])

    def _parts(self) -> dict[str, Any]:
        return {
            "net": self.net,
            "opt": self.opt,
            "lr_schedule": self.lr_schedule,
            "contrastive": self.contrastive,
            "gen": self.gen,
        }

    def state_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            **states_of(self._parts()),
            "order": list(self.order),
            "total": self.total,
            "count": self.count,
            "dev_scores": list(r.dev_scores),
            "train_losses": list(r.train_losses),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_states(self._parts(), state)
        self.order, self.total, self.count = list(state["order"]), state["total"], state["count"]
        self.result.dev_scores = list(state["dev_scores"])
        self.result.train_losses = list(state["train_losses"])

    def step(self, batch: Tensor, loop: TrainLoop) -> float:
        loss = _stage_one_loss(self.net, self.train, batch, self.contrastive)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.lr_schedule.step()
        value = loss.item()
        self.total += value * len(batch)
        self.count += len(batch)
        return value

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        return {"epoch": epoch + 1, "loss": self.total / self.count}

    def evaluator(self) -> Evaluator:
        """The loop's validation (the engine's :class:`~spacl.engine.evaluation.Evaluator`):
        the closed-set dev score of the network in eval mode, epochs ranked by it."""
        net, train, dev, num_known = self.net, self.train, self.dev, self.num_known
        return Evaluator(
            lambda epoch, step: {"score": _closed_score(net, train, dev, num_known)},
            (net,),
            key="score",
            log=self.record_score,
        )

    def record_score(self, epoch: int, metrics: dict[str, Any], record: dict[str, Any]) -> None:
        """Keep ``epoch``'s dev score and training loss (and log them)."""
        score = metrics["score"]
        self.result.dev_scores.append(score)
        self.result.train_losses.append(record["loss"])
        if self.log is not None:
            self.log(f"epoch {epoch + 1}: train loss {record['loss']:.4f}, dev {score:.2f}")

    def snapshot(self) -> dict[str, Tensor]:
        return copy.deepcopy(self.net.state_dict())

    def load_best(self, snapshot: Any) -> None:
        self.net.load_state_dict(snapshot)


def pretrain(
    net: OpenIntentNet,
    train: CachedTexts,
    dev: CachedTexts,
    schedule: ADBSchedule,
    log: Callable[[str], None] | None = None,
    stages: Checkpointer | None = None,
) -> PretrainResult:
    """Stage 1 (module docstring): train ``net`` in place, keep the best dev epoch's weights
    (:class:`PretrainSteps` in the engine's loop; ``stages``: the run's checkpointed
    loops)."""
    steps = (len(train) // schedule.batch_size) * schedule.max_epochs
    start = time.perf_counter()
    body = PretrainSteps(net, (train, dev), schedule, steps, log)
    plan = LoopPlan(epochs=schedule.max_epochs, validate_every=1, patience=schedule.patience)
    loop = run_stage(body, plan, stages, body.evaluator())
    assert loop.best is not None
    loop.restore_best()
    body.result.best_epoch = loop.best.epoch
    body.result.seconds = time.perf_counter() - start
    return body.result


class BoundarySteps(StageBody):
    """Stage 2 in the engine's loop: ADB's radii by Adam on training-mode features of
    length-grouped batches; the dev macro-F1 of the open classifier after every epoch
    (the best epoch's radii kept, ``patience``)."""

    def __init__(
        self,
        net: OpenIntentNet,
        data: tuple[CachedTexts, CachedTexts],
        schedule: ADBSchedule,
        log: Callable[[str], None] | None,
    ) -> None:
        self.net, (self.train, self.dev), self.schedule, self.log = net, data, schedule, log
        self.num_known = int(net.classifier.out_features)
        self.centroids = class_means(embed(net, self.train), self.train.labels, self.num_known)
        self.gen = torch.Generator().manual_seed(schedule.seed + BOUNDARY_SEED_OFFSET)
        self.raw = torch.randn(self.num_known, generator=self.gen).requires_grad_(True)
        self.opt = build_optimizer([self.raw], "adam", schedule.boundary_lr)
        classes = torch.arange(self.num_known)
        radii = F.softplus(self.raw).detach()
        self.model = ADBModel(self.centroids, radii, classes, self.num_known)
        self.dev_z = embed(net, self.dev)
        self.scores: list[float] = []
        self.order: list[Tensor] = []  # the running epoch's batches

    def batches(self, epoch: int, start: int) -> Iterator[Tensor]:
        self.order = epoch_order(self.order, self.train, self.schedule.batch_size, self.gen, start)
        return iter(self.order[start:])

    def state_dict(self) -> dict[str, Any]:
        return {
            **states_of({"opt": self.opt, "gen": self.gen}),
            "raw": self.raw.detach().clone(),
            "radii": self.model.radii,
            "order": list(self.order),
            "scores": list(self.scores),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_states({"opt": self.opt, "gen": self.gen}, state)
        with torch.no_grad():
            self.raw.copy_(state["raw"])
        self.model.radii = state["radii"]
        self.order, self.scores = list(state["order"]), list(state["scores"])

    def step(self, batch: Tensor, loop: TrainLoop) -> float:
        with torch.no_grad():
            z = self.net.features(*self.train.batch(batch))
        d = (z - self.centroids[self.train.labels[batch]]).norm(dim=1)
        loss = boundary_loss(d, F.softplus(self.raw)[self.train.labels[batch]])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def evaluator(self) -> Evaluator:
        """The loop's validation (the engine's :class:`~spacl.engine.evaluation.Evaluator`,
        no module: the dev features are fixed): the open classifier's dev macro-F1 with
        the current radii, epochs ranked by it."""
        return Evaluator(self.score, key="score", log=self.record_score)

    def score(self, epoch: int, step: int) -> dict[str, float]:
        """The current radii, set on the model, and its dev macro-F1."""
        self.model.radii = F.softplus(self.raw).detach().clone()
        predicted = self.model.predict(self.dev_z)
        return {"score": _macro_f1(self.dev.labels, predicted, self.num_known + 1)}

    def record_score(self, epoch: int, metrics: dict[str, Any], record: dict[str, Any]) -> None:
        """Keep ``epoch``'s dev macro-F1 (and log it)."""
        score = metrics["score"]
        self.scores.append(score)
        if self.log is not None:
            self.log(f"boundary epoch {epoch + 1}: dev macro-F1 {score:.2f}")

    def snapshot(self) -> Tensor:
        return self.model.radii

    def load_best(self, snapshot: Any) -> None:
        self.model.radii = snapshot


def fit_boundaries(
    net: OpenIntentNet,
    train: CachedTexts,
    dev: CachedTexts,
    schedule: ADBSchedule,
    log: Callable[[str], None] | None = None,
    stages: Checkpointer | None = None,
) -> tuple[ADBModel, dict[str, float | int | list[float]]]:
    """Stage 2 (module docstring): ADB's radii on training-mode features, dev early stopping
    (:class:`BoundarySteps` in the engine's loop; ``stages``: the run's checkpointed loops).

    Returns the fitted :class:`~spacl.evaluate.adb.ADBModel` (``open_label = K``) and a
    record (``boundary_epochs``, ``boundary_best_epoch``, ``boundary_dev_f1``, seconds).
    """
    start = time.perf_counter()
    body = BoundarySteps(net, (train, dev), schedule, log)
    plan = LoopPlan(
        epochs=schedule.boundary_max_epochs, validate_every=1, patience=schedule.patience
    )
    was = net.training
    net.train()
    try:
        loop = run_stage(body, plan, stages, body.evaluator())
    finally:
        net.train(was)
    loop.restore_best()
    record: dict[str, float | int | list[float]] = {
        "boundary_epochs": len(body.scores),
        "boundary_best_epoch": 0 if loop.best is None else loop.best.epoch,
        "boundary_dev_f1": body.scores,
        "boundary_seconds": time.perf_counter() - start,
    }
    return body.model, record


@dataclass
class Detector:
    """A trained two-stage detector: the network (eval mode) and its boundaries."""

    net: OpenIntentNet
    boundary: ADBModel
    record: dict[str, object]

    @torch.no_grad()
    def scores(self, texts: CachedTexts) -> tuple[Tensor, Tensor, Tensor]:
        """``(features [N, d], nearest class [N], distance to its centroid [N])``."""
        z = embed(self.net, texts)
        dist, nearest = self.boundary.distances(z).min(dim=1)
        return z, nearest, dist

    def predict(self, texts: CachedTexts) -> Tensor:
        """Class ids, ``K`` (open) outside the nearest class's ball."""
        return self.boundary.predict(embed(self.net, texts))


def train_detector(
    top: TopLayers | None,
    train: CachedTexts,
    dev: CachedTexts,
    num_known: int,
    schedule: ADBSchedule,
    log: Callable[[str], None] | None = None,
    stages: Checkpointer | None = None,
) -> Detector:
    """Both stages (module docstring) with the same ``schedule`` for either method
    (``stages``: the run's checkpointed loops).

    ``top``: a fresh copy of the trainable top layers (``None``: the head reads pooled
    vectors, ``train.states`` is ``[N, d]``).  The record holds the epochs, the kept
    epochs, the dev scores and the seconds of each stage.
    """
    torch.manual_seed(schedule.seed)  # the head's initialisation
    width = None if top is not None else int(train.states.shape[-1])
    net = OpenIntentNet(
        top, num_known, schedule.method, width=width, scale=schedule.scale, dropout=schedule.dropout
    )
    fit = pretrain(net, train, dev, schedule, log, stages)
    boundary, record = fit_boundaries(net, train, dev, schedule, log, stages)
    net.eval()
    out: dict[str, object] = {
        "epochs": fit.epochs,
        "best_epoch": fit.best_epoch,
        "dev_scores": fit.dev_scores,
        "train_losses": fit.train_losses,
        "pretrain_seconds": fit.seconds,
        **record,
    }
    return Detector(net, boundary, out)
