"""Verdict rules, statistics and the report writer of ``spacl reproduce`` (experiments.common)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacl.experiments.common import (
    NOT_AT_SCALE,
    OPPOSITE,
    REPRODUCED,
    VERDICTS,
    StudyReport,
    Verdict,
    at_least,
    at_most,
    best_of,
    combine,
    compare,
    fmt,
    git_commit,
    mean_std,
    new_figure,
    pooled_std,
    seed_list,
    summarize,
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
    # the gap (0.1) is inside one pooled std (~1): not at this scale
    assert compare([1.0, 2.0, 3.0], [0.9, 1.9, 2.9]).verdict == NOT_AT_SCALE
    # one seed: std 0, so min_gap decides
    assert compare([1.0], [0.9]).verdict == REPRODUCED
    assert compare([1.0], [0.9], min_gap=0.2).verdict == NOT_AT_SCALE
    v = compare([2.0], [1.0], names=("HSCL", "SCL"))
    assert "mean(HSCL) - mean(SCL) = +1" in v.rule
    with pytest.raises(ValueError, match="min_gap"):
        compare([1.0], [0.0], min_gap=-1.0)
    with pytest.raises(ValueError, match="at least one value"):
        compare([], [1.0])


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.floats(min_value=0, max_value=10))
def test_compare_is_antisymmetric(a: list[float], b: list[float], gap: float) -> None:
    forward, backward = compare(a, b, min_gap=gap).verdict, compare(b, a, min_gap=gap).verdict
    flip = {REPRODUCED: OPPOSITE, OPPOSITE: REPRODUCED, NOT_AT_SCALE: NOT_AT_SCALE}
    assert backward == flip[forward]


@settings(max_examples=60, deadline=None)
@given(samples, st.floats(min_value=-100, max_value=100))
def test_compare_gap_against_pooled_std(a: list[float], shift: float) -> None:
    # b = a - 1: the gap is 1 and the pooled std is std(a); min_gap 0.5
    b = [x - 1.0 for x in a]
    std = mean_std(a)[1]
    if abs(std - 1.0) < 1e-6:
        return  # on the boundary: rounding decides
    want = REPRODUCED if max(std, 0.5) < 1.0 else NOT_AT_SCALE
    assert compare(a, b, min_gap=0.5).verdict == want
    shifted = compare([x + shift for x in a], [x + shift for x in b], min_gap=0.5).verdict
    if abs(max(std, 0.5) - 1.0) > 1e-6:
        assert shifted == want


def test_best_of() -> None:
    s = {0: [1.0, 1.1], 5: [3.0, 3.1], 30: [2.0, 2.1]}
    assert best_of(s, 5).verdict == REPRODUCED
    assert best_of(s, 0).verdict == OPPOSITE  # every other option beats it
    assert best_of(s, 30).verdict == NOT_AT_SCALE  # beats one, loses to one
    tie = {"a": [1.0, 2.0], "b": [1.1, 2.1]}
    assert best_of(tie, "a").verdict == NOT_AT_SCALE
    with pytest.raises(ValueError, match="claimed option"):
        best_of(s, 7)


def test_trend_uses_endpoints() -> None:
    rising = [[0.1], [0.5], [0.3], [0.9]]
    assert trend(rising).verdict == REPRODUCED
    assert trend(rising, increasing=False).verdict == OPPOSITE
    assert trend([[1.0, 1.2], [1.1, 1.3]], min_gap=0.5).verdict == NOT_AT_SCALE
    assert "C'=10" in trend([[0.1], [0.9]], labels=["C'=2", "C'=10"]).rule
    with pytest.raises(ValueError, match="at least 2"):
        trend([[1.0]])


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
    assert combine({"a": r, "b": o}).verdict == NOT_AT_SCALE
    assert combine({"a": r, "b": n}).verdict == NOT_AT_SCALE
    assert "[a] reproduced: x" in combine({"a": r, "b": n}).rule
    with pytest.raises(ValueError, match="verdict must be"):
        Verdict("sort of", "")


# -------------------------------------------------------------------------------- report
def test_report_writer_files_and_content(tmp_path) -> None:
    rep = StudyReport(
        "demo-study", "A demo study", tmp_path / "out", "spacl reproduce demo", {"lr": 0.1}, [0, 1]
    )
    rep.data_notes.append("synthetic, 10 classes")
    rep.claim(
        "c1", "§9", "a beats b", "9.9 vs 1.1", "3.0 ± 0.1 vs 1.0", compare([3.0, 3.1], [1.0, 1.0])
    )
    rep.claim("c2", "§9", "a | b pipes", "—", "x", Verdict(NOT_AT_SCALE, "rule text"))
    with pytest.raises(ValueError, match="used twice"):
        rep.claim("c1", "§9", "dup", "", "", Verdict(REPRODUCED, ""))
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
    assert "- Wall time: " in text and "seeds [0, 1]" in text
    assert "- Data: synthetic, 10 classes" in text
    assert "| 1 | §9 | a beats b | 9.9 vs 1.1 | 3.0 ± 0.1 vs 1.0 | **reproduced** |" in text
    assert "a \\| b pipes" in text  # pipes escaped inside cells
    assert "1. `c1`: mean(a) - mean(b)" in text
    assert "| a | 1 |" in text and "a note" in text and "![a line](line.png)" in text
    assert (tmp_path / "out" / "line.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    loaded = json.loads((tmp_path / "out" / "results.json").read_text())
    assert loaded == results
    assert loaded["study"] == "demo-study" and loaded["seeds"] == [0, 1]
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
