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

**One file.**  A folder of the user's own intents may hold ``train.tsv`` alone (or
with ``test.tsv``, or with ``dev.tsv``): each missing split is carved from train,
stratified, by :func:`carve_intent_splits` (``dev_fraction`` / ``test_fraction`` of each
intent, a permutation seeded by ``seed``), the same split each time it is read.  A run
records what it carved (:func:`write_intent_split_record`, its ``split.json``) and holds
a later reading to it (:func:`check_intent_split_record`), as an image run does its
folder's split.

**Decisions**: a dev or test label that never occurs in train (other than the declared
open label) is an error (naming
the file and line: it cannot be a known class and is almost always a typo); so is a
known class without a dev example, since thresholds are fitted per class on dev.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from spacl._validation import check_choice
from spacl.data._files import find_dataset_dir, split_file
from spacl.data.seeding import derive_seed
from spacl.data.textoir import textoir_known_classes

SPLIT_SUFFIXES = (".tsv", ".tsv.gz")

__all__ = [
    "CARVE_FRACTIONS",
    "DEFAULT_OPEN_LABEL",
    "INTENT_SPLITS",
    "INTENT_SPLIT_RECORD",
    "PROTOCOLS",
    "IntentExamples",
    "OpenIntentSplit",
    "carve_intent_splits",
    "check_intent_split_record",
    "intent_dataset_name",
    "intent_path",
    "load_intent_dataset",
    "open_intent_split",
    "protocol_split",
    "read_intent_tsv",
    "recorded_carve",
    "write_intent_split_record",
]

INTENT_SPLITS = ("train", "dev", "test")
#: the declared open (out-of-scope) label of CLINC150's ``oos`` files
DEFAULT_OPEN_LABEL = "oos"
#: the default share of each intent of train carved out for a split without its own file
#: (the text task's ``data.dev_fraction`` / ``data.test_fraction``)
CARVE_FRACTIONS = {"dev": 0.1, "test": 0.2}
#: the file of a run directory that records the splits carved from train (a run's own)
INTENT_SPLIT_RECORD = "split.json"


@dataclass(frozen=True)
class IntentExamples:
    """Texts with their string labels, and where they came from (for error messages)."""

    texts: list[str]
    labels: list[str]
    path: Path
    lines: list[int]  # 1-based file line of each example
    #: a share of ``path``'s examples (:func:`carve_intent_splits`), not the whole file
    carved: bool = False

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: Sequence[int]) -> IntentExamples:
        """The examples at ``indices`` (in that order), marked carved from ``path``."""
        return IntentExamples(
            [self.texts[i] for i in indices],
            [self.labels[i] for i in indices],
            self.path,
            [self.lines[i] for i in indices],
            carved=True,
        )


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
        "train.tsv, dev.tsv and test.tsv, or train.tsv alone (dev and test then carved "
        "from it by data.dev_fraction and data.test_fraction) (or .tsv.gz; a "
        "'text<TAB>label' header, one example a line); a data root holds "
        f"text/{name}/ (`spacl data` lists the public datasets' sources)"
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
    name: str = "stackoverflow",
    root: str | Path | None = None,
    *,
    dev_fraction: float = CARVE_FRACTIONS["dev"],
    test_fraction: float = CARVE_FRACTIONS["test"],
    seed: int = 0,
    carve: Sequence[str] = (),
    key_prefix: str = "",
) -> dict[str, IntentExamples]:
    """``{"train", "dev", "test"}`` examples of an intent dataset (see :func:`intent_path`).

    A folder without ``dev.tsv`` / ``test.tsv`` has that split carved from ``train.tsv``
    (:func:`carve_intent_splits`: ``dev_fraction`` / ``test_fraction`` of each intent,
    seeded by ``seed``; each carved split is marked ``carved``, and so is train then).
    ``carve``: splits carved even where their file exists now (a run's recorded split,
    :func:`recorded_carve`).  ``key_prefix``: the config section the fractions are keys of
    (``"data."``), named by the errors.
    """
    directory = intent_path(name, root)
    out: dict[str, IntentExamples] = {}
    fractions = {"dev": dev_fraction, "test": test_fraction}
    missing: dict[str, float] = {}
    for split in INTENT_SPLITS:
        path = _split_file(directory, split)
        if split != "train" and (path is None or split in carve):
            missing[split] = fractions[split]
        elif path is None:
            raise FileNotFoundError(
                f"{directory}: no {split}.tsv intent file "
                "(`spacl data` lists each dataset's expected layout)"
            )
        else:
            out[split] = read_intent_tsv(path)
    if missing:
        out.update(carve_intent_splits(out["train"], missing, seed, key_prefix=key_prefix))
    return {split: out[split] for split in INTENT_SPLITS}


