"""The fair SPACL study's building blocks (issue 11): views, splits, options, store, rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spacl.data import LabeledData
from spacl.losses import SPACLLoss
from spacl.studies.spacl_bench.benches import FeatureDropoutViews, few_shot_index
from spacl.studies.spacl_bench.claims import no_worse
from spacl.studies.spacl_bench.methods import BASE, FACTORS, spacl_choices, spacl_method
from spacl.studies.spacl_bench.protocol import RunKey, RunStore
from spacl.studies.spacl_bench.stages import option_choices, paper_ablations
from spacl.studies.verdicts import NOT_AT_SCALE, OPPOSITE, REPRODUCED


def test_feature_views_keep_the_original_and_drop_coordinates() -> None:
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    data = LabeledData(x, torch.arange(6) % 2, None, 2, "toy")
    maker = FeatureDropoutViews(dropout=0.5, sigma=0.0)
    views = maker(data, torch.arange(6), 5, torch.Generator().manual_seed(1))
    assert views.shape == (6, 5, 40)
    assert torch.equal(views[:, 0], x)
    aug = views[:, 1:]
    kept = aug != 0
    torch.testing.assert_close(aug[kept], (2 * x.unsqueeze(1).expand_as(aug))[kept])
    assert 0.3 < float(kept.double().mean()) < 0.7
    again = maker(data, torch.arange(6), 5, torch.Generator().manual_seed(1))
    assert torch.equal(views, again)  # the same generator state gives the same views
    with pytest.raises(ValueError, match="dropout"):
        FeatureDropoutViews(dropout=1.0)


def test_few_shot_index_takes_exactly_k_per_class() -> None:
    labels = torch.tensor([0, 1, 2] * 20)
    idx = few_shot_index(labels, 3, 4, seed=0)
    assert torch.equal(torch.bincount(labels[idx]), torch.tensor([4, 4, 4]))
    assert torch.equal(idx, idx.sort().values)
    assert torch.equal(idx, few_shot_index(labels, 3, 4, seed=0))
    assert not torch.equal(idx, few_shot_index(labels, 3, 4, seed=1))


def test_options_change_one_factor_at_a_time() -> None:
    sup = spacl_choices("supervised")
    assert sup[0] == BASE and len(sup) == 1 + sum(len(o) - 1 for o in FACTORS.values())
    selfsup = spacl_choices("self-supervised")
    assert all(c.supervision == BASE.supervision for c in selfsup)
    for choice in sup[1:]:
        changed = [f for f in FACTORS if getattr(choice, f) != getattr(BASE, f)]
        assert len(changed) == 1
    names = [spacl_method(c, "supervised", 8).name for c in option_choices("supervised")]
    assert len(set(names)) == len(names)
    assert all(c in option_choices("weak") for c in paper_ablations().values())


def test_spacl_methods_build_what_they_name() -> None:
    sup = spacl_method(BASE, "supervised", 8)
    loss = sup.build(0.2, 0)
    assert isinstance(loss, SPACLLoss) and sup.uses_labels
    assert loss.positive_pool == "instance_class" and loss.mass == "similarity"
    assert loss.online == "all_views" and loss.num_adversarial == 1
    ema = spacl_method(option(gradient="ema"), "self-supervised", 8)
    assert ema.momentum == 0.99 and ema.build(0.2, 0).online == "anchor_view"
    assert not ema.uses_labels and ema.build(0.2, 0).positive_pool == "instance"
    none = spacl_method(option(cut="none"), "weak", 8).build(0.1, 0)
    assert none.effective_share == 1.0
    mean = spacl_method(option(supervision="instance_class_mean"), "supervised", 8).build(0.1, 0)
    assert mean.positive_mode == "mean"


def option(**change: str) -> object:
    from dataclasses import replace

    return replace(BASE, **change)


def test_run_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    store = RunStore(path)
    key = RunKey("b", "s", "m", 0.1, 0)
    assert key not in store
    store.add(key, {"val": {"linear": 0.5}})
    path.write_text(path.read_text() + "\n")  # a trailing blank line is tolerated
    again = RunStore(path)
    assert key in again and again.get(key)["val"]["linear"] == 0.5
    assert again.select(method="m")[0]["tau"] == 0.1


def test_no_worse_rule_can_fail() -> None:
    same = no_worse([90.0, 90.2, 89.9], [90.1, 89.8, 90.0], ("SPACL", "SupCon"))
    assert same.verdict == REPRODUCED
    worse = no_worse([85.0, 85.3, 84.8], [90.1, 89.8, 90.0], ("SPACL", "SupCon"))
    assert worse.verdict == OPPOSITE
    assert no_worse([85.0], [90.0], ("SPACL", "SupCon")).verdict == NOT_AT_SCALE


def test_clustered_synthetic_puts_siblings_together() -> None:
    from spacl.data import make_synthetic

    plain = make_synthetic(12, 16, 4, seed=0, num_superclasses=3)
    assert torch.equal(plain.inputs, make_synthetic(12, 16, 4, seed=0).inputs)  # default kept
    data = make_synthetic(
        12, 16, 30, within_std=0.0, seed=0, num_superclasses=3, cluster_spread=0.3
    )
    centres = torch.stack([data.inputs[data.labels == c][0] for c in range(12)])
    cos = (
        torch.nn.functional.normalize(centres, dim=1)
        @ torch.nn.functional.normalize(centres, dim=1).T
    )
    group = torch.arange(12) % 3
    sib = (group[:, None] == group[None]) & ~torch.eye(12, dtype=torch.bool)
    other = group[:, None] != group[None]
    assert float(cos[sib].min()) > float(cos[other].max())
    assert torch.equal(data.coarse_labels, data.labels % 3)
    with pytest.raises(ValueError, match="num_superclasses"):
        make_synthetic(12, 16, 4, cluster_spread=0.3)


def test_best_chance_smoke_records_times(tmp_path: Path) -> None:
    from spacl.studies.spacl_bench.best_chance import ARMS, QUICK, collect, run_best_chance

    store = RunStore(tmp_path / "bc.jsonl")
    tuned = run_best_chance(store, QUICK, quick=True)
    assert list(tuned) == list(ARMS)
    recs = store.select(bench="best_chance")
    assert len(recs) == len(ARMS)
    assert all(r["seconds"] > 0 and r["seconds"] >= r["train_seconds"] for r in recs)
    metrics = collect(store, tuned, QUICK)
    assert set(metrics["arms"]) == set(ARMS)
    assert metrics["arms"]["SPACL IB+H"]["kept_fraction_end"]
