"""Which sub-folders of an image folder are classes, and torchvision's ``ImageFolder`` that
reads only those.

A user's folder often carries folders that are not classes: ``.ipynb_checkpoints`` from a
notebook, ``.git``, ``__MACOSX`` from a zip made on a Mac.  torchvision's ``ImageFolder``
makes each one a class; :class:`VisibleClassFolders` leaves them out (the split record,
``predict``'s class names and ``embed --data`` then agree with what a user sees).

:func:`class_folders` needs only the standard library; the class is built on its first
use, when torchvision (a slow import) is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["NOT_CLASSES", "class_folders"]  # and VisibleClassFolders, built on first use

#: sub-folders that are never classes: hidden ones (``.ipynb_checkpoints``, ``.git``) and
#: the resource forks macOS archives carry
NOT_CLASSES = ("__MACOSX",)


def class_folders(root: Path) -> tuple[list[str], dict[str, int]]:
    """``(classes, class_to_idx)`` of an image folder: its sub-folders in sorted order,
    hidden ones (a name starting with ``.``) and :data:`NOT_CLASSES` left out.

    Raises:
        FileNotFoundError: ``root`` has no such sub-folder.
    """
    names = sorted(
        entry.name
        for entry in root.iterdir()
        if entry.is_dir() and not entry.name.startswith(".") and entry.name not in NOT_CLASSES
    )
    if not names:
        raise FileNotFoundError(f"Couldn't find any class folder in {root}.")
    return names, {name: i for i, name in enumerate(names)}


def _visible_class_folders() -> type:
    """The class (built at first use: torchvision is a slow import)."""
    from torchvision.datasets import ImageFolder

    class VisibleClassFolders(ImageFolder):
        """``torchvision.datasets.ImageFolder`` whose classes are :func:`class_folders`'s
        (reached as this module's attribute, so a DataLoader's spawned workers unpickle it).

        Example::

            data = VisibleClassFolders("photos", loader=read_rgb)
            data.classes  # ['cat', 'dog']: photos/.ipynb_checkpoints left out
        """

        def find_classes(self, directory: str | Path) -> tuple[list[str], dict[str, int]]:
            return class_folders(Path(directory))

    VisibleClassFolders.__module__ = __name__
    VisibleClassFolders.__qualname__ = "VisibleClassFolders"
    return VisibleClassFolders


def __getattr__(name: str) -> Any:
    """``VisibleClassFolders``, built on first access (PEP 562) and kept."""
    if name == "VisibleClassFolders":
        cls = globals()[name] = _visible_class_folders()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
