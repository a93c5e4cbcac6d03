"""The fair SPACL study's building blocks (issue 11): views, splits, options, store, rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spacl.data import LabeledData
from spacl.losses import SPACLLoss
from spacl.studies.spacl_bench.benches import FeatureDropoutViews, few_shot_index
from spacl.studies.spacl_bench.methods import (
    BASE,
    FACTORS,
    TEMPERATURES,
    spacl_choices,
    spacl_method,
)
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


def _group(values: list[float], tau: float = 0.1) -> dict:
    from spacl.studies.stats import summarize

    recs = [{"ncc": v, "linear": v, "knn": v} for v in values]
    return {
        "tau": tau,
        "seeds": list(range(len(values))),
        "val": summarize(recs),
        "test": summarize(recs),
        "kept_fraction_end": [],
    }


def _setting(full: list[float], ablated: list[float], supcon: list[float]) -> dict:
    """A minimal metrics entry of one bench and setting for the claims table."""
    arms = {
        k: _group(ablated)
        for k in (
            "no_anchor",
            "no_hard_positive",
            "no_adversarial",
            "no_negative_selection",
            "oaa",
            "ib",
        )
    }
    return {
        "criterion": "ncc",
        "seeds": list(range(len(full))),
        "baselines": {"SupCon": _group(supcon), "SimCLR": _group([50.0] * len(full))},
        "best_baseline": "SupCon",
        "spacl": {"base": _group(full), "selected": _group(full)},
        "base_name": "SPACL[cut=similarity, sup=instance_class, grad=shared, gen=1]",
        "selected_name": "SPACL[cut=similarity, sup=instance_class_mean, grad=shared, gen=1, "
        "anchors=every_view]",
        "ablations": arms,
    }


def _claims(metrics: dict) -> dict:
    from spacl.studies.spacl_bench.claims import claim_specs

    settings = (("a", "supervised"), ("b", "supervised"))
    return {s.key: s.rule(metrics) for s in claim_specs(settings)}


def test_spacl_claims_can_fail() -> None:
    """Counter-examples on the claims table itself: TOST and the per-setting ablation rule."""
    from spacl.studies.verdicts import MIXED, NOT_RUN, RULE_TESTS

    good = [91.6, 91.3, 91.9, 91.5, 91.7]
    worse = [x - 4.0 for x in good]
    better = [x + 0.8 for x in good]
    m = {
        "benches": {
            "a": {"supervised": _setting(good, worse, good)},
            "b": {"supervised": _setting(good, better, [x - 1.5 for x in good])},
        }
    }
    v = _claims(m)
    assert v["ablation_no_anchor"].verdict == MIXED  # +4 in a, -0.8 in b
    assert v["ib_h_beats_ib"].verdict == NOT_AT_SCALE  # IB+H and IB are the same arm here
    assert v["supervised_spacl_equivalent_to_supcon_a"].verdict == REPRODUCED
    assert v["supervised_spacl_equivalent_to_supcon_b"].verdict == OPPOSITE  # +1.5 > margin
    assert v["paper_form_beats_best_baseline_b_supervised"].verdict == REPRODUCED
    # the diagnostics and the best-chance bench did not run: no verdict, never a pass
    for key in ("lemma_2_4_negatives_saturate", "best_chance_cut_helps"):
        assert v[key].verdict == NOT_RUN
    for key, verdict in v.items():
        assert verdict.verdict == NOT_RUN or verdict.by in RULE_TESTS, key
    # a missing seed is no verdict, not a pass
    m["benches"]["a"]["supervised"]["baselines"]["SupCon"] = _group(good[:2])
    assert v["supervised_spacl_equivalent_to_supcon_a"].verdict == REPRODUCED
    assert _claims(m)["supervised_spacl_equivalent_to_supcon_a"].verdict == NOT_RUN


def test_diagnostic_claims_can_fail() -> None:
    """Lemma 2.4: a still-rising gradient curve is not reproduced (its critical size at the
    range's top: no direction past it), a flat one reproduced; Corollary 2.2: 100% for
    both encoders at every dimension drops the verdict; Theorem 2.1: SPACL nearer is
    opposite."""
    from spacl.studies.verdicts import NO_SIGNAL

    sizes = [1, 4, 16, 64, 256, 1024]
    rising = [[0.01 * n**0.9 + 0.001 * s for n in sizes] for s in range(3)]
    flat = [[1.0 - 0.5 / n - 0.001 * s for n in sizes] for s in range(3)]
    enc = {
        "SPACL": {
            "grad_curve_own_tau": rising,
            "certified": [100.0] * 3,
            "certified_lowdim": [100.0] * 3,
            "collapse_residual": [0.1, 0.11, 0.12],
        },
        "SimCLR": {
            "grad_curve_own_tau": flat,
            "certified": [100.0] * 3,
            "certified_lowdim": [100.0] * 3,
            "collapse_residual": [0.5, 0.52, 0.51],
        },
    }
    m = {"benches": {}, "diagnostics": {"sizes": sizes, "encoders": enc}}
    v = _claims(m)
    lemma = v["lemma_2_4_negatives_saturate"]
    # SPACL rises to the top of the range, SimCLR levels off: SPACL's curve shows no
    # direction past n = 1024 (issue 39's fourth review: "opposite on n <= 1024" before),
    # so the conjunction over the encoders is not reproduced, and nothing refutes it
    assert lemma.verdict == NOT_AT_SCALE
    assert lemma.rule.startswith(
        "encoders differ: SPACL not reproduced at this scale, SimCLR reproduced"
    )
    assert "refuted" not in lemma.row
    assert "critical size at the range's top (n = 1024): no direction is seen past it" in (
        lemma.row
    )
    enc["SimCLR"]["grad_curve_own_tau"] = rising
    assert _claims(m)["lemma_2_4_negatives_saturate"].verdict == NOT_AT_SCALE
    enc["SPACL"]["grad_curve_own_tau"] = enc["SimCLR"]["grad_curve_own_tau"] = flat
    assert _claims(m)["lemma_2_4_negatives_saturate"].verdict == REPRODUCED
    assert v["corollary_2_2_spacl_certifies_more"].verdict == NO_SIGNAL
    assert v["theorem_2_1_spacl_farther_from_collapse"].verdict == OPPOSITE
    enc["SPACL"]["certified_lowdim"] = [20.0, 25.0, 22.0]
    enc["SimCLR"]["certified_lowdim"] = [60.0, 65.0, 62.0]
    assert _claims(m)["corollary_2_2_spacl_certifies_more"].verdict == OPPOSITE


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


def test_settings_are_named_for_what_they_compute() -> None:
    from spacl.studies.spacl_bench.claims import describe

    base = spacl_method(BASE, "supervised", 8).name
    supcon_like = spacl_method(
        option(supervision="instance_class_mean", anchors="every_view"), "supervised", 8
    ).name
    assert "paper describes" in describe(base, base)
    assert describe(supcon_like, base).startswith("SupCon's loss")
    assert "without the cut" in describe(
        spacl_method(option(cut="none"), "weak", 8).name, spacl_method(BASE, "weak", 8).name
    )
    ema = spacl_method(option(gradient="ema"), "self-supervised", 8).name
    assert describe(ema, spacl_method(BASE, "self-supervised", 8).name) == "SPACL with grad=ema"


def test_grid_edges_flag_a_choice_at_either_end_and_only_there() -> None:
    from spacl.studies.spacl_bench.edges import grid_edges

    tune = {"0.05": 90.0, "0.1": 91.0, "0.2": 92.0, "0.5": 93.0}
    m = {
        "benches": {
            "b": {
                "s": {
                    "tuning": {"A": tune, "B": {**tune, "0.5": 80.0}, "C": tune, "D": {}},
                    "temperatures": {"A": 0.5, "B": 0.2, "C": 0.05},
                }
            }
        },
        "best_chance": {"tuning": {"E": tune}, "temperatures": {"E": 0.1}},
    }
    rows, total = grid_edges(m)
    assert total == 4  # D was not tuned
    assert [(r[1], r[3]) for r in rows] == [("A", "highest"), ("C", "lowest")]
    from spacl.studies.spacl_bench.edges import grown_grids

    assert grown_grids(m) == 0
    m["benches"]["b"]["s"]["tuning"]["B"] = {**tune, "1.25": 79.0}  # grown past 0.5
    assert grown_grids(m) == 1 and len(grid_edges(m)[0]) == 2  # B's 0.2 is still inside


def test_grow_grid_extends_the_end_holding_the_choice_up_to_the_cap() -> None:
    from spacl.studies.spacl_bench.methods import MAX_GROWTH, grow_grid

    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.5) == (0.05, 0.1, 0.2, 0.5, 1.25)
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.05) == (0.025, 0.05, 0.1, 0.2, 0.5)
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.1) is None  # inside: nothing to grow
    assert grow_grid((0.1,), (0.1,), 0.1) is None  # one value (a quick run)
    grid = TEMPERATURES
    for _ in range(MAX_GROWTH):
        grid = grow_grid(grid, TEMPERATURES, max(grid)) or grid
    assert grid == (0.05, 0.1, 0.2, 0.5, 1.25, 3.12, 7.79)
    assert grow_grid(grid, TEMPERATURES, 7.79) is None  # the cap: flagged, not grown
    assert grow_grid(grid, TEMPERATURES, 0.05) == (0.025, *grid)  # the other end still can


def test_grow_grid_grows_past_an_edge_whose_validation_score_the_choice_ties() -> None:
    """The lower value wins a tie, so a tie with the top hides a curve still at its best
    there: the grid grows past the tied end, within the same cap; a choice strictly
    above both ends' scores grows nothing (the counter-example)."""
    from spacl.studies.spacl_bench.methods import MAX_GROWTH, grow_grid

    tied = {0.05: 0.80, 0.1: 0.85, 0.2: 0.90, 0.5: 0.90}
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.2, tied) == (0.05, 0.1, 0.2, 0.5, 1.25)
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.2) is None  # no scores: the old rule
    inside = {**tied, 0.5: 0.89}  # 0.2 strictly above both ends
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.2, inside) is None
    interior_tie = {**inside, 0.1: 0.90}  # ties an interior value only: no edge
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.1, interior_tie) is None
    low = {0.05: 0.9, 0.1: 0.9, 0.2: 0.8, 0.5: 0.7}  # a tie with the bottom (another selector)
    assert grow_grid(TEMPERATURES, TEMPERATURES, 0.1, low) == (0.025, 0.05, 0.1, 0.2, 0.5)
    grid = (*TEMPERATURES, 1.25, 3.12, 7.79)  # MAX_GROWTH values past the top already
    assert sum(v > max(TEMPERATURES) for v in grid) == MAX_GROWTH
    flat = {t: 0.9 for t in grid} | {0.05: 0.8, 0.1: 0.85}
    assert grow_grid(grid, TEMPERATURES, 0.2, flat) is None  # the cap holds for a tie too


