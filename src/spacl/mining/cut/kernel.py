"""The cut's CPU kernel: each row's prefix found by one scan, compiled by numba.

On CPU, :meth:`spacl.mining.cut.threshold.RelativeThresholdNegatives` settles its rows here
before any tensor pass: per row, the first largest key (kept alone where its weight
reaches the target), else the ``m`` first keys of a stable descending sort (``m = 32``,
then 64, then 128: one scan of the row that keeps the ``m`` largest so far in a sorted
buffer, equal keys in increasing column order, starting from a floor guessed on every
8th column and scanning again from ``-inf`` where fewer than ``m`` keys lie above it)
and the running float64 weight over them in that order.  The row is settled where it
reaches the target, with exactly the prefix the cut defines (module docstring of
:mod:`spacl.mining.cut.threshold`: the shortest prefix of a stable sort by decreasing key
whose running weight reaches ``share * total``).
Rows whose prefix is longer than 128 keys, and rows the caller does not ``allow``
(``"exp"`` / ``"linear"`` with a zero total), are left to the exact selection.

The weights are the tensor path's float64 values added in the same order, so where both
settle a row they keep the same entries (tests/test_cut_kernel.py compares them entry by
entry, ties included).  One scan per row against the tensor path's dozen passes over
``[B, K]`` (group maxima, two ``topk``, gathers); benchmarks/results/spacl_overhead.md
times both on the ``[1280, 1281]`` every-view rows.

With several torch threads (``torch.get_num_threads()``) the rows go to the kernel in
contiguous blocks of at least 64, one per thread (it releases the GIL; a thread pool per
process), and the blocks' columns are joined in row order: the same result as one call.

Used for float32 / float64 CPU tensors when numba imports; elsewhere (GPU, other
dtypes, no numba, ``SPACL_CUT_KERNEL=0`` in the environment, or :data:`ENABLED` set to
``False``) the tensor path.  The first call compiles (about a second, cached on disk by
numba); if compiling fails, one warning and the tensor path from then on.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import Tensor

from spacl.mining.cut.exact import WIDE_ROWS


def enabled_by(value: str | None) -> bool:
    """The kernel's switch from the environment's ``SPACL_CUT_KERNEL`` (unset: on;
    ``0`` / ``false`` / ``off`` / ``no``, any case: off)."""
    return value is None or value.strip().lower() not in ("0", "false", "off", "no")


#: set to ``False`` to use the tensor path everywhere (tests compare the two)
ENABLED = enabled_by(os.environ.get("SPACL_CUT_KERNEL"))

_MODES = {"similarity": 0, "linear": 1, "exp": 2}
_state: dict[str, ModuleType | str] = {}


def _kernels() -> ModuleType | None:
    """The compiled kernels' module, or ``None`` where numba is missing or failed."""
    if "failed" in _state:
        return None
    module = _state.get("module")
    if isinstance(module, ModuleType):
        return module
    try:
        from spacl.mining.cut import rows_nb

        _state["module"] = rows_nb
        return rows_nb
    except Exception as error:  # numba missing or broken: the tensor path
        _fail(error)
        return None


