"""A package's public names, each imported from its module on first use (PEP 562).

A package (:mod:`spacl.engine`, :mod:`spacl.data`, :mod:`spacl.tasks.kg`,
:mod:`spacl.tasks.text`) names its public names and the submodule defining each, and sets
``__getattr__ = lazy_attributes(__name__, _PUBLIC)``: importing the package, or one of
its light submodules (``spacl.engine.rundir`` for the CLI's checks, a task's schema for
the registry), then loads no heavy code (torch, torchvision, training loops).  The names
stay static for type checkers in an ``if TYPE_CHECKING:`` block of the package.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, public: Mapping[str, str], *, submodules: bool = False
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``public`` maps each public name to the
    submodule of ``package`` that defines it (imported on first use, then kept in the
    package's namespace); with ``submodules``, any other name of a submodule imports it;
    anything else raises ``AttributeError``.

    Example (in a package's ``__init__.py``)::

        _PUBLIC = {"Trainer": "trainer", "RunDirectory": "rundir"}
        __getattr__ = lazy_attributes(__name__, _PUBLIC)
    """

    def __getattr__(name: str) -> Any:
        module = public.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
        elif submodules and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__
