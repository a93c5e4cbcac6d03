"""Intent-classification TSVs and the open-intent (out-of-domain) protocol.

File format (the TEXTOIR splits of StackOverflow, BANKING77, CLINC150; Zhang et al.
2021): a header line ``text<TAB>label`` (column order free, extra columns ignored),
then one example per line; CRLF line endings and ``*.gz`` files are accepted.  Every
malformed line raises ``ValueError`` naming the file and the (1-based) line number.

Open-intent protocol (TEXTOIR, and the SPACL paper's OOD experiments):

1. the class universe is the set of training labels (sorted);
2. a seeded choice of ``round(known_ratio * C)`` classes is *known*:
   ``numpy.random.default_rng(seed).choice(C, n_known, replace=False)`` over the
   sorted labels;
3. train and dev keep only known-class examples (labels renumbered ``0..K-1`` in the
   sorted order of the known class names);
4. test keeps every example; unknown-class examples get the single OOD label ``K``.

A dataset may also **declare an open label** (``open_label``, default ``"oos"``: the
out-of-scope queries of CLINC150, Larson et al. 2019): a label that occurs in test
only.  Its test examples are out-of-domain whatever ``known_ratio`` is, so
``known_ratio=1.0`` evaluates real out-of-scope queries against all the training
classes with no known-class split.  It must occur in neither train nor dev: the
classifier and its thresholds are then fitted without any OOD example.

**Decisions**: a dev or test label that never occurs in train (other than the declared
open label) is an error (naming
the file and line: it cannot be a known class and is almost always a typo); so is a
known class without a dev example, since thresholds are fitted per class on dev.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from spacl._validation import check_choice
from spacl.data._files import find_dataset_dir, split_file
from spacl.data.textoir import textoir_known_classes

SPLIT_SUFFIXES = (".tsv", ".tsv.gz")

__all__ = [
    "DEFAULT_OPEN_LABEL",
    "INTENT_SPLITS",
    "PROTOCOLS",
    "IntentExamples",
    "OpenIntentSplit",
    "intent_dataset_name",
    "intent_path",
    "load_intent_dataset",
    "open_intent_split",
    "protocol_split",
    "read_intent_tsv",
]

INTENT_SPLITS = ("train", "dev", "test")
#: the declared open (out-of-scope) label of CLINC150's ``oos`` files
DEFAULT_OPEN_LABEL = "oos"


@dataclass(frozen=True)
class IntentExamples:
    """Texts with their string labels, and where they came from (for error messages)."""

    texts: list[str]
    labels: list[str]
    path: Path
    lines: list[int]  # 1-based file line of each example

    def __len__(self) -> int:
        return len(self.texts)


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _iter_records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(first line of the record, fields)`` of every non-blank record of a quoted TSV.

    The standard quoted dialect (:mod:`csv`, tab delimiter, ``"`` quote, doubled quotes
    inside a quoted field, ``strict``): a quoted field may span lines, as in the TEXTOIR
    BANKING77 files.
    """
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter="\t", quotechar='"', doublequote=True, strict=True)
        start = 1
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                raise ValueError(
                    f"{path}, line {start}: not a valid quoted TSV record: {err}"
                ) from err
            if fields and any(f.strip() for f in fields):
                yield start, fields
            start = reader.line_num + 1