@pytest.mark.parametrize(
    ("curve", "chosen", "grid"),
    [
        # 0.2 ties 0.5: one value past the top, which scores lower: inside, stop
        ({0.05: 0.8, 0.1: 0.85, 0.2: 0.9, 0.5: 0.9, 1.25: 0.88}, 0.2, (*TEMPERATURES, 1.25)),
        # the tie holds at every grown value: grown to the cap, still tied (flagged)
        ({0.05: 0.8, 0.1: 0.85}, 0.2, (*TEMPERATURES, 1.25, 3.12, 7.79)),
        # strictly inside: nothing grows (the counter-example)
        ({0.05: 0.8, 0.1: 0.85, 0.2: 0.9, 0.5: 0.89}, 0.2, TEMPERATURES),
    ],
)
def test_tuning_grows_the_grid_while_the_choice_ties_the_tops_score(
    tmp_path: Path, curve: dict[float, float], chosen: float, grid: tuple[float, ...]
) -> None:
    """A fake trainer with a validation plateau from 0.2 up (``curve``, 0.9 elsewhere)."""
    from spacl.studies.spacl_bench.edges import edge_of
    from spacl.studies.spacl_bench.stages import tune_over_grid

    store = RunStore(tmp_path / "runs.jsonl")
    method = spacl_method(BASE, "supervised", 16)
    trained: list[float] = []

    def fit(jobs: list[tuple[object, float]], seed: int) -> None:
        for m, tau in jobs:
            key = RunKey("b", "s", m.name, tau, seed)  # type: ignore[attr-defined]
            if key not in store:
                trained.append(tau)
                score = curve.get(tau, 0.9)
                store.add(key, {"steps": 1, "val": {"linear": score}, "test": {"linear": 0.0}})

    assert tune_over_grid(store, "b", "s", method, "linear", fit) == (chosen, grid)
    assert sorted(trained) == sorted(grid)  # each value trained once
    tune = {f"{t:g}": 100.0 * curve.get(t, 0.9) for t in grid}
    flagged = edge_of(chosen, tune)
    assert flagged == ("ties the highest (7.79)" if len(grid) == 7 else "")


