"""One meaning per key (issue 21): ``train.threads``, ``train.device``, ``train.log_every``
are the shared keys of every task; an old key names its new one; text's SPACL defaults are
the loss's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.engine.device import resolve_device
from spacl.schema import TrainSection
from spacl.schema_files import RENAMED_KEYS
from spacl.tasks import load_recipe
from test_ood import FakeEncoder, write_topic_dataset

#: one small recipe of each task (the data is never read by load_recipe)
RECIPES = {
    "image": {"data": {"name": "digits"}},
    "kg": {"task": "kg"},
    "text": {"task": "text"},
}


@pytest.mark.parametrize("task", sorted(RECIPES))
def test_shared_train_keys_mean_the_same_in_every_task(task: str) -> None:
    cfg = load_recipe(RECIPES[task], ["train.threads=2"]).config
    assert cfg.train.threads == 2
    assert cfg.train.device == TrainSection.device == "auto"
    with pytest.raises(ValueError, match=r"config key 'train\.threads' must be an integer >= 1"):
        load_recipe(RECIPES[task], ["train.threads=0"])
    with pytest.raises(ValueError, match=r"config key 'train\.device' must be auto"):
        load_recipe(RECIPES[task], ["train.device=gpu"])


@pytest.mark.parametrize("task", ["image", "kg"])
def test_log_every_has_one_range(task: str) -> None:
    """0 (epoch records only) and up, where a task logs steps; text rejects the key."""
    assert load_recipe(RECIPES[task], ["train.log_every=0"]).config.train.log_every == 0
    with pytest.raises(ValueError, match=r"config key 'train\.log_every' must be an integer >= 0"):
        load_recipe(RECIPES[task], ["train.log_every=-1"])
    with pytest.raises(ValueError, match=r"unknown config key 'train\.log_every'"):
        load_recipe(RECIPES["text"], ["train.log_every=0"])


@pytest.mark.parametrize("task", sorted(RECIPES))
@pytest.mark.parametrize("old", sorted(RENAMED_KEYS))
def test_an_old_key_names_the_new_one(task: str, old: str) -> None:
    with pytest.raises(ValueError) as err:
        load_recipe(RECIPES[task], [f"{old}=1"])
    assert str(err.value) == f"config key {old!r} was renamed: use {RENAMED_KEYS[old]!r}"


@pytest.mark.parametrize("task", ["image", "text"])
def test_views_are_configured_in_one_section(task: str) -> None:
    """``views.num_views`` in every task with views; the old ``data.*`` keys name it."""
    cfg = load_recipe(RECIPES[task], ["views.num_views=3"]).config
    assert cfg.views.num_views == 3 and "num_views" not in cfg.data


def test_an_old_views_key_in_a_recipe_file_names_the_views_section(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("data:\n  name: digits\n  num_views: 5\n  augment: image\n")
    with pytest.raises(ValueError, match=r"'data\.num_views' was renamed: use 'views\.num_views'"):
        load_recipe(old)
    with pytest.raises(ValueError, match=r"'data\.augment' was renamed: use 'views\.augment'"):
        load_recipe({"data": {"name": "digits", "augment": "image"}})


def test_auto_is_cuda_when_available_else_cpu() -> None:
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"config key 'train\.device'"):
        resolve_device("auto:0")


def test_a_text_run_with_device_auto_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spacl.tasks.text import train_ood

    monkeypatch.setenv("SPACL_CACHE_DIR", str(tmp_path / "cache"))
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    cfg = {
        "task": "text",
        "objective": {"name": "supcon"},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 16, "proj_dim": 8},
        "train": {"epochs": 1, "batch_size": 32, "device": "auto"},
    }
    summary = train_ood(cfg, encoder=FakeEncoder(dim=64), split=split, log=None)
    assert summary["config"]["train"]["device"] == "auto"
    assert 0.0 <= summary["test"]["accuracy"] <= 100.0


def test_text_spacl_defaults_are_the_losss() -> None:
    import inspect

    from spacl.losses.spacl import SPACLLoss
    from spacl.tasks.text.config import build_text_loss

    cfg = load_recipe({"task": "text"}, ["objective.name=spacl"]).config
    loss = build_text_loss(cfg, 0)
    default = inspect.signature(SPACLLoss).parameters["positive_pool"].default
    assert isinstance(loss, SPACLLoss) and loss.positive_pool == default


def test_eval_features_takes_the_backbone_name_embed_and_predict_use() -> None:
    """``spacl eval RUN eval.features=backbone`` was an error while ``spacl embed
    --features backbone`` and ``.embed(features="backbone")`` name the same output so."""
    for name in ("backbone", "features", "projections"):
        cfg = load_recipe("digits/supcon", [f"eval.features={name}"]).config
        assert cfg.eval.features == name
    with pytest.raises(ValueError, match=r"eval\.features"):
        load_recipe("digits/supcon", ["eval.features=logits"])
