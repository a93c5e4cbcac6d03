"""Boundary checks shared by every public function: clear errors, never silent NaN.

The value checks (:func:`check_choice`, :func:`check_flag`, :func:`check_real`,
:func:`check_int`, :func:`check_positive`, :func:`check_in_range`) need no torch, so the
CLI's config validation (``spacl recipes``, ``spacl --help``) starts without it; the
tensor checks import torch where they run.
"""

from __future__ import annotations

import math
import numbers
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
    """Return ``labels`` as an int64 tensor of length ``n`` or raise naming the mismatch.

    Any integer dtype is accepted and cast to ``int64`` (``uint8``, ``int32``, ...: the
    losses index and group with the labels, which needs ``int64``); an ``int64`` tensor
    is returned as it is.  Floating, complex and bool tensors are a ``TypeError``.
    """
    import torch

    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(labels).__name__}")
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got dtype {labels.dtype}")
    if labels.shape[0] != n:
        raise ValueError(f"{name} has length {labels.shape[0]} but the batch has {n} instances")
    return labels if labels.dtype == torch.int64 else labels.to(torch.int64)


def _is_numpy_bool(value: Any) -> bool:
    """Whether ``value`` is a numpy boolean scalar (checked without importing numpy)."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def check_flag(value: Any, name: str) -> bool:
    """Return ``value`` as a ``bool`` if it is one (a numpy bool too), else ``TypeError``.

    A switch takes ``True`` or ``False`` only: ``bool("no")`` is ``True``, so a string
    (or ``0`` / ``1``, or a tensor) would silently flip a configuration.
    ``check_flag("no", "detach_weights")`` raises
    ``TypeError("detach_weights must be a bool (True or False), got str 'no'")``.
    """
    if isinstance(value, bool) or _is_numpy_bool(value):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}")


def _check_number_type(value: Any, name: str) -> None:
    """``TypeError`` unless ``value`` is a real number: not a bool, a string or a tensor."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or _is_numpy_bool(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")


def check_real(value: Any, name: str, *, finite: bool = True) -> float:
    """Return ``value`` as a ``float`` if it is a real number (finite unless ``finite=False``).

    Python and numpy ints and floats are numbers; a bool, a string (``"0.5"``) or a
    tensor (``torch.tensor(0.5)``) is a ``TypeError`` naming ``name`` and the value; NaN
    or an infinity a ``ValueError``.
    """
    _check_number_type(value, name)
    if finite and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_int(value: Any, name: str, *, low: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= low`` (``None``: no bound).

    Python and numpy integers are accepted; a bool (``True`` is not a count), a float or
    a string is a ``TypeError``, an integer below ``low`` a ``ValueError``, both naming
    ``name`` and the value.
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_positive(value: float, name: str) -> float:
    """Require a finite number ``> 0`` (a bool, string or tensor is a ``TypeError``)."""
    _check_number_type(value, name)
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
    _check_number_type(value, name)
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


def check_export_archive(out: str | Path) -> Path:
    """``out`` as the ``.pt2`` file an image encoder is exported to (a ``torch.export``
    archive; the suffix in any case, as every ``--out`` suffix: ``.PT2`` is kept as
    named); any other suffix is refused with a ``ValueError`` (no torch needed, so the
    CLI checks it before loading a run).

    Example:
        >>> check_export_archive("encoder.pt2").name
        'encoder.pt2'
        >>> check_export_archive("encoder.PT2").name
        'encoder.PT2'
        >>> check_export_archive("encoder.onnx")
        Traceback (most recent call last):
        ...
        ValueError: --out must name a .pt2 file (...), got 'encoder.onnx'
    """
    path = Path(out)
    if path.suffix.lower() != ".pt2":
        raise ValueError(
            f"--out must name a .pt2 file (a torch.export archive; ONNX and other formats "
            f"are not written), got {str(path)!r}"
        )
    return path
