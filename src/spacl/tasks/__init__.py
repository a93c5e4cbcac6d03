"""Tasks: what a user runs, each from data through model and objective to evaluation.

==============================================  ===========================================
``spacl.tasks.kg.train_kg(cfg)``                link prediction (recipes ``kg/*``)
``spacl.tasks.text.train_ood(cfg)``             open-intent detection (recipes ``text/*``)
``spacl.tasks.text_decision``                   the open-intent decision rules, chosen on dev
``spacl.tasks.text_finetune``                   top-layer fine-tuning of the text encoder
``run_task_recipe(path, overrides, out)``       dispatch a ``task:`` recipe (``spacl train``)
==============================================  ===========================================

The task entry points take the OmegaConf config of a recipe (``task: kg`` /
``task: text``), validate it against their schema (``kg_config`` / ``text_config``, built
on :mod:`spacl.schema`: the sections data / optim / train / eval are shared with the image
engine; unknown keys are named), and return a summary dict.

Importing this package registers every built-in task's recipe loader with
:func:`spacl.schema.register_task` (the schema modules: the image engine's config, KG and
text); the training modules are imported on use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the built-in tasks' schemas register their recipe loaders (spacl.schema.register_task)
from spacl.engine import config as _image_schema
from spacl.tasks import kg_config as _kg_schema
from spacl.tasks import text_config as _text_schema

__all__ = ["TASKS", "recipe_task", "run_task_recipe"]

_REGISTERED = (_image_schema, _kg_schema, _text_schema)

#: recipe ``task:`` value -> ``module:function`` taking ``(config, overrides=..., log=...)``
TASKS = {
    "kg": "spacl.tasks.kg:train_kg",
    "text": "spacl.tasks.text:train_ood",
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
    # messages go to the task's logger (spacl.tasks.<task>); --quiet: no bars
    summary: dict[str, Any] = func(str(source), overrides=[*overrides, *extra])
    return summary
