"""The device of a run, for every task: ``train.device`` resolved, a module's device.

:func:`resolve_device` is the one reading of ``train.device`` (``auto``: CUDA when it is
available, else the CPU; :func:`spacl.schema_checks.resolve_device`, checked there with
the recipe's other values); the image engine's distributed context starts from the same
value (:func:`spacl.engine.distributed.init_from_env`).  :func:`device_of` is where a
module's parameters live.
"""

from __future__ import annotations

import torch
from torch import nn

from spacl.schema_checks import resolve_device as _resolve

__all__ = ["device_of", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    """The ``torch.device`` of a ``train.device`` value (``auto`` | ``cpu`` | ``cuda[:N]``)."""
    device: torch.device = _resolve(str(name))
    return device


def device_of(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (the CPU for a module without any)."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")