def _fail(error: BaseException) -> None:
    _state["failed"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
    warnings.warn(
        f"the cut's CPU kernel is unavailable ({_state['failed']}); using the tensor path",
        RuntimeWarning,
        stacklevel=4,
    )


def applies(keys: Tensor, mass: str) -> bool:
    """Whether :func:`row_prefixes` serves ``keys`` (CPU, float32/float64, kernel on).

    Not the long rows (``K >= 4096``, the link-prediction rows) of ``"exp"`` /
    ``"linear"``: their prefixes run to thousands of keys and have their own selection
    (:func:`spacl.mining.cut.exact.wide_prefix`); ``"similarity"`` keeps few there too.
    """
    return (
        ENABLED
        and keys.device.type == "cpu"
        and keys.dtype in (torch.float32, torch.float64)
        and (mass == "similarity" or keys.shape[1] < WIDE_ROWS)
        and "failed" not in _state
    )


def row_prefixes(
    keys: Tensor,
    row_max: Tensor,
    weights: Tensor | None,
    mass: str,
    temperature: float,
    target: Tensor,
    allow: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor] | None:
    """``(cols[B, m], kept[B, m], done[B])``: the rows' kept columns, as the fast path.

    ``keys[B, K]``: contiguous, ``-inf`` off the candidates; ``row_max[B]``: their
    largest key (``-inf`` for a row without candidates); ``weights``: ``exp(keys -
    row_max)`` in the keys' dtype for ``mass="exp"`` (else ``None``); ``target[B]``:
    float64 ``share * total``; ``allow[B]``: rows that may be settled here (``None``:
    all).  ``None`` where the kernel is unavailable.
    """
    kernels = _kernels()
    if kernels is None:
        return None
    b = keys.shape[0]
    dtype = keys.dtype
    k_np = keys.detach().numpy()
    w_np = (
        weights.detach().to(dtype).contiguous().numpy()
        if weights is not None
        else np.zeros((1, 1), dtype=k_np.dtype)
    )
    allow_np = np.ones(b, dtype=np.bool_) if allow is None else allow.detach().contiguous().numpy()
    count = np.empty(b, dtype=np.int64)
    flat = np.empty(b * kernels.SIZES[-1], dtype=np.int64)
    try:
        flat = _settle(
            kernels,
            (
                k_np,
                row_max.detach().to(dtype).contiguous().numpy(),
                w_np,
                _MODES[mass],
                float(temperature),
                target.detach().to(torch.float64).contiguous().numpy(),
                allow_np,
            ),
            flat,
            count,
        )
        width = max(int(count.max()) if b else 0, 1)
        cols, kept = kernels.padded(flat, count, width)
    except Exception as error:  # a compilation failure: the tensor path from now on
        _fail(error)
        return None
    return torch.from_numpy(cols), torch.from_numpy(kept), torch.from_numpy(count >= 0)


#: rows a thread takes at the least (fewer: one call on the calling thread)
_MIN_ROWS_PER_THREAD = 64
_pool: dict[str, Any] = {}


def _settle(
    kernels: ModuleType, inputs: tuple[Any, ...], flat: np.ndarray, count: np.ndarray
) -> np.ndarray:
    """:func:`prefixes` over the rows, split into contiguous blocks of rows run on
    ``torch.get_num_threads()`` threads (the kernel releases the GIL); returns the kept
    columns, row after row."""
    keys, row_max, weights, mode, tau, target, allow = inputs
    b = keys.shape[0]
    parts = max(min(torch.get_num_threads(), b // _MIN_ROWS_PER_THREAD), 1)
    width = kernels.SIZES[-1]
    bounds = [b * i // parts for i in range(parts + 1)]

    def block(i: int) -> int:
        lo, hi = bounds[i], bounds[i + 1]
        n: int = kernels.prefixes(
            keys[lo:hi],
            row_max[lo:hi],
            weights[lo:hi] if mode == 2 else weights,
            mode,
            tau,
            target[lo:hi],
            allow[lo:hi],
            flat[lo * width : hi * width],
            count[lo:hi],
        )
        return n

    if parts == 1:
        return flat[: block(0)]
    others = [_executor(parts - 1).submit(block, i) for i in range(1, parts)]
    written = [block(0)] + [job.result() for job in others]
    return np.concatenate(
        [flat[bounds[i] * width : bounds[i] * width + written[i]] for i in range(parts)]
    )


def _executor(workers: int) -> ThreadPoolExecutor:
    """The kernel's thread pool: one per process (a forked child makes its own)."""
    pid = os.getpid()
    if _pool.get("pid") != pid or _pool.get("workers", 0) < workers:
        if _pool.get("pid") == pid:
            _pool["executor"].shutdown(wait=False)  # a larger one replaces it
        _pool.update(
            executor=ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spacl-cut"),
            pid=pid,
            workers=workers,
        )
    executor: ThreadPoolExecutor = _pool["executor"]
    return executor


__all__ = ["ENABLED", "applies", "enabled_by", "row_prefixes"]
