"""The device of a run, for every task: ``train.device`` resolved, the process set up for
it, the precision on it, a module's device.

:func:`resolve_device` is the one reading of ``train.device`` (``auto``: CUDA when it is
available, else the CPU; the string itself is checked by
:func:`spacl.schema_checks.check_device`, with the recipe's other values); a run's
distributed context starts from the same value through it
(:func:`spacl.engine.distributed.init_from_env`), and so does a text encoder's
``device="auto"`` (:mod:`spacl.models.text`).  :func:`prepare_run`
is every task's setup of the process's backend for a run (``train.threads``, the
deterministic algorithms, cuDNN's autotuner), :func:`precision_dtypes` the reading of
``train.precision`` on a device, and :func:`device_of` where a module's parameters live.
No task asks ``torch.cuda`` or sets ``torch.backends`` itself, and no study sets the
thread count but through :func:`set_threads` / :func:`threads`
(``tests/test_one_engine.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from spacl.schema_checks import check_device

__all__ = [
    "deterministic_algorithms",
    "device_of",
    "precision_dtypes",
    "prepare_run",
    "resolve_device",
    "set_threads",
    "threads",
]


def resolve_device(name: str) -> torch.device:
    """The ``torch.device`` of a ``train.device`` value (``auto`` | ``cpu`` | ``cuda[:N]``)."""
    name = str(name)
    check_device("train.device", name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def set_threads(count: int | None) -> None:
    """``torch.set_num_threads(count)`` (``None``: the count as it is): ``train.threads``
    of a run (:func:`prepare_run`), a study's ``--threads``."""
    if count is not None:
        torch.set_num_threads(int(count))


@contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Run with :func:`set_threads` ``(count)``, the previous count restored after."""
    before = torch.get_num_threads()
    set_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def device_of(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (the CPU for a module without any)."""
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


#: whether the deterministic mode now on was turned on by :func:`deterministic_algorithms`
#: for a CPU run (a later run that should not have it turns it off again)
_TURNED_ON_FOR_A_CPU_RUN = False


def deterministic_algorithms(requested: bool | None, device: torch.device) -> bool:
    """Set ``torch.use_deterministic_algorithms`` for a run on ``device`` and return
    whether it is on: ``True`` on; ``None`` (the default) on for a run on the CPU, else as
    ``False``; ``False`` off, unless it was on before spacl turned it on (the user's).

    On the CPU, with more than one thread, the backward of advanced indexing
    (``x[index]``, an accumulating ``index_put_``) sums in thread order, so two runs of
    one seed differ from their first step (by ~1e-7, growing to ~1e-2 in the weights)
    and a resumed run could not equal the uninterrupted one.  The deterministic
    implementations cost little there (measured: the losses' steps within the noise); on
    CUDA they can cost more and some ops have none, so there the default leaves them off:
    a CUDA run after a CPU run in one process (a notebook) turns off again what the CPU
    run turned on.  On CUDA, ``True`` also sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` where
    it is unset, which cuBLAS needs for deterministic matmuls (effective before the
    process's first matmul on the GPU).
    """
    global _TURNED_ON_FOR_A_CPU_RUN
    on = device.type == "cpu" if requested is None else bool(requested)
    if on:
        if device.type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if not torch.are_deterministic_algorithms_enabled():
            torch.use_deterministic_algorithms(True)
            _TURNED_ON_FOR_A_CPU_RUN = requested is None
    elif _TURNED_ON_FOR_A_CPU_RUN:
        torch.use_deterministic_algorithms(False)
        _TURNED_ON_FOR_A_CPU_RUN = False
    return torch.are_deterministic_algorithms_enabled()


def prepare_run(
    device: torch.device,
    *,
    threads: int | None = None,
    deterministic: bool | None = None,
    cudnn_benchmark: bool = False,
) -> bool:
    """Set the process up for a run on ``device``, one way for every task, and return
    whether the deterministic algorithms are on.

    ``threads``: ``train.threads`` (``torch.set_num_threads``; ``None`` leaves the count
    as it is); ``deterministic``: ``train.deterministic``
    (:func:`deterministic_algorithms`; ``None``, the KG and text runs' setting, is on for
    a run on the CPU); ``cudnn_benchmark``: cuDNN's autotuner for a run on CUDA without
    the deterministic algorithms (the image task's convolutions; left as it is
    otherwise).  The seeds are the task's: which generators a run seeds, and when, is
    part of what it computes.

    Example::

        prepare_run(resolve_device(cfg.train.device), threads=cfg.train.threads)
    """
    set_threads(threads)
    on = deterministic_algorithms(deterministic, device)
    if cudnn_benchmark and not on and device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    return on


def precision_dtypes(name: str, device: torch.device) -> tuple[torch.dtype, torch.dtype | None]:
    """``(parameter dtype, autocast dtype or None)`` of a ``train.precision`` value on
    ``device``: ``fp64`` / ``fp32`` parameters of that dtype, no autocast; ``bf16`` /
    ``fp16`` float32 parameters under that autocast, on CUDA only (a ``ValueError``
    naming the key elsewhere); ``auto`` bf16 on CUDA where the GPU supports it (fp16
    otherwise), fp32 on the CPU.

    Example:
        >>> import torch
        >>> from spacl.engine.device import precision_dtypes
        >>> precision_dtypes("auto", torch.device("cpu"))
        (torch.float32, None)
    """
    cuda = device.type == "cuda"
    if name == "auto":
        name = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "fp32"
    if name == "fp64":
        return torch.float64, None
    if name == "fp32":
        return torch.float32, None
    if not cuda:
        raise ValueError(f"config key 'train.precision'={name!r} (mixed precision) needs CUDA")
    return torch.float32, torch.bfloat16 if name == "bf16" else torch.float16
