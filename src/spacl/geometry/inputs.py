"""What geometry and alignment read: input conversion and the chunked float64 passes.

Shared by :mod:`spacl.geometry` and :mod:`spacl.alignment` (public for that reason).

Every public function accepts torch tensors or numpy arrays; these helpers turn them into
validated torch tensors (no copy for numpy) and provide the chunked float64 passes that keep
memory independent of the number of samples.  Every metric is computed in float64, so two
inputs of different floating dtypes (float32 and float64, or float16) are promoted to
float64 alike: mixing them is allowed and gives the float64 answer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

from spacl._validation import check_labels, check_tensor

__all__ = [
    "CHUNK_ELEMENTS",
    "F64",
    "as_labels",
    "as_matrix",
    "as_tensor",
    "check_same_columns",
    "check_same_rows",
    "check_sums_finite",
    "chunk_rows",
    "column_mean",
    "entropy_of_distribution",
    "gram",
    "nan_with_warning",
    "row_slices",
]

#: elements per float64 work chunk (32 MiB); keeps passes over [N, d] data O(d) in memory
CHUNK_ELEMENTS = 1 << 22

F64 = torch.float64


def as_matrix(x: Any, name: str, *, min_rows: int = 1, check_finite: bool = True) -> Tensor:
    """Return ``x`` as a finite floating ``[N, d]`` tensor (numpy arrays are wrapped, not copied).

    Raises ``TypeError`` for other types / non-float dtypes and ``ValueError`` for a wrong rank,
    non-finite values, or fewer than ``min_rows`` rows.  ``check_finite=False`` skips the
    finiteness scan for callers that detect non-finite values from their own float64 sums.
    """
    t = _to_tensor(x, name)
    if t.ndim != 2:
        check_tensor(t, name, ndim=2)  # raises the type / rank error
    # type and rank on an empty view; finiteness chunk by chunk, so memory stays O(d)
    check_tensor(t[:0], name, ndim=2)
    bad = 0
    for rows in row_slices(t.shape[0], t.shape[1]) if check_finite else ():
        finite = torch.isfinite(t[rows])
        if not bool(finite.all()):
            bad += int((~finite).sum())
    if bad:
        raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")
    if t.shape[0] < min_rows:
        raise ValueError(
            f"{name} needs at least {min_rows} rows (samples), got shape {tuple(t.shape)}"
        )
    if t.shape[1] < 1:
        raise ValueError(f"{name} needs at least one feature column, got shape {tuple(t.shape)}")
    return t


def as_tensor(x: Any, name: str, ndim: int | tuple[int, ...]) -> Tensor:
    """Return ``x`` as a finite floating tensor of the given rank(s)."""
    t = _to_tensor(x, name)
    check_tensor(t, name, ndim=ndim)
    return t


def as_labels(labels: Any, n: int, name: str = "labels") -> Tensor:
    """Return ``labels`` as a 1-D int64 tensor of length ``n`` (numpy integer arrays accepted)."""
    if isinstance(labels, np.ndarray):
        if not np.issubdtype(labels.dtype, np.integer):
            raise TypeError(f"{name} must hold integers, got numpy dtype {labels.dtype}")
        labels = torch.from_numpy(np.ascontiguousarray(labels))
    t = check_labels(labels, n, name)
    return t.to(torch.int64)


def check_same_rows(x: Tensor, y: Tensor, x_name: str = "X", y_name: str = "Y") -> None:
    """Raise ``ValueError`` unless ``x`` and ``y`` describe the same number of samples."""
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"{x_name} and {y_name} must have the same number of rows (samples), "
            f"got {x.shape[0]} and {y.shape[0]}"
        )


def check_same_columns(x: Tensor, y: Tensor, x_name: str = "X", y_name: str = "Y") -> None:
    """Raise ``ValueError`` unless ``x`` and ``y`` have the same number of feature columns."""
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"{x_name} and {y_name} must have the same number of columns (features), "
            f"got shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )


def nan_with_warning(message: str) -> float:
    """Warn (``RuntimeWarning``) that a quantity is undefined and return NaN."""
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    return math.nan


def chunk_rows(n: int, width: int) -> int:
    """Rows per chunk so that a float64 ``[rows, width]`` block stays near ``CHUNK_ELEMENTS``."""
    return max(1, min(n, CHUNK_ELEMENTS // max(1, width)))


def row_slices(n: int, width: int) -> Iterator[slice]:
    """Consecutive row slices covering ``range(n)``, sized by :func:`chunk_rows`."""
    step = chunk_rows(n, width)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def column_mean(x: Tensor, name: str | None = None) -> Tensor:
    """Float64 column mean of ``x`` computed chunk by chunk (no full float64 copy).

    With ``name``, non-finite entries of ``x`` raise ``ValueError`` (detected from the
    float64 chunk sums, which saves a separate scan of the data).
    """
    total = torch.zeros(x.shape[1], dtype=F64, device=x.device)
    for rows in row_slices(x.shape[0], x.shape[1]):
        part = x[rows].to(F64).sum(0)
        if name is not None:
            check_sums_finite(part, x[rows], name)
        total += part
    return total / x.shape[0]


def check_sums_finite(sums: Tensor, chunk: Tensor, name: str) -> None:
    """Raise if ``sums`` (float64 sums over ``chunk``) are not finite: NaN / inf in the chunk."""
    if bool(torch.isfinite(sums).all()):
        return
    bad = int((~torch.isfinite(chunk)).sum())
    if bad:
        raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")
    raise ValueError(f"{name} holds values too large to sum in float64")


def gram(x: Tensor, block: int = 128) -> Tensor:
    """``x^T x`` from the upper block triangle only, mirrored: ~1/2 of a GEMM's flops for wide x.

    Column blocks of ``block`` keep the products large enough to run at full GEMM speed
    (measured: 0.74 of one ``x^T x`` GEMM at ``d = 512``); narrow inputs use one GEMM.
    """
    d = x.shape[1]
    if d < 2 * block:
        return x.T @ x
    out = torch.empty(d, d, dtype=x.dtype, device=x.device)
    for start in range(0, d, block):
        stop = min(d, start + block)
        out[start:stop, start:] = x[:, start:stop].T @ x[:, start:]
        out[stop:, start:stop] = out[start:stop, stop:].T
    return out


def entropy_of_distribution(p: Tensor) -> float:
    """Shannon entropy ``-sum p log p`` (natural log) with ``0 log 0 = 0``."""
    positive = p[p > 0]
    return float(-(positive * positive.log()).sum())


def _to_tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{name} must be a floating-point array, got numpy dtype {x.dtype}")
        return torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(x, Tensor):
        return x.detach()
    raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