def read_intent_tsv(
    path: str | Path, text_column: str = "text", label_column: str = "label"
) -> IntentExamples:
    """Read a ``text<TAB>label`` TSV with a header line (standard quoted-TSV dialect).

    Fields are read by :mod:`csv` with a tab delimiter and standard quoting: a field
    that starts with ``"`` ends at the next lone ``"`` and may hold tabs, newlines and
    doubled ``""`` quotes.  Blank lines are skipped; ``lines`` holds the first line of
    each record.

    Raises:
        FileNotFoundError: no such file.
        ValueError: empty file, header without the two columns, a record with too few
            fields, a malformed quoted field, an empty text or label (the message names
            the file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"intent file {path} does not exist")
    texts: list[str] = []
    labels: list[str] = []
    lines: list[int] = []
    columns: list[str] | None = None
    ti = li = -1
    try:
        for number, fields in _iter_records(path):
            if columns is None:
                columns = [c.strip() for c in fields]
                missing = [c for c in (text_column, label_column) if c not in columns]
                if missing:
                    raise ValueError(
                        f"{path}, line {number}: header must name the columns "
                        f"{text_column!r} and {label_column!r} (tab-separated), got {columns}"
                    )
                ti, li = columns.index(text_column), columns.index(label_column)
                continue
            if len(fields) < len(columns):
                shown = "\t".join(fields)[:80]
                raise ValueError(
                    f"{path}, line {number}: expected {len(columns)} tab-separated fields "
                    f"({', '.join(columns)}), got {len(fields)}: {shown!r}"
                )
            text, label = fields[ti].strip(), fields[li].strip()
            if not text or not label:
                which = "text" if not text else "label"
                raise ValueError(f"{path}, line {number}: empty {which}")
            texts.append(text)
            labels.append(label)
            lines.append(number)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
        raise ValueError(f"{path}: not a UTF-8 (or gzipped UTF-8) TSV file: {err}") from err
    if columns is None:
        raise ValueError(f"{path}: empty file (expected a 'text<TAB>label' header and examples)")
    if not texts:
        raise ValueError(f"{path}: no example after the header line")
    return IntentExamples(texts, labels, path, lines)


def intent_path(name: str, root: str | Path | None = None) -> Path:
    """Directory of intent dataset ``name`` (``stackoverflow``, ``banking``...).

    Looks in ``<root>/text/<name>``, ``<root>/<name>`` and ``root`` itself; ``root``
    defaults to :func:`spacl.data.default_data_root` (``$SPACL_DATA_DIR``).

    Not found, ``FileNotFoundError``: for a ``root`` of the user's own (not one of the
    data roots :func:`spacl.data.sources.data_search_dirs` searches), a message that
    names that folder first and the files expected there; otherwise the public dataset's
    (where to put it, its source).
    """
    try:
        return find_dataset_dir(name, root, "text", SPLIT_SUFFIXES, "intent dataset")
    except FileNotFoundError:
        if root is None or _is_data_root(root):
            raise
        raise FileNotFoundError(_no_intents_at(Path(root).expanduser(), name)) from None


def _is_data_root(root: str | Path) -> bool:
    """Whether ``root`` is one of the default data roots (``$SPACL_DATA_DIR``, the
    per-user one, ``../shared/data`` beside a checkout), not a folder of the user's own."""
    from spacl.data.sources import data_search_dirs

    given = Path(root).expanduser().resolve()
    return any(given == d.expanduser().resolve() for d in data_search_dirs())


def _no_intents_at(root: Path, name: str) -> str:
    """The error of a given ``root`` holding no intent data: it names ``root`` (the
    user's own TSVs, most often) and the files expected there, before the public
    dataset's layout."""
    state = "does not exist" if not root.exists() else "holds no train.tsv (or .tsv.gz)"
    return (
        f"intent data not found at {root}: it {state}. Your own intents' folder holds "
        "train.tsv, dev.tsv and test.tsv (or .tsv.gz; a 'text<TAB>label' header, one "
        f"example a line); a data root holds text/{name}/ (`spacl data` lists the public "
        "datasets' sources)"
    )


def intent_dataset_name(name: str, root: str | Path | None = None) -> str:
    """The name a run gives its intent data: ``name``, or, where ``root`` is itself the
    folder of the three TSV files (the user's own intents), that folder's name, as a KG
    run names the user's own graph.

    Example:
        >>> intent_dataset_name("stackoverflow")
        'stackoverflow'
    """
    if root is None:
        return name
    directory = intent_path(name, root)
    own = directory.resolve() == Path(root).expanduser().resolve()
    return directory.resolve().name if own else name


