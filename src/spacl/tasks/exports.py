"""The public names of a task package, each imported from its module on first use.

A task package (:mod:`spacl.tasks.kg`, :mod:`spacl.tasks.text`) names its public names
and the module defining each; importing the package (as the task registry does, for the
schema) then loads no training code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, public: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``public`` maps each public name to the
    submodule of ``package`` that defines it (imported on first use); any other name
    raises ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
