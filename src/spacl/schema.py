"""The recipe schema: one loader, one override syntax and one validator for every task.

A recipe is a YAML file (or a built-in name, :mod:`spacl.recipes`) with an optional
top-level ``task:`` (``image``, the default; ``kg``; ``text``) and an optional
``base:`` (a path or list of paths relative to the recipe, merged first).  Every task
is a tree of dataclasses given to ``OmegaConf.structured``, and the three share their
common sections, defined here:

=========  ================================================  =============================
section    shared keys (:class:`DataSection`...)             task-specific keys, e.g.
=========  ================================================  =============================
data       ``name``, ``root``                                views (image), ``unseen`` (kg)
optim      ``name``, ``lr``, ``weight_decay``                LARS (image), ``n3`` (kg)
train      ``epochs``, ``batch_size``, ``seed``, ``device``,  ``precision`` (image),
           ``progress``                                      ``minutes`` (kg)
eval       ``batch_size``                                    kNN (image), ``ties`` (kg)
=========  ================================================  =============================

The task schemas are :class:`spacl.tasks.image.config.Config` (image),
:class:`spacl.tasks.kg.config.KGConfig` and :class:`spacl.tasks.text.config.OODConfig`; each
registers its loader with :func:`register_task` (this module imports no task, at its top
or inside a function: it sits below them).  :func:`spacl.tasks.load_recipe`, where every
built-in task is registered, reads any recipe, applies dot-list overrides
(``train.epochs=5``, :func:`parse_overrides`) and validates it; :func:`validate_shared`
checks the shared sections identically for every task, then the task's own checks run.
Every error is
a ``ValueError`` naming the key, the value and the allowed values
(``config key 'optim.name' must be one of ['adagrad', 'adam'], got 'sgd'``); an unknown
key names the closest valid one (``unknown config key 'data.nmae' (did you mean
'data.name'?)``).

This module holds the shared sections, the layering and the task registry (filled by
the tasks, read as it stands: :func:`registered_task`).  The validators and the error
format are in :mod:`spacl.schema_checks`, the reading of recipe files, ``base:`` chains
and saved run configs in :mod:`spacl.schema_files`; callers import each from its module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from spacl.schema_checks import (
    check_device,
    choice,
    fail,
    format_error,
    in_range,
    int_at_least,
    positive,
)
from spacl.schema_files import (
    find_recipe_file,
    read_recipe,
)

__all__ = [
    "DataSection",
    "EvalSection",
    "OptimSection",
    "TaskEntry",
    "TrainSection",
    "as_layer",
    "load_structured",
    "merge_structured",
    "parse_overrides",
    "recipe_layer",
    "register_task",
    "registered_task",
    "registered_tasks",
    "validate_shared",
]

#: a task's recipe loader: ``(recipe layer, dot-list overrides) -> validated DictConfig``
TaskLoader = Callable[[DictConfig, Sequence[str]], DictConfig]

_Loader = TypeVar("_Loader", bound=TaskLoader)

#: the task registry, the one list of tasks: name -> :class:`TaskEntry`, filled by
#: :func:`register_task` where each task's schema lives (``image``:
#: :mod:`spacl.tasks.image.config`; ``kg`` / ``text``: :mod:`spacl.tasks.kg.config`,
#: :mod:`spacl.tasks.text.config`); importing :mod:`spacl.tasks` registers all three
_TASKS: dict[str, TaskEntry] = {}


# --------------------------------------------------------------- shared sections


@dataclass
class DataSection:
    """Keys every task's ``data`` section has."""

    name: str = ""
    root: str | None = None  # data root (default: the search of spacl.data.sources)


@dataclass
class OptimSection:
    """Keys every task's ``optim`` section has."""

    name: str = ""
    lr: float = 0.1
    weight_decay: float = 0.0


@dataclass
class TrainSection:
    """Keys every task's ``train`` section has."""

    epochs: int = 10
    batch_size: int = 256
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N (auto: cuda when available)
    progress: bool | None = None  # tqdm bars; None: only when stderr is a terminal
    threads: int | None = None  # torch.set_num_threads for the run (None: leave as is)


@dataclass
class EvalSection:
    """Keys every task's ``eval`` section has."""

    batch_size: int = 512


# --------------------------------------------------------------- a task's loader


def load_structured(
    schema: type, validate: Callable[[DictConfig], None], cfg: Any, overrides: Sequence[str]
) -> DictConfig:
    """A task's recipe loader in one call: merge ``cfg`` (a mapping, ``DictConfig`` or
    YAML path) and dot-list ``overrides`` onto the dataclass ``schema`` (unknown keys
    raise ``ValueError`` naming them), then ``validate`` the result."""
    merged = merge_structured(schema, [cfg, parse_overrides(overrides)])
    validate(merged)
    return merged