def _split_file(directory: Path, split: str) -> Path | None:
    return split_file(directory, split, SPLIT_SUFFIXES)


def load_intent_dataset(
    name: str = "stackoverflow", root: str | Path | None = None
) -> dict[str, IntentExamples]:
    """``{"train", "dev", "test"}`` examples of an intent dataset (see :func:`intent_path`)."""
    directory = intent_path(name, root)
    out: dict[str, IntentExamples] = {}
    for split in INTENT_SPLITS:
        path = _split_file(directory, split)
        if path is None:
            raise FileNotFoundError(
                f"{directory}: no {split}.tsv intent file "
                "(`spacl data` lists each dataset's expected layout)"
            )
        out[split] = read_intent_tsv(path)
    return out


@dataclass(frozen=True)
class OpenIntentSplit:
    """The open-intent protocol applied to one dataset (module docstring).

    ``*_labels`` are ``LongTensor``; known classes are ``0..K-1`` (``known_classes[k]``
    names class ``k``) and test's OOD label is ``K`` (:attr:`ood_label`).
    """

    known_classes: list[str]
    unknown_classes: list[str]
    train_texts: list[str]
    train_labels: Tensor
    dev_texts: list[str]
    dev_labels: Tensor
    test_texts: list[str]
    test_labels: Tensor
    known_ratio: float
    seed: int
    open_label: str | None = None  # the declared open label found in test, if any

    @property
    def num_known(self) -> int:
        return len(self.known_classes)

    @property
    def ood_label(self) -> int:
        return len(self.known_classes)


def _check_labels_known(examples: IntentExamples, universe: set[str]) -> None:
    for label, line in zip(examples.labels, examples.lines, strict=True):
        if label not in universe:
            raise ValueError(
                f"{examples.path}, line {line}: class {label!r} has no training example "
                "(every dev/test class must occur in the training file)"
            )


def _check_open_label(data: dict[str, IntentExamples], open_label: str | None) -> str | None:
    """The declared open label if test holds it (error if train or dev holds it)."""
    if open_label is None:
        return None
    if not isinstance(open_label, str) or not open_label.strip():
        raise ValueError(f"open_label must be a non-empty string or None, got {open_label!r}")
    if open_label not in data["test"].labels:
        return None
    for split in ("train", "dev"):
        ex = data[split]
        if open_label in ex.labels:
            line = ex.lines[ex.labels.index(open_label)]
            raise ValueError(
                f"{ex.path}, line {line}: the open label {open_label!r} occurs in {split} "
                "(it must be a test-only label: classes and thresholds are fitted without "
                "OOD examples; pass open_label=None to treat it as a class)"
            )
    return open_label


def _named_known(names: Sequence[str], universe: set[str], path: Path) -> list[str]:
    """``known_classes`` checked: strings, no repeat, each a training class."""
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise TypeError(f"known_classes must be a non-empty sequence of class names, got {names!r}")
    known = list(names)
    for name in known:
        if not isinstance(name, str):
            raise TypeError(f"known_classes must hold class names (str), got {name!r}")
        if name not in universe:
            raise ValueError(f"known_classes: {name!r} is not a class of {path}")
    if len(set(known)) != len(known):
        raise ValueError(f"known_classes names a class twice: {known!r}")
    return known


#: how the known classes are drawn (:func:`protocol_split`)
PROTOCOLS = ("spacl", "textoir")


