"""Issue 38: own intents from one ``train.tsv``: dev and test carved from it (stratified,
seeded by ``data.split_seed``, ``data.dev_fraction`` / ``data.test_fraction``), recorded in
the run's ``split.json`` so ``eval`` and ``embed`` read the same split, a changed file one
line, and a class too small to carve one line naming the key and its value."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from spacl.cli import main
from spacl.data.text import (
    carve_intent_splits,
    check_intent_split_record,
    load_intent_dataset,
    read_intent_tsv,
    recorded_carve,
    write_intent_split_record,
)
from test_ood import TOPICS, FakeEncoder


def write_train_only(root: Path, per_class: int = 30, small: dict[str, int] | None = None) -> Path:
    """``root/train.tsv`` alone: the topic set of test_ood (each class its own words),
    ``per_class`` examples a class (``small``: fewer for the named classes)."""
    gen = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    lines = ["text\tlabel"]
    for label, words in TOPICS.items():
        for _ in range((small or {}).get(label, per_class)):
            lines.append(" ".join(gen.choice(words, 4)) + f"\t{label}")
    (root / "train.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_carving_is_stratified_seeded_and_keeps_the_lines(tmp_path: Path) -> None:
    root = write_train_only(tmp_path / "intents")
    data = load_intent_dataset("intents", root)  # the defaults: 10% dev, 20% test
    for split, n in (("train", 21), ("dev", 3), ("test", 6)):  # 70%, 10%, 20% of each
        assert Counter(data[split].labels) == {label: n for label in TOPICS}
    assert all(data[s].carved for s in data)
    lines = [line for s in data for line in data[s].lines]
    assert sorted(lines) == list(range(2, 2 + 8 * 30))  # each example once, its file line
    assert all(data[s].lines == sorted(data[s].lines) for s in data)  # the file's order
    whole = read_intent_tsv(root / "train.tsv")
    for split in data.values():
        for text, label, line in zip(split.texts, split.labels, split.lines, strict=True):
            assert (whole.texts[line - 2], whole.labels[line - 2]) == (text, label)
    again = load_intent_dataset("intents", root)
    assert all(again[s].lines == data[s].lines for s in data)  # the same split each time
    other = load_intent_dataset("intents", root, seed=1)
    assert other["test"].lines != data["test"].lines  # split_seed draws another
    # a test.tsv of the user's own: only dev is carved, from train
    (root / "test.tsv").write_text("text\tlabel\nw0_1 w0_2\tt0\n")
    mixed = load_intent_dataset("intents", root, dev_fraction=0.2)
    assert not mixed["test"].carved and len(mixed["test"]) == 1
    assert Counter(mixed["dev"].labels) == {label: 6 for label in TOPICS}
    assert len(mixed["train"]) == 8 * 24


def test_a_class_too_small_to_carve_is_one_line_naming_the_key(tmp_path: Path) -> None:
    root = write_train_only(tmp_path / "intents", small={"t3": 4})
    with pytest.raises(ValueError) as err:
        load_intent_dataset("intents", root, key_prefix="data.")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("config key 'data.dev_fraction' is 0.1: intent 't3' has 4 example(s)")
    assert "an intent needs 5 or more" in text and "or add your own dev.tsv" in text
    whole = read_intent_tsv(root / "train.tsv")
    with pytest.raises(ValueError, match=r"^dev_fraction=0\.45 and test_fraction=0\.45 leave"):
        carve_intent_splits(whole, {"dev": 0.45, "test": 0.45})  # 't3': 2 dev, 2 test
    with pytest.raises(ValueError, match=r"^dev_fraction \+ test_fraction must be < 1"):
        carve_intent_splits(whole, {"dev": 0.5, "test": 0.5})


def test_a_record_holds_a_later_reading_to_the_carved_split(tmp_path: Path) -> None:
    root = write_train_only(tmp_path / "intents")
    data = load_intent_dataset("intents", root)
    record = write_intent_split_record(tmp_path / "run" / "split.json", data)
    assert record is not None and recorded_carve(record) == ("dev", "test")
    check_intent_split_record(record, data)
    # a dev.tsv added since: the run's split is still carved, as recorded
    (root / "dev.tsv").write_text("text\tlabel\nw0_1 w0_2\tt0\n")
    again = load_intent_dataset("intents", root, carve=recorded_carve(record))
    check_intent_split_record(record, again)
    with (root / "train.tsv").open("a") as handle:
        handle.write("w1_1 w1_2 w1_3\tt1\n")
    changed = load_intent_dataset("intents", root, carve=recorded_carve(record))
    with pytest.raises(ValueError, match=r"not the ones run .* carved its splits from") as err:
        check_intent_split_record(record, changed)
    assert "train: 168 example(s) recorded, 169 now" in str(err.value)
    # three files of the user's own: nothing carved, nothing recorded
    (root / "test.tsv").write_text("text\tlabel\nw0_1 w0_2\tt0\n")
    own = load_intent_dataset("intents", root)
    assert write_intent_split_record(tmp_path / "other.json", own) is None


def fake_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The text encoder faked (a hashing bag of words) wherever a run builds it."""
    from spacl.models import text as text_models
    from spacl.tasks.text import task as text_task

    monkeypatch.setattr(text_task, "MiniLMEncoder", lambda **kwargs: FakeEncoder(dim=256))
    monkeypatch.setattr(text_models, "MiniLMEncoder", lambda **kwargs: FakeEncoder(dim=256))


