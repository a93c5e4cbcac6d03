"""Knowledge-graph triples: reading, vocabularies, reciprocal relations, the known-triple index.

File format (FB15k-237 and WN18RR as redistributed with ConvE, Dettmers et al. 2018):
one triple per line, ``head<TAB>relation<TAB>tail``; CRLF line endings are accepted,
blank lines are skipped, ``*.gz`` files are read through gzip.  Every malformed line
raises ``ValueError`` naming the file and the (1-based) line number.

Conventions (the standard link-prediction protocol, Lacroix et al. 2018):

- entities and relations are numbered in order of first appearance in the training
  file (deterministic), then valid, then test (only with ``unseen="include"``);
- a triple tensor is ``LongTensor[N, 3]`` of ``(head, relation, tail)`` ids;
- **reciprocal relations**: relation ``r + R`` is the inverse of ``r``
  (``(h, r, t)`` gives ``(t, r + R, h)``), so that head prediction ``(?, r, t)`` is the
  tail query ``(t, r + R, ?)`` and one tail scorer answers both directions;
- the **filter index** (:class:`TripleIndex`) holds every known true tail of every
  query ``(h, r)`` (reciprocals included), stored CSR-style: queries are encoded as
  ``key = h * (2R) + r``, sorted, with an offset per unique key; all look-ups are
  vectorised over a batch of queries.

**Decision** (unseen entities in valid/test): ``unseen="error"`` (default) raises a
``ValueError`` naming the file, line and entity; ``"include"`` adds them to the
vocabulary (the published FB15k-237 protocol: 14,541 entities, every test triple
ranked; 9 valid and 28 test triples of FB15k-237 mention an entity absent from
train); ``"drop"`` removes those triples (their count is recorded in
``KnowledgeGraph.dropped``).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from spacl._validation import check_choice
from spacl.data._files import find_dataset_dir, split_file

#: accepted split file names: ``train.txt``, ``train.txt.gz``, ``train.tsv``...
SPLIT_SUFFIXES = (".txt", ".txt.gz", ".tsv", ".tsv.gz")

__all__ = [
    "GRAPH_FILE",
    "KG_SPLITS",
    "UNSEEN_POLICIES",
    "KnowledgeGraph",
    "TripleIndex",
    "Vocabulary",
    "add_reciprocals",
    "kg_path",
    "load_kg",
    "read_graph_vocabulary",
    "read_triples",
    "write_graph_vocabulary",
]

KG_SPLITS = ("train", "valid", "test")
UNSEEN_POLICIES = ("error", "include", "drop")


@dataclass
class Vocabulary:
    """Bidirectional string <-> id map, ids in order of insertion."""

    names: list[str] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)

    def add(self, name: str) -> int:
        """Id of ``name``, inserting it if new."""
        idx = self.ids.get(name)
        if idx is None:
            idx = len(self.names)
            self.ids[name] = idx
            self.names.append(name)
        return idx

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.ids

    def __repr__(self) -> str:  # the count and the first names, not 14,541 of them
        shown = ", ".join(repr(n) for n in self.names[:3])
        more = ", ..." if len(self.names) > 3 else ""
        return f"Vocabulary({len(self.names)} names: [{shown}{more}])"


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline=None)
    return open(path, encoding="utf-8", newline=None)


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` with the line ending (LF or CRLF) removed."""
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            yield number, line.rstrip("\r\n")


