"""Two own-folder paths a user meets after training (issue 38): a run whose image folder
moved is evaluated again with ``spacl eval RUN data.root=NEW``, and a folder too small for
the geometry report still trains, evaluates and predicts (geometry skipped, logged)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from spacl.cli import main
from spacl.evaluate import evaluate_representation
from spacl.evaluate.report import GEOMETRY_MIN_ROWS
from test_own_images import overrides, write_folder


def test_eval_of_a_moved_folder_takes_its_new_data_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "folder"
    write_folder(root / "train")
    run = tmp_path / "run"
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.25"),
                 "--out", str(run), "--quiet"]) == 0  # fmt: skip
    before = json.loads((run / "eval.json").read_text())
    moved = tmp_path / "moved"
    shutil.move(str(root), str(moved))
    capsys.readouterr()
    assert main(["eval", str(run), "--no-write"]) == 2  # the stored root is gone: one line
    err = capsys.readouterr().err.strip()
    assert "data.root" in err and "\n" not in err
    code = main(["eval", str(run), f"data.root={moved}", "--json", "--no-write"])
    assert code == 0, capsys.readouterr().err
    again = json.loads(capsys.readouterr().out)
    assert again == before  # the same files, the same split: the same metrics
    assert main(["eval", str(run), "optim.lr=0.1"]) == 2
    assert "only eval.* overrides and data.root" in capsys.readouterr().err


def test_a_folder_too_small_for_geometry_trains_evaluates_and_predicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """3 classes x 6 images hold 3 test images, fewer than the geometry report's 4: the
    run used to end with 'features needs at least 4 rows' and no eval.json."""
    root = tmp_path / "small"
    files = write_folder(root, per_class=6)
    run = tmp_path / "run"
    assert main(["train", "imagefolder/supcon", *overrides(root, "data.test_fraction=0.17"),
                 "--out", str(run), "--quiet"]) == 0  # fmt: skip
    metrics = json.loads((run / "eval.json").read_text())
    arm = next(iter(metrics.values()))
    assert "knn_accuracy" in arm and not any(k.startswith("geometry/") for k in arm)
    capsys.readouterr()
    assert main(["predict", str(run), str(files[0])]) == 0
    assert capsys.readouterr().out.split("\t")[1] in {"class0", "class1", "class2"}


def test_evaluation_skips_geometry_below_its_minimum_and_keeps_it_at_the_minimum() -> None:
    g = torch.Generator().manual_seed(0)
    train, train_y = torch.randn(12, 4, generator=g), torch.arange(12) % 3
    cases = {  # test labels -> whether the geometry report runs
        (0, 0, 1): False,  # 3 rows < GEOMETRY_MIN_ROWS
        (0, 0, 1, 2): False,  # classes 1 and 2 have one sample each
        (0, 0, 1, 1): True,
    }
    assert len(next(iter(cases))) == GEOMETRY_MIN_ROWS - 1
    for labels, runs in cases.items():
        test_y = torch.tensor(labels)
        test = torch.randn(len(labels), 4, generator=g)
        out = evaluate_representation(train, train_y, test, test_y, knn_k=3, linear=False)
        assert any(k.startswith("geometry/") for k in out) == runs, labels
