"""Reading any recipe, with every built-in task registered: the one way in.

The task registry lives in :mod:`spacl.schema` (:func:`~spacl.schema.register_task`),
below the tasks, and each task's schema module fills it.  This module imports those three,
so every function here sees the built-in tasks; the schema imports none.  The image one
(:mod:`spacl.tasks.image.config`) is imported at its top; :mod:`spacl.tasks.kg.config`
and :mod:`spacl.tasks.text.config` import torch (their objective lists and loss checks),
so they are imported where first needed (:func:`_register_builtin`): an image recipe's
config error is reported without loading torch (issue 38: CLI start-up).
:mod:`spacl.tasks` re-exports every name (``spacl.tasks.load_recipe``), and
``spacl.load_recipe``, ``spacl train`` / ``spacl eval`` and ``spacl.load`` call
:func:`load_recipe`.  The KG and text run readers
(``tasks/kg/run.py``, ``tasks/text/run.py``) know their task: they call its loader
(:func:`~spacl.tasks.kg.config.kg_config`, :func:`~spacl.tasks.text.config.ood_config`),
the one :func:`load_recipe` dispatches to, so no task imports this module back.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from spacl.schema import (
    TaskEntry,
    TaskLoader,
    as_layer,
    recipe_layer,
    registered_task,
    registered_tasks,
)

# the image task's schema registers itself (spacl.schema.register_task); no torch
from spacl.tasks.image import config as _image_schema  # noqa: F401

__all__ = [
    "LoadedRecipe",
    "load_recipe",
    "recipe_task",
    "task_entry",
    "task_loader",
    "task_names",
]

#: the built-in tasks, each registered by its schema module (:func:`_register_builtin`)
BUILTIN_TASKS = ("image", "kg", "text")


def _register_builtin(task: str) -> None:
    """Import the schema module of built-in ``task`` (it registers itself with
    :func:`spacl.schema.register_task`; a no-op once imported; ``image``'s is imported
    at this module's top); a name that is no built-in task imports them all, so a
    lookup's error names every one.  The module names are literal: the import-graph
    test reads them."""
    if task == "kg":
        importlib.import_module("spacl.tasks.kg.config")
    elif task == "text":
        importlib.import_module("spacl.tasks.text.config")
    elif task != "image":
        for builtin in BUILTIN_TASKS:
            _register_builtin(builtin)


def task_names() -> list[str]:
    """Every registered task, sorted (the built-in ones included)."""
    for task in BUILTIN_TASKS:
        _register_builtin(task)
    return registered_tasks()


def task_entry(name: str) -> TaskEntry:
    """The registry entry of ``task: name`` (``ValueError`` naming the registered tasks);
    a built-in task's schema is imported here, on its first lookup."""
    _register_builtin(name)
    return registered_task(name)


def task_loader(name: str) -> TaskLoader:
    """The registered recipe loader of ``task: name`` (:func:`task_entry`)."""
    return task_entry(name).loader


def recipe_task(raw: Any) -> str:
    """The ``task:`` of a recipe (a mapping or a YAML path); ``image`` when absent.  A name
    no task registered raises ``ValueError`` naming the registered ones."""
    layer = as_layer(raw)
    task = layer.get("task", None)
    if task is None:
        return "image"
    task_entry(str(task) if isinstance(task, str) else repr(task))
    return str(task)


@dataclass(frozen=True)
class LoadedRecipe:
    """A validated recipe: its ``task`` and typed ``config``."""

    task: str
    config: DictConfig


def load_recipe(source: Any, overrides: Sequence[str] = ()) -> LoadedRecipe:
    """Read, override and validate any recipe (image, KG or text).

    ``source``: a built-in recipe name (``mnist5k/spacl``), a YAML path, a mapping or a
    ``DictConfig``.  The ``task:`` key (default ``image``) chooses the schema; the
    shared sections are checked by :func:`spacl.schema.validate_shared`, then the task's
    own rules.
    """
    layer = as_layer(source)
    task = recipe_task(recipe_layer([layer], overrides))
    config = task_loader(task)(layer, overrides)
    _absolute_paths(config)
    return LoadedRecipe(task, config)


#: the config keys that name a file or directory the run reads again later (any task's
#: schema; a key a task lacks is skipped).  ``out_dir`` is not one: it is only the parent
#: of a new run directory, relative to where ``spacl train`` runs, and read at no later time
#: (the run's ``config.yaml`` stores it absolute: :meth:`RunDirectory.write_config`).
_PATH_KEYS = ("data.root", "encoder.cache_dir")


def _absolute_paths(cfg: Any) -> None:
    """Every relative path of :data:`_PATH_KEYS` made absolute (from the working directory,
    ``~`` expanded) once, when the recipe is read: the run directory's config then names
    the same data and embedding cache from any directory (``spacl eval`` elsewhere).  An
    absolute path is kept as written; an unset (``None`` / empty) key stays unset."""
    for key in _PATH_KEYS:
        section_name, name = key.split(".")
        section: Any = cfg.get(section_name) if hasattr(cfg, "get") else None
        value = section.get(name) if hasattr(section, "get") else None
        if not isinstance(value, str) or not value:
            continue
        if Path(value).is_absolute():
            continue
        path = Path(value).expanduser()
        section[name] = str(path if path.is_absolute() else path.resolve())
