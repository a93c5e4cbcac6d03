"""Verdict rules, statistics and the report writer of ``spacl reproduce`` (studies.common)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.studies.claim_table import ClaimSpec, evaluate_claims
from spacl.studies.common import seed_list
from spacl.studies.report import StudyReport, git_commit, new_figure
from spacl.studies.stats import fmt, mean_std, pooled_std, seeds_needed, summarize, welch
from spacl.studies.verdicts import (
    FEW_SEEDS,
    MIXED,
    NOT_AT_SCALE,
    OPPOSITE,
    REFUTED,
    REPRODUCED,
    SMOKE,
    VERDICTS,
    Verdict,
    at_least,
    at_most,
    best_of,
    combine,
    compare,
    trend,
)

samples = st.lists(
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=6,
)


# ---------------------------------------------------------------------------- statistics
def test_mean_std_matches_numpy_sample_std() -> None:
    x = [0.3, 1.7, -2.2, 5.0]
    m, s = mean_std(x)
    assert m == pytest.approx(np.mean(x), abs=1e-15)
    assert s == pytest.approx(np.std(x, ddof=1), rel=1e-14)
    assert mean_std([4.5]) == (4.5, 0.0)
    with pytest.raises(ValueError, match="at least one value"):
        mean_std([])


def test_pooled_std_closed_form() -> None:
    a, b = [1.0, 3.0], [0.0, 0.0, 6.0]
    expected = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    assert pooled_std(a, b) == pytest.approx(expected, rel=1e-14)


def test_fmt_and_summarize() -> None:
    assert fmt([1.0, 3.0], digits=1) == "2.0 ± 1.4"
    assert fmt([0.5], scale=100, digits=1) == "50.0"
    assert fmt(0.25, digits=2) == "0.25"
    s = summarize([{"a": 1.0, "b": 2.0}, {"a": 3.0, "b": 2.0}])
    assert s["a"] == {"values": [1.0, 3.0], "mean": 2.0, "std": pytest.approx(math.sqrt(2))}
    assert s["b"]["std"] == 0.0
    with pytest.raises(ValueError, match="keys"):
        summarize([{"a": 1.0}, {"b": 1.0}])


def test_git_commit_outside_a_checkout_is_unknown(tmp_path) -> None:
    assert git_commit(tmp_path) == "unknown"
    here = git_commit()
    assert here == "unknown" or len(here.split("+")[0]) == 40


def test_seed_list_validates() -> None:
    assert seed_list(3) == [0, 1, 2]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="--seeds"):
            seed_list(bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ verdicts
def test_compare_three_outcomes_and_min_gap() -> None:
    hi, lo = [10.0, 10.2, 9.8], [5.0, 5.1, 4.9]
    assert compare(hi, lo).verdict == REPRODUCED
    assert compare(lo, hi).verdict == OPPOSITE
    # counter-example: the gap (0.1) is inside the noise (std 1): not reproduced
    assert compare([1.0, 2.0, 3.0], [0.9, 1.9, 2.9]).verdict == NOT_AT_SCALE
    # one seed: no test, no verdict either way
    assert compare([1.0], [0.9]).verdict == NOT_AT_SCALE
    assert "no test possible" in compare([1.0], [0.9]).rule
    # significant but smaller than the stated min_gap
    assert compare([1.0, 1.01, 0.99], [0.9, 0.91, 0.89]).verdict == REPRODUCED
    assert compare([1.0, 1.01, 0.99], [0.9, 0.91, 0.89], min_gap=0.2).verdict == NOT_AT_SCALE
    v = compare([2.0, 2.1, 1.9], [1.0, 1.1, 0.9], names=("HSCL", "SCL"))
    assert "mean(HSCL) - mean(SCL) = +1" in v.rule and "Welch t" in v.rule
    with pytest.raises(ValueError, match="min_gap"):
        compare([1.0], [0.0], min_gap=-1.0)
    with pytest.raises(ValueError, match="at least one value"):
        compare([], [1.0])


def test_welch_matches_scipy() -> None:
    from scipy import stats

    a, b = [0.81, 0.84, 0.80, 0.86, 0.83], [0.78, 0.80, 0.79, 0.81]
    t, p = welch(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert t == pytest.approx(float(ref.statistic), rel=1e-10)
    assert p == pytest.approx(float(ref.pvalue), rel=1e-8)
    assert welch([1.0, 1.0], [1.0, 1.0]) == (0.0, 1.0)
    assert welch([2.0, 2.0], [1.0, 1.0])[1] == 0.0
    with pytest.raises(ValueError, match="at least 2 values"):
        welch([1.0], [1.0, 2.0])


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.floats(min_value=0, max_value=10))
def test_compare_is_antisymmetric(a: list[float], b: list[float], gap: float) -> None:
    forward, backward = compare(a, b, min_gap=gap).verdict, compare(b, a, min_gap=gap).verdict
    flip = {REPRODUCED: OPPOSITE, OPPOSITE: REPRODUCED, NOT_AT_SCALE: NOT_AT_SCALE}
    assert backward == flip[forward]


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.floats(min_value=0, max_value=5))
def test_compare_is_welch_at_five_percent(a: list[float], b: list[float], gap: float) -> None:
    v = compare(a, b, min_gap=gap).verdict
    if len(a) < 2 or len(b) < 2:
        assert v == NOT_AT_SCALE
        return
    _, p = welch(a, b)
    diff = mean_std(a)[0] - mean_std(b)[0]
    want = NOT_AT_SCALE
    if p < 0.05 and diff > gap:
        want = REPRODUCED
    elif p < 0.05 and -diff > gap:
        want = OPPOSITE
    assert v == want


def test_seeds_needed() -> None:
    assert seeds_needed(12.0) == 5 and seeds_needed(59.9) == 5 and seeds_needed(60.0) == 3
    with pytest.raises(ValueError, match="run_seconds"):
        seeds_needed(-1.0)


def test_best_of() -> None:
    s = {0: [1.0, 1.1, 1.05], 5: [3.0, 3.1, 3.05], 30: [2.0, 2.1, 2.05]}
    assert best_of(s, 5).verdict == REPRODUCED
    assert best_of(s, 0).verdict == OPPOSITE  # every other option beats it
    # beats one, loses to one: a claim of the best option is refuted as stated
    assert best_of(s, 30).verdict == REFUTED
    # counter-example: the claimed best is ahead of the others by less than the noise
    tie = {"a": [1.0, 2.0, 3.0], "b": [1.1, 2.1, 2.9]}
    assert best_of(tie, "a").verdict == NOT_AT_SCALE
    with pytest.raises(ValueError, match="claimed option"):
        best_of(s, 7)


def test_trend_needs_every_step() -> None:
    noise = [-0.004, 0.0, 0.004]
    rising = [[0.60 + e for e in noise], [0.70 + e for e in noise], [0.80 + e for e in noise]]
    assert trend(rising).verdict == REPRODUCED
    assert trend(rising, increasing=False).verdict == OPPOSITE
    # counter-example from the issue: 0.740 -> 0.683 -> 0.786 rises end to end but is not
    # monotone, a step clearly the other way: refuted as stated (the endpoint rule used to
    # say "reproduced")
    dip = [[0.740 + e for e in noise], [0.683 + e for e in noise], [0.786 + e for e in noise]]
    v = trend(dip, labels=["C'=2", "C'=5", "C'=10"])
    assert v.verdict == REFUTED
    assert "[C'=2 -> C'=5] opposite" in v.rule and "[C'=5 -> C'=10] reproduced" in v.rule
    # counter-example: a monotone mean whose steps are inside the noise
    flat = [[0.70, 0.75, 0.80], [0.71, 0.76, 0.81], [0.72, 0.77, 0.82]]
    assert trend(flat).verdict == NOT_AT_SCALE
    assert trend(rising, min_gap=0.5).verdict == NOT_AT_SCALE
    with pytest.raises(ValueError, match="at least 2 points"):
        trend([[1.0]])
    with pytest.raises(ValueError, match="labels must name"):
        trend(rising, labels=["a"])


def test_trend_rank_test() -> None:
    rising = [[0.60, 0.61, 0.62], [0.70, 0.69, 0.71], [0.80, 0.79, 0.81]]
    assert trend(rising, test="spearman").verdict == REPRODUCED
    assert trend(rising, increasing=False, test="spearman").verdict == OPPOSITE
    dip = [[0.74, 0.75, 0.73], [0.68, 0.69, 0.67], [0.78, 0.79, 0.77]]
    assert trend(dip, test="spearman").verdict == NOT_AT_SCALE
    assert "Spearman" in trend(dip, test="spearman").rule
    with pytest.raises(ValueError, match="test must be"):
        trend(rising, test="kendall")


def test_bounds_levels_and_combine() -> None:
    assert at_most([1.2, 1.9], 2.0).verdict == REPRODUCED
    assert at_most([1.2, 2.1], 2.0).verdict == NOT_AT_SCALE
    assert at_most([2.2, 2.1], 2.0).verdict == OPPOSITE
    assert at_least([0.9, 0.95], 0.8).verdict == REPRODUCED
    assert at_least([0.5, 0.55], 0.8).verdict == OPPOSITE
    assert at_least([0.7, 0.9], 0.8).verdict == NOT_AT_SCALE
    r, o, n = Verdict(REPRODUCED, "x"), Verdict(OPPOSITE, "y"), Verdict(NOT_AT_SCALE, "z")
    assert combine({"a": r, "b": r}).verdict == REPRODUCED
    assert combine({"a": o, "b": o}).verdict == OPPOSITE
    assert combine({"a": r, "b": o}).verdict == MIXED  # the parts disagree outright
    assert combine({"a": r, "b": o}).rule.startswith("parts disagree: a reproduced (test")
    assert combine({"a": r, "b": n}).verdict == NOT_AT_SCALE
    assert "[a] reproduced: x" in combine({"a": r, "b": n}).rule
    with pytest.raises(ValueError, match="verdict must be"):
        Verdict("sort of", "")


# -------------------------------------------------------------------------------- report
def test_report_writer_files_and_content(tmp_path) -> None:
    rep = StudyReport(
        "demo-study",
        "A demo study",
        tmp_path / "out",
        "spacl reproduce demo",
        {"lr": 0.1},
        [0, 1, 2],
    )
    rep.data_notes.append("synthetic, 10 classes")
    rep.claim(
        "c1", "§9", "a beats b", "9.9 vs 1.1", "3.0 ± 0.1 vs 1.0", compare([3.0, 3.1], [1.0, 1.1])
    )
    with pytest.raises(ValueError, match="not computed by a rule"):
        rep.claim("hand", "§9", "hand-built", "—", "x", Verdict(NOT_AT_SCALE, "t", by="compare"))
    unclear = compare([1.0, 1.2], [1.1, 1.0])
    assert unclear.verdict == NOT_AT_SCALE
    rep.claim("c2", "§9", "a | b pipes", "—", "x", unclear)
    with pytest.raises(ValueError, match="used twice"):
        rep.claim("c1", "§9", "dup", "", "", Verdict(REPRODUCED, "", by="compare"))
    rep.section("Numbers", "Some text.")
    rep.table(["k", "v"], [["a", 1], ["b", 2.5]], note="a note")
    with pytest.raises(ValueError, match="cells"):
        rep.table(["k", "v"], [["a"]])
    fig, (ax,) = new_figure()
    ax.plot([0, 1], [0, 1])
    rep.figure("line.png", "a line", fig)
    with pytest.raises(ValueError, match="png"):
        rep.figure("../x.jpg", "bad", fig)
    rep.metrics = {"good": [1.0, 2.0], "nested": {"bad": float("nan"), "inf": float("inf")}}
    rep.runs.append({"seed": 0, "acc": np.float64(0.5)})
    results = rep.write()

    text = (tmp_path / "out" / "report.md").read_text()
    assert text.startswith("# A demo study")
    assert "- Command: `spacl reproduce demo`" in text and "- Commit: `" in text
    assert "- Wall time: " in text and "seeds [0, 1, 2]" in text
    assert "- Data: synthetic, 10 classes" in text
    assert "| 1 | §9 | a beats b | 9.9 vs 1.1 | 3.0 ± 0.1 vs 1.0 | **reproduced** |" in text
    assert "a \\| b pipes" in text  # pipes escaped inside cells
    assert "1. `c1`: mean(a) - mean(b)" in text
    assert "| a | 1 |" in text and "a note" in text and "![a line](line.png)" in text
    assert (tmp_path / "out" / "line.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    loaded = json.loads((tmp_path / "out" / "results.json").read_text())
    assert loaded == results
    assert loaded["study"] == "demo-study" and loaded["seeds"] == [0, 1, 2]
    assert loaded["config"] == {"lr": 0.1} and loaded["command"] == "spacl reproduce demo"
    assert loaded["wall_time_s"] >= 0 and loaded["figures"] == ["line.png"]
    assert [c["verdict"] for c in loaded["claims"]] == [REPRODUCED, NOT_AT_SCALE]
    assert all(c["verdict"] in VERDICTS for c in loaded["claims"])
    assert loaded["metrics"]["nested"] == {"bad": None, "inf": None}
    assert sorted(loaded["non_finite"]) == [
        "results.metrics.nested.bad",
        "results.metrics.nested.inf",
    ]
    assert loaded["runs"] == [{"seed": 0, "acc": 0.5}]


def test_budget_rule_withholds_verdicts(tmp_path) -> None:
    """Counter-examples: a quick run and a two-seed run never print a verdict."""
    strong = compare([3.0, 3.1, 3.05], [1.0, 1.1, 1.05])
    assert strong.verdict == REPRODUCED
    quick = StudyReport("q", "Q", tmp_path / "q", "cmd --quick", {}, [0, 1, 2], quick=True)
    row = quick.claim("c", "§1", "a > b", "—", "x", strong)
    assert row.verdict == SMOKE and "the rule gives reproduced" in row.rule
    few = StudyReport("f", "F", tmp_path / "f", "cmd", {}, [0, 1])
    assert few.claim("c", "§1", "a > b", "—", "x", strong).verdict == FEW_SEEDS
    full = StudyReport("g", "G", tmp_path / "g", "cmd", {}, [0, 1, 2])
    assert full.claim("c", "§1", "a > b", "—", "x", strong).verdict == REPRODUCED


def test_claim_table_runner(tmp_path) -> None:
    metrics = {"a": [3.0, 3.1, 3.05], "b": [1.0, 1.1, 1.05]}
    specs = [
        ClaimSpec(
            "a_beats_b",
            "§1",
            "a beats b",
            "2.0 vs 1.0 (Table 1)",
            "paper",
            measured=lambda m: f"{fmt(m['a'])} vs {fmt(m['b'])}",
            rule=lambda m: compare(m["a"], m["b"], names=("a", "b")),
        ),
        ClaimSpec(
            "b_small",
            "§2",
            "b is at most 2",
            "2",
            "SPEC",
            measured=lambda m: fmt(m["b"]),
            rule=lambda m: at_most(m["b"], 2.0),
        ),
    ]
    rep = StudyReport("t", "T", tmp_path / "t", "cmd", {}, [0, 1, 2])
    rows = evaluate_claims(rep, specs, metrics)
    assert [r.verdict for r in rows] == [REPRODUCED, REPRODUCED]
    assert rows[0].paper == "2.0 vs 1.0 (Table 1)" and rows[1].paper == "2 (SPEC)"
    assert rows[0].measured == "3.05 ± 0.05 vs 1.05 ± 0.05"
    missing = [
        ClaimSpec("c", "§3", "c", "—", "none", lambda m: m["c"], lambda m: at_most(m["c"], 1))
    ]
    with pytest.raises(ValueError, match="claim 'c': metric missing"):
        evaluate_claims(StudyReport("u", "U", tmp_path / "u", "cmd", {}, [0, 1, 2]), missing, {})
    with pytest.raises(ValueError, match="source must be one of"):
        ClaimSpec("d", "§", "d", "1", "blog", lambda m: "", lambda m: at_most([0.0], 1.0))


def test_train_shared_stops_at_max_steps() -> None:
    """Equal-step budgets (the batch-size claims): training stops after max_steps."""
    from types import SimpleNamespace

    from spacl.studies.common import train_shared

    class Stream:
        def epoch_batches(self, epoch: int):
            for i in range(4):
                yield SimpleNamespace(views=(epoch, i), labels=None)

    seen: list[tuple[int, int]] = []
    arm = SimpleNamespace(train_step=lambda views, labels, step: seen.append(views))
    epochs: list[int] = []
    assert train_shared({"a": arm}, Stream(), 5, epochs.append, max_steps=6) == 6
    assert seen == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    assert epochs == [0, 1, 2]
    assert train_shared({"a": arm}, Stream(), 2) == 8
    with pytest.raises(ValueError, match="max_steps"):
        train_shared({"a": arm}, Stream(), 1, max_steps=0)
