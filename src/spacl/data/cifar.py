"""CIFAR-10 / CIFAR-100 from the standard "python version" files, into memory.

Layout (exactly what ``torchvision.datasets.CIFAR10/100(root, download=True)`` writes):

* ``<root>/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}``: pickles
  with ``data`` (``uint8 [n, 3072]``, channel-major 3x32x32) and ``labels``.
* ``<root>/cifar-100-python/{train, test, meta}``: pickles with ``data``,
  ``fine_labels`` and ``coarse_labels`` (the 20 super-classes used for weak
  supervision); ``meta`` holds ``fine_label_names`` / ``coarse_label_names``.

**Decision**: we read the pickles directly rather than through
``torchvision.datasets.CIFAR*``, for two reasons: torchvision drops CIFAR-100's
coarse labels, and its MD5 check rejects any file but the official ones (so tests
could not use tiny fixtures). The format is the same, so ``root`` is the same
directory torchvision would use. Nothing is downloaded, ever: a missing directory
raises ``FileNotFoundError`` naming the path and how to get the data.

``root`` may be the parent directory or the ``cifar-*`` directory itself.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spacl._validation import check_choice

from .labeled import LabeledData

__all__ = ["CIFAR_DIRS", "load_cifar"]

CIFAR_DIRS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
_FILES = {
    ("cifar10", True): [f"data_batch_{i}" for i in range(1, 6)],
    ("cifar10", False): ["test_batch"],
    ("cifar100", True): ["train"],
    ("cifar100", False): ["test"],
}
_META = {"cifar10": "batches.meta", "cifar100": "meta"}


def _resolve_dir(root: str | Path, name: str) -> Path:
    folder = CIFAR_DIRS[name]
    root = Path(root).expanduser()
    for candidate in (root / folder, root):
        if candidate.is_dir() and (candidate / _FILES[(name, False)][0]).exists():
            return candidate
    raise FileNotFoundError(
        f"{name} not found: expected the directory {root / folder} (the 'python version' of "
        f"the dataset). spacl never downloads; fetch it once with "
        f'`python -c "import torchvision; torchvision.datasets.'
        f"{'CIFAR10' if name == 'cifar10' else 'CIFAR100'}('{root}', download=True)\"` "
        f"or unpack the tarball from https://www.cs.toronto.edu/~kriz/cifar.html into {root}. "
        "`spacl data` lists every dataset's source and layout"
    )


def _unpickle(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"missing CIFAR file {path}")
    with path.open("rb") as handle:
        obj = pickle.load(handle, encoding="latin1")
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(obj).__name__}")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def load_cifar(
    root: str | Path,
    name: str = "cifar10",
    train: bool = True,
    dtype: torch.dtype = torch.float32,
) -> LabeledData:
    """Load CIFAR-10 or CIFAR-100 into memory: ``inputs [N, 3, 32, 32]`` in ``[0, 1]``.

    Args:
        root: directory holding ``cifar-10-batches-py`` / ``cifar-100-python`` (or that
            directory itself).
        name: ``"cifar10"`` or ``"cifar100"``.
        train: the 50,000-image training set or the 10,000-image test set.
        dtype: floating dtype of ``inputs`` (float32: 614 MB for the training set).

    CIFAR-100 carries ``coarse_labels`` (20 super-classes); CIFAR-10 has ``None``.
    """
    check_choice(name, "name", sorted(CIFAR_DIRS))
    folder = _resolve_dir(root, name)
    data_parts, fine_parts, coarse_parts = [], [], []
    fine_key = "labels" if name == "cifar10" else "fine_labels"
    for fname in _FILES[(name, bool(train))]:
        batch = _unpickle(folder / fname)
        data_parts.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        fine_parts.append(np.asarray(batch[fine_key], dtype=np.int64))
        if name == "cifar100":
            coarse_parts.append(np.asarray(batch["coarse_labels"], dtype=np.int64))
    images = torch.from_numpy(np.concatenate(data_parts)).to(dtype) / 255.0
    labels = torch.from_numpy(np.concatenate(fine_parts))
    coarse = torch.from_numpy(np.concatenate(coarse_parts)) if coarse_parts else None
    num_classes = 10 if name == "cifar10" else 100
    names = _class_names(folder, name, num_classes)
    split = "train" if train else "test"
    return LabeledData(images, labels, coarse, num_classes, f"{name}-{split}", names)


def _class_names(folder: Path, name: str, num_classes: int) -> tuple[str, ...] | None:
    meta_path = folder / _META[name]
    if not meta_path.is_file():
        return None
    meta = _unpickle(meta_path)
    key = "label_names" if name == "cifar10" else "fine_label_names"
    names = meta.get(key)
    if names is None or len(names) != num_classes:
        return None
    return tuple(str(n) for n in names)
