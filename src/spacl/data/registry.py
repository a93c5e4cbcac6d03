"""``get_dataset``: one entry point for configs, by name.

| name          | returns                         | root    | splits                  |
|---------------|---------------------------------|---------|-------------------------|
| ``synthetic`` | ``LabeledData [N, dim]``        | unused  | train / test / all      |
| ``digits``    | ``LabeledData [N, 1, 8, 8]``    | unused  | train / test / all      |
| ``mnist5k``   | ``LabeledData [N, 1, 28, 28]``  | unused  | train / test / all      |
| ``cifar10``   | ``LabeledData [N, 3, 32, 32]``  | needed  | train / test            |
| ``cifar100``  | same + ``coarse_labels``        | needed  | train / test            |
| ``imagefolder``| ``torchvision ImageFolder``    | needed  | sub-directory name      |

Single-set data (synthetic, digits, mnist5k) is split by
:func:`~spacl.data.stratified_split` with keyword arguments ``test_fraction``
(default 0.2) and ``split_seed`` (default 0); ``split="all"`` returns everything.
Other keyword arguments go to the loader (e.g. ``make_synthetic(num_classes=...)``,
``load_imagefolder(transform=...)``). When ``root`` is ``None`` for on-disk data,
:func:`spacl.data.sources.find_dataset` searches the data roots (``$SPACL_DATA_DIR``, the
per-user data directory, ...; ``spacl data`` lists them) for ``cifar-10-batches-py``,
``cifar-100-python`` or ``imagenet100``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset

from spacl._validation import check_choice

from .builtin import load_digits, load_mnist5k
from .cifar import load_cifar
from .imagefolder import load_imagefolder
from .labeled import LabeledData, stratified_split
from .sources import find_dataset
from .synthetic import make_synthetic

__all__ = ["DATASET_NAMES", "get_dataset"]

DATASET_NAMES = ("synthetic", "digits", "mnist5k", "cifar10", "cifar100", "imagefolder")


def _split_single(data: LabeledData, split: str, kw: dict[str, Any]) -> LabeledData:
    test_fraction = kw.pop("test_fraction", 0.2)
    split_seed = kw.pop("split_seed", 0)
    if split == "all":
        return data
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train', 'test' or 'all' for {data.name}, got {split!r}")
    train, test = stratified_split(data, test_fraction, split_seed)
    return train if split == "train" else test


def get_dataset(
    name: str, root: str | Path | None = None, split: str = "train", **kw: Any
) -> LabeledData | Dataset[Any]:
    """Load dataset ``name`` (see the module table) and return the requested split."""
    check_choice(name, "name", list(DATASET_NAMES))
    kw = dict(kw)
    if name in ("synthetic", "digits", "mnist5k"):
        split_kw: dict[str, Any] = {
            k: kw.pop(k) for k in ("test_fraction", "split_seed") if k in kw
        }
        loaders: dict[str, Callable[..., LabeledData]] = {
            "synthetic": make_synthetic,
            "digits": load_digits,
            "mnist5k": load_mnist5k,
        }
        data = loaders[name](**kw)
        return _split_single(data, split, split_kw)
    if name in ("cifar10", "cifar100"):
        check_choice(split, "split", ("train", "test"), where=f" for {name}")
        base = Path(root) if root is not None else find_dataset(name)
        return load_cifar(base, name, train=split == "train", **kw)
    # imagefolder: an explicit root is the folder itself; else <data root>/imagenet100
    folder = Path(root) if root is not None else find_dataset("imagenet100")
    return load_imagefolder(folder, split=split or None, **kw)
