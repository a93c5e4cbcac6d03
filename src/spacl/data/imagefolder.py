"""ImageFolder datasets (ImageNet-100 / ImageNet-1K and any ``root/<class>/<image>`` tree).

:func:`load_imagefolder` returns ``torchvision.datasets.ImageFolder`` (lazy, on disk):
wrap it in :class:`spacl.data.MultiViewDataset` with the SimCLR recipe of
:func:`spacl.data.simclr_transform` and a :class:`spacl.data.PlanBatchSampler` for
full-scale training. :func:`materialize` turns a small folder into an in-memory
:class:`LabeledData` (resized, ``[0, 1]``) for the tensor path (``ViewStream``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from spacl._validation import check_choice

from .labeled import LabeledData

if TYPE_CHECKING:  # torchvision is imported where it is used (a slow import)
    from torch.utils.data import Dataset
    from torchvision.datasets import ImageFolder

__all__ = [
    "SPLIT_RECORD",
    "UnreadableImageError",
    "align_classes",
    "check_class_count",
    "check_images",
    "check_split_record",
    "in_trained_split",
    "load_imagefolder",
    "materialize",
    "read_rgb",
    "subset",
    "write_split_record",
]

#: what to do with a file that does not open as an image (config key ``data.bad_images``)
BAD_IMAGE_POLICIES = ("error", "skip")


def load_imagefolder(
    root: str | Path, split: str | None = None, transform: Any = None
) -> ImageFolder:
    """``torchvision.datasets.ImageFolder`` over ``root`` (or ``root/split`` if given).

    ``transform`` is applied to each PIL image (``None``: PIL images are returned).
    A missing directory raises ``FileNotFoundError`` naming it; a file in its place a
    ``ValueError`` saying so.
    """
    path = Path(root).expanduser()
    if split is not None:
        path = path / split
    if path.is_file():
        raise ValueError(
            f"{path} is a file, not an image folder (a folder with one sub-folder of images "
            f"per class); single image files go to `spacl predict RUN FILE...` or "
            f"spacl.load(RUN).embed([FILE, ...])"
        )
    if not path.is_dir():
        raise FileNotFoundError(
            f"image folder {path} does not exist: expected a folder with one sub-folder of "
            f"images per class ({path}/<class>/<image>)"
        )
    from .visible_folders import VisibleClassFolders  # imports torchvision

    try:
        return VisibleClassFolders(str(path), transform=transform, loader=read_rgb)
    except FileNotFoundError as err:  # torchvision: no class folder, or no image in them
        empty = str(err).split("Found no valid file for the classes", 1)
        if len(empty) == 2:  # class folders there, some of them without an image
            raise FileNotFoundError(
                f"image folder {path}: class folder(s) {empty[1].split('.')[0].strip()} hold "
                "no image file: add images or remove the folder(s)"
            ) from None
        loose = sorted(p.name for p in path.iterdir() if p.is_file())[:3]
        found = f"it holds loose files ({', '.join(loose)}, ...)" if loose else str(err)
        raise FileNotFoundError(
            f"image folder {path} has no class sub-folder with images: expected one "
            f"sub-folder of images per class ({path}/<class>/<image>); {found}"
        ) from None


class UnreadableImageError(ValueError):
    """A file of an image folder that PIL cannot open or decode (a ``ValueError`` whose one
    line names the file; raised where the image is decoded, in training or in ``embed``)."""


#: what PIL raises on a file it cannot identify (``UnidentifiedImageError`` is an
#: ``OSError``) or decode (``OSError: image file is truncated``, ``ValueError``,
#: ``SyntaxError`` from some plugins)
DECODE_ERRORS = (OSError, ValueError, SyntaxError)


def read_rgb(path: str) -> Any:
    """The RGB PIL image of ``path``, fully decoded (the loader of :func:`load_imagefolder`).

    A file that cannot be opened or decoded (e.g. a PNG cut short: its header is sound,
    its pixels are not) raises :class:`UnreadableImageError` naming it, in one line.
    """
    from PIL import Image

    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except DECODE_ERRORS as err:
        raise UnreadableImageError(
            f"unreadable image {path} ({type(err).__name__}: {err}); {BAD_IMAGE_ADVICE}"
        ) from None


#: what to do about an unreadable file: a new run can leave it out; a trained run's split
#: holds it, so evaluating or embedding that run needs the file back
BAD_IMAGE_ADVICE = (
    "remove it or set data.bad_images=skip to train without it; a trained run's split "
    "includes it, so for spacl eval / embed / --resume restore the file"
)


def in_trained_split(err: UnreadableImageError) -> ValueError:
    """The one line for an unreadable file of a trained run's own split (``spacl eval``,
    ``spacl embed --split``): the run's ``split.json`` holds it, so the file must come
    back; leaving it out (``data.bad_images``) is for training a new run."""
    what = str(err).split(";")[0]
    return ValueError(
        f"{what}; the run's split includes it: restore the file as it was in training"
    )


def check_images(dataset: ImageFolder, policy: str = "error") -> int:
    """Check every file once; an unreadable file stops or is left out.

    ``policy="error"``: ``ValueError`` naming the first file that PIL cannot identify.
    Only headers are read (cheap on large folders); a file whose header is sound but whose
    pixels are not (a truncated PNG or JPEG) raises :class:`UnreadableImageError`, one line
    naming it, when it is decoded.  ``"skip"``: every file is decoded once, and those that
    fail (header or pixels) are removed from ``dataset`` (``samples``, ``imgs``,
    ``targets``); their count is returned.
    """
    from PIL import Image

    check_choice(policy, "bad_images", list(BAD_IMAGE_POLICIES))
    keep = []
    for path, label in dataset.samples:
        try:
            with Image.open(path) as img:
                if policy == "skip":
                    img.load()
        except DECODE_ERRORS as err:
            if policy == "error":
                raise ValueError(
                    f"unreadable image {path} ({type(err).__name__}); {BAD_IMAGE_ADVICE}"
                ) from None
            continue
        keep.append((path, label))
    skipped = len(dataset.samples) - len(keep)
    dataset.samples = dataset.imgs = keep
    dataset.targets = [label for _, label in keep]
    return skipped


def check_class_count(dataset: ImageFolder, where: str | Path) -> None:
    """A ``ValueError`` before any training when the folder ``where`` holds fewer than 2
    class folders: a folder set one level too high (``root/animals/{cat,dog}`` read as the
    one class ``animals``) or a single class, which no classifier or evaluation can use."""
    if len(dataset.classes) < 2:
        found = ", ".join(repr(c) for c in dataset.classes)
        raise ValueError(
            f"config key 'data.root': {where} holds {len(dataset.classes)} class folder "
            f"({found}); expected one sub-folder of images per class, at least 2 (if the "
            "class folders are inside it, set data.root one level lower)"
        )


def align_classes(test: ImageFolder, classes: Sequence[str], where: str | Path) -> ImageFolder:
    """``test`` relabelled by class name to the indices of ``classes`` (the training
    folder's, in label order): torchvision numbers each folder's classes on its own, so a
    test folder lacking a training class would shift every label after it.  A test class
    that is not in ``classes`` raises a one-line ``ValueError`` naming it (``where``: the
    test folder)."""
    extra = sorted(set(test.classes) - set(classes))
    if extra:
        raise ValueError(
            f"config key 'data.root': {where} has class folder(s) {extra} that the training "
            f"folder lacks (its classes: {list(classes)}): every test class must be a "
            "training class"
        )
    if list(test.classes) == list(classes):
        return test
    index = {name: i for i, name in enumerate(classes)}
    test.samples = test.imgs = [(path, index[test.classes[y]]) for path, y in test.samples]
    test.targets = [y for _, y in test.samples]
    test.classes, test.class_to_idx = list(classes), dict(index)
    return test


def subset(dataset: ImageFolder, indices: Any, transform: Any = None) -> ImageFolder:
    """A copy of ``dataset`` holding only the files at ``indices`` (same classes)."""
    import copy

    part = copy.copy(dataset)
    part.samples = part.imgs = [dataset.samples[int(i)] for i in indices]
    part.targets = [label for _, label in part.samples]
    part.transform = transform
    return part


def materialize(
    dataset: Dataset[Any],
    size: int | None = None,
    name: str = "imagefolder",
    num_classes: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> LabeledData:
    """Load every ``(PIL image, label)`` of a small dataset into a :class:`LabeledData`.

    Images become RGB float tensors in ``[0, 1]``; ``size`` resizes (shorter side) and
    centre-crops to ``size x size`` so that they stack. Meant for small folders (tests,
    ImageNet subsets on CPU); the loop over files is IO, not maths.
    """
    from torchvision.transforms import v2

    steps: list[Any] = [v2.ToImage(), v2.RGB()]
    if size is not None:
        steps += [v2.Resize(size, antialias=True), v2.CenterCrop(size)]
    steps.append(v2.ToDtype(dtype, scale=True))
    to_tensor = v2.Compose(steps)
    n = len(dataset)  # type: ignore[arg-type]
    images, labels = [], []
    for i in range(n):
        img, label = dataset[i]
        images.append(to_tensor(img))
        labels.append(int(label))
    if not images:
        raise ValueError(f"dataset {name!r} is empty")
    label_t = torch.tensor(labels, dtype=torch.long)
    if num_classes is None:
        classes = getattr(dataset, "classes", None)
        num_classes = len(classes) if classes is not None else int(label_t.max()) + 1
    names = getattr(dataset, "classes", None)
    class_names = tuple(names) if names is not None and len(names) == num_classes else None
    return LabeledData(torch.stack(images), label_t, None, num_classes, name, class_names)


#: the file of a run directory that records an image folder's split (written at train time)
SPLIT_RECORD = "split.json"
#: above this many files a record holds only each split's count and fingerprint
RECORD_PATHS_UP_TO = 100_000


def _relative_files(dataset: Any, root: Path) -> list[str]:
    out = []
    for path, _ in dataset.samples:
        p = Path(path)
        try:
            out.append(p.relative_to(root).as_posix())
        except ValueError:
            out.append(p.as_posix())
    return sorted(out)


def _fingerprint(files: list[str]) -> str:
    return hashlib.sha256("\n".join(files).encode()).hexdigest()


def _split_files(train: Any, test: Any, root: Path) -> dict[str, list[str]]:
    return {"train": _relative_files(train, root), "test": _relative_files(test, root)}


def write_split_record(path: str | Path, train: Any, test: Any, root: str | Path) -> Path:
    """Write ``path`` (a run's ``split.json``): per split the sorted file paths relative to
    ``root`` (only when the folder holds at most :data:`RECORD_PATHS_UP_TO` files), their
    count and a sha256 fingerprint of them."""
    files = _split_files(train, test, Path(root))
    keep = sum(len(v) for v in files.values()) <= RECORD_PATHS_UP_TO
    record: dict[str, Any] = {"version": 1}
    for name, names in files.items():
        record[name] = {"count": len(names), "sha256": _fingerprint(names)}
        if keep:
            record[name]["files"] = names
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return path


def _few(names: list[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f", ... ({len(names) - n} more)" if len(names) > n else "")


def _read_split_record(path: Path) -> dict[str, Any]:
    """The record at ``path`` (:func:`write_split_record`'s layout); a damaged one (not
    JSON, or not that layout) is a one-line ``ValueError`` naming it and the ways on."""

    def damaged(why: str) -> ValueError:
        return ValueError(
            f"the split record {path} is damaged ({why}): it holds the files the run "
            f"{path.parent} trained and tested on; restore it from a copy of the run, or "
            f"delete it to skip this check (the split is then made from the folder as it is "
            f"now, unchecked)"
        )

    try:
        record = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise damaged(f"not valid JSON: {str(err).splitlines()[0]}") from None
    for name in ("train", "test"):
        entry = record.get(name) if isinstance(record, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise damaged(f"no {name} fingerprint")
        if "files" in entry and not isinstance(entry["files"], list):
            raise damaged(f"its {name} files are not a list")
        if not isinstance(entry.get("count"), int):
            raise damaged(f"no {name} count")
    return dict(record)


def check_split_record(path: str | Path, train: Any, test: Any, root: str | Path) -> None:
    """Hold the current ``(train, test)`` split of ``root`` to the record at ``path``.

    A missing record (a run from before records were kept) passes.  Any difference raises
    a one-line ``ValueError`` naming what changed (files added / removed, the first few
    names) and saying to train a new run.
    """
    path = Path(path)
    if not path.is_file():
        return
    record = _read_split_record(path)
    files = _split_files(train, test, Path(root))
    if all(record[k]["sha256"] == _fingerprint(v) for k, v in files.items()):
        return
    where = f"the image folder {root} is not the one run {path.parent} was trained on"
    fix = (
        "train a new run on the folder as it is now, or restore the recorded files (to test "
        "the run on another labelled folder: spacl predict RUN IMAGE..., or spacl embed RUN "
        "--data DIR --out F.npz then spacl geometry F.npz)"
    )
    if all("files" in record[k] for k in files):
        was = {f for k in files for f in record[k]["files"]}
        now = {f for v in files.values() for f in v}
        added, removed = sorted(now - was), sorted(was - now)
        parts = []
        if added:
            parts.append(f"{len(added)} file(s) added ({_few(added)})")
        if removed:
            parts.append(f"{len(removed)} file(s) removed ({_few(removed)})")
        change = "; ".join(parts) or "the same files fall into other splits"
    else:
        change = "; ".join(
            f"{k}: {record[k]['count']} file(s) recorded, {len(v)} now" for k, v in files.items()
        )
        change += " (the file lists differ)"
    raise ValueError(f"{where} ({path.name}): {change}; {fix}")
