"""Experiments: end-to-end studies and tasks beyond the image engine.

==========================================  ================================================
``spacl.experiments.kg.train_kg(cfg)``       link prediction (recipes ``kg/*``)
``spacl.experiments.text.train_ood(cfg)``    open-intent detection (recipes ``text/*``)
``run_task_recipe(path, overrides, out)``    dispatch a ``task:`` recipe (``spacl train`` hook)
==========================================  ================================================

The task entry points take the OmegaConf config of a recipe (``task: kg`` /
``task: text``), validate it against their schema (:mod:`spacl.schema`: the sections
data / optim / train / eval are shared with the image engine; unknown keys are named), and
return a summary dict.  Submodules are imported lazily: importing this package loads
nothing heavy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["TASKS", "recipe_task", "run_task_recipe"]

#: recipe ``task:`` value -> ``module:function`` taking ``(config, overrides=..., log=...)``
TASKS = {
    "kg": "spacl.experiments.kg:train_kg",
    "text": "spacl.experiments.text:train_ood",
}


def recipe_task(path: str | Path) -> str | None:
    """The top-level ``task:`` of a recipe (a YAML path or built-in name, ``base:`` chain
    included), or ``None`` for an image-engine recipe or a path that is not a file."""
    from spacl.recipes import find_recipe
    from spacl.schema import read_recipe
    from spacl.schema import recipe_task as task_of

    source = Path(path)
    if not source.is_file():
        found = find_recipe(str(path))
        if found is None:
            return None
        source = found
    task = task_of(read_recipe(source))
    if task != "image" and task not in TASKS:
        raise ValueError(f"config key 'task' must be one of {sorted(TASKS)}, got {task!r}")
    return None if task == "image" else task


def run_task_recipe(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    out: str | Path | None = None,
    quiet: bool = False,
) -> dict[str, Any] | None:
    """Run a ``task: kg`` / ``task: text`` recipe; ``None`` if ``path`` has no ``task:``.

    ``out`` sets ``out_dir`` (``summary.json`` is written there); ``quiet`` sets
    ``train.progress=false``.  ``path`` may be a built-in recipe name.  This is the hook for
    ``spacl train``: call it first and fall back to the image engine when it returns
    ``None``.
    """
    import importlib

    from spacl.recipes import find_recipe

    task = recipe_task(path)
    if task is None:
        return None
    module_name, _, func_name = TASKS[task].partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    extra = [f"out_dir={out}"] if out is not None else []
    if quiet:
        extra.append("train.progress=false")
    source = Path(path) if Path(path).is_file() else find_recipe(str(path))
    # messages go to the task's logger (spacl.experiments.<task>); --quiet: no bars
    summary: dict[str, Any] = func(str(source), overrides=[*overrides, *extra])
    return summary
