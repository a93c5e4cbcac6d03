"""Loading a task recipe onto its structured schema (shared by ``task: kg`` and ``task: text``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException


def merge_recipe(schema: type, cfg: Any, overrides: Sequence[str], task: str) -> DictConfig:
    """Merge ``cfg`` (a mapping, DictConfig or YAML path) and dot-list ``overrides`` onto the
    dataclass ``schema``; an unknown key or a wrong type raises ``ValueError`` naming it
    (``"<task> config key 'model.dimm': ..."``)."""
    try:
        if isinstance(cfg, (str, Path)):
            cfg = OmegaConf.load(Path(cfg))
        merged = OmegaConf.merge(
            OmegaConf.structured(schema), cfg or {}, OmegaConf.from_dotlist(list(overrides))
        )
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        first = str(getattr(err, "msg", None) or err).splitlines()[0]
        raise ValueError(
            f"{task} config key {key!r}: {first}" if key else f"{task} config: {first}"
        ) from err
    assert isinstance(merged, DictConfig)
    return merged
