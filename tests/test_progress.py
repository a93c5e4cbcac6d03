"""Progress bars and logging: library code logs (never prints), bars follow
``train.progress`` / ``--quiet``, and the CLI shows library messages on stderr."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import torch

from spacl import _progress
from spacl._progress import console_logging, progress_enabled, set_progress

SRC = Path(__file__).resolve().parents[1] / "src" / "spacl"


@pytest.fixture(autouse=True)
def _reset():
    """Earlier tests may have run the CLI with --quiet (a process-wide switch)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    set_progress(None)
    logging.getLogger("spacl").setLevel(logging.NOTSET)
    yield
    set_progress(None)
    logging.getLogger("spacl").setLevel(logging.NOTSET)
    torch.set_num_threads(before)


def _graph(root: Path, e: int = 12) -> Path:
    root.mkdir(parents=True)
    rows = [(i, r, (i + r + 1) % e) for i in range(e) for r in range(2)]
    split = {"train": rows[:-6], "valid": rows[-6:-3], "test": rows[-3:]}
    for name, part in split.items():
        (root / f"{name}.txt").write_text("".join(f"e{h}\tr{r}\te{t}\n" for h, r, t in part))
    return root


def _kg_recipe(root: Path) -> dict:
    return {
        "data": {"name": "toy", "root": str(root)},
        "model": {"dim": 8},
        "train": {"epochs": 2, "batch_size": 8},
    }


def test_library_code_never_prints():
    """Only the command line (cli.py, commands/) prints; libraries log."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "cli.py" or rel.startswith("commands/"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"(?<![\w.])print\(", code) or re.search(r"=\s*print\b", code):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == []


def test_progress_switch_precedence(monkeypatch):
    monkeypatch.setattr(_progress.sys.stderr, "isatty", lambda: False, raising=False)
    assert progress_enabled(True) and not progress_enabled(False)
    assert not progress_enabled(None)  # not a terminal
    set_progress(True)
    assert progress_enabled(None) and not progress_enabled(False)
    set_progress(False)  # --quiet wins over everything
    assert not progress_enabled(True) and not progress_enabled(None)
    with pytest.raises(TypeError, match="enabled must be a bool or None"):
        set_progress("yes")  # type: ignore[arg-type]


def test_kg_training_logs_through_logging(tmp_path, caplog):
    from spacl.tasks.kg import train_kg

    root = _graph(tmp_path / "toy")
    with caplog.at_level(logging.INFO, logger="spacl"):
        summary = train_kg(_kg_recipe(root))
    messages = [r.getMessage() for r in caplog.records if r.name == "spacl.tasks.kg"]
    assert messages[0].startswith("kg: toy E=12 R=2")
    assert any(m.startswith("epoch 2: loss") for m in messages)
    assert messages[-1].startswith("test (best epoch")
    assert summary["history"][-1]["epoch"] == 2


def test_kg_progress_bars_follow_train_progress(tmp_path, capsys):
    from spacl.tasks.kg import train_kg

    root = _graph(tmp_path / "toy")
    train_kg(_kg_recipe(root), overrides=["train.progress=true"])
    err = capsys.readouterr().err
    assert "kg:" in err and "epoch 1:" in err and "ranking:" in err  # bar descriptions
    train_kg(_kg_recipe(root), overrides=["train.progress=false"])
    assert capsys.readouterr().err == ""
    set_progress(False)  # the CLI's --quiet beats train.progress=true
    train_kg(_kg_recipe(root), overrides=["train.progress=true"])
    assert capsys.readouterr().err == ""


def test_cli_console_logging_and_quiet(tmp_path, capsys):
    from spacl.cli import main

    root = _graph(tmp_path / "toy")
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(
        f"task: kg\ndata: {{name: toy, root: '{root}'}}\nmodel: {{dim: 8}}\n"
        "train: {epochs: 1, batch_size: 8}\n"
    )
    assert main(["train", str(recipe), "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    assert "kg: toy E=12" in err and "test (best epoch 1)" in err  # library log lines
    assert out.startswith("toy-infonce test: mrr ") and f"run directory: {tmp_path / 'a'}" in out
    assert main(["train", str(recipe), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("toy-infonce test: mrr ")
    console_logging(quiet=False)
    console_logging(quiet=False)
    handlers = [
        h for h in logging.getLogger("spacl").handlers if type(h).__name__ == "_ConsoleHandler"
    ]
    assert len(handlers) == 1