def read_triples(path: str | Path) -> list[tuple[str, str, str]]:
    """Read ``head<TAB>relation<TAB>tail`` lines (CRLF-tolerant, optionally gzipped).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file holds no triple, or a line has not exactly three
            non-empty tab-separated fields (the message names the file and the line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"triple file {path} does not exist")
    triples: list[tuple[str, str, str]] = []
    try:
        for number, line in _iter_lines(path):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 3 or any(not p.strip() for p in parts):
                raise ValueError(
                    f"{path}, line {number}: expected 'head<TAB>relation<TAB>tail' "
                    f"(3 non-empty fields), got {len(parts)} field(s): {line[:80]!r}"
                )
            h, r, t = (p.strip() for p in parts)
            triples.append((h, r, t))
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
        raise ValueError(f"{path}: not a UTF-8 (or gzipped UTF-8) triple file: {err}") from err
    if not triples:
        raise ValueError(f"{path}: empty triple file (no 'head<TAB>relation<TAB>tail' line)")
    return triples


def add_reciprocals(triples: Tensor, num_relations: int) -> Tensor:
    """``[N, 3] -> [2N, 3]``: the triples followed by their inverses ``(t, r + R, h)``.

    ``num_relations`` is ``R``, the number of original relations.
    """
    _check_triples(triples, "triples")
    inverse = torch.stack((triples[:, 2], triples[:, 1] + num_relations, triples[:, 0]), dim=1)
    return torch.cat((triples, inverse), dim=0)


def _check_triples(triples: Tensor, name: str) -> None:
    if not isinstance(triples, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(triples).__name__}")
    if triples.ndim != 2 or triples.shape[1] != 3:
        raise ValueError(
            f"{name} must be [N, 3] (head, relation, tail), got {tuple(triples.shape)}"
        )
    if triples.dtype != torch.long:
        raise TypeError(f"{name} must be a long tensor, got dtype {triples.dtype}")


class TripleIndex:
    """Every known tail of every query ``(h, r)``: the filter of filtered ranking.

    Built from ``[N, 3]`` triples (already holding the reciprocals if wanted); keys
    ``h * num_relations + r`` are sorted once (``O(N log N)``) and stored with the
    tails grouped per key (CSR).  All methods are vectorised over a batch of queries.

    Args:
        triples: ``LongTensor[N, 3]``.
        num_entities: ``E``.
        num_relations: number of relation ids in use (``2R`` with reciprocals).
    """

    def __init__(self, triples: Tensor, num_entities: int, num_relations: int) -> None:
        _check_triples(triples, "triples")
        self.num_entities = int(num_entities)
        self.num_relations = int(num_relations)
        if triples.numel():
            if int(triples[:, [0, 2]].max()) >= num_entities or int(triples.min()) < 0:
                raise ValueError(f"triples hold entity ids outside [0, {num_entities})")
            if int(triples[:, 1].max()) >= num_relations:
                raise ValueError(f"triples hold relation ids outside [0, {num_relations})")
        keys = triples[:, 0] * self.num_relations + triples[:, 1]
        # unique (key, tail) pairs, sorted by key then tail
        pair = torch.unique(keys * self.num_entities + triples[:, 2])
        self.keys_sorted = pair // self.num_entities  # [M] key of each stored tail
        self.tails = pair % self.num_entities  # [M]
        self.unique_keys, counts = torch.unique_consecutive(self.keys_sorted, return_counts=True)
        self.offsets = torch.zeros(len(counts) + 1, dtype=torch.long)
        self.offsets[1:] = counts.cumsum(0)

    def __len__(self) -> int:
        """Number of distinct ``(h, r, t)`` triples stored."""
        return int(self.tails.numel())

    @property
    def num_queries(self) -> int:
        """Number of distinct queries ``(h, r)``."""
        return int(self.unique_keys.numel())

    def query_pairs(self) -> Tensor:
        """``LongTensor[Q, 2]`` of every distinct ``(h, r)``, in key order."""
        return torch.stack(
            (self.unique_keys // self.num_relations, self.unique_keys % self.num_relations), 1
        )

    def triples(self) -> Tensor:
        """``LongTensor[M, 3]`` of every distinct stored ``(h, r, t)``, in key order."""
        return torch.stack(
            (
                self.keys_sorted // self.num_relations,
                self.keys_sorted % self.num_relations,
                self.tails,
            ),
            1,
        )

    def _ranges(self, heads: Tensor, relations: Tensor) -> tuple[Tensor, Tensor]:
        """CSR ``(start, count)`` of each query (``count = 0`` for an unknown query)."""
        keys = heads.long().cpu() * self.num_relations + relations.long().cpu()
        if self.num_queries == 0:
            return torch.zeros_like(keys), torch.zeros_like(keys)
        pos = torch.searchsorted(self.unique_keys, keys).clamp_max(self.num_queries - 1)
        found = self.unique_keys[pos] == keys
        start = torch.where(found, self.offsets[pos], 0)
        count = torch.where(found, self.offsets[pos + 1] - self.offsets[pos], 0)
        return start, count

    def pairs(self, heads: Tensor, relations: Tensor) -> tuple[Tensor, Tensor]:
        """``(row, tail)``: flat list of every known tail of each query of the batch.

        ``row[j]`` is the query (0-based position in the batch) that tail ``tail[j]``
        belongs to.  No Python loop: ``repeat_interleave`` over the CSR ranges.
        """
        start, count = self._ranges(heads, relations)
        row = torch.repeat_interleave(torch.arange(len(count)), count)
        first = torch.repeat_interleave(start - (count.cumsum(0) - count), count)
        flat = first + torch.arange(int(count.sum()))
        return row, self.tails[flat]

    def counts(self, heads: Tensor, relations: Tensor) -> Tensor:
        """``LongTensor[B]`` number of known tails of each query."""
        return self._ranges(heads, relations)[1]

    def mask(self, heads: Tensor, relations: Tensor, device: torch.device | None = None) -> Tensor:
        """``BoolTensor[B, E]``: ``True`` at every known tail of each query."""
        row, tail = self.pairs(heads, relations)
        out = torch.zeros(len(heads), self.num_entities, dtype=torch.bool)
        out[row, tail] = True
        return out if device is None else out.to(device)


@dataclass
class KnowledgeGraph:
    """A link-prediction dataset: vocabularies and id triples of each split.

    ``train``/``valid``/``test`` hold the original triples only (``[N, 3]``); use
    :func:`add_reciprocals` for training and :meth:`filter_index` for ranking.
    """

    name: str
    entities: Vocabulary
    relations: Vocabulary
    train: Tensor
    valid: Tensor
    test: Tensor
    dropped: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:  # sizes, not every name and triple
        dropped = f", dropped={self.dropped}" if self.dropped else ""
        return (
            f"KnowledgeGraph(name={self.name!r}, entities={self.num_entities}, "
            f"relations={self.num_relations}, train={len(self.train)}, "
            f"valid={len(self.valid)}, test={len(self.test)}{dropped})"
        )

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        """``R``, original relations (ids ``R..2R-1`` are their reciprocals)."""
        return len(self.relations)

    def split(self, name: str) -> Tensor:
        check_choice(name, "split", KG_SPLITS)
        triples: Tensor = getattr(self, name)
        return triples

    def train_index(self) -> TripleIndex:
        """Known tails of training queries (reciprocals included): the training positives."""
        return TripleIndex(
            add_reciprocals(self.train, self.num_relations),
            self.num_entities,
            2 * self.num_relations,
        )

    def filter_index(self) -> TripleIndex:
        """Every true triple of train, valid and test (reciprocals included): the filter."""
        every = torch.cat((self.train, self.valid, self.test))
        return TripleIndex(
            add_reciprocals(every, self.num_relations), self.num_entities, 2 * self.num_relations
        )


def kg_path(name: str, root: str | Path | None = None) -> Path:
    """Directory of knowledge graph ``name`` (e.g. ``fb15k-237``) under the data root.

    ``root`` defaults to :func:`spacl.data.default_data_root` (``$SPACL_DATA_DIR`` or
    ``../shared/data`` next to the checkout); the graph lives in ``<root>/kg/<name>``
    (or directly in ``root`` if that directory holds ``train.txt``).
    """
    return find_dataset_dir(name, root, "kg", SPLIT_SUFFIXES, "knowledge graph")


def _split_file(directory: Path, split: str) -> Path | None:
    return split_file(directory, split, SPLIT_SUFFIXES)


def _encode(
    triples: Sequence[tuple[str, str, str]],
    path: Path,
    entities: Vocabulary,
    relations: Vocabulary,
    unseen: str,
    grow: bool,
) -> tuple[Tensor, int]:
    """Id tensor of ``triples``; ``grow``: add new names (train), else apply ``unseen``."""
    rows: list[tuple[int, int, int]] = []
    dropped = 0
    if grow or unseen == "include":
        rows = [(entities.add(h), relations.add(r), entities.add(t)) for h, r, t in triples]
        return torch.tensor(rows, dtype=torch.long).reshape(-1, 3), 0
    # file line numbers of non-blank lines, recovered only when an error is raised
    for position, (h, r, t) in enumerate(triples):
        missing = [
            (kind, name)
            for kind, name, vocab in (
                ("entity", h, entities),
                ("relation", r, relations),
                ("entity", t, entities),
            )
            if name not in vocab
        ]
        if missing:
            if unseen == "drop":
                dropped += 1
                continue
            kind, name = missing[0]
            line = _line_of(path, position)
            raise ValueError(
                f"{path}, line {line}: unknown {kind} {name!r} (not in the training file); "
                "pass unseen='include' to add it to the vocabulary or unseen='drop' to skip "
                "such triples"
            )
        rows.append((entities.ids[h], relations.ids[r], entities.ids[t]))
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 3), dropped


def _line_of(path: Path, position: int) -> int:
    """1-based file line of the ``position``-th non-blank line."""
    seen = -1
    for number, line in _iter_lines(path):
        if line.strip():
            seen += 1
            if seen == position:
                return number
    return -1  # pragma: no cover


def load_kg(
    name: str = "fb15k-237", root: str | Path | None = None, *, unseen: str = "error"
) -> KnowledgeGraph:
    """Read ``train``/``valid``/``test`` of a knowledge graph and number its names.

    Args:
        name: directory name under ``<root>/kg`` (``fb15k-237``, ``wn18rr``), or any
            directory holding ``train.txt``/``valid.txt``/``test.txt`` (``.gz`` too).
            Where ``root`` is itself a graph's directory (the user's own triples), the
            graph is named after that directory and ``name`` is not used.
        root: data root (default :func:`spacl.data.default_data_root`), or the
            graph's own directory.
        unseen: ``"error"`` | ``"include"`` | ``"drop"`` for valid/test triples naming
            an entity or relation absent from train (module docstring, **Decision**).
    """
    check_choice(unseen, "unseen", UNSEEN_POLICIES)
    if root is not None and _is_graph_dir(root):
        directory = Path(root).expanduser()
        name = directory.resolve().name  # own triples: not the recipe's public graph
    else:
        try:
            directory = kg_path(name, root)
        except FileNotFoundError:
            if root is None:
                raise
            raise FileNotFoundError(_no_graph_at(Path(root).expanduser(), name)) from None
    entities, relations = Vocabulary(), Vocabulary()
    tensors: dict[str, Tensor] = {}
    dropped: dict[str, int] = {}
    for split in KG_SPLITS:
        path = _split_file(directory, split)
        if path is None:
            raise FileNotFoundError(
                f"{directory}: no {split}.txt (or .txt.gz) triple file "
                "(`spacl data` lists each dataset's expected layout)"
            )
        triples = read_triples(path)
        tensors[split], dropped[split] = _encode(
            triples, path, entities, relations, unseen, grow=(split == "train")
        )
    return KnowledgeGraph(
        name=name,
        entities=entities,
        relations=relations,
        train=tensors["train"],
        valid=tensors["valid"],
        test=tensors["test"],
        dropped={k: v for k, v in dropped.items() if v},
    )


def _no_graph_at(root: Path, name: str) -> str:
    """The error of a given ``root`` holding no graph: it names ``root`` (the user's own
    triples, most often), not the public dataset's source."""
    state = "does not exist" if not root.exists() else "holds no train.txt (or .txt.gz)"
    return (
        f"knowledge graph not found at {root}: it {state}. Your own graph's directory holds "
        f"train.txt, valid.txt and test.txt (head<TAB>relation<TAB>tail per line); a data "
        f"root holds kg/{name}/ (`spacl data` lists the public graphs' sources)"
    )


