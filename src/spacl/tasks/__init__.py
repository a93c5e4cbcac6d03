"""Tasks: what a user runs, each from data through model and objective to evaluation.

==============================================  ===========================================
``spacl.tasks.kg.train_kg(cfg)``                link prediction (recipes ``kg/*``)
``spacl.tasks.text.train_ood(cfg)``             open-intent detection (recipes ``text/*``)
``spacl.tasks.text.decision``                   the open-intent decision rules, chosen on dev
``spacl.tasks.text.finetune``                   top-layer fine-tuning of the text encoder
``run_recipe(name_or_path, overrides, out)``    load any recipe and run its task
``load_recipe(name_or_path, overrides)``        read and validate any recipe (every task)
==============================================  ===========================================

One way in.  :func:`run_recipe` (the Python API) and ``spacl train`` read a recipe with
:func:`load_recipe` (:mod:`spacl.tasks.registry`), which picks the task from the recipe's
``task:`` in the task registry (:func:`spacl.schema.register_task`) and validates it with
that task's schema (image: :mod:`spacl.tasks.image.config`; ``kg``: :mod:`.kg.config`;
``text``: :mod:`.text.config`).  The registry entry also names the task's runner,
imported when a run starts: the image task's :func:`spacl.tasks.image.train`,
:func:`spacl.tasks.kg.train_kg` or :func:`spacl.tasks.text.train_ood`.

:func:`load_recipe`, :func:`recipe_task`, :func:`task_names`, :func:`task_entry` and
:func:`task_loader` see every built-in task: :mod:`spacl.tasks.registry` imports the
image schema at its top and the KG and text ones (which import torch) on their first
lookup, so an image recipe's config error loads no torch; the training modules are
imported on use.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spacl.engine.rundir import require_checkpoint
from spacl.tasks import registry

# the registry registers the built-in tasks (their schema modules; KG and text on use)
from spacl.tasks.registry import (
    LoadedRecipe,
    load_recipe,
    recipe_task,
    task_entry,
    task_loader,
    task_names,
)

__all__ = [
    "LoadedRecipe",
    "load_recipe",
    "recipe_task",
    "run_loaded",
    "run_recipe",
    "task_entry",
    "task_loader",
    "task_names",
]


def _runner(task: str) -> Any:
    """The runner function of ``task`` (its registry entry's ``module:function``)."""
    target = task_entry(task).runner
    if target is None:
        raise ValueError(f"config key 'task': task {task!r} registered no runner")
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def run_loaded(
    recipe: LoadedRecipe,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
) -> Any:
    """Run a validated recipe (:func:`load_recipe`) with its task's runner.

    ``out``: the run directory (default: a new ``<out_dir>/<name>-<time>`` where the task
    writes one); ``resume`` continues the run in ``out`` (a ``FileNotFoundError`` when
    ``out`` holds no checkpoint); ``quiet``: no progress bars
    (``train.progress=false``).  Returns the runner's result: the image task's
    :class:`~spacl.tasks.image.TrainResult`, the KG / text summary dict.
    """
    func = _runner(recipe.task)
    if resume:  # a resume with nothing to continue is an error, not a fresh start
        require_checkpoint(out)
    cfg = recipe.config
    if quiet:
        cfg.train.progress = False
    params = inspect.signature(func).parameters
    if "run_dir" in params:
        kwargs: dict[str, Any] = {"run_dir": out, "resume": resume}
        if "quiet" in params:
            kwargs["quiet"] = quiet
        return func(cfg, **kwargs)
    # a runner without run directories: ``out`` is where its summary.json goes
    if resume:
        raise ValueError(f"task {recipe.task!r} runs cannot be resumed")
    return func(cfg, overrides=[f"out_dir={out}"] if out is not None else [])


def run_recipe(
    source: Any,
    overrides: Sequence[str] = (),
    *,
    out: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
) -> Any:
    """Load any recipe (a built-in name, a YAML path or a mapping) under dot-list
    ``overrides`` with :func:`load_recipe`, and run it (:func:`run_loaded`)."""
    loaded = registry.load_recipe(source, overrides)
    return run_loaded(loaded, out=out, resume=resume, quiet=quiet)
