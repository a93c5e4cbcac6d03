"""FB15k-237 epochs at the budget's edge (claims 26, 27): a seed run keeps the epoch of best
validation MRR; one that kept its last validated epoch may be bounded by the budget, not
the method, and the report flags it (claim rows, the edges section, the header) with the
count per arm.  The store's ``best_epoch`` counts the epoch the budget cut short, its
``epochs`` the steps done: the last validated epoch is ``epochs`` rounded up, so
``best_epoch`` may exceed ``epochs`` (a resumed run too), which the train loop shows here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spacl.engine.loop import TrainLoop
from spacl.studies import spacl_bench
from spacl.studies.spacl_bench.budget_edge import (
    EpochChoice,
    beyond_epochs,
    budget_edge_rows,
    budget_edge_stamp,
    budget_edge_text,
    epoch_choices,
    last_validated_epoch,
)
from test_interrupt_tasks import killed_at_step
from test_kg_model import cycle_graph
from test_task_runs import kg_recipe

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "spacl"


def test_the_last_validated_epoch_is_the_epochs_rounded_up() -> None:
    assert [last_validated_epoch(e) for e in (25.33, 26.0, 16.94, 0.25)] == [26, 26, 17, 1]
    assert last_validated_epoch(26.0 + 1e-9) == 26  # a floating sum at an epoch's end
    cut = EpochChoice("spacl_nocut", 1, 25.33, 26)
    assert cut.at_edge and cut.cut_short and not cut.last_whole
    whole = EpochChoice("spacl", 0, 16.94, 16)
    assert not whole.at_edge and whole.last_whole
    inside = EpochChoice("spacl", 2, 22.23, 18)
    assert not inside.at_edge and not inside.last_whole
    # a run that ended at an epoch's end: its last whole epoch is its last validated one
    ended = EpochChoice("infonce", 0, 20.0, 20)
    assert ended.at_edge and not ended.cut_short


def _kg(best: dict[str, list[int]], epochs: dict[str, list[float]]) -> dict[str, Any]:
    return {
        "seeds": {m: list(range(len(v))) for m, v in epochs.items()},
        "epochs": epochs,
        "best_epoch": best,
    }


def test_a_run_at_its_last_validated_epoch_is_flagged_with_the_count_per_arm() -> None:
    kg = _kg(
        {"spacl": [16, 17, 18], "infonce": [23, 30, 25]},
        {"spacl": [16.94, 23.06, 22.23], "infonce": [27.84, 29.49, 26.85]},
    )
    text = budget_edge_text(kg, ("spacl", "infonce"))
    assert "at the run's last validated epoch SPACL 0 of 3, InfoNCE 1 of 3 (s1: epoch 30" in text
    assert "cut short by the budget after 29.49 epochs" in text
    assert "SPACL s0 (epoch 16 of 16.94 trained)" in text  # its last whole epoch, noted
    assert text.endswith(
        "Caveat (budget edge): 1 of 3 runs of InfoNCE chose their last validated epoch: the "
        "budget, not the method, may bound them."
    )
    assert budget_edge_stamp(kg).startswith("; FB15k-237: 1 of 6 seed runs chose their last")
    assert [r[4].startswith("**at the edge**") for r in budget_edge_rows(kg)].count(True) == 1
    assert beyond_epochs(kg) == ["InfoNCE s1 (30 of 29.49)"]
    # counter-examples: nobody at the edge says 0 of n and no caveat; no best epoch, no text
    calm = _kg({"spacl": [10, 11, 12]}, {"spacl": [16.94, 23.06, 22.23]})
    assert "SPACL 0 of 3" in budget_edge_text(calm, ("spacl",))
    assert "Caveat" not in budget_edge_text(calm, ("spacl",))
    assert (
        budget_edge_text({"epochs": {"spacl": [16.9]}, "seeds": {"spacl": [0]}}, ("spacl",)) == ""
    )


def test_the_committed_store_flags_the_no_cut_seed_1_run(tmp_path: Path) -> None:
    """No-cut seed 1 (resumed) kept epoch 26 of 25.33 trained: the cut-short 26th, its last
    validated epoch.  SPACL seed 0 (16 of 16.94) and no-cut seed 0 (20 of 20.93) kept their
    last whole epoch: the cut-short part after it validated no higher (noted, not counted)."""
    kg = spacl_bench.kg_seed_metrics(RESULTS)
    choices = epoch_choices(kg)
    edge = [(r.method, r.seed) for rs in choices.values() for r in rs if r.at_edge]
    assert edge == [("spacl_nocut", 1)]
    whole = [(r.method, r.seed) for rs in choices.values() for r in rs if r.last_whole]
    assert whole == [("spacl", 0), ("spacl_nocut", 0)]
    out = spacl_bench.regenerate(RESULTS, tmp_path)
    claims = {c["key"]: c["measured"] for c in out["claims"]}
    for key in ("fb15k237_mrr_beats_best_baseline", "fb15k237_cut_helps"):
        assert "SPACL without the cut 1 of 3 (s1: epoch 26, cut short by the budget" in claims[key]
        assert "Caveat (budget edge): 1 of 3 runs of SPACL without the cut" in claims[key]
    assert "InfoNCE 0 of 3" in claims["fb15k237_mrr_beats_best_baseline"]
    report = (tmp_path / "report.md").read_text()
    stamp = next(x for x in report.splitlines() if x.startswith("- Grid edges:"))
    assert "FB15k-237: 1 of 9 seed runs chose their last validated epoch" in stamp
    section = report.split("## Choices at a grid edge (flagged)")[1].split("\n## ")[0]
    assert "**Epochs at the budget's edge**" in section
    assert "| SPACL without the cut s1 | 25.33 | 26 | 26 (cut short) | **at the edge**" in section


def test_a_budget_cut_epoch_is_validated_and_numbered_past_the_epochs_trained(
    tmp_path: Path,
) -> None:
    """What the report's reading rests on, in the real loop: the budget cuts epoch 4 at its
    step 2 of 4 (3.5 epochs trained); that epoch is closed and validated as epoch 4, so the
    last validated epoch is the epochs rounded up, and here it scores best: best epoch 4
    of 3.5 trained, as the no-cut seed 1 run's 26 of 25.33.  A run killed after step 11
    and resumed from its step-9 checkpoint (epoch 3, its step 1) records the same."""
    from spacl.tasks.kg import train_kg

    recipe = kg_recipe(cycle_graph(tmp_path / "toy"), epochs=10)
    recipe["eval"] = {"every_epochs": 1}
    recipe["train"] = {**recipe["train"], "checkpoint_every": 3}  # type: ignore[dict-item]

    def budget(self: TrainLoop, started: float) -> bool:
        return self.progress.global_step >= 14  # the budget runs out after step 14

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TrainLoop, "_out_of_time", budget)
        whole = train_kg(recipe, log=None, run_dir=tmp_path / "whole")
        with pytest.MonkeyPatch.context() as kill:
            with pytest.raises(killed_at_step(kill, 11)):  # the last checkpoint is step 9's
                train_kg(recipe, log=None, run_dir=tmp_path / "killed")
        resumed = train_kg(recipe, log=None, run_dir=tmp_path / "killed", resume=True)
    for summary in (whole, resumed):
        assert summary["epochs"] == 3.5
        history = summary["history"]
        assert [h["epoch"] for h in history] == [1, 2, 3, 4] and history[-1]["steps"] == 2
        assert all("valid" in h for h in history)  # the cut-short epoch 4 validated too
        assert last_validated_epoch(summary["epochs"]) == history[-1]["epoch"] == 4
        mrr = [h["valid"]["mrr"] for h in history]
        assert summary["best_epoch"] == 1 + mrr.index(max(mrr))  # the earliest best
        assert summary["best_epoch"] == 4 > summary["epochs"]  # the cut-short epoch won
        choice = EpochChoice("spacl_nocut", 1, summary["epochs"], summary["best_epoch"])
        assert choice.at_edge and choice.cut_short
    assert [h["valid"] for h in resumed["history"]] == [h["valid"] for h in whole["history"]]
