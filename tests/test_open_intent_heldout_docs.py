"""The held-out-class trials' summaries (heldout.md, heldout_top.md) are the render of
their committed stores, and a trial still running lists the draws it lacks with the
command that adds them (issue 37: "The results file lists the settings and seeds still
missing, with the command that adds them")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench_modules import benchmark_module

OPEN_INTENT = Path(__file__).resolve().parents[1] / "docs" / "results" / "open_intent"


@pytest.fixture(scope="module")
def heldout() -> Any:
    return benchmark_module("open_intent_heldout")


@pytest.mark.parametrize("which", ["HEAD", "TOP"])
def test_each_summary_is_the_render_of_its_store(heldout: Any, which: str) -> None:
    variant = getattr(heldout, which)
    if not variant.summary.is_file():
        pytest.skip(f"{variant.summary.name}: no draw of {variant.plan} stored yet")
    rows = heldout.load_runs(variant.store) if variant.store.is_file() else []
    assert variant.summary.read_text() == heldout.summary_text(rows, variant), (
        f"{variant.summary.name} differs from `{variant.summary_command}`"
    )


def test_a_trial_still_running_lists_what_it_lacks_and_how_to_add_it(heldout: Any) -> None:
    variant = heldout.TOP
    row = {
        "dataset": "stackoverflow",
        "ratio": 0.75,
        "seed": 1000,
        "pseudo_open": {
            rule: {"macro_f1": 80.0, "f1_ood": 60.0} for rule in ("boundary", "heldout", "dev_best")
        },
    }
    line = heldout.decision([row], variant)
    assert line.startswith("Decision: none yet (1 of the 9 draws stored).  Missing: ")
    assert (
        "StackOverflow 75% draws 1001, 1002; StackOverflow 50% draws 1000, 1001, 1002; "
        "CLINC150-oos 50% draws 1000, 1001, 1002; each added by "
        "`python benchmarks/open_intent_heldout.py --top-layer --seeds DRAW`"
    ) in line


def test_the_top_trials_run_order_is_read_from_the_store(heldout: Any) -> None:
    def row(ratio: float, seed: int, finished: str) -> dict[str, Any]:
        return {"dataset": "stackoverflow", "ratio": ratio, "seed": seed, "finished": finished}

    rows = [row(0.75, 1001, "2026-12-06T19:10:10Z"), row(0.5, 1000, "2026-12-06T18:00:00Z")]
    text = " ".join(heldout.run_order_lines(rows))
    assert "stored in this order: StackOverflow 50% 1000, StackOverflow 75% 1001." in text
    assert heldout.run_order_lines([]) == []