@pytest.mark.parametrize(
    ("peak", "chosen", "grid"),
    [
        (0.2, 0.2, (0.05, 0.1, 0.2, 0.5)),  # inside: no growth
        (1.0, 1.25, (0.05, 0.1, 0.2, 0.5, 1.25, 3.12)),  # grows past the peak, then stops
        (0.03, 0.025, (0.0125, 0.025, 0.05, 0.1, 0.2, 0.5)),  # the lower end
        (100.0, 7.79, (0.05, 0.1, 0.2, 0.5, 1.25, 3.12, 7.79)),  # still rising at the cap
    ],
)
def test_tuning_grows_the_grid_while_the_validation_choice_sits_at_an_edge(
    tmp_path: Path, peak: float, chosen: float, grid: tuple[float, ...]
) -> None:
    """A fake trainer whose validation score peaks at ``peak`` (log scale): the grid grows
    run by run until the choice is inside, or the cap is reached (then it is flagged)."""
    import math

    from spacl.studies.spacl_bench.stages import tune_over_grid

    store = RunStore(tmp_path / "runs.jsonl")
    method = spacl_method(BASE, "supervised", 16)
    trained: list[float] = []

    def fit(jobs: list[tuple[object, float]], seed: int) -> None:
        for m, tau in jobs:
            key = RunKey("b", "s", m.name, tau, seed)  # type: ignore[attr-defined]
            if key not in store:
                trained.append(tau)
                score = -abs(math.log(tau / peak))
                store.add(key, {"steps": 1, "val": {"linear": score}, "test": {"linear": 0.0}})

    got, got_grid = tune_over_grid(store, "b", "s", method, "linear", fit)
    assert (got, got_grid) == (chosen, grid)
    assert sorted(trained) == sorted(grid)  # each value trained once
    # without training, the same store gives the same choice; an empty one gives none
    assert tune_over_grid(store, "b", "s", method, "linear", lambda j, s: None) == (got, grid)
    empty = RunStore(tmp_path / "empty.jsonl")
    assert tune_over_grid(empty, "b", "s", method, "linear", lambda j, s: None)[0] is None


