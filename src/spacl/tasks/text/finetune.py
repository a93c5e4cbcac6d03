"""Fine-tuning the top layers of a BERT-style sentence encoder on cached bottom states.

CPU-friendly fine-tuning for open-intent detection (issue 11, item 6b): the bottom
``n_layers - L`` transformer layers stay frozen, so their token-level outputs (and the
attention masks) are computed **once per text** (:func:`bottom_states`) and kept in
memory; each training step runs only the top ``L`` trainable layers and the mean
pooling (:class:`TopLayers`).  In eval mode ``TopLayers`` on the cached states gives
the same embedding as the full model (tested against
:class:`spacl.models.text.MiniLMEncoder`).

Views (:func:`encode_views`): the same text passed ``V`` times through the trainable
layers, view 0 in eval mode (the original embedding), views ``1..V-1`` with the
layers' dropout on (SimCSE-style dropout views, Gao et al. 2021).  Dropout acts in the
trainable layers only: the frozen bottom is computed once, without dropout.

Objectives (:func:`finetune`), all on the same views, steps and initial weights (the
``text_finetune`` rows of :mod:`spacl.losses.registry`, which hold the SPACL forms):

- ``spacl``: :class:`spacl.losses.SPACLLoss` supervised
  (``positive_pool="instance_class"``, ``detach_candidates=False``, anchors from the
  pool: gradient through every view), defaults otherwise;
- ``spacl_selected``: the same with the supervised setting ``spacl reproduce spacl``
  chose on validation (every view an anchor, SupCon's mean over the positives);
- ``supcon``: :class:`spacl.losses.SupConLoss`;
- ``cross_entropy``: a linear classifier on the *unnormalised* mean-pooled embedding
  of every view (as a BERT classifier reads its un-normalised output); the classifier
  is trained with the same optimiser and discarded afterwards.

Contrastive losses read the L2-normalised embeddings; no projection head is used, so
the features of the open-set decision are the encoder's embeddings for every method.
``FinetuneSettings.params`` adds keyword arguments to the loss (a recipe's
``objective.params``): the SPACL form is then the recipe's, over the defaults above.

Batches (issue 18): class-balanced by default (:class:`spacl.data.sampling.BatchPlan`,
``samples_per_class`` m = 2: a batch of 8 holds 2 examples of each of 4 classes), so
every batch holds at least two classes; with fewer classes than ``batch_size / m``, m
grows to the smallest divisor of the batch that fits (:func:`balanced_m`).
``samples_per_class=None`` keeps the older uniform batches (a seeded permutation).

The task's runner (``spacl train text/stackoverflow_finetune_*``) is
:mod:`spacl.tasks.text.task`.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch import Tensor, nn

from spacl._validation import check_choice, check_flag
from spacl.engine.device import device_of
from spacl.engine.evaluation import Evaluator, evaluating
from spacl.engine.loop import LoopPlan, TrainLoop
from spacl.engine.optim import build_optimizer
from spacl.engine.stages import Checkpointer, StageBody, load_states, run_stage, states_of
from spacl.losses.registry import objective_names
from spacl.tasks.text.loss import text_loss

__all__ = [
    "EPOCH_SEED_STRIDE",
    "FINETUNE_OBJECTIVES",
    "FinetuneSettings",
    "FinetuneSteps",
    "TopLayers",
    "balanced_m",
    "bottom_states",
    "dev_accuracy_score",
    "embed_states",
    "encode_views",
    "epoch_batches",
    "finetune",
    "finetune_loss",
    "pad_states",
    "settings_of",
]

#: the fine-tuning objectives: the ``text_finetune`` rows of :mod:`spacl.losses.registry`
FINETUNE_OBJECTIVES = objective_names("text_finetune")
#: the optimisers of a text run (``optim.name``; SGD with momentum 0.9)
TEXT_OPTIMIZERS = ("adam", "adamw", "sgd")
#: epoch ``e`` of seed ``s`` shuffles with generator seed ``s * EPOCH_SEED_STRIDE + e``
#: (no two (seed, epoch) pairs share a generator seed while epochs stay below the stride)
EPOCH_SEED_STRIDE = 1_000_003


def pad_states(states: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad ``[T_i, d]`` token states to ``([B, T, d] states, [B, T] bool mask)``."""
    if not states:
        raise ValueError("pad_states needs at least one text's states")
    t = max(int(s.shape[0]) for s in states)
    d = int(states[0].shape[1])
    out = states[0].new_zeros(len(states), t, d)
    mask = torch.zeros(len(states), t, dtype=torch.bool)
    for i, s in enumerate(states):
        out[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = True
    return out, mask


@torch.no_grad()
def bottom_states(
    model: nn.Module,
    tokenize: Callable[[list[str]], dict[str, Tensor]],
    texts: Sequence[str],
    num_frozen: int,
    batch_size: int = 256,
) -> list[Tensor]:
    """Token states after the first ``num_frozen`` layers of ``model``, one per text.

    ``model`` is a Hugging Face encoder (``BertModel``-like: called with ``input_ids``,
    ``attention_mask``... and ``output_hidden_states=True``); ``tokenize`` maps texts
    to its inputs.  Returns ``float32 [T_i, d]`` per text (padding removed; ``T_i``
    counts the special tokens), in the order of ``texts``, computed under the engine's
    :func:`~spacl.engine.evaluation.evaluating` (eval mode, the RNG forked) on the
    model's device and kept in host memory (moved to the device a batch at a time).
    """
    device = device_of(model)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
    out: list[Tensor | None] = [None] * len(texts)
    with evaluating(model):  # eval mode, each submodule's own mode restored after
        for i in range(0, len(order), batch_size):
            rows = order[i : i + batch_size]
            feats = tokenize([texts[r] for r in rows])
            inputs = {k: v.to(device) for k, v in feats.items() if isinstance(v, Tensor)}
            hidden = model(**inputs, output_hidden_states=True).hidden_states[num_frozen]
            hidden = hidden.float().cpu()  # the cache lives in host memory
            lengths = inputs["attention_mask"].sum(1).tolist()
            for j, (r, n) in enumerate(zip(rows, lengths, strict=True)):
                out[r] = hidden[j, : int(n)].clone()
    return [s for s in out if s is not None]


class TopLayers(nn.Module):
    """The top transformer layers of an encoder (copied) + mean pooling.

    ``forward(states [B, T, d], mask [B, T]) -> [B, d]``: the layers run with an
    additive attention mask (0 on tokens, the dtype's minimum on padding), then the
    masked mean over tokens; L2-normalised when ``normalize`` (returned unnormalised
    by :meth:`pooled`).

    Args:
        layers: the trainable layers (deep-copied, so the source model is untouched),
            each called as ``layer(hidden, attention_mask=additive_mask)``.
        normalize: L2-normalise the output (the sentence-transformer's last module).
    """

    def __init__(self, layers: Sequence[nn.Module], normalize: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in layers)
        for p in self.layers.parameters():
            p.requires_grad_(True)
        self.normalize = check_flag(normalize, "normalize")

    def pooled(self, states: Tensor, mask: Tensor) -> Tensor:
        """Mean-pooled output of the layers, not normalised: ``[B, d]``."""
        if states.ndim != 3 or mask.shape != states.shape[:2]:
            raise ValueError(
                f"states must be [B, T, d] with mask [B, T], got {tuple(states.shape)} "
                f"and {tuple(mask.shape)}"
            )
        m = mask.to(states.device)
        additive = torch.zeros(m.shape, dtype=states.dtype, device=states.device)
        additive = additive.masked_fill(~m, torch.finfo(states.dtype).min)[:, None, None, :]
        h = states
        for layer in self.layers:
            out = layer(h, attention_mask=additive)
            h = out[0] if isinstance(out, tuple) else out
        w = m.to(h.dtype).unsqueeze(-1)
        return (h * w).sum(1) / w.sum(1).clamp_min(1.0)

    def forward(self, states: Tensor, mask: Tensor) -> Tensor:
        z = self.pooled(states, mask)
        return F.normalize(z, dim=1) if self.normalize else z


def encode_views(top: TopLayers, states: Tensor, mask: Tensor, num_views: int) -> Tensor:
    """``[B, V, d]`` unnormalised views: view 0 in eval mode, ``1..V-1`` with dropout on.

    Leaves ``top`` in train mode.
    """
    if num_views < 1:
        raise ValueError(f"num_views must be >= 1, got {num_views}")
    b, t, d = states.shape
    top.eval()
    first = top.pooled(states, mask).unsqueeze(1)
    top.train()
    if num_views == 1:
        return first
    m = num_views - 1
    rep = states.unsqueeze(1).expand(b, m, t, d).reshape(b * m, t, d)
    others = top.pooled(rep, mask.unsqueeze(1).expand(b, m, t).reshape(b * m, t))
    return torch.cat((first, others.reshape(b, m, -1)), dim=1)


def embed_states(top: TopLayers, states: Sequence[Tensor], batch_size: int = 512) -> Tensor:
    """``float32 [N, d]`` eval-mode embeddings of cached states (normalised as ``top``),
    computed on ``top``'s device under the engine's
    :func:`~spacl.engine.evaluation.evaluating` (eval mode, autograd off, the RNG forked,
    each submodule's mode restored after), returned in host memory."""
    if not states:
        raise ValueError("embed_states needs at least one text's states")
    device = device_of(top)
    order = sorted(range(len(states)), key=lambda i: int(states[i].shape[0]))  # less padding
    out: Tensor | None = None
    with evaluating(top):
        for i in range(0, len(order), batch_size):
            rows = order[i : i + batch_size]
            h, mask = pad_states([states[r] for r in rows])
            z = top(h.to(device), mask.to(device)).float().cpu()
            if out is None:
                out = z.new_zeros(len(states), z.shape[1])
            out[torch.tensor(rows)] = z
    assert out is not None
    return out


@dataclass(frozen=True)
class FinetuneSettings:
    """One fine-tuning budget, identical across objectives."""

    objective: str
    epochs: int = 1
    batch_size: int = 8  # instances per step (each with ``num_views`` views)
    lr: float = 1e-5  # every trainable parameter (the SPACL paper's setting)
    optimizer: str = "adam"  # spacl.engine.optim.build_optimizer's name
    weight_decay: float = 0.0
    temperature: float = 0.1
    num_views: int = 5
    seed: int = 0
    max_steps: int | None = None  # stop early (tests / smoke runs)
    samples_per_class: int | None = 2  # balanced batches (module docstring); None: uniform
    params: Mapping[str, Any] = field(default_factory=dict)  # extra loss keyword arguments

    def __post_init__(self) -> None:
        check_choice(self.objective, "objective", FINETUNE_OBJECTIVES)
        if self.epochs < 1 or self.batch_size < 2 or self.num_views < 2:
            raise ValueError(
                "epochs must be >= 1, batch_size >= 2 and num_views >= 2, got "
                f"{self.epochs}, {self.batch_size}, {self.num_views}"
            )
        if not self.lr > 0 or not self.temperature > 0:
            raise ValueError(f"lr and temperature must be > 0, got {self.lr}, {self.temperature}")
        check_choice(self.optimizer, "optimizer", TEXT_OPTIMIZERS)
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.samples_per_class is not None and not 1 <= self.samples_per_class:
            raise ValueError(f"samples_per_class must be >= 1, got {self.samples_per_class}")


def balanced_m(batch_size: int, num_classes: int, samples_per_class: int) -> int:
    """The ``m`` of a balanced batch: ``samples_per_class``, or the smallest divisor of
    ``batch_size`` above it that leaves at most ``num_classes`` classes per batch.

    Raises:
        ValueError: fewer than 2 classes, or no divisor leaves 2 or more classes.
    """
    for m in range(samples_per_class, batch_size // 2 + 1):
        if batch_size % m == 0 and 2 <= batch_size // m <= num_classes:
            return m
    raise ValueError(
        f"no balanced batch of {batch_size} holds >= 2 of {num_classes} classes with "
        f">= {samples_per_class} examples each"
    )


def epoch_batches(settings: FinetuneSettings, labels: Tensor, epoch: int) -> Iterator[Tensor]:
    """The instance indices of every step of ``epoch`` (module docstring)."""
    n = labels.numel()
    if settings.samples_per_class is None:
        gen = torch.Generator().manual_seed(settings.seed * EPOCH_SEED_STRIDE + epoch)
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, settings.batch_size):
            if perm[i : i + settings.batch_size].numel() >= 2:  # skip a last batch of one
                yield perm[i : i + settings.batch_size]
        return
    from spacl.data.sampling import BatchPlan

    classes = int(labels.unique().numel())
    m = balanced_m(settings.batch_size, classes, settings.samples_per_class)
    plan = BatchPlan(
        n, settings.batch_size, settings.seed, labels=labels, balanced=True, samples_per_class=m
    )
    for step in range(len(plan)):
        yield plan.global_indices(epoch, step)


def finetune_loss(settings: FinetuneSettings) -> nn.Module:
    """The loss of ``settings.objective`` from the one registry (:mod:`spacl.losses.registry`).

    The SPACL forms of the module docstring are the registry rows' defaults
    (``params`` override them); a classifier's loss takes no temperature.
    """
    loss = text_loss(
        settings.objective,
        settings.params,
        temperature=settings.temperature,
        seed=settings.seed,
        finetuned=True,
    )
    assert loss is not None  # every fine-tuning objective has a loss module
    return loss


def _objective_loss(
    settings: FinetuneSettings,
    views: Tensor,
    labels: Tensor,
    classifier: nn.Linear | None,
    loss_fn: nn.Module,
) -> Tensor:
    """The step's loss on ``views [b, V, d]``: CE of every view, or the contrastive loss."""
    if classifier is not None:
        b, v, d = views.shape
        logits = classifier(views.reshape(b * v, d))
        ce: Tensor = loss_fn(logits.reshape(b, v, -1), labels)
        return ce
    z = F.normalize(views, dim=-1)
    if settings.objective in ("spacl", "spacl_selected"):
        loss: Tensor = loss_fn(None, z, labels)
    else:
        loss = loss_fn(z, labels=labels)
    return loss


class FinetuneSteps(StageBody):
    """The fine-tune's body in the engine's loop (:func:`finetune`): an epoch's batches
    (:func:`epoch_batches`), their views and the objective's loss, one Adam step; the epoch
    score (``score``) is the loop's validation, the best epoch's weights its snapshot."""

    def __init__(
        self,
        top: TopLayers,
        data: tuple[Sequence[Tensor], Tensor],
        settings: FinetuneSettings,
        parts: tuple[nn.Linear | None, nn.Module, torch.optim.Optimizer],
        on_step: Callable[[int, float], None] | None,
        score: Callable[[TopLayers], float] | None,
        scores: list[float] | None = None,
    ) -> None:
        self.top, (self.states, self.labels), self.settings = top, data, settings
        self.classifier, self.loss_fn, self.optimizer = parts
        self.on_step, self.score = on_step, score
        self.device = device_of(top)
        self.epoch_losses: list[float] = []
        self.scores: list[float] = scores if scores is not None else []  # every epoch's

    def batches(self, epoch: int, start: int) -> Iterator[Tensor]:
        # an epoch's batches are a function of (seed, epoch): a resumed epoch skips ahead
        return itertools.islice(epoch_batches(self.settings, self.labels, epoch), start, None)

    def _parts(self) -> dict[str, Any]:
        return {
            "top": self.top,
            "classifier": self.classifier,
            "loss_fn": self.loss_fn,
            "optimizer": self.optimizer,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            **states_of(self._parts()),
            "epoch_losses": list(self.epoch_losses),
            "scores": list(self.scores),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_states(self._parts(), state)
        self.epoch_losses = list(state["epoch_losses"])
        self.scores[:] = state["scores"]  # the caller's list, filled in place

    def step(self, batch: Tensor, loop: TrainLoop) -> float:
        h, mask = pad_states([self.states[int(j)] for j in batch])
        h, mask = h.to(self.device), mask.to(self.device)
        yb = self.labels[batch].to(self.device)
        views = encode_views(self.top, h, mask, self.settings.num_views)  # [b, V, d]
        loss = _objective_loss(self.settings, views, yb, self.classifier, self.loss_fn)
        if not bool(torch.isfinite(loss)):
            where = loop.progress.global_step
            raise ValueError(f"non-finite {self.settings.objective} loss at step {where}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        value = float(loss.detach())
        if self.on_step is not None:
            self.on_step(loop.progress.global_step + 1, value)
        return value

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        self.epoch_losses.append(loop.progress.mean_losses().get("loss", 0.0))
        return {"epoch": epoch, "loss": self.epoch_losses[-1]}

    def evaluator(self) -> Evaluator | None:
        """The loop's validation (the engine's :class:`~spacl.engine.evaluation.Evaluator`):
        ``score`` of the copy in eval mode, epochs ranked by it; ``None`` without one."""
        score = self.score
        if score is None:
            return None
        top = self.top
        return Evaluator(
            lambda epoch, step: {"score": float(score(top))},
            (top,),
            key="score",
            log=self.record_score,
        )

    def record_score(self, epoch: int, metrics: dict[str, Any], record: dict[str, Any]) -> None:
        """Keep ``epoch``'s score (a NaN stops: no epoch can be compared with it)."""
        value = float(metrics["score"])
        if value != value:
            raise ValueError(f"the epoch score is NaN after epoch {epoch + 1}")
        self.scores.append(value)

    def snapshot(self) -> dict[str, Tensor]:
        return {k: v.detach().clone() for k, v in self.top.state_dict().items()}

    def load_best(self, snapshot: Any) -> None:
        self.top.load_state_dict(snapshot)


def finetune(
    initial: TopLayers,
    states: Sequence[Tensor],
    labels: Tensor,
    num_classes: int,
    settings: FinetuneSettings,
    *,
    on_step: Callable[[int, float], None] | None = None,
    score: Callable[[TopLayers], float] | None = None,
    stages: Checkpointer | None = None,
    scores: list[float] | None = None,
) -> tuple[TopLayers, list[float]]:
    """Fine-tune a copy of ``initial`` on cached ``states`` with ``labels``.

    Every step draws ``settings.batch_size`` instances (class-balanced, or a seeded
    permutation per epoch: module docstring), makes their views (:func:`encode_views`)
    and takes one Adam step on the objective, in the engine's loop
    (:class:`FinetuneSteps`).  ``initial`` is not modified.  Returns the fine-tuned copy
    (eval mode) and the mean loss of every epoch.  ``on_step`` receives ``(step, loss)``
    after every step.

    The copy trains on ``initial``'s device (the cached states, on the host, move there
    one batch at a time; so do the loss and the cross-entropy classifier).

    ``score``: called with the copy in eval mode after every epoch (e.g. the known-class
    dev accuracy, :func:`dev_accuracy_score`); the weights of the best-scoring epoch (the
    earliest on ties) are returned instead of the last ones, early stopping without a
    patience.  It must not draw from torch's global random state (the next epoch's
    dropout views do); an eval-mode forward does not.

    ``stages``: the run's checkpointed loops (this fine-tune is its next stage);
    ``scores``: every epoch's ``score`` is appended to it (also those of a stage a
    resumed run loads instead of training again).
    """
    if len(states) != labels.numel():
        raise ValueError(f"{len(states)} texts' states but {labels.numel()} labels")
    torch.manual_seed(settings.seed)
    top = copy.deepcopy(initial)
    top.train()
    classifier: nn.Linear | None = None
    params: list[nn.Parameter] = list(top.parameters())
    device = device_of(top)
    if settings.objective == "cross_entropy":
        dim = int(states[0].shape[1])
        classifier = nn.Linear(dim, num_classes).to(device)
        params += list(classifier.parameters())
    loss_fn = finetune_loss(settings).to(device)
    optimizer = build_optimizer(
        params, settings.optimizer, settings.lr, weight_decay=settings.weight_decay, momentum=0.9
    )
    body = FinetuneSteps(
        top, (states, labels), settings, (classifier, loss_fn, optimizer), on_step, score, scores
    )
    plan = LoopPlan(
        epochs=settings.epochs,
        max_steps=settings.max_steps,
        validate_every=1 if score is not None else 0,
    )
    loop = run_stage(body, plan, stages, body.evaluator())
    top.eval()
    loop.restore_best()
    return top, body.epoch_losses


def settings_of(cfg: DictConfig, objective: str | None = None) -> FinetuneSettings:
    """The fine-tuning settings of a text recipe (``objective`` replaces its name)."""
    return FinetuneSettings(
        objective or str(cfg.objective.name),
        epochs=int(cfg.train.epochs),
        batch_size=int(cfg.train.batch_size),
        lr=float(cfg.optim.lr),
        optimizer=str(cfg.optim.name),
        weight_decay=float(cfg.optim.weight_decay),
        temperature=float(cfg.objective.temperature),
        num_views=int(cfg.views.num_views),
        seed=int(cfg.train.seed),
        max_steps=cfg.finetune.max_steps,
        samples_per_class=cfg.finetune.samples_per_class,
        params=dict(cfg.objective.params or {}),
    )


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