def _share(fraction: float, n: int) -> int:
    """``round(fraction * n)``, halves up (as the known-class draw rounds)."""
    return math.floor(fraction * n + 0.5)


def _fewest(fraction: float) -> int:
    """The fewest examples of an intent of which ``fraction`` carves one."""
    n = 1
    while _share(fraction, n) < 1:
        n += 1
    return n


def _fraction_key(split: str, key_prefix: str) -> str:
    return f"{key_prefix}{split}_fraction"


def _check_fractions(fractions: Mapping[str, float], key_prefix: str) -> None:
    """Each carved split is ``dev`` or ``test`` with a fraction in (0, 1), their sum < 1:
    one-line ``ValueError`` naming the key and value."""
    for split, fraction in fractions.items():
        if split not in ("dev", "test"):
            raise ValueError(f"only dev and test are carved from train, got {split!r}")
        ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
        if not ok or not 0.0 < fraction < 1.0:
            key = _fraction_key(split, key_prefix)
            raise ValueError(f"{_named(key, key_prefix)} must be in (0, 1), got {fraction!r}")
    if sum(fractions.values()) >= 1.0:
        keys = " + ".join(_fraction_key(s, key_prefix) for s in fractions)
        raise ValueError(
            f"{keys} must be < 1 (train keeps the rest), got {sum(fractions.values())!r}"
        )


def _named(key: str, key_prefix: str) -> str:
    return f"config key {key!r}" if key_prefix else key


def carve_intent_splits(
    train: IntentExamples,
    fractions: Mapping[str, float],
    seed: int = 0,
    *,
    key_prefix: str = "",
) -> dict[str, IntentExamples]:
    """``train`` cut into itself and the splits of ``fractions`` (``{"dev": 0.1}``,
    ``{"dev": 0.1, "test": 0.2}``), stratified: of each intent's ``n`` examples,
    ``round(fraction * n)`` go to each split (test first, then dev) by a permutation of a
    generator seeded from ``seed`` (:func:`spacl.data.seeding.derive_seed`), the rest stay
    in train; each part keeps the file's order and lines, and is marked ``carved``.

    An intent too small to give every carved split one example and keep one to train on
    is a one-line ``ValueError`` naming the fraction's key (``key_prefix`` + ``dev_fraction``
    / ``test_fraction``), its value, the intent and the fewest examples that suffice.
    """
    _check_fractions(fractions, key_prefix)
    order = [s for s in ("test", "dev") if s in fractions]
    rng = np.random.default_rng(derive_seed(int(seed), "intent-carve"))
    by_class: dict[str, list[int]] = {}
    for i, label in enumerate(train.labels):
        by_class.setdefault(label, []).append(i)
    parts: dict[str, list[int]] = {s: [] for s in ("train", *order)}
    for label in sorted(by_class):
        members = by_class[label]
        shuffled = [members[int(j)] for j in rng.permutation(len(members))]
        start = 0
        for split in order:
            take = _share(fractions[split], len(members))
            if take < 1:
                raise _too_few(train, label, len(members), fractions, split, key_prefix)
            parts[split].extend(shuffled[start : start + take])
            start += take
        if start >= len(members):
            raise _too_few(train, label, len(members), fractions, None, key_prefix)
        parts["train"].extend(shuffled[start:])
    return {split: train.subset(sorted(idx)) for split, idx in parts.items()}


