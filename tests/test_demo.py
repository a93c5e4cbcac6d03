"""``spacl demo``: trains SimCLR, SupCon and SPACL on digits and prints the comparison."""

from __future__ import annotations

import json

import pytest

from spacl.cli import main
from spacl.commands.demo import DEMO_MODELS, demo_config


def test_demo_configs_are_valid_recipes():
    for name in DEMO_MODELS:
        cfg = demo_config(name, epochs=3)
        assert cfg.data.name == "digits" and cfg.train.device == "cpu" and cfg.train.epochs == 3
    spacl = demo_config("spacl")
    assert spacl.views.num_views == 5 and spacl.views.keep_original and spacl.model.momentum == 0
    sup = demo_config("spacl_sup")
    assert sup.objective.use_labels and sup.objective.params["positive_pool"] == "instance_class"
    assert all(demo_config(n).views.num_views == 5 for n in DEMO_MODELS)  # the same views
    assert demo_config("supcon").objective.name == "supcon"


def test_demo_runs_end_to_end_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--epochs", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    header = "| model | linear probe % | kNN % | NCC % | eff. rank | NC1 |"
    assert header in printed
    assert f"run directory: {out}" in printed
    for name in DEMO_MODELS:
        run = out / name
        for f in ("config.yaml", "metrics.jsonl", "eval.json", "summary.md", "checkpoints/last.pt"):
            assert (run / f).is_file(), f"{name}/{f}"
        metrics = json.loads((run / "eval.json").read_text())["main"]
        row = next(line for line in printed.splitlines() if line.startswith(f"| {name} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f"{100 * metrics['linear_accuracy']:.2f}"
        assert cells[2] == f"{100 * metrics['knn_accuracy']:.2f}"
        assert cells[3] == f"{100 * metrics['ncc_accuracy']:.2f}"
        assert 0.5 < metrics["linear_accuracy"] <= 1.0  # one epoch already beats chance (0.1)
    assert "| spacl |" in (out / "results.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--epochs", "0"], "--epochs must be"), (["--models", "byol"], "--models must name")],
)
def test_demo_rejects_bad_arguments(tmp_path, capsys, args, message):
    assert main(["demo", "--out", str(tmp_path / "d"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
