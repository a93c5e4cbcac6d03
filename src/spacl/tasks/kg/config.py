"""``task: kg`` recipes: the :class:`KGConfig` dataclasses and :func:`kg_config`, the KG
entry of the task registry (training: :mod:`spacl.tasks.kg`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig
from torch import nn

from spacl.data.kg import UNSEEN_POLICIES
from spacl.evaluate.ranking import TIE_POLICIES
from spacl.losses.registry import build_objective, objective_names
from spacl.models.kg import KG_INTERACTIONS
from spacl.schema import (
    DataSection,
    EvalSection,
    OptimSection,
    TrainSection,
    load_structured,
    register_task,
    validate_shared,
)
from spacl.schema_checks import choice, in_range, int_at_least, positive

__all__ = ["KG_OBJECTIVES", "KGConfig", "build_kg_objective", "kg_config"]

#: the link-prediction objectives: the ``kg`` rows of :mod:`spacl.losses.registry`
KG_OBJECTIVES = objective_names("kg")


@dataclass
class KGDataConfig(DataSection):
    name: str = "fb15k-237"
    root: str | None = None  # default: the data roots of spacl.data.sources
    unseen: str = "include"  # error | include | drop (valid/test names absent from train)


@dataclass
class KGModelConfig:
    kind: str = "complex"  # complex | distmult
    dim: int = 400
    init_scale: float = 1e-3
    dropout: float = 0.0
    normalize: bool = False


@dataclass
class KGObjectiveConfig:
    name: str = "infonce"  # infonce | spacl
    temperature: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class KGOptimConfig(OptimSection):
    name: str = "adagrad"  # adagrad | adam
    lr: float = 0.1
    n3: float = 0.0  # weight of the N3 regulariser, mean over the step's triples (h, r, t)
    weight_decay: float = 0.0


@dataclass
class KGTrainConfig(TrainSection):
    epochs: int = 100
    minutes: float | None = None  # training-time budget (evaluation excluded)
    batch_size: int = 1000  # queries (or triples, unit=triple) per step
    #: "query": a step holds distinct queries (h, r) with all their known tails as
    #: positives (K-vs-all); "triple": a step holds training triples, each with its one
    #: tail as positive and every other entity in the denominator (1-vs-all, Lacroix et
    #: al. 2018), the N3 term then covering (h, r, t)
    unit: str = "query"
    seed: int = 0
    device: str = "auto"
    log_every: int = 0  # steps between progress lines (0: epoch lines only)
    #: steps between checkpoints of a run directory (and after every epoch, at the end and
    #: on Ctrl-C / SIGTERM); 0: epoch ends only
    checkpoint_every: int = 500


@dataclass
class KGEvalConfig(EvalSection):
    every_epochs: int = 1  # validation (model selection); 0: only at the end
    batch_size: int = 1000
    ties: str = "mean"
    valid_subset: int | None = None  # rank only the first N valid triples (faster checks)


@dataclass
class KGConfig:
    """A link-prediction recipe (``task: kg``)."""

    task: str = "kg"
    name: str | None = None
    out_dir: str | None = None  # writes summary.json there when set
    data: KGDataConfig = field(default_factory=KGDataConfig)
    model: KGModelConfig = field(default_factory=KGModelConfig)
    objective: KGObjectiveConfig = field(default_factory=KGObjectiveConfig)
    optim: KGOptimConfig = field(default_factory=KGOptimConfig)
    train: KGTrainConfig = field(default_factory=KGTrainConfig)
    eval: KGEvalConfig = field(default_factory=KGEvalConfig)


@register_task("kg", runner="spacl.tasks.kg:train_kg")
def kg_config(cfg: Any = None, overrides: Sequence[str] = ()) -> DictConfig:
    """A KG recipe and its overrides on :class:`KGConfig`, validated (:func:`_validate`)."""
    return load_structured(KGConfig, _validate, cfg, overrides)


def _validate(cfg: DictConfig) -> None:
    """The shared sections (:func:`spacl.schema.validate_shared`), then the KG keys."""
    choice("task", cfg.task, ["kg"])
    validate_shared(cfg, optim_names=["adagrad", "adam"])
    choice("data.unseen", cfg.data.unseen, UNSEEN_POLICIES)
    choice("model.kind", cfg.model.kind, KG_INTERACTIONS)
    choice("objective.name", cfg.objective.name, KG_OBJECTIVES)
    choice("eval.ties", cfg.eval.ties, TIE_POLICIES)
    choice("train.unit", cfg.train.unit, ["query", "triple"])
    positive("objective.temperature", cfg.objective.temperature)
    positive("model.init_scale", cfg.model.init_scale)
    in_range("model.dropout", cfg.model.dropout, 0.0, 1.0, high_open=True)
    int_at_least("model.dim", cfg.model.dim, 1)
    int_at_least("eval.every_epochs", cfg.eval.every_epochs, 0)
    int_at_least("train.log_every", cfg.train.log_every, 0)
    int_at_least("train.checkpoint_every", cfg.train.checkpoint_every, 0)
    if cfg.eval.valid_subset is not None:
        int_at_least("eval.valid_subset", cfg.eval.valid_subset, 1)
    if cfg.train.minutes is not None:
        positive("train.minutes", cfg.train.minutes)
    in_range("optim.n3", cfg.optim.n3, 0.0, float("inf"), high_open=True)
    # build the loss once (cheap, no data): an unknown or invalid objective.params key
    # fails here, naming it, before the graph is loaded
    build_kg_objective(cfg.objective, int(cfg.train.seed))


def build_kg_objective(ocfg: Any, seed: int = 0) -> nn.Module:
    """The loss module of an ``objective`` section: the ``kg`` rows of the one registry
    (:mod:`spacl.losses.registry`: ``infonce`` | ``spacl``)."""
    loss = build_objective(
        str(ocfg.name), "kg", ocfg.params, temperature=ocfg.temperature, seed=seed
    )
    assert loss is not None  # every KG objective has a loss module
    return loss
