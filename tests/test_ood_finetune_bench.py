"""benchmarks/ood_finetune.py: the stability-bounds summary of the fine-tuned table."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from bench_modules import benchmark_module


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_module("ood_finetune")


def _runs(dataset: str, ratio: float, method: str, macro: list[float], ood: list[float]) -> list:
    return [
        {
            "dataset": dataset,
            "known_ratio": ratio,
            "method": method,
            "split_seed": seed,
            "test": {"macro_f1": m, "f1_ood": o},
        }
        for seed, (m, o) in enumerate(zip(macro, ood, strict=True))
    ]


def test_bounds_summary_flags_each_cell_and_counts_complete_ones(bench: Any) -> None:
    """A cell over a bound is flagged (the counter-example), a cell with fewer than the
    planned seeds is left out, and the count covers complete cells only."""
    runs = [
        *_runs("stackoverflow", 0.25, "supcon", [70.0, 71.0, 72.0], [60.0, 70.0, 80.0]),
        *_runs("stackoverflow", 0.25, "spacl", [70.0, 70.5, 71.0], [60.0, 61.0, 62.0]),
        *_runs("banking", 0.25, "supcon", [50.0, 90.0], [50.0, 90.0]),  # 2 of 3 seeds
    ]
    lines = bench._bounds(runs, ["supcon", "spacl"])
    text = "\n".join(lines)
    sd = statistics.stdev([60.0, 70.0, 80.0])
    assert f"| StackOverflow 25% | 1.00 ✓ / {sd:.2f} ✗ | 0.50 ✓ / 1.00 ✓ |" in text
    assert "| BANKING77 25% | — | — |" in text
    assert lines[-1] == (
        "Both bounds met in 1 of 2 complete cells (withdrawn bounds: not a verdict)."
    )
    assert "**withdrawn by issue 37**" in lines[0]
    # no setting with every class known among the runs: no fixed-split sentence
    assert "With every class known" not in lines[0]
    # exactly at a bound counts as met (std <= bound)
    edge = _runs("stackoverflow", 0.5, "supcon", [67.0, 70.0, 73.0], [60.0, 65.0, 70.0])
    assert bench._bounds(edge, ["supcon"])[-1].startswith("Both bounds met in 1 of 1 complete")
    # every class known (the split fixed): the largest std of those cells is stated
    fixed = _runs("oos", 1.0, "supcon", [80.0, 80.5, 81.0], [70.0, 70.2, 70.4])
    assert "the largest of these stds is 0.50" in bench._bounds(fixed, ["supcon"])[0]


def test_a_setting_without_fine_tuned_runs_says_so(bench: Any) -> None:
    """Before any fine-tuned run of a setting lands (the frozen row only), its section says
    there is none: no "0.0 min" timing, no empty loss table, and for CLINC150-oos why no
    published row stands beside it."""
    frozen = {
        "dataset": "oos",
        "known_ratio": 1.0,
        "method": "frozen",
        "split_seed": 0,
        "num_known": 150,
        "test_size": 5700,
        "test_ood": 1200,
        "seconds": 10.0,
        "test": {k: 50.0 for k in ("auroc", "macro_f1", "f1_ood", "f1_ind", "accuracy")},
    }
    frozen["test"]["fpr_at_95_tpr"] = 20.0
    frozen["reject_all"] = dict(frozen["test"])
    section = bench.render([frozen]).split("## CLINC150-oos")[1]
    assert "0.0 min" not in section
    assert section.count("No fine-tuned run of this setting yet.") == 2  # timing, losses
    assert "| method | seeds | epoch 1 |" not in section
    assert "hold out known classes" in section
    assert "the split is the same on every seed" in section  # all classes known
    assert "the split is the same" not in bench.render([frozen | {"known_ratio": 0.5}])
    # a setting with published rows keeps its table
    assert bench._published("stackoverflow", 0.25, [])[0].startswith("| model |")


def test_bounds_confidence_settles_only_what_the_seeds_can_show(bench: Any) -> None:
    """A sample std over a bound is "over it at 90%" only when the chi-square interval's
    lower end is above the bound (the counter-example: F1-OOD std 5.95 with 3 seeds is
    not), and "under it" only when the upper end is at or below it."""
    runs = [
        # macro-F1 std 0.5 (upper end 2.2 <= 3: under); F1-OOD std 5.95 (lower 3.44: open)
        *_runs("stackoverflow", 0.25, "supcon", [70.0, 70.5, 71.0], [60.0, 65.95, 71.9]),
        # macro-F1 std 10 (lower 5.78 > 3: over); F1-OOD std 1.0 (upper 4.4 <= 5: under)
        *_runs("stackoverflow", 0.25, "spacl", [60.0, 70.0, 80.0], [60.0, 61.0, 62.0]),
    ]
    lines = bench._bounds_confidence(runs, ["supcon", "spacl"])
    summary = next(line for line in lines if line.startswith("Over its bound"))
    assert "wholly above): StackOverflow 25% spacl macro-F1." in summary
    under = "StackOverflow 25% supcon macro-F1, StackOverflow 25% spacl F1-OOD."
    assert f"wholly at or below): {under}" in summary
    assert summary.endswith("Not settled by these seeds: 1 of 4 (cell, metric) entries.")
    rows = [line for line in lines if line.startswith("| StackOverflow 25% |")]
    assert "[0.29, 2.2] / [3.44, 26.3]" in rows[0]
    # the planning table: settled entries say so, the open one the seeds it would need
    from spacl.evaluate.spread import seeds_to_settle, std_interval

    need = seeds_to_settle(5.95, 5.0)
    assert need is not None and std_interval(5.95, need)[0] > 5.0
    assert std_interval(5.95, need - 1)[0] <= 5.0  # the first n that settles it
    assert rows[1] == f"| StackOverflow 25% | under / {need} | over / under |"
    # no complete cell: nothing to say
    assert bench._bounds_confidence(runs[:2], ["supcon"]) == []


def test_spread_table_gives_the_true_std_interval_of_both_bounded_metrics(bench: Any) -> None:
    """ood_report.spread_table (both reports' std table): the last column is the 90% interval
    of the true std for macro-F1 / F1-OOD, from the n seeds of the row."""
    import ood_report

    def run(seed: int, macro: float, ood: float) -> dict:
        test = {"macro_f1": macro, "f1_ood": ood, "f1_ind": 1.0, "accuracy": 1.0}
        test |= {"auroc": 90.0 + seed, "fpr_at_95_tpr": 10.0 + seed}
        return {"method": "supcon", "split_seed": seed, "test": test}

    runs = [run(0, 70.0, 60.0), run(1, 70.5, 61.0), run(2, 71.0, 62.0)]
    lines = ood_report.spread_table(runs, ["supcon"])
    assert lines[0].endswith("| 90% interval of the true std, macro-F1 / F1-OOD |")
    row = next(line for line in lines if line.startswith("| supcon |"))
    low, high = (0.5 / math.sqrt(math.log(20.0)), 0.5 / math.sqrt(-math.log(0.95)))
    assert row.endswith(f"| [{low:.2f}, {high:.1f}] / [{2 * low:.2f}, {2 * high:.1f}] |")