def validate_shared(
    cfg: Any,
    *,
    optim_names: Sequence[str],
    data_names: Sequence[str] | None = None,
    min_batch_size: int = 1,
) -> None:
    """Check the shared sections (``data``, ``optim``, ``train``, ``eval``) of any task.

    ``data_names``: the allowed ``data.name`` values (``None``: any non-empty name, e.g.
    a dataset directory); ``min_batch_size``: the smallest ``train.batch_size``.
    """
    d, o, t, e = cfg.data, cfg.optim, cfg.train, cfg.eval
    if data_names is not None:
        choice("data.name", d.name, data_names)
    elif not d.name:
        raise fail("data.name", d.name, "must name a dataset")
    choice("optim.name", o.name, optim_names)
    positive("optim.lr", o.lr)
    in_range("optim.weight_decay", o.weight_decay, 0.0, math.inf, high_open=True)
    int_at_least("train.epochs", t.epochs, 1)
    int_at_least("train.batch_size", t.batch_size, min_batch_size)
    int_at_least("train.seed", t.seed, 0)
    check_device("train.device", t.device)
    if t.threads is not None:
        int_at_least("train.threads", t.threads, 1)
    int_at_least("eval.batch_size", e.batch_size, 1)


# ----------------------------------------------------------------------- loading


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """Dot-list overrides (``["train.epochs=5", "optim.lr=0.1"]``) as a ``DictConfig``."""
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be a list of key=value strings, got {overrides!r}")
    for item in overrides:
        if not isinstance(item, str) or "=" not in item or item.startswith("="):
            raise ValueError(f"override {item!r} must look like key=value (e.g. train.epochs=5)")
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as err:
        raise format_error(err) from err


def as_layer(cfg: Any) -> DictConfig:
    """A recipe source (mapping, DictConfig, YAML path or built-in name) as a DictConfig
    (a ``DictConfig`` as given; ``None``: an empty one)."""
    if cfg is None:
        return OmegaConf.create({})
    if isinstance(cfg, DictConfig):
        return cfg
    if isinstance(cfg, Mapping):
        return OmegaConf.create(dict(cfg))
    if isinstance(cfg, (str, Path)):
        return read_recipe(find_recipe_file(cfg))
    raise TypeError(
        f"a recipe must be a mapping, a DictConfig or a YAML path, got {type(cfg).__name__}"
    )


def recipe_layer(sources: Sequence[Any], overrides: Sequence[str] = ()) -> DictConfig:
    """The one layering rule: ``sources`` (mappings, DictConfigs, YAML paths or built-in
    names, each with its ``base:`` chain; ``None`` skipped) merged in order, then the
    dot-list ``overrides`` (:func:`parse_overrides`); later wins."""
    layers = [as_layer(x) for x in sources if x is not None]
    merged = OmegaConf.merge(OmegaConf.create({}), *layers, parse_overrides(overrides))
    assert isinstance(merged, DictConfig)
    return merged


def merge_structured(
    schema: type,
    layers: Sequence[Any],
    *,
    list_items: Mapping[str, type] | None = None,
) -> DictConfig:
    """Merge recipe ``layers`` (mappings, DictConfigs or YAML paths; later wins) onto the
    structured ``schema``; an unknown key or a wrong type raises ``ValueError`` naming it."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), *[as_layer(x) for x in layers])
    except OmegaConfBaseException as err:
        raise format_error(err, schema, list_items=list_items) from err
    assert isinstance(merged, DictConfig)
    return merged


@dataclass(frozen=True)
class TaskEntry:
    """One task of the registry: its recipe ``loader`` and its ``runner``.

    ``runner``: ``"module:function"`` of the function that trains a validated config
    (``function(config, overrides=[...])`` returning a summary dict), imported only when a
    run starts (:func:`spacl.tasks.run_recipe`); the image task's is
    :func:`spacl.tasks.image.train` (its :class:`~spacl.tasks.image.Trainer`: run
    directories, resume, DDP).
    """

    name: str
    loader: TaskLoader
    runner: str | None = None


def register_task(name: str, *, runner: str | None = None) -> Callable[[_Loader], _Loader]:
    """Decorator: register ``loader`` as the recipe loader of ``task: name``.

    The module holding a task's schema registers it (``@register_task("kg",
    runner="spacl.tasks.kg:train_kg")`` on :func:`spacl.tasks.kg.config.kg_config`), so this
    module imports no task and the registry is the one list of tasks.  Registering a name
    twice with different loaders raises ``ValueError``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise fail("task", name, "must be a name of letters, digits and _")

    def decorate(loader: _Loader) -> _Loader:
        known = _TASKS.get(name)
        if known is not None and known.loader is not loader:
            raise ValueError(f"task {name!r} is already registered ({known.loader.__qualname__})")
        if known is None or runner is not None:  # the same loader again: a no-op
            _TASKS[name] = TaskEntry(name, loader, runner)
        return loader

    return decorate


def registered_tasks() -> list[str]:
    """The tasks registered so far, sorted: the registry as it stands (this module imports
    no task; :func:`spacl.tasks.task_names` holds the built-in ones)."""
    return sorted(_TASKS)


def registered_task(name: str) -> TaskEntry:
    """The registry entry of ``task: name`` as the registry stands (no task imported):
    ``ValueError`` naming the registered tasks when ``name`` is not one of them.  The
    built-in tasks are registered once :mod:`spacl.tasks` is imported
    (:func:`spacl.tasks.task_entry`)."""
    choice("task", name, sorted(_TASKS))
    return _TASKS[name]
