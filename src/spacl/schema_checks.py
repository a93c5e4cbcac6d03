"""The recipe schema's checks: the validators every task's loader calls and the error
messages of a bad key.

Beside :mod:`spacl.schema` (callers import these names from here): each check raises a
``ValueError`` naming the key, the value and what is allowed (:func:`fail`); a merge error
becomes one naming the full key and, for an unknown key, the closest valid one
(:func:`format_error`); :func:`check_device` checks a ``train.device`` string, which
:func:`spacl.engine.device.resolve_device` (the one resolver) turns into a
``torch.device``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from spacl._validation import check_choice
from spacl.schema_files import RENAMED_KEYS

__all__ = [
    "check_device",
    "choice",
    "fail",
    "format_error",
    "in_range",
    "int_at_least",
    "positive",
]


def fail(key: str, value: Any, need: str) -> ValueError:
    """``ValueError("config key 'key' <need>, got <value>")``."""
    return ValueError(f"config key {key!r} {need}, got {value!r}")


def choice(key: str, value: Any, options: Sequence[Any], *, where: str = "") -> None:
    """``value`` must be one of ``options`` (:func:`spacl._validation.check_choice`).

    A config error is always a ``ValueError`` naming the key: a value of the wrong
    type (``optim.name: 3``) too.
    """
    try:
        check_choice(value, f"config key {key!r}", options, where=where)
    except TypeError as err:
        raise ValueError(str(err)) from err


def int_at_least(key: str, value: Any, low: int) -> None:
    """``value`` must be an integer (not a bool) ``>= low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise fail(key, value, f"must be an integer >= {low}")


def positive(key: str, value: Any) -> None:
    """``value`` must be a finite number ``> 0``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not value > 0:
        raise fail(key, value, "must be a finite number > 0")


def in_range(key: str, value: Any, low: float, high: float, *, high_open: bool = False) -> None:
    """``low <= value <= high`` (``< high`` when ``high_open``)."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and low <= value
        and (value < high if high_open else value <= high)
    )
    if not ok:
        bracket = ")" if high_open else "]"
        raise fail(key, value, f"must be in [{low}, {high}{bracket}")


def check_device(key: str, value: Any) -> None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    ok = isinstance(value, str) and (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    )
    if not ok:
        raise fail(key, value, "must be auto, cpu, cuda or cuda:N")


def _schema_keys(schema: type, dotted: str, list_items: Mapping[str, type]) -> list[str] | None:
    """The valid keys of the section ``dotted`` of ``schema`` (``None``: not a section).

    ``list_items`` gives the schema of list elements (``arms[0].objective``, ``arms.0``).
    """

    def keys_of(cls: type) -> Any:
        return OmegaConf.to_container(OmegaConf.structured(cls))

    node: Any = keys_of(schema)
    last = ""
    for part in [p for p in dotted.split(".") if p]:
        head = part.split("[")[0]
        if part.isdigit() and last in list_items:
            node = keys_of(list_items[last])
            continue
        if "[" in part and head in list_items:
            node, last = keys_of(list_items[head]), head
            continue
        if not isinstance(node, dict) or head not in node:
            return None
        node, last = node[head], head
    return sorted(node) if isinstance(node, dict) else None


def format_error(
    err: OmegaConfBaseException,
    schema: type | None = None,
    prefix: str = "",
    list_items: Mapping[str, type] | None = None,
) -> ValueError:
    """The ``ValueError`` of an OmegaConf merge error: the full key, and for an unknown
    key the closest valid one of ``schema`` (``list_items``: schemas of list elements,
    e.g. ``{"arms": ArmConfig}``)."""
    key = prefix + (str(err.full_key) if getattr(err, "full_key", None) else "")
    first = str(getattr(err, "msg", None) or err).splitlines()[0]
    if isinstance(err, ConfigKeyError) and key in RENAMED_KEYS:
        return ValueError(f"config key {key!r} was renamed: use {RENAMED_KEYS[key]!r}")
    if isinstance(err, ConfigKeyError) and key:
        parent_key, _, leaf = key.rpartition(".")
        valid = _schema_keys(schema, parent_key, list_items or {}) if schema else None
        hint = ""
        if valid:
            close = difflib.get_close_matches(leaf, valid, n=1)
            if close:
                full = f"{parent_key}.{close[0]}" if parent_key else close[0]
                hint = f" (did you mean {full!r}?)"
            else:
                hint = f" (valid keys: {', '.join(valid)})"
        return ValueError(f"unknown config key {key!r}{hint}")
    return ValueError(f"config key {key!r}: {first}" if key else f"invalid config: {first}")
