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

__all__ = ["deterministic_algorithms", "device_of", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    """The ``torch.device`` of a ``train.device`` value (``auto`` | ``cpu`` | ``cuda[:N]``)."""
    device: torch.device = _resolve(str(name))
    return device


def device_of(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (the CPU for a module without any)."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def deterministic_algorithms(requested: bool | None, device: torch.device) -> bool:
    """Turn on ``torch.use_deterministic_algorithms`` for the process when ``requested``,
    or, by default (``None``), for a run on the CPU; return whether it is on.

    On the CPU, with more than one thread, the backward of advanced indexing
    (``x[index]``, an accumulating ``index_put_``) sums in thread order, so two runs of
    one seed differ from their first step (by ~1e-7, growing to ~1e-2 in the weights)
    and a resumed run could not equal the uninterrupted one.  The deterministic
    implementations cost little there (measured: the losses' steps within the noise); on
    CUDA they can cost more and some ops have none, so there the default leaves them off.
    ``False`` leaves the process's setting as it is.
    """
    on = device.type == "cpu" if requested is None else bool(requested)
    if on:
        torch.use_deterministic_algorithms(True)
    return on
