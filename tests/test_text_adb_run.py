"""A detector run (detector.method: adb | da_adb): run directory, predict, eval, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.tasks import load_recipe
from spacl.tasks.text import train_ood
from spacl.tasks.text.run import OPEN, evaluate_text_run, load_intent_detector
from test_ood import FakeEncoder, write_topic_dataset
from test_text_finetune import tiny_backbone, tiny_split


def _recipe(tmp_path: Path, method: str) -> dict[str, object]:
    return {
        "detector": {
            "method": method,
            "lr": 1e-2,
            "max_epochs": 40,
            "patience": 5,
            "batch_size": 16,
        },
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "train": {"seed": 3},
    }


@pytest.mark.parametrize("method", ["adb", "da_adb"])
def test_detector_run_predicts_what_its_summary_scored(tmp_path: Path, method: str) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    encoder = FakeEncoder(dim=256)
    run = tmp_path / "run"
    summary = train_ood(
        _recipe(tmp_path, method), encoder=encoder, split=split, log=None, run_dir=run
    )
    assert (
        summary["detector"] == method
        and summary["name"] == f"stackoverflow-{method.replace('_', '-')}"
    )
    record = summary["record"]
    assert 1 <= record["best_epoch"] <= record["epochs"] <= 40
    assert record["epochs"] == 40 or record["epochs"] == record["best_epoch"] + 5
    # bag-of-words topics are separable: the detector beats rejecting everything
    assert summary["test"]["macro_f1"] > summary["reject_all"]["macro_f1"] + 20
    stored = json.loads((run / "summary.json").read_text())
    assert stored["known_classes"] == split.known_classes
    detector = load_intent_detector(run, encoder)
    predicted = detector.predict(split.test_texts)
    names = [*split.known_classes, OPEN]
    truth = [names[int(y)] for y in split.test_labels]
    accuracy = 100.0 * sum(p == t for (p, _), t in zip(predicted, truth, strict=True)) / len(truth)
    assert accuracy == pytest.approx(summary["test"]["accuracy"], abs=1e-9)
    again = evaluate_text_run(run, encoder, split)
    assert again["test"] == pytest.approx(summary["test"], abs=1e-9)
    resumed = train_ood(
        _recipe(tmp_path, method), encoder=encoder, split=split, log=None, run_dir=run, resume=True
    )
    assert resumed["test"] == stored["test"]


def test_a_detector_with_a_trained_top_layer_saves_and_reloads_that_layer(tmp_path: Path) -> None:
    """``detector.trainable_layers=1``: the top layer trains with the head; the run
    directory holds it, and the rebuilt detector scores what the run scored."""
    import torch

    from spacl.engine.rundir import read_task_checkpoint

    split = tiny_split(num_known=3, per_class=8)
    recipe = _recipe(tmp_path, "da_adb")
    recipe["detector"] = {**recipe["detector"], "trainable_layers": 1, "lr": 3e-3}  # type: ignore[dict-item]
    run = tmp_path / "run"
    summary = train_ood(recipe, encoder=tiny_backbone(), split=split, log=None, run_dir=run)
    assert summary["record"]["best_epoch"] >= 1
    assert summary["test"]["macro_f1"] > summary["reject_all"]["macro_f1"]
    state = read_task_checkpoint(run, "text")
    assert state["encoder"]["trainable_layers"] == 1
    assert not any(key.startswith("top.") for key in state["adb_head"])
    # the saved layer is the trained one: it differs from the source model's top layer
    source = tiny_backbone().top(1)  # type: ignore[attr-defined]
    saved = state["encoder"]["top"]
    assert any(not torch.equal(v, saved[k]) for k, v in source.state_dict().items())
    detector = load_intent_detector(run, tiny_backbone())
    names = [*split.known_classes, OPEN]
    truth = [names[int(y)] for y in split.test_labels]
    predicted = detector.predict(split.test_texts)
    accuracy = 100.0 * sum(p == t for (p, _), t in zip(predicted, truth, strict=True)) / len(truth)
    assert accuracy == pytest.approx(summary["test"]["accuracy"], abs=1e-9)
    again = evaluate_text_run(run, tiny_backbone(), split)
    assert again["test"] == pytest.approx(summary["test"], abs=1e-9)


def test_detector_config_is_checked() -> None:
    with pytest.raises(ValueError, match=r"detector\.method"):
        load_recipe({"task": "text", "detector": {"method": "adb3"}})
    with pytest.raises(ValueError, match=r"detector\.patience"):
        load_recipe({"task": "text", "detector": {"method": "adb", "patience": 0}})
    with pytest.raises(ValueError, match="trainable_layers"):
        load_recipe(
            {"task": "text", "detector": {"method": "adb"}, "finetune": {"trainable_layers": 1},
             "objective": {"name": "cross_entropy"}}
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"detector\.trainable_layers"):
        load_recipe({"task": "text", "detector": {"method": "adb", "trainable_layers": 7}})
    with pytest.raises(ValueError, match=r"detector\.max_tokens"):
        load_recipe({"task": "text", "detector": {"method": "adb", "max_tokens": 1}})
    with pytest.raises(ValueError, match=r"data\.protocol"):
        load_recipe({"task": "text", "data": {"protocol": "mine"}})
    with pytest.raises(ValueError, match=r"data\.name"):
        load_recipe({"task": "text", "data": {"protocol": "textoir", "name": "clinc"}})