def _is_graph_dir(root: str | Path) -> bool:
    return _split_file(Path(root).expanduser(), "train") is not None


#: the format tag of :func:`write_graph_vocabulary`'s file, and its name in a run directory
GRAPH_FORMAT = "spacl knowledge-graph vocabulary 1"
GRAPH_FILE = "graph.pt"


def write_graph_vocabulary(kg: KnowledgeGraph, path: str | Path) -> Path:
    """Save what a trained link predictor needs of ``kg`` without the dataset: the entity
    and relation names (in id order) and the training triples (``int32``, the filter of
    ``predict --filter``).  Read back by :func:`read_graph_vocabulary`; written through
    a temporary file, so a crash never leaves half a file.

    Example:
        >>> write_graph_vocabulary(kg, run_dir / "graph.pt")  # doctest: +SKIP
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(
        {
            "format": GRAPH_FORMAT,
            "name": kg.name,
            "entities": list(kg.entities.names),
            "relations": list(kg.relations.names),
            "train": kg.train.to(torch.int32),
        },
        tmp,
    )
    tmp.replace(path)
    return path


def read_graph_vocabulary(path: str | Path) -> KnowledgeGraph:
    """The graph :func:`write_graph_vocabulary` saved: its names and training triples;
    ``valid`` and ``test`` are empty (``[0, 3]``: evaluation needs the dataset)."""
    saved = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(saved, dict) or saved.get("format") != GRAPH_FORMAT:
        raise ValueError(f"{path} is not a graph vocabulary written by spacl")
    entities, relations = Vocabulary(), Vocabulary()
    for name in saved["entities"]:
        entities.add(name)
    for name in saved["relations"]:
        relations.add(name)
    empty = torch.zeros(0, 3, dtype=torch.long)
    train = saved["train"].long()
    return KnowledgeGraph(str(saved["name"]), entities, relations, train, empty, empty.clone())