def one_file_recipe(tmp_path: Path, root: Path) -> Path:
    recipe: dict[str, Any] = {
        "task": "text",
        "data": {"name": "intents", "root": str(root), "known_ratio": 0.5},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "objective": {"name": "supcon", "temperature": 0.5},
        "train": {"epochs": 3, "batch_size": 16, "progress": False},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_one_train_tsv_trains_evaluates_embeds_and_predicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_minilm(monkeypatch)
    root = write_train_only(tmp_path / "intents")
    run = tmp_path / "runs" / "intents"
    assert main(["train", str(one_file_recipe(tmp_path, root)), "--out", str(run), "--quiet"]) == 0
    record = json.loads((run / "split.json").read_text())
    assert record["carved"] == ["dev", "test"] and record["from"] == "train.tsv"
    assert [record[s]["count"] for s in ("train", "dev", "test")] == [168, 24, 48]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["name"] == "intents-supcon" and len(summary["known_classes"]) == 4
    assert summary["dev_accuracy"] > 90  # the topics are apart: the run learnt them
    capsys.readouterr()
    assert main(["eval", str(run), "--json", "--no-write"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["test"] == pytest.approx(summary["test"])  # the same carved test split
    out = tmp_path / "test.npz"
    assert main(["embed", str(run), "--split", "test", "--out", str(out), "--quiet"]) == 0
    with np.load(out) as arrays:
        assert len(arrays["labels"]) == 48
    known = summary["known_classes"][0]
    rows = (root / "train.tsv").read_text().splitlines()[1:]
    sentence = next(text for text, label in (r.split("\t") for r in rows) if label == known)
    capsys.readouterr()
    assert main(["predict", str(run), sentence]) == 0
    assert capsys.readouterr().out.split("\t")[0] == known
    # the file changed since training: eval is one line, not another split
    with (root / "train.tsv").open("a") as handle:
        handle.write("w1_1 w1_2 w1_3\tt1\n")
    assert main(["eval", str(run), "--json", "--no-write"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not the ones run" in err and "split.json" in err


def test_spacl_train_on_a_class_too_small_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_minilm(monkeypatch)
    root = write_train_only(tmp_path / "intents", small={"t5": 3})
    recipe = str(one_file_recipe(tmp_path, root))
    run = tmp_path / "run"
    assert main(["train", recipe, "--out", str(run), "--quiet"]) == 2  # 1 test, 0 dev
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "config key 'data.dev_fraction' is 0.1: intent 't5' has 3 example(s)" in err
    assert not run.exists()  # nothing left behind
    assert main(["train", recipe, "data.test_fraction=0.1", "--out", str(run), "--quiet"]) == 2
    assert "config key 'data.test_fraction' is 0.1: intent 't5'" in capsys.readouterr().err
    assert main(["train", recipe, "data.dev_fraction=0", "--out", str(run)]) == 2
    assert "config key 'data.dev_fraction' must be > 0, got 0" in capsys.readouterr().err
    assert main(["train", recipe, "data.dev_fraction=0.5", "data.test_fraction=0.5"]) == 2
    assert "must be < 1" in capsys.readouterr().err
