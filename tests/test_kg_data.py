"""Knowledge-graph data: triple files, vocabularies, reciprocals, the known-triple index."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
import torch

from spacl.data.kg import (
    TripleIndex,
    Vocabulary,
    add_reciprocals,
    kg_path,
    load_kg,
    read_triples,
)


def write(path: Path, text: str, crlf: bool = False) -> Path:
    data = text.replace("\n", "\r\n") if crlf else text
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(data.encode())
    else:
        path.write_bytes(data.encode())
    return path


def make_graph(root: Path, valid: str = "b\tr1\tc\n", test: str = "c\tr2\ta\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write(root / "train.txt", "a\tr1\tb\nb\tr2\tc\n\nc\tr1\ta\na\tr1\tc\n", crlf=True)
    write(root / "valid.txt", valid, crlf=True)
    write(root / "test.txt", test)
    return root


def test_read_triples_crlf_gzip_and_blank_lines(tmp_path: Path) -> None:
    plain = write(tmp_path / "t.txt", "x\tp\ty\n\nu\tq\tv\n", crlf=True)
    zipped = write(tmp_path / "t.txt.gz", "x\tp\ty\n\nu\tq\tv\n", crlf=True)
    expected = [("x", "p", "y"), ("u", "q", "v")]
    assert read_triples(plain) == expected
    assert read_triples(zipped) == expected


@pytest.mark.parametrize(
    ("content", "line"),
    [("a\tr\tb\na\tr\n", 2), ("a\tr\tb\n\nx\ty\tz\tw\n", 3), ("a\t\tb\n", 1)],
)
def test_read_triples_bad_columns_name_file_and_line(
    tmp_path: Path, content: str, line: int
) -> None:
    path = write(tmp_path / "bad.txt", content)
    with pytest.raises(ValueError, match=rf"bad\.txt, line {line}: expected"):
        read_triples(path)


def test_read_triples_empty_and_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"empty\.txt: empty triple file"):
        read_triples(write(tmp_path / "empty.txt", "\n\r\n"))
    with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
        read_triples(tmp_path / "nope.txt")


def test_vocabulary_order_and_reciprocals(tmp_path: Path) -> None:
    kg = load_kg("g", make_graph(tmp_path / "g"))
    assert kg.entities.names == ["a", "b", "c"]
    assert kg.relations.names == ["r1", "r2"]
    assert kg.train.tolist() == [[0, 0, 1], [1, 1, 2], [2, 0, 0], [0, 0, 2]]
    assert kg.valid.tolist() == [[1, 0, 2]]
    both = add_reciprocals(kg.train, kg.num_relations)
    assert both.shape == (8, 3)
    for (h, r, t), (h2, r2, t2) in zip(kg.train.tolist(), both[4:].tolist(), strict=True):
        assert (h2, r2, t2) == (t, r + 2, h)


def test_unknown_entity_in_valid_or_test(tmp_path: Path) -> None:
    root = make_graph(tmp_path / "g", test="c\tr2\ta\n\nzz\tr1\ta\n")
    with pytest.raises(ValueError, match=r"test\.txt, line 3: unknown entity 'zz'"):
        load_kg("g", root)
    root2 = make_graph(tmp_path / "g2", valid="a\tr9\tb\n")
    with pytest.raises(ValueError, match=r"valid\.txt, line 1: unknown relation 'r9'"):
        load_kg("g2", root2)
    dropped = load_kg("g", root, unseen="drop")
    assert dropped.test.tolist() == [[2, 1, 0]] and dropped.dropped == {"test": 1}
    included = load_kg("g", root, unseen="include")
    assert included.num_entities == 4 and included.entities.names[3] == "zz"
    with pytest.raises(ValueError, match="unseen must be one of"):
        load_kg("g", root, unseen="ignore")


def test_kg_path_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_graph(tmp_path / "kg" / "toy")
    assert kg_path("toy", tmp_path) == tmp_path / "kg" / "toy"
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path))
    assert load_kg("toy").num_entities == 3
    with pytest.raises(FileNotFoundError, match="knowledge graph 'other' not found"):
        kg_path("other", tmp_path)


def _brute_force_tails(triples: torch.Tensor) -> dict[tuple[int, int], set[int]]:
    out: dict[tuple[int, int], set[int]] = {}
    for h, r, t in triples.tolist():
        out.setdefault((h, r), set()).add(t)
    return out


def test_triple_index_matches_brute_force() -> None:
    gen = torch.Generator().manual_seed(0)
    e, r = 13, 4
    triples = torch.stack(
        (
            torch.randint(0, e, (200,), generator=gen),
            torch.randint(0, r, (200,), generator=gen),
            torch.randint(0, e, (200,), generator=gen),
        ),
        1,
    )
    index = TripleIndex(triples, e, r)
    truth = _brute_force_tails(triples)
    assert len(index) == sum(len(v) for v in truth.values())
    assert index.num_queries == len(truth)
    assert sorted(map(tuple, index.query_pairs().tolist())) == sorted(truth)
    listed = index.triples().tolist()
    assert len(listed) == len(index) and len(set(map(tuple, listed))) == len(listed)
    assert {tuple(t) for t in listed} == {(h, rr, t) for (h, rr), ts in truth.items() for t in ts}
    heads = torch.arange(e).repeat_interleave(r)
    rels = torch.arange(r).repeat(e)
    mask = index.mask(heads, rels)
    counts = index.counts(heads, rels)
    for i, (h, rr) in enumerate(zip(heads.tolist(), rels.tolist(), strict=True)):
        want = truth.get((h, rr), set())
        assert set(mask[i].nonzero().squeeze(1).tolist()) == want
        assert int(counts[i]) == len(want)
    row, tail = index.pairs(heads[:7], rels[:7])
    for i in range(7):
        assert set(tail[row == i].tolist()) == truth.get((int(heads[i]), int(rels[i])), set())


def test_triple_index_rejects_bad_ids() -> None:
    with pytest.raises(ValueError, match="entity ids outside"):
        TripleIndex(torch.tensor([[0, 0, 5]]), 3, 1)
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        TripleIndex(torch.zeros(2, 2, dtype=torch.long), 3, 1)
    empty = TripleIndex(torch.zeros(0, 3, dtype=torch.long), 3, 2)
    assert empty.counts(torch.tensor([0]), torch.tensor([1])).tolist() == [0]


def test_filter_index_holds_every_split(tmp_path: Path) -> None:
    kg = load_kg("g", make_graph(tmp_path / "g"))
    f = kg.filter_index()
    # test triple (c, r2, a) and its reciprocal (a, r2^-1, c)
    assert bool(f.mask(torch.tensor([2]), torch.tensor([1]))[0, 0])
    assert bool(f.mask(torch.tensor([0]), torch.tensor([3]))[0, 2])
    assert len(kg.train_index()) == 2 * len(kg.train)
    assert Vocabulary(["x"], {"x": 0}).add("x") == 0


DATA = Path(
    os.environ.get("SPACL_DATA_DIR", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.mark.skipif(
    not (DATA / "kg" / "fb15k-237" / "train.txt").is_file(),
    reason="FB15k-237 not found (set SPACL_DATA_DIR to the shared data directory)",
)
def test_fb15k237_statistics() -> None:
    kg = load_kg("fb15k-237", DATA, unseen="include")
    assert (len(kg.train), len(kg.valid), len(kg.test)) == (272115, 17535, 20466)
    assert (kg.num_entities, kg.num_relations) == (14541, 237)
    with pytest.raises(ValueError, match=r"valid\.txt, line \d+: unknown entity"):
        load_kg("fb15k-237", DATA)


def test_package_level_exports() -> None:
    import spacl.data
    import spacl.evaluate
    import spacl.models
    from spacl.data import kg as data_kg
    from spacl.data import text as data_text
    from spacl.evaluate import ood, ranking
    from spacl.models import kg as model_kg

    assert spacl.data.load_kg is data_kg.load_kg
    assert spacl.data.open_intent_split is data_text.open_intent_split
    assert spacl.models.LinkPredictor is model_kg.LinkPredictor
    assert spacl.evaluate.evaluate_link_prediction is ranking.evaluate_link_prediction
    assert spacl.evaluate.fit_open_classifier is ood.fit_open_classifier
    for module in (spacl.data, spacl.evaluate, spacl.models):
        assert all(hasattr(module, name) for name in module.__all__)
