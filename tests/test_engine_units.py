"""Engine building blocks: optimisers, schedule, checkpoints, RNG state, objective registry."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from spacl.engine import (
    LARS,
    WarmupCosine,
    all_gather_with_grad,
    build_optimizer,
    capture_rng_state,
    load_checkpoint,
    remove_stale_temporaries,
    restore_rng_state,
    save_checkpoint,
    scaled_lr,
)
from spacl.tasks.image import OBJECTIVES, build_objective, load_config
from spacl.tasks.image.trainer import config_differences

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------- schedule


def test_warmup_cosine_closed_form():
    sched = WarmupCosine(warmup_steps=4, total_steps=14, min_ratio=0.1)
    assert [sched(s) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    for s in range(4, 15):
        progress = (s - 4) / 10
        expected = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
        assert sched(s) == pytest.approx(expected, abs=1e-15)
    assert sched(100) == pytest.approx(0.1)  # clamped after the end
    const = WarmupCosine(2, 10, schedule="constant")
    assert [const(s) for s in range(5)] == [0.5, 1.0, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="schedule must be"):
        WarmupCosine(0, 10, schedule="linear")


def test_lambda_lr_state_survives_weights_only_round_trip(tmp_path):
    p = nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([p], lr=0.4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, WarmupCosine(3, 10))
    for _ in range(5):
        opt.step()
        sched.step()
    save_checkpoint({"s": sched.state_dict(), "o": opt.state_dict()}, tmp_path / "c.pt")
    state = load_checkpoint(tmp_path / "c.pt")
    opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.4)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, WarmupCosine(1, 2))
    opt2.load_state_dict(state["o"])
    sched2.load_state_dict(state["s"])
    opt.step(), sched.step(), opt2.step(), sched2.step()
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


@pytest.mark.parametrize(
    ("rule", "factor"), [("none", 1.0), ("linear", 2.0), ("sqrt", 2**0.5), ("fourth_root", 2**0.25)]
)
def test_scaled_lr(rule, factor):
    assert scaled_lr(0.3, 512, 256, rule) == pytest.approx(0.3 * factor)


# ------------------------------------------------------------------------ optimisers


def test_lars_matches_hand_computed_update():
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    b = nn.Parameter(torch.randn(3, dtype=torch.float64))
    gw, gb = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    opt = LARS(
        [
            {"params": [w], "weight_decay": 0.1},
            {"params": [b], "weight_decay": 0.0, "lars_exclude": True},
        ],
        lr=0.5,
        momentum=0.9,
        trust_coefficient=0.01,
    )
    w0, b0 = w.detach().clone(), b.detach().clone()
    bufs_w, bufs_b = None, None
    for _ in range(2):
        w.grad, b.grad = gw.clone(), gb.clone()
        d = gw + 0.1 * w.detach()
        trust = 0.01 * w.detach().norm() / d.norm()
        d = d * trust
        bufs_w = d if bufs_w is None else 0.9 * bufs_w + d
        bufs_b = gb.clone() if bufs_b is None else 0.9 * bufs_b + gb
        expected_w = w.detach() - 0.5 * bufs_w
        expected_b = b.detach() - 0.5 * bufs_b
        opt.step()
        torch.testing.assert_close(w.detach(), expected_w, rtol=0, atol=1e-14)
        torch.testing.assert_close(b.detach(), expected_b, rtol=0, atol=1e-14)
    assert not torch.equal(w0, w.detach()) and not torch.equal(b0, b.detach())


def test_build_optimizer_groups_exclude_bias_and_norm():
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    opt = build_optimizer(model, "lars", 0.1, weight_decay=1e-4, exclude_bias_and_norm=True)
    decay, plain = opt.param_groups
    assert decay["weight_decay"] == 1e-4 and plain["weight_decay"] == 0.0 and plain["lars_exclude"]
    assert {id(p) for p in decay["params"]} == {id(model[0].weight), id(model[2].weight)}
    assert len(plain["params"]) == 4  # two biases, BN weight and bias
    for name, cls in [
        ("sgd", torch.optim.SGD),
        ("adam", torch.optim.Adam),
        ("adamw", torch.optim.AdamW),
    ]:
        opt = build_optimizer(model, name, 0.1, weight_decay=0.5)
        assert isinstance(opt, cls) and len(opt.param_groups) == 1
        assert opt.param_groups[0]["weight_decay"] == 0.5
    with pytest.raises(ValueError, match="optimizer must be one of"):
        build_optimizer(model, "rmsprop", 0.1)


# ----------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_is_weights_only_and_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt" / "last.pt"
    save_checkpoint({"w": torch.arange(3.0), "meta": {"step": 1, "name": "a", "none": None}}, path)
    assert load_checkpoint(path)["meta"] == {"step": 1, "name": "a", "none": None}

    def broken_save(obj, handle):  # writes half a file, then dies
        handle.write(b"garbage")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint({"w": torch.zeros(3)}, path)
    monkeypatch.undo()
    # the previous checkpoint is intact and no temporary file is left behind
    assert torch.equal(load_checkpoint(path)["w"], torch.arange(3.0))
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.pt"]


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="could not be read"):
        load_checkpoint(bad)
    torch.save({"obj": nn.Linear(2, 2)}, tmp_path / "pickled.pt")  # a module: not weights-only
    with pytest.raises(ValueError, match="could not be read"):
        load_checkpoint(tmp_path / "pickled.pt")
    stale = tmp_path / ".last.pt.abc.tmp"
    stale.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == [stale] and not stale.exists()


def test_rng_state_capture_restore_round_trip(tmp_path):
    legacy = np.random  # the legacy global NumPy RNG is exactly the state to save
    random.seed(1)
    legacy.seed(2)
    torch.manual_seed(3)
    legacy.standard_normal()  # leaves a cached gaussian in NumPy's state
    save_checkpoint({"rng": capture_rng_state()}, tmp_path / "r.pt")
    expected = (random.random(), float(legacy.standard_normal()), float(torch.rand(1)))
    random.seed(9)
    legacy.seed(9)
    torch.manual_seed(9)
    restore_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    got = (random.random(), float(legacy.standard_normal()), float(torch.rand(1)))
    assert got == expected


def test_gather_is_identity_without_process_group():
    x = torch.randn(3, 2, requires_grad=True)
    y = all_gather_with_grad(x)
    assert y is x


# -------------------------------------------------------------------- objectives


def _cfg(*overrides: str):
    return load_config(None, ["data.name=synthetic", *overrides])


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_registered_objective_builds_and_runs(name):
    views = 5 if name == "spacl" else 2
    cfg = _cfg(f"objective.name={name}", f"views.num_views={views}")
    spec, module, use_labels = build_objective(cfg.objective, cfg, embedding_dim=6)
    assert use_labels == (spec.labels in ("always", "default"))
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(4).repeat_interleave(2)
    if spec.step == "spacl":
        pool = torch.randn(8, views, 6, generator=g)
        idx = module.choose_anchor(pool)
        loss = module(pool[torch.arange(8), idx], pool, labels=None, anchor_index=idx)
    elif spec.classifier_head:
        loss = module(torch.randn(8, views, 4, generator=g), labels=labels)
    else:
        loss = module(torch.randn(8, views, 6, generator=g), labels=labels if use_labels else None)
    assert torch.isfinite(loss)


def test_objective_parameters_are_checked_by_name():
    with pytest.raises(
        ValueError, match=r"'objective.params.betta' is not a parameter of objective 'hcl'"
    ):
        _cfg("objective.name=hcl", "objective.params.betta=1.0")
    with pytest.raises(ValueError, match=r"objective\.params\.variant' is fixed"):
        _cfg("objective.name=supcon", "objective.params.variant=in")
    with pytest.raises(ValueError, match=r"config key 'objective' \(hcl\): beta must be a finite"):
        _cfg("objective.name=hcl", "objective.params.beta=-1.0")
    with pytest.raises(
        ValueError, match=r"objective\.use_labels': objective 'simclr' takes no labels"
    ):
        _cfg("objective.name=simclr", "objective.use_labels=true")
    with pytest.raises(
        ValueError, match=r"'model\.momentum'=0\.9: objective 'sampled_hard' cannot"
    ):
        _cfg("objective.name=sampled_hard", "model.momentum=0.9")


def test_objective_generators_are_seeded_from_the_run_seed():
    cfg = _cfg("objective.name=sampled_hard")
    _, a, _ = build_objective(cfg.objective, cfg, seed=5)
    _, b, _ = build_objective(cfg.objective, cfg, seed=5)
    _, c, _ = build_objective(cfg.objective, cfg, seed=6)
    assert torch.equal(
        a.state_dict()["sampler_class._extra_state"]["generator_state"],
        b.state_dict()["sampler_class._extra_state"]["generator_state"],
    )
    assert not torch.equal(
        a.state_dict()["sampler_class._extra_state"]["generator_state"],
        c.state_dict()["sampler_class._extra_state"]["generator_state"],
    )


def test_config_differences_ignore_only_resumable_keys():
    a = OmegaConf.to_container(_cfg())
    b = OmegaConf.to_container(_cfg("train.max_steps=3", "eval.knn_k=5", "train.log_every=2"))
    assert config_differences(a, b) == []
    c = OmegaConf.to_container(_cfg("optim.lr=0.5"))
    assert config_differences(a, c) == ["optim.lr: 0.1 -> 0.5"]
