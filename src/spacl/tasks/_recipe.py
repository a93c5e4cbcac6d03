"""Loading a task recipe onto its structured schema (shared by ``task: kg`` and ``task: text``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig

from spacl.schema import merge_structured, parse_overrides


def merge_recipe(schema: type, cfg: Any, overrides: Sequence[str], task: str) -> DictConfig:
    """Merge ``cfg`` (a mapping, DictConfig, YAML path or built-in recipe name, ``base:``
    chains included) and dot-list ``overrides`` onto the dataclass ``schema`` with
    :func:`spacl.schema.merge_structured`: an unknown key or a wrong type raises
    ``ValueError`` naming it (``"unknown config key 'model.dimm' (did you mean
    'model.dim'?)"``).  ``task`` is the recipe's task (kept for callers' messages)."""
    del task
    return merge_structured(schema, [cfg, parse_overrides(list(overrides))])
