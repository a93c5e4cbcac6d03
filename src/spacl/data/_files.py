"""Finding a dataset's directory and split files under the data root (KG and text readers)."""

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
    """The directory of dataset ``name``: ``<root>/<family>/<name>``, ``<root>/<name>`` or
    ``root`` itself, whichever holds a ``train`` split file.

    ``root`` defaults to :func:`spacl.data.default_data_root` (``$SPACL_DATA_DIR`` or
    ``../shared/data`` next to the checkout).  ``FileNotFoundError`` lists where it looked.
    """
    if root is None:
        from spacl.data.registry import default_data_root

        root = default_data_root()
    base = Path(root).expanduser()
    for candidate in (base / family / name, base / name, base):
        if split_file(candidate, "train", suffixes) is not None:
            return candidate
    train = f"train{suffixes[0]}"
    raise FileNotFoundError(
        f"{what} {name!r} not found under {base} (looked for {family}/{name}/{train}, "
        f"{name}/{train} and {train}; set SPACL_DATA_DIR or pass root=)"
    )