def _too_few(
    train: IntentExamples,
    label: str,
    n: int,
    fractions: Mapping[str, float],
    split: str | None,
    key_prefix: str,
) -> ValueError:
    """The one line of an intent too small to carve: ``split`` gets no example, or
    (``None``) train keeps none."""
    where = f"intent {label!r} has {n} example(s) in {train.path}"
    if split is not None:
        key = _fraction_key(split, key_prefix)
        value = fractions[split]
        return ValueError(
            f"{_named(key, key_prefix)} is {value}: {where}, too few to carve a {split} "
            f"example from (round({value} x {n}) = 0; at {key}={value} an intent needs "
            f"{_fewest(value)} or more): add examples, raise {key}, or add your own "
            f"{split}.tsv"
        )
    keys = " and ".join(f"{_fraction_key(s, key_prefix)}={f}" for s, f in fractions.items())
    return ValueError(
        f"{keys} leave no training example: {where}; add examples or lower the fractions"
    )


def _split_fingerprint(examples: IntentExamples) -> str:
    rows = (f"{line}\t{label}\t{text}\n" for text, label, line in _rows(examples))
    return hashlib.sha256("".join(rows).encode()).hexdigest()


def _rows(examples: IntentExamples) -> Iterator[tuple[str, str, int]]:
    return zip(examples.texts, examples.labels, examples.lines, strict=True)


def _record_of(data: Mapping[str, IntentExamples]) -> dict[str, Any]:
    """The record of a split: the splits carved, and each split's count and fingerprint."""
    carved = [s for s in INTENT_SPLITS if s != "train" and data[s].carved]
    record: dict[str, Any] = {"version": 1, "carved": carved, "from": data["train"].path.name}
    for split in INTENT_SPLITS:
        record[split] = {"count": len(data[split]), "sha256": _split_fingerprint(data[split])}
    return record


def write_intent_split_record(path: str | Path, data: Mapping[str, IntentExamples]) -> Path | None:
    """Write ``path`` (a run's ``split.json``) when ``data`` carved a split from train: the
    splits carved and each split's count and sha256 fingerprint (line, label, text of every
    example); ``None`` (nothing written) when every split is its own file."""
    if not any(data[s].carved for s in INTENT_SPLITS):
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_record_of(data), sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def _read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` (``None``: no file); a damaged one is a one-line error."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError):
        record = None
    ok = isinstance(record, dict) and isinstance(record.get("carved"), list)
    ok = ok and all(isinstance(record.get(s), dict) for s in INTENT_SPLITS)
    if not ok:
        raise ValueError(
            f"the split record {path} is damaged: it holds how the run {path.parent} carved "
            "its intents; restore it from a copy of the run, or delete it to skip this check"
        )
    return dict(record)


def recorded_carve(path: str | Path) -> tuple[str, ...]:
    """The splits a run's record at ``path`` says were carved from train (``()`` without
    a record): read again, they are carved again, whatever files the folder holds now."""
    record = _read_record(Path(path))
    return tuple(str(s) for s in record["carved"]) if record is not None else ()


def check_intent_split_record(path: str | Path, data: Mapping[str, IntentExamples]) -> None:
    """Hold ``data`` (read again: eval, embed, resume) to the record at ``path``.

    No record (every split its own file, or a run from before records) passes.  A split
    whose examples differ is a one-line ``ValueError`` naming the file, the counts and the
    way on."""
    path = Path(path)
    record = _read_record(path)
    if record is None:
        return
    now = _record_of(data)
    changed = [s for s in INTENT_SPLITS if record[s].get("sha256") != now[s]["sha256"]]
    if not changed:
        return
    counts = "; ".join(
        f"{s}: {record[s].get('count')} example(s) recorded, {now[s]['count']} now" for s in changed
    )
    raise ValueError(
        f"the intents of {data['train'].path} are not the ones run {path.parent} carved its "
        f"splits from ({path.name}): {counts}; train a new run on the file as it is now, "
        "or restore the file the run was trained on"
    )


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
