"""Finding a dataset's directory and split files under the data roots (KG and text readers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def split_file(directory: Path, split: str, suffixes: Sequence[str]) -> Path | None:
    """``directory/<split><suffix>`` for the first suffix that exists, else ``None``."""
    for suffix in suffixes:
        path = directory / f"{split}{suffix}"
        if path.is_file():
            return path
    return None


def find_dataset_dir(
    name: str, root: str | Path | None, family: str, suffixes: Sequence[str], what: str
) -> Path:
    """The directory of dataset ``name``: ``<base>/<family>/<name>`` or ``<base>/<name>``
    for each data root ``base`` in :func:`spacl.data.sources.data_search_dirs` order, or an
    explicit ``root`` itself, whichever first holds a ``train`` split file.

    ``FileNotFoundError`` lists every directory searched and points to ``spacl data``.
    """
    from spacl.data.sources import data_search_dirs, dataset_not_found

    searched: list[Path] = []
    for base in data_search_dirs(root):
        candidates = [base / family / name, base / name]
        if root is not None:
            candidates.append(base)
        for candidate in candidates:
            if split_file(candidate, "train", suffixes) is not None:
                return candidate
        searched.extend(candidates)
    raise FileNotFoundError(dataset_not_found(name, searched, what))