def test_a_run_store_seeded_from_results_keeps_what_the_report_reads(tmp_path: Path) -> None:
    """``--seed-store-from``: every run row, the option traces, the kept fraction's last
    value per seed (from the row, or from the metrics where they hold one per seed) and
    the diagnostics cache with its temperatures; a stored run is never replaced."""
    import json

    from spacl.studies.spacl_bench import provenance
    from spacl.studies.spacl_bench.protocol import import_results

    group = {"tau": 0.5, "seeds": [0, 1], "kept_fraction_end": [0.25, 0.5]}
    metrics = {
        "benches": {
            "b": {
                "s": {
                    "temperatures": {"S": 0.5},
                    "base_name": "S",
                    "selected_name": "S",
                    "options": {"S": {"kept_fraction": [1.0, 0.25]}},
                    "baselines": {"A": {"tau": 0.1, "seeds": [0, 1], "kept_fraction_end": [0.9]}},
                    "spacl": {"base": group, "selected": group},
                    "ablations": {},
                }
            }
        },
        "best_chance": {"arms": {"Q": {"tau": 0.2, "seeds": [0], "kept_fraction_end": [0.3]}}},
        "diagnostics": {
            "seeds": [0, 1],
            "encoders": {"SPACL": {"g": [1.0, 2.0]}, "SimCLR": {"g": [3.0, 4.0]}},
            "temperatures": {"SPACL": 0.5, "SimCLR": 0.2},
        },
    }
    row = {"bench": "b", "setting": "s", "val": {"linear": 0.5}, "test": {"linear": 0.4}}
    runs = [
        {**row, "method": "S", "tau": 0.5, "seed": 0},
        {**row, "method": "S", "tau": 0.5, "seed": 1},
        {**row, "method": "A", "tau": 0.1, "seed": 1},  # its metrics are not per seed
        {**row, "method": "A", "tau": 0.1, "seed": 0, "kept_fraction_end": 0.75},
    ]
    runs.append({**row, "bench": "best_chance", "method": "Q", "tau": 0.2, "seed": 0})
    runs[0] |= {"seconds": 12.5, "cpu_seconds": 9.0, "commit": "def+dirty"}
    runs[1] |= {"seconds": None, "commit": None}  # trained before runs recorded them
    runs[3] |= {"commit": "0123abc"}
    source = tmp_path / "results.json"
    source.write_text(json.dumps({"commit": "abc", "metrics": metrics, "runs": runs}))
    out = tmp_path / "out"
    assert import_results(source, out, keep=lambda r: True) == 5
    arm = RunStore(out / "runs" / "best_chance.jsonl").get(RunKey("best_chance", "s", "Q", 0.2, 0))
    assert arm["kept_fraction"] == [0.3]  # a one-setting bench's arms, per seed
    store = RunStore(out / "runs" / "b.jsonl")
    kept = {(k.method, k.seed): r["kept_fraction"] for k, r in store.records.items()}
    assert kept == {("S", 0): [1.0, 0.25], ("S", 1): [0.5], ("A", 1): [], ("A", 0): [0.75]}
    # each run's own time and commit travel; a run that recorded none gets none
    first, second = (
        store.get(RunKey("b", "s", "S", 0.5, 0)),
        store.get(RunKey("b", "s", "S", 0.5, 1)),
    )
    assert (first["seconds"], first["cpu_seconds"], first["commit"]) == (12.5, 9.0, "def+dirty")
    assert "seconds" not in second and "commit" not in second
    assert provenance([{**r, **store.get(k)} for k, r in store.records.items()]) == {
        "runs": 4, "clean": 1, "modified_tree": 1, "no_commit": 2,
    }  # fmt: skip
    cache = json.loads((out / "runs" / "diagnostics.json").read_text())
    assert cache["1"]["SimCLR"] == {"g": 4.0} and cache["0"]["temperatures"]["SPACL"] == 0.5
    assert import_results(source, out, keep=lambda r: True) == 0  # nothing replaced


def test_diagnostics_made_at_other_temperatures_are_not_reused(tmp_path: Path) -> None:
    import json

    from spacl.studies.spacl_bench.diagnostics import run_diagnostics

    spacl = spacl_method(BASE, "self-supervised", 16).name
    entry = {"SPACL": {"g": 1.0}, "SimCLR": {"g": 2.0}}
    cache = tmp_path / "diagnostics.json"
    cache.write_text(
        json.dumps(
            {
                "0": {**entry, "temperatures": {"SPACL": 0.05, "SimCLR": 0.2}},
                "1": {**entry, "temperatures": {"SPACL": 0.025, "SimCLR": 0.2}},  # grown since
                "2": entry,  # written before temperatures were recorded: kept
            }
        )
    )
    temps = {spacl: 0.05, "SimCLR": 0.2}
    out = run_diagnostics(None, temps, [0, 1, 2], 16, cache, train=False)
    assert out["seeds"] == [0, 2] and out["encoders"]["SPACL"]["g"] == [1.0, 1.0]