def protocol_split(
    data: dict[str, IntentExamples], name: str, protocol: str, known_ratio: float, seed: int
) -> OpenIntentSplit:
    """:func:`open_intent_split` with the known classes of ``protocol``: ``"spacl"``
    (the seeded draw of :func:`open_intent_split`) or ``"textoir"`` (TEXTOIR's draw for
    dataset ``name``, :func:`spacl.data.textoir.textoir_known_classes`)."""
    check_choice(protocol, "protocol", PROTOCOLS)
    known = textoir_known_classes(name, known_ratio, seed) if protocol == "textoir" else None
    if known is not None:
        absent = sorted(set(known) - set(data["train"].labels))
        if absent:
            raise ValueError(
                f"data.protocol=textoir draws the known classes from TEXTOIR's list for "
                f"{name!r}, but {data['train'].path} has no class {absent[0]!r}: for your "
                f"own intents set data.protocol=spacl (a seeded draw of your classes)"
            )
    return open_intent_split(data, known_ratio, seed, known_classes=known)


def open_intent_split(
    data: dict[str, IntentExamples],
    known_ratio: float,
    seed: int = 0,
    *,
    open_label: str | None = DEFAULT_OPEN_LABEL,
    known_classes: Sequence[str] | None = None,
) -> OpenIntentSplit:
    """Apply the open-intent protocol with ``known_ratio`` of the classes known.

    Args:
        data: ``{"train", "dev", "test"}`` from :func:`load_intent_dataset`.
        known_ratio: share of the classes that are known, ``0 < known_ratio <= 1``
            (25%, 50%, 75% in the literature); at least one class is known.
        seed: seed of the choice of known classes.
        open_label: the declared open label (module docstring): test examples with
            this label are out-of-domain; ``None`` declares none.
        known_classes: the known classes by name, in the order of their class ids (e.g.
            TEXTOIR's draw, :func:`spacl.data.textoir.textoir_known_classes`); ``None``
            draws them: ``round(known_ratio * n)`` of the sorted class names by
            ``numpy.random.default_rng(seed)``, known class ids in name order.
    """
    if not isinstance(known_ratio, (int, float)) or not 0.0 < known_ratio <= 1.0:
        raise ValueError(f"known_ratio must be in (0, 1], got {known_ratio!r}")
    for split in INTENT_SPLITS:
        if split not in data:
            raise ValueError(f"data must hold the splits {INTENT_SPLITS}, missing {split!r}")
    found_open = _check_open_label(data, open_label)
    classes = sorted(set(data["train"].labels))
    universe = set(classes)
    _check_labels_known(data["dev"], universe)
    _check_labels_known(data["test"], universe | ({found_open} if found_open else set()))
    if known_classes is None:
        n_known = max(1, math.floor(known_ratio * len(classes) + 0.5))
        rng = np.random.default_rng(seed)
        chosen = rng.choice(len(classes), n_known, replace=False)
        known = sorted(classes[int(i)] for i in chosen)
    else:
        known = _named_known(known_classes, universe, data["train"].path)
        n_known = len(known)
    unknown = [c for c in classes if c not in set(known)]
    index = {c: k for k, c in enumerate(known)}
    dev_seen = set(data["dev"].labels)
    no_dev = [c for c in known if c not in dev_seen]
    if no_dev:
        raise ValueError(
            f"{data['dev'].path}: known class {no_dev[0]!r} has no dev example "
            "(thresholds are fitted per class on dev)"
        )

    def keep_known(ex: IntentExamples) -> tuple[list[str], Tensor]:
        texts = [t for t, y in zip(ex.texts, ex.labels, strict=True) if y in index]
        labels = [index[y] for y in ex.labels if y in index]
        return texts, torch.tensor(labels, dtype=torch.long)

    train_texts, train_labels = keep_known(data["train"])
    dev_texts, dev_labels = keep_known(data["dev"])
    test = data["test"]
    test_labels = torch.tensor([index.get(y, n_known) for y in test.labels], dtype=torch.long)
    return OpenIntentSplit(
        known_classes=known,
        unknown_classes=unknown,
        train_texts=train_texts,
        train_labels=train_labels,
        dev_texts=dev_texts,
        dev_labels=dev_labels,
        test_texts=list(test.texts),
        test_labels=test_labels,
        known_ratio=float(known_ratio),
        seed=int(seed),
        open_label=found_open,
    )
