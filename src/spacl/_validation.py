"""Boundary checks shared by every public function: clear errors, never silent NaN.

The value checks (:func:`check_choice`, :func:`check_positive`, :func:`check_in_range`)
need no torch, so the CLI's config validation (``spacl recipes``, ``spacl --help``) starts
without it; the tensor checks import torch where they run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from torch import Tensor

_T = TypeVar("_T")


def check_choice(value: _T, name: str, options: Iterable[Any], *, where: str = "") -> _T:
    """Return ``value`` if it is one of ``options``, else raise naming ``name`` and ``value``.

    The one "must be one of" check of the package:
    ``check_choice("cubic", "mass", ("exp", "similarity"))`` raises
    ``ValueError("mass must be one of ['exp', 'similarity'], got 'cubic'")``.  When every
    option is a string and ``value`` is not, the error is a ``TypeError`` that names the
    type found.  ``where`` qualifies the options (``" for an image folder"``); it goes
    between the list and ``got``.
    """
    allowed = list(options)
    if allowed and all(isinstance(o, str) for o in allowed) and not isinstance(value, str):
        raise TypeError(
            f"{name} must be a string, one of {allowed}{where}, "
            f"got {type(value).__name__} {value!r}"
        )
    try:
        known = value in allowed
    except TypeError:  # an unhashable or incomparable value is not an option
        known = False
    if not known:
        raise ValueError(f"{name} must be one of {allowed}{where}, got {value!r}")
    return value


def check_tensor(
    x: Any, name: str, *, ndim: int | tuple[int, ...] | None = None, finite: bool = True
) -> Tensor:
    """Return ``x`` if it is a floating tensor of the given rank with finite values.

    Raises ``TypeError`` for non-tensors / non-float dtypes and ``ValueError`` for a
    wrong rank or non-finite entries, naming ``name`` and what was found.
    ``finite=False`` leaves the values to the caller (:func:`check_all_finite` checks
    several tensors with one host wait).
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    if finite:
        check_finite(x, name)
    return x


def check_finite(x: Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or infinity.

    One reduction on the fast path: a NaN or an infinity makes the sum non-finite;
    only then (or if the finite values overflow the sum) is the exact check run.
    """
    import torch

    if not x.numel():
        return
    if bool(torch.isfinite(x.detach().sum())):
        return
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")


def check_all_finite(named: dict[str, Tensor | None]) -> None:
    """:func:`check_finite` of every tensor of ``named`` (``None`` skipped) with one
    reduction, hence one host wait on a GPU; the one-by-one check names the culprit."""
    import torch

    present = {k: t for k, t in named.items() if t is not None and t.numel()}
    if not present:
        return
    sums = [t.detach().sum().to(torch.float64) for t in present.values()]
    if bool(torch.isfinite(torch.stack(sums).sum())):
        return
    for name, t in present.items():
        check_finite(t, name)


def check_labels(labels: Any, n: int, name: str = "labels") -> Tensor:
    """Return ``labels`` as an integer tensor of length ``n`` or raise naming the mismatch."""
    import torch

    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got dtype {labels.dtype}")
    if labels.shape[0] != n:
        raise ValueError(f"{name} has length {labels.shape[0]} but the batch has {n} instances")
    return labels


def check_positive(value: float, name: str) -> float:
    """Require a finite number ``> 0``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return float(value)


def check_in_range(
    value: float,
    name: str,
    low: float,
    high: float,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Require ``low <= value <= high`` (bounds inclusive or not), else ``ValueError``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    ok_low = value >= low if low_inclusive else value > low
    ok_high = value <= high if high_inclusive else value < high
    if not (math.isfinite(value) and ok_low and ok_high):
        lb = "[" if low_inclusive else "("
        hb = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must be in {lb}{low}, {high}{hb}, got {value}")
    return float(value)


def check_export_folder(out: str | Path, what: str, contents: str) -> Path:
    """``out`` as a new or empty folder for an export of ``what`` holding ``contents``.

    A name with a file suffix (``link.pt2``, ``det.onnx``) is refused with a
    ``ValueError`` naming the folder that would be written instead, and a non-empty
    folder or a file is refused too; names with a numeric suffix (``link-1.5``) are
    folders.

    Example:
        >>> check_export_folder("exports/link", "a KG run", "tables").name
        'link'
        >>> check_export_folder("link.pt2", "a KG run", "tables")
        Traceback (most recent call last):
        ...
        ValueError: --out names a file (.pt2), ... such as 'link', got 'link.pt2'
    """
    folder = Path(out)
    suffix = folder.suffix
    if suffix[1:2].isalpha():
        raise ValueError(
            f"--out names a file ({suffix}), but {what} is exported as a folder ({contents}): "
            f"give a folder name such as {str(folder.with_suffix(''))!r}, got {str(folder)!r}"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"--out must be a new or empty folder, got {str(folder)!r}")
    return folder
