"""Intent TSVs and the open-intent protocol on tiny generated files."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
import torch

from spacl.data.text import (
    intent_path,
    load_intent_dataset,
    open_intent_split,
    read_intent_tsv,
)

CLASSES = [f"c{i}" for i in range(8)]


def write_tsv(path: Path, rows: list[tuple[str, str]], header: str = "text\tlabel") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\r\n".join([header] + [f"{t}\t{y}" for t, y in rows]) + "\r\n"
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(body.encode())
    else:
        path.write_text(body, newline="")
    return path


def make_dataset(root: Path, per_class: int = 4) -> Path:
    for split, n in (("train", per_class), ("dev", 2), ("test", 3)):
        rows = [(f"{split} text {c} {i}", c) for c in CLASSES for i in range(n)]
        write_tsv(root / f"{split}.tsv", rows)
    return root


def test_read_intent_tsv_crlf_gzip_and_column_order(tmp_path: Path) -> None:
    rows = [("how do I x", "a"), ("why y", "b")]
    plain = read_intent_tsv(write_tsv(tmp_path / "p.tsv", rows))
    zipped = read_intent_tsv(write_tsv(tmp_path / "z.tsv.gz", rows))
    swapped = read_intent_tsv(
        write_tsv(tmp_path / "s.tsv", [(y, t) for t, y in rows], header="label\ttext")
    )
    for ex in (plain, zipped, swapped):
        assert ex.texts == ["how do I x", "why y"] and ex.labels == ["a", "b"]
    assert plain.lines == [2, 3]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("text\tlabel\nonly text\n", r"bad\.tsv, line 2: expected 2 tab-separated fields"),
        ("sentence\tintent\nx\ty\n", r"bad\.tsv, line 1: header must name the columns"),
        ("text\tlabel\nx\ty\n\t z\n", r"bad\.tsv, line 3: empty text"),
        ("text\tlabel\nx\t \n", r"bad\.tsv, line 2: empty label"),
        ("\n\n", r"bad\.tsv: empty file"),
        ("text\tlabel\n", r"bad\.tsv: no example after the header"),
    ],
)
def test_read_intent_tsv_errors_name_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(body)
    with pytest.raises(ValueError, match=message):
        read_intent_tsv(path)


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_open_intent_split_protocol(tmp_path: Path, ratio: float, seed: int) -> None:
    data = load_intent_dataset("toy", make_dataset(tmp_path / "toy"))
    split = open_intent_split(data, ratio, seed)
    k = split.num_known
    assert k == round(ratio * len(CLASSES))
    assert sorted(split.known_classes + split.unknown_classes) == CLASSES
    known = set(split.known_classes)
    # no unknown-class example in train or dev; labels renumber the known classes
    for texts, labels in (
        (split.train_texts, split.train_labels),
        (split.dev_texts, split.dev_labels),
    ):
        assert len(texts) == len(labels)
        for text, y in zip(texts, labels.tolist(), strict=True):
            cls = text.split()[2]
            assert cls in known and split.known_classes[y] == cls
    assert len(split.train_texts) == 4 * k and len(split.dev_texts) == 2 * k
    # test keeps everything, unknown classes become the single OOD label K
    assert len(split.test_texts) == 3 * len(CLASSES)
    for text, y in zip(split.test_texts, split.test_labels.tolist(), strict=True):
        cls = text.split()[2]
        assert y == (split.known_classes.index(cls) if cls in known else k)
    assert split.ood_label == k
    again = open_intent_split(data, ratio, seed)
    assert again.known_classes == split.known_classes
    assert torch.equal(again.test_labels, split.test_labels)


def test_known_class_choice_depends_on_seed(tmp_path: Path) -> None:
    data = load_intent_dataset("toy", make_dataset(tmp_path / "toy"))
    choices = {tuple(open_intent_split(data, 0.5, s).known_classes) for s in range(6)}
    assert len(choices) > 1


def test_class_without_training_example_is_an_error(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "toy")
    rows = [("a dev text", "c0"), ("a typo", "c9"), ("more", "c1")]
    write_tsv(root / "dev.tsv", rows)
    data = load_intent_dataset("toy", root)
    with pytest.raises(ValueError, match=r"dev\.tsv, line 3: class 'c9' has no training example"):
        open_intent_split(data, 0.5, 0)


def test_known_class_without_dev_example_is_an_error(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "toy")
    write_tsv(root / "dev.tsv", [("only one class", "c0")])
    data = load_intent_dataset("toy", root)
    with pytest.raises(ValueError, match=r"dev\.tsv: known class '.+' has no dev example"):
        open_intent_split(data, 1.0, 0)


def test_split_arguments_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_dataset(tmp_path / "text" / "toy")
    data = load_intent_dataset("toy", root)
    with pytest.raises(ValueError, match="known_ratio must be in"):
        open_intent_split(data, 0.0)
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path))
    assert intent_path("toy") == root
    with pytest.raises(FileNotFoundError, match="intent dataset 'nope' not found"):
        intent_path("nope")


def test_missing_own_intents_names_every_place_searched(tmp_path: Path) -> None:
    # data.root given: <root>/text/<name>, <root>/<name> and <root> itself are all tried
    with pytest.raises(FileNotFoundError) as err:
        intent_path("intents", tmp_path)
    msg = str(err.value)
    # a user's own folder: named first, with what it must hold and the data-root layout
    assert msg.startswith(f"intent data not found at {tmp_path}: it holds no train.tsv")
    assert "train.tsv, dev.tsv and test.tsv" in msg and "text/intents/" in msg
    assert "Xu et al" not in msg  # not pointed at a public dataset's source
    # the directory itself holding train.tsv is found
    make_dataset(tmp_path)
    assert intent_path("intents", tmp_path) == tmp_path


DATA = Path(
    os.environ.get("SPACL_DATA_DIR", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.mark.skipif(
    not (DATA / "text" / "stackoverflow" / "train.tsv").is_file(),
    reason="StackOverflow intents not found (set SPACL_DATA_DIR to the shared data directory)",
)
def test_stackoverflow_split_sizes() -> None:
    data = load_intent_dataset("stackoverflow", DATA)
    assert (len(data["train"]), len(data["dev"]), len(data["test"])) == (12000, 2000, 6000)
    split = open_intent_split(data, 0.25, 0)
    assert split.num_known == 5 and len(split.train_texts) == 5 * 600
    assert int((split.test_labels == 5).sum()) == 6000 * 15 // 20


def test_read_intent_tsv_quoted_fields_span_lines(tmp_path: Path) -> None:
    # the TEXTOIR BANKING77 files quote texts that hold a newline; "" is a quote
    body = 'text\tlabel\nplain\ta\n"first line\nsecond ""quoted"" line"\tb\nlast\tc\n'
    path = tmp_path / "q.tsv"
    path.write_text(body)
    ex = read_intent_tsv(path)
    assert ex.texts == ["plain", 'first line\nsecond "quoted" line', "last"]
    assert ex.labels == ["a", "b", "c"]
    assert ex.lines == [2, 3, 5]


def test_read_intent_tsv_malformed_quote_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text('text\tlabel\nok\ta\n"closed" then text\tb\n')
    with pytest.raises(ValueError, match=r"bad\.tsv, line 3: not a valid quoted TSV record"):
        read_intent_tsv(path)


def make_open_dataset(root: Path) -> Path:
    make_dataset(root)
    rows = [(f"test text {c} {i}", c) for c in CLASSES for i in range(3)]
    rows += [(f"test text oos {i}", "oos") for i in range(5)]
    write_tsv(root / "test.tsv", rows)
    return root


def test_declared_open_label_is_ood_in_test_with_every_class_known(tmp_path: Path) -> None:
    data = load_intent_dataset("toy", make_open_dataset(tmp_path / "toy"))
    split = open_intent_split(data, 1.0)
    assert split.known_classes == CLASSES and split.unknown_classes == []
    assert split.open_label == "oos"
    assert int((split.test_labels == split.ood_label).sum()) == 5
    assert [
        t
        for t, y in zip(split.test_texts, split.test_labels.tolist(), strict=True)
        if y == split.ood_label
    ] == [f"test text oos {i}" for i in range(5)]
    # with half the classes known, unknown classes and oos share the OOD label
    half = open_intent_split(data, 0.5, 1)
    assert int((half.test_labels == half.ood_label).sum()) == 5 + 3 * len(half.unknown_classes)
    # no declared open label: oos is an unknown training class, an error
    with pytest.raises(ValueError, match=r"line 26: class 'oos' has no training example"):
        open_intent_split(data, 1.0, open_label=None)


def test_open_label_in_train_or_dev_is_an_error(tmp_path: Path) -> None:
    root = make_open_dataset(tmp_path / "toy")
    write_tsv(root / "dev.tsv", [("x", "c0"), ("an oos dev query", "oos")])
    data = load_intent_dataset("toy", root)
    with pytest.raises(ValueError, match=r"dev\.tsv, line 3: the open label 'oos' occurs in dev"):
        open_intent_split(data, 1.0)
    with pytest.raises(ValueError, match="open_label must be a non-empty string"):
        open_intent_split(data, 1.0, open_label="")


@pytest.mark.skipif(
    not (DATA / "text" / "banking" / "train.tsv").is_file(),
    reason="BANKING77 intents not found (set SPACL_DATA_DIR to the shared data directory)",
)
def test_banking_published_files_read_with_quoted_fields() -> None:
    data = load_intent_dataset("banking", DATA)
    assert (len(data["train"]), len(data["dev"]), len(data["test"])) == (9003, 1000, 3080)
    assert len(set(data["train"].labels)) == 77
    assert any("\n" in t for t in data["train"].texts)  # a quoted text spanning lines
    split = open_intent_split(data, 0.25, 0)
    assert split.num_known == 19 and split.open_label is None


@pytest.mark.skipif(
    not (DATA / "text" / "oos" / "test.tsv").is_file(),
    reason="CLINC150 oos files not found (set SPACL_DATA_DIR to the shared data directory)",
)
def test_clinc_oos_is_the_open_label() -> None:
    data = load_intent_dataset("oos", DATA)
    split = open_intent_split(data, known_ratio=1.0)
    assert split.num_known == 150 and split.unknown_classes == []
    assert split.open_label == "oos"
    assert int((split.test_labels == 150).sum()) == 1200
    oos_texts = {
        t for t, y in zip(data["test"].texts, data["test"].labels, strict=True) if y == "oos"
    }
    flagged = {
        t for t, y in zip(split.test_texts, split.test_labels.tolist(), strict=True) if y == 150
    }
    assert flagged == oos_texts
    assert (len(split.train_texts), len(split.dev_texts), len(split.test_texts)) == (
        15000,
        3000,
        5700,
    )
