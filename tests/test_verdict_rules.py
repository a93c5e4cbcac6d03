"""Every verdict rule can fail (issue 20): one counter-example per rule, and the registry.

:data:`spacl.studies.verdicts.RULE_TESTS` names, for each rule, the test below in which
a counter-example gets "not reproduced at this scale" or "opposite"; the report writer
refuses a verdict from any other rule, and the last tests check that the three studies'
claim tables only use registered rules.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from spacl.studies import verdicts as V
from spacl.studies.report import StudyReport
from spacl.studies.verdicts import (
    MIXED,
    NO_SIGNAL,
    NOT_AT_SCALE,
    NOT_RUN,
    OPPOSITE,
    REFUTED,
    REPRODUCED,
    RULE_TESTS,
    Verdict,
)

HIGH = [3.0, 3.1, 3.05, 2.95, 3.02]
LOW = [1.0, 1.1, 1.05, 0.95, 1.02]
NOISE = [2.0, 2.6, 1.4, 2.3, 1.7]


def test_compare_counter_examples() -> None:
    assert V.compare(HIGH, LOW).verdict == REPRODUCED
    assert V.compare(LOW, HIGH).verdict == OPPOSITE
    assert V.compare(NOISE, [x + 0.1 for x in NOISE]).verdict == NOT_AT_SCALE
    assert V.compare(HIGH, LOW, min_gap=5.0).verdict == NOT_AT_SCALE
    assert V.compare(HIGH, LOW).by == "compare"


def test_best_of_counter_examples() -> None:
    assert V.best_of({"a": HIGH, "b": LOW, "c": LOW}, "a").verdict == REPRODUCED
    assert V.best_of({"a": LOW, "b": HIGH, "c": HIGH}, "a").verdict == OPPOSITE
    assert V.best_of({"a": HIGH, "b": LOW, "c": HIGH}, "a").verdict == NOT_AT_SCALE
    # the claimed option beats one and is beaten by another: refuted as stated (no matter
    # of scale), the row naming the comparisons that disagree
    split = V.best_of({"a": [2.0, 2.1, 1.9, 2.05, 1.95], "b": LOW, "c": HIGH}, "a")
    assert split.verdict == REFUTED
    assert split.row == "comparisons disagree: vs b reproduced, vs c opposite"
    # ... and beaten by one beside a tie: refuted too (it is not the best); a clear win
    # beside a tie is not refuted (the counter-example: nothing points against it)
    beaten = V.best_of({"a": [2.0, 2.1, 1.9, 2.05, 1.95], "b": [2.0, 2.1, 1.9], "c": HIGH}, "a")
    assert beaten.verdict == REFUTED and beaten.row.startswith("comparisons differ: vs c opp")
    noisy = V.best_of({"a": HIGH, "b": LOW, "c": HIGH}, "a")
    assert noisy.verdict == NOT_AT_SCALE
    assert noisy.row == f"comparisons differ: vs b reproduced; 1 other(s) {NOT_AT_SCALE}"
    assert V.best_of({"a": NOISE, "b": NOISE}, "a").row == ""
    # lowest=True (a deviation, an error): the smallest value is the best, and every
    # printed difference is of the values as given, with their sign under their names
    assert V.best_of({"a": LOW, "b": HIGH, "c": HIGH}, "a", lowest=True).verdict == REPRODUCED
    assert V.best_of({"a": HIGH, "b": LOW, "c": LOW}, "a", lowest=True).verdict == OPPOSITE
    low_best = V.best_of({"a": LOW, "b": HIGH}, "a", lowest=True)
    gap = sum(HIGH) / len(HIGH) - sum(LOW) / len(LOW)
    assert f"mean(b) - mean(a) = {gap:+.4g}" in low_best.rule and gap > 0
    assert "(the lowest value is the best)" in low_best.rule
    beaten = V.best_of({"a": HIGH, "b": LOW}, "a", lowest=True)
    assert beaten.verdict == OPPOSITE and f"mean(b) - mean(a) = {-gap:+.4g}" in beaten.rule


def test_trend_counter_examples() -> None:
    mid = [2.0, 2.1, 2.05, 1.95, 2.02]
    assert V.trend([LOW, mid, HIGH]).verdict == REPRODUCED
    assert V.trend([HIGH, mid, LOW]).verdict == OPPOSITE
    bent = V.trend([LOW, HIGH, mid])  # not monotone: one step up, one down
    assert bent.verdict == REFUTED  # refuted as stated, no matter of scale
    assert bent.row == "steps disagree: #0 -> #1 reproduced, #1 -> #2 opposite"
    # one step down beside a flat one: refuted too; one step up beside a flat one is not
    down = V.trend([mid, [2.0, 2.1, 1.95, 2.05, 1.9], LOW])
    assert down.verdict == REFUTED
    up = V.trend([LOW, mid, [2.0, 2.1, 1.95, 2.05, 1.9]])
    assert up.verdict == NOT_AT_SCALE
    assert V.trend([HIGH, mid, LOW], test="spearman").verdict == OPPOSITE
    # the Spearman branch says each of its three outcomes (a rule that always said
    # "opposite" fails here): increasing, flat noise, and every value equal
    assert V.trend([LOW, mid, HIGH], test="spearman").verdict == REPRODUCED
    assert V.trend([HIGH, mid, LOW], increasing=False, test="spearman").verdict == REPRODUCED
    # ... and the falling claim's counter-examples (a rule that always said "reproduced"
    # for increasing=False fails here): a rising sweep, flat noise, every value equal
    assert V.trend([LOW, mid, HIGH], increasing=False, test="spearman").verdict == OPPOSITE
    assert V.trend([NOISE, NOISE, NOISE], increasing=False, test="spearman").verdict == (
        NOT_AT_SCALE
    )
    assert V.trend([[1.0, 1.0], [1.0, 1.0]], increasing=False, test="spearman").verdict == (
        NOT_AT_SCALE
    )
    assert V.trend([LOW, mid, HIGH], increasing=False).verdict == OPPOSITE  # the step test
    assert V.trend([NOISE, NOISE, NOISE], test="spearman").verdict == NOT_AT_SCALE
    assert V.trend([[1.0, 1.0], [1.0, 1.0]], test="spearman").verdict == NOT_AT_SCALE
    assert V.trend([LOW, mid, HIGH], test="spearman").by == "trend"


def test_combine_counter_examples() -> None:
    r, o = V.compare(HIGH, LOW), V.compare(LOW, HIGH)
    assert V.combine({"x": r, "y": r}).verdict == REPRODUCED
    assert V.combine({"x": o, "y": o}).verdict == OPPOSITE
    split = V.combine({"equal steps": r, "equal epochs": o}, what="regimes")
    assert split.verdict == MIXED and split.by == "combine"
    assert split.rule.startswith("regimes disagree: equal steps reproduced (test, p = ")
    assert ", equal epochs opposite (test, p = " in split.row
    # parts that agree, or differ only by a part inside the noise, do not "disagree"
    flat = V.compare(NOISE, [x + 0.1 for x in NOISE])
    assert flat.verdict == NOT_AT_SCALE
    for parts in ({"x": r, "y": r}, {"x": o, "y": o}, {"x": r, "y": flat}, {"x": o, "y": flat}):
        assert "disagree" not in V.combine(parts).rule
    assert V.combine({"x": r, "y": flat}).verdict == NOT_AT_SCALE
    # ... but parts that differ say so, in the rule and in the row; parts that agree do not
    differ = V.combine({"equal epochs": r, "equal steps": flat}, what="regimes")
    note = "regimes differ: equal epochs reproduced, equal steps not reproduced at this scale"
    assert differ.verdict == NOT_AT_SCALE and differ.rule.startswith(note)
    assert differ.row == note
    both_flat = V.combine({"x": flat, "y": flat}, what="regimes")
    assert "differ" not in both_flat.rule and not both_flat.row
    # a not-reproduced whole carries its parts' notes: the table row shows them
    outer_flat = V.combine({"rule a": differ, "rule b": both_flat}, what="rules")
    assert outer_flat.verdict == NOT_AT_SCALE and outer_flat.row == f"[rule a] {note}"
    # a part that is itself mixed makes the whole mixed, named as such
    outer = V.combine({"lr rule a": split, "lr rule b": r}, what="rules")
    assert outer.verdict == MIXED and outer.rule.startswith("rules disagree: lr rule a mixed")


def test_combine_names_a_test_against_a_level_rule() -> None:
    """ "Mixed" only where corrected tests disagree (issue 39): a corrected test against a
    level rule (no test) is "test and level rule disagree", and the claim as stated is
    refuted by its opposite part: not reproduced, never mixed; two corrected tests that
    disagree stay mixed, "<what> disagree"."""
    r, o = V.compare(HIGH, LOW), V.compare(LOW, HIGH)
    low = V.at_least([0.6, 0.62, 0.65], 0.8)
    high = V.at_least([0.9, 0.91, 0.92], 0.8)
    assert low.verdict == OPPOSITE and high.verdict == REPRODUCED
    split = V.combine({"weights grow": r, "CKA high": low})
    assert split.verdict == REFUTED and split.verdict != MIXED and split.from_rule
    assert split.row.startswith("test and level rule disagree: weights grow reproduced (test, p = ")
    assert "CKA high opposite (level rule: 3 of 3 runs fall below the threshold)" in split.row
    assert split.row.endswith(
        "the claim as stated is refuted by CKA high (opposite, level rule: 3 of 3 runs fall "
        "below the threshold)"
    )
    # ... and the other way round: the test opposite, the level rule reproduced
    other = V.combine({"weights grow": o, "CKA high": high})
    assert other.verdict == REFUTED
    assert "is refuted by weights grow (opposite, test, p = " in other.row
    # counter-example: two corrected tests that disagree are mixed, not a test/rule split
    tests = V.combine({"a": r, "b": o})
    assert tests.verdict == MIXED and tests.row.startswith("parts disagree: ")
    assert "level rule" not in tests.row and "bound rule" not in tests.row
    assert "refuted" not in tests.row
    # a part that is itself mixed (corrected tests) beside a test: still mixed
    assert V.combine({"x": tests, "y": r}).verdict == MIXED
    # a test against a bound rule is named as such, and is not mixed either
    broken = V.at_most([1.5, 2.0], 1.0)
    against_bound = V.combine({"a": r, "b": broken})
    assert against_bound.row.startswith("test and bound rule disagree: ")
    assert against_bound.verdict == REFUTED
    # two bound rules that disagree run no test at all: not mixed
    fine = V.at_most([0.5, 0.9], 1.0)
    assert V.combine({"a": fine, "b": broken}).verdict == REFUTED


def test_combine_every_regime_refutes_instead_of_mixing() -> None:
    """A claim stated for every regime (``every=True``): regimes that disagree refute it
    as stated, not reproduced (never "mixed"), the row saying "regimes disagree" and where
    it is refuted; a regime opposite beside one inside the noise is named too."""
    bad = V.at_most([1.5, 2.0, 3.0], 1.0, runs="networks")
    good = V.at_most([0.2, 0.5], 1.0, runs="networks")
    # a bound stated for every regime, broken by a majority of the runs in one: opposite
    v = V.combine({"tau = 0.1": bad, "tau = 0.5": good}, what="regimes", every=True)
    assert v.verdict == OPPOSITE and v.by == "combine"
    assert v.row.startswith("regimes disagree: tau = 0.1 opposite (bound rule: 3 of 3 networks")
    assert "is refuted in tau = 0.1 (opposite, bound rule: 3 of 3 networks break" in v.row
    # ... also beside a regime inside the bound's middle ground (some runs break it)
    half = V.at_most([0.5, 1.5], 1.0, runs="networks")
    assert half.verdict == NOT_AT_SCALE
    assert V.combine({"a": bad, "b": half}, what="regimes", every=True).verdict == OPPOSITE
    # counter-examples: no regime broken by a majority (exactly half) is not opposite ...
    mid = V.combine({"a": half, "b": good}, what="regimes", every=True)
    assert mid.verdict == NOT_AT_SCALE and "refuted" not in mid.row
    assert mid.row == (
        "regimes differ: a not reproduced at this scale, b reproduced; "
        "[a] 1 of 2 networks break the bound; [b] 0 of 2 networks break the bound"
    )
    # ... and without every=True the same parts are refuted by the broken part, not mixed
    plain = V.combine({"tau = 0.1": bad, "tau = 0.5": good}, what="regimes")
    assert plain.verdict == REFUTED
    assert "the claim as stated is refuted by tau = 0.1 (opposite, bound rule: " in plain.row
    # regimes that agree are not refuted
    agree = V.combine({"a": good, "b": good}, what="regimes", every=True)
    assert agree.verdict == REPRODUCED and "refuted" not in agree.rule
    o = V.compare(LOW, HIGH)
    r = V.compare(HIGH, LOW)
    # corrected tests stated for every regime that disagree: refuted as stated, not
    # reproduced (an ordering opposite in one regime is not opposite in all)
    tests = V.combine({"d = 64": r, "d = 4": o}, what="regimes", every=True)
    assert tests.verdict == REFUTED and tests.row.startswith("regimes disagree: ")
    assert "is refuted in d = 4 (opposite, test, p = " in tests.row
    flat = V.compare(NOISE, [x + 0.1 for x in NOISE])
    one = V.combine({"d = 64": o, "d = 4": flat}, what="regimes", every=True)
    assert one.verdict == REFUTED
    assert "the claim as stated, in every one of the regimes, is refuted in d = 64 (opposite, " in (
        one.row
    )
    # counter-example: read as parts (not every regime), an opposite beside the noise
    # refutes nothing: not reproduced at this scale, no "refuted" in its row
    parts = V.combine({"d = 64": o, "d = 4": flat}, what="regimes")
    assert parts.verdict == NOT_AT_SCALE and "refuted" not in parts.row


def test_a_claim_refuted_as_stated_is_not_a_matter_of_scale() -> None:
    """Issue 39's fourth review: a claim stated for every part that one part refutes
    (significantly opposite) reads "not reproduced (refuted as stated)", never "not
    reproduced at this scale" beside a row that says "refuted"; a part itself refuted as
    stated (a non-monotone trend) refutes the whole.  Counter-examples: a part inside the
    noise beside a reproduced one refutes nothing (not reproduced at this scale), and a
    bound broken by a majority in one regime stays opposite (the bound is refuted)."""
    r, o = V.compare(HIGH, LOW), V.compare(LOW, HIGH)
    flat = V.compare(NOISE, [x + 0.1 for x in NOISE])
    low = V.at_least([0.6, 0.62, 0.65], 0.8)
    bent = V.trend([LOW, HIGH, [2.0, 2.1, 2.05, 1.95, 2.02]])
    cases = {
        "opposite beside reproduced": V.combine({"a": r, "b": o}, what="regimes", every=True),
        "opposite beside noise": V.combine({"a": o, "b": flat}, what="regimes", every=True),
        "level rule opposite": V.combine({"a": r, "b": low}, every=True),
        "refuted part": V.combine({"a": r, "b": bent}, what="regimes", every=True),
    }
    for name, v in cases.items():
        assert v.verdict == REFUTED, name
        assert "refuted" in v.row, name
    assert "is refuted in b (refuted as stated)" in cases["refuted part"].row
    assert REFUTED.startswith("not reproduced") and "at this scale" not in REFUTED
    # counter-examples
    fine = V.combine({"a": r, "b": flat}, what="regimes", every=True)
    assert fine.verdict == NOT_AT_SCALE and "refuted" not in fine.row
    broken = V.at_most([1.5, 2.0, 3.0], 1.0)
    held = V.at_most([0.5, 0.9], 1.0)
    bound = V.combine({"a": broken, "b": held}, what="regimes", every=True)
    assert bound.verdict == OPPOSITE and "refuted" in bound.row
    # every rule's row that says "refuted" carries a verdict that says so
    for v in [*cases.values(), fine, bound]:
        if "refuted" in v.row:
            assert v.verdict in (REFUTED, OPPOSITE)
    legend = " ".join(V.VERDICT_RULES.split())
    assert "**Not reproduced (refuted as stated)** is no matter of scale" in legend


def test_a_family_of_one_says_uncorrected_beside_its_p() -> None:
    """A claim whose only comparison test is a family of one: its rule line says so
    beside the raw p; counter-examples: a claim of two tests is Holm-adjusted (no such
    note), and a claim with no test has none."""
    alone, size = V.holm_within("claim 1", lambda: V.compare(HIGH, LOW))
    assert size == 1 and f"p = {V.welch(HIGH, LOW)[1]:.3g}{V.FAMILY_OF_ONE}" in alone.rule
    assert alone.clear[0][2].endswith(", family of one, uncorrected")
    two, size = V.holm_within(
        "claim 2", lambda: V.combine({"a": V.compare(HIGH, LOW), "b": V.compare(HIGH, LOW)})
    )
    assert size == 2 and "family of one" not in two.rule and "Holm-adjusted p = " in two.rule
    none, size = V.holm_within("claim 3", lambda: V.at_most([0.5], 1.0))
    assert size == 0 and "family of one" not in none.rule
    # outside holm_within (a plain rule call) nothing is claimed about the family
    assert "family of one" not in V.compare(HIGH, LOW).rule


def test_at_most_counter_examples() -> None:
    """Reproduced when no run breaks the bound, opposite (the bound is refuted) when more
    than half do, else not reproduced; the boundary: exactly half is not opposite."""
    assert V.at_most([0.5, 0.9], 1.0).verdict == REPRODUCED
    assert V.at_most([1.5, 1.9], 1.0).verdict == OPPOSITE
    assert V.at_most([0.5, 1.9], 1.0).verdict == NOT_AT_SCALE
    assert V.at_most([0.5, 1.0], 1.0).verdict == REPRODUCED  # on the bound is within it
    # none breaks it / exactly half / a majority (issue 39: 85 of 90 read "not reproduced")
    assert V.at_most([0.1, 0.2, 0.3, 0.4], 1.0).verdict == REPRODUCED
    exactly_half = V.at_most([0.1, 0.2, 1.3, 1.4], 1.0)
    assert exactly_half.verdict == NOT_AT_SCALE
    assert exactly_half.row == "2 of 4 runs break the bound"
    majority = V.at_most([0.1, 1.2, 1.3, 1.4], 1.0)
    assert majority.verdict == OPPOSITE and majority.row == "3 of 4 runs break the bound"
    # not "every value breaks it": 85 of 90 runs above the bound refute it
    most = V.at_most([0.5] * 5 + [2.0] * 85, 1.0, runs="informative runs")
    assert most.verdict == OPPOSITE and most.row == "85 of 90 informative runs break the bound"
    assert V.at_most([0.5] * 3 + [2.0] * 2, 1.0).verdict == NOT_AT_SCALE  # a minority


def test_at_least_counter_examples() -> None:
    assert V.at_least([0.9, 0.91, 0.92], 0.8).verdict == REPRODUCED
    assert V.at_least([0.5, 0.51, 0.52], 0.8).verdict == OPPOSITE
    assert V.at_least([0.6, 1.0, 0.8], 0.8).verdict == NOT_AT_SCALE


def test_per_setting_counter_examples() -> None:
    """Issue 20's case: +4.1 in one setting, -0.8 in another is "mixed", not a verdict."""
    up = V.compare([91.6, 91.3, 91.9, 91.5, 91.7], [87.5, 87.1, 87.9])  # +4.1
    down = V.compare([93.9, 93.8, 94.0], [94.7, 94.6, 94.8])  # -0.8
    flat = V.compare(NOISE, [x + 0.1 for x in NOISE])
    assert up.verdict == REPRODUCED and down.verdict == OPPOSITE
    mixed = V.per_setting({"clinc150 sup": up, "mnist5k weak": down})
    assert mixed.verdict == MIXED and mixed.by == "per_setting"
    assert "+4.1" in mixed.rule and "-0.8" in mixed.rule  # the signs are in the rule
    # a clear setting beside one inside the noise: not reproduced, the row says they differ
    differ = V.per_setting({"a": up, "b": flat, "c": flat})
    assert differ.verdict == NOT_AT_SCALE and differ.by == "per_setting"
    assert differ.row == "settings differ: a reproduced; 2 other(s) not reproduced at this scale"
    assert V.per_setting({"a": down, "b": flat}).verdict == NOT_AT_SCALE
    assert V.per_setting({"a": down, "b": down}).verdict == OPPOSITE
    assert V.per_setting({"a": flat, "b": flat}).verdict == NOT_AT_SCALE
    assert V.per_setting({"a": up, "b": up}).verdict == REPRODUCED
    # a setting that did not run: agreement is no verdict, disagreement stays mixed
    assert V.per_setting({"a": up, "b": V.not_run("b")}).verdict == NOT_RUN
    assert V.per_setting({"a": up, "b": down, "c": V.not_run("c")}).verdict == MIXED


def test_equivalent_counter_examples() -> None:
    """TOST at a 1-point margin: a 1-point loss with std 0.4 is not "no worse" any more."""
    supcon = [97.0, 96.6, 97.4, 97.1, 96.9]
    same = [97.1, 96.8, 97.3, 96.9, 97.0]
    loses_1 = [96.0, 95.6, 96.4, 96.1, 95.9]
    loses_3 = [94.0, 93.6, 94.4, 94.1, 93.9]
    assert V.equivalent(same, supcon, margin=1.0).verdict == REPRODUCED
    assert V.equivalent(loses_1, supcon, margin=1.0).verdict == NOT_AT_SCALE
    assert V.equivalent(loses_3, supcon, margin=1.0).verdict == OPPOSITE
    # three noisy seeds cannot certify equivalence, whatever the means
    wide = V.equivalent([97.0, 96.2, 97.8], [97.4, 96.6, 96.4], margin=1.0)
    assert wide.verdict == NOT_AT_SCALE and "smallest margin" in wide.rule
    # the old `no_worse` passed this; TOST does not
    old_pass = V.compare(supcon, [96.4, 96.0, 96.8], min_gap=0.3)
    assert old_pass.verdict != REPRODUCED
    assert V.equivalent([96.4, 96.0, 96.8], supcon, margin=1.0).verdict != REPRODUCED
    with pytest.raises(ValueError, match="margin"):
        V.equivalent(same, supcon, margin=0.0)


def test_equivalence_claims_in_a_family_are_holm_corrected() -> None:
    """A TOST whose p-value passes alone (p in (0.025, 0.05)) fails beside a second one
    like it, corrected together (Holm: both 2p > 0.05); alone it says no Holm."""
    supcon = [97.0, 96.6, 97.4, 97.1, 96.9]
    shift = next(
        d / 100
        for d in range(0, 100)
        if 0.025
        < float(
            V.equivalent([x - d / 100 for x in supcon], supcon, margin=1.0)
            .rule.split(", p = ")[1]
            .split(" ")[0]
        )
        < 0.05
    )
    close = [x - shift for x in supcon]
    alone = V.equivalent(close, supcon, margin=1.0)
    assert alone.verdict == REPRODUCED and "Holm" not in alone.rule

    def rule() -> V.Verdict:
        return V.equivalent(close, supcon, margin=1.0)

    verdicts, size = V.holm_family("two benches", [rule, rule])
    assert size == 2
    for v in verdicts:
        assert v.verdict == NOT_AT_SCALE, v.rule
        assert "Holm-adjusted p" in v.rule and "family 'two benches', 2 tests" in v.rule


def test_saturates_counter_examples() -> None:
    """Lemma 2.4's use: a curve that levels off saturates; one still rising does not."""
    sizes = [1, 4, 16, 64, 256]
    flat = [[0.2, 0.9, 1.35, 1.40, 1.41], [0.3, 1.0, 1.38, 1.41, 1.42]]
    rising = [[0.01, 0.04, 0.16, 0.6, 1.5], [0.02, 0.05, 0.2, 0.7, 1.6]]  # ~linear in n
    halfway = [[0.2, 0.5, 0.9, 1.2, 1.22], [0.2, 0.5, 0.9, 1.2, 1.33]]
    ok = V.saturates(flat, sizes)
    assert ok.verdict == REPRODUCED and "critical size" in ok.rule
    # still rising at the top of the range: no direction past it (issue 39's fourth review)
    assert V.saturates(rising, sizes).verdict == NOT_AT_SCALE
    assert V.saturates(halfway, sizes).verdict == NOT_AT_SCALE
    # opposite where the gain over the last step is large but the curve levels off inside
    # the range (its critical size below the top)
    late = [[0.1, 0.2, 0.5, 0.97, 1.0], [0.1, 0.21, 0.52, 0.98, 1.01]]
    assert V.saturates(late, [1, 2, 4, 8, 16]).verdict == OPPOSITE
    with pytest.raises(ValueError, match="increasing"):
        V.saturates(flat, [4, 1, 16, 64, 256])


def test_saturates_counts_the_seeds_above_the_tolerance() -> None:
    """Like the bound rules, the saturation rule states how many seeds are on the wrong
    side: the seeds whose gain over the last 4-fold step exceeds the tolerance (0.05).
    None in a flat curve, every seed in a rising one, and a mixed case where the mean
    rule says "not reproduced" while one of three seeds is above."""
    sizes = [1, 4, 16, 64, 256]
    flat = [[0.2, 0.9, 1.35, 1.40, 1.41], [0.3, 1.0, 1.38, 1.41, 1.42]]  # gains 0.7%
    rising = [[0.01, 0.04, 0.16, 0.6, 1.5], [0.02, 0.05, 0.2, 0.7, 1.6]]
    # gains (256 vs 64): 1.64%, 9.02% (above), 0.83%
    mixed = [
        [0.2, 0.5, 0.9, 1.2, 1.22],
        [0.2, 0.5, 0.9, 1.21, 1.33],
        [0.2, 0.5, 0.9, 1.19, 1.2],
    ]
    ok = V.saturates(flat, sizes)
    assert ok.verdict == REPRODUCED and ok.row == "0 of 2 seeds above the tolerance"
    assert "tolerance = 0.05 (0 of 2 seeds above the tolerance)" in ok.rule
    up = V.saturates(rising, sizes)
    # the rising curve's critical size is the top of the range: the row flags it
    # (test_saturates_flags_a_critical_size_at_the_range_edge)
    assert up.verdict == NOT_AT_SCALE and up.row == (
        "2 of 2 seeds above the tolerance; critical size at the range's top (n = 256): no "
        "direction is seen past it; the gain over the last step alone reads opposite"
    )
    part = V.saturates(mixed, sizes)
    assert part.verdict == NOT_AT_SCALE
    assert part.row == "1 of 3 seeds above the tolerance" and part.notes == part.row
    # the count moves with the tolerance: at 0.01 two of the three gains exceed it
    # (at 0.01 the critical size is 256, the top of the range: the row also flags that edge)
    assert V.saturates(mixed, sizes, tolerance=0.01).row.startswith(
        "2 of 3 seeds above the tolerance; critical size at the range's top (n = 256)"
    )
    assert V.above_tolerance([0.05, 0.0500001], 0.05) == "1 of 2 seeds above the tolerance"


def test_the_lemma_claims_row_states_each_encoders_count() -> None:
    """Claim 19 (SPACL study): its measured cell states, per encoder, how many seeds'
    gains are above the tolerance, whatever the combined verdict, and why its range of n
    was not extended past the critical size at its top."""
    from spacl.studies.spacl_bench.claims import claim_specs

    spec = next(c for c in claim_specs() if c.key == "lemma_2_4_negatives_saturate")
    sizes = [1, 4, 16, 64, 256]
    rising = [
        [0.01, 0.04, 0.16, 0.6, 1.5],
        [0.02, 0.05, 0.2, 0.7, 1.6],
        [0.02, 0.06, 0.2, 0.7, 1.7],
    ]
    mixed = [[0.2, 0.5, 0.9, 1.2, 1.22], [0.2, 0.5, 0.9, 1.21, 1.33], [0.2, 0.5, 0.9, 1.19, 1.2]]
    m = {
        "diagnostics": {
            "sizes": sizes,
            "encoders": {
                "SPACL": {"grad_curve_own_tau": rising},
                "SimCLR": {"grad_curve_own_tau": mixed},
            },
        }
    }
    cell = spec.measured(m)
    # SPACL's curve still rises at n = 256, the top of its range: flagged (issue 39)
    assert (
        "n=256: 1.6 (3 of 3 seeds above the tolerance; critical size at the range's top "
        "(n = 256): no direction is seen past it; the gain over the last step alone reads "
        "opposite) / SimCLR:" in cell
    )
    assert "n=256: 1.25 (1 of 3 seeds above the tolerance). Range not extended to n = 4096" in cell
    assert "about 16 CPU-minutes" in cell
    assert spec.rule(m).verdict == NOT_AT_SCALE


def test_saturates_flags_a_critical_size_at_the_range_edge() -> None:
    """Where the critical size is the largest size tested (the curve still rises at the
    top), the rule sees no direction past the range: not reproduced at this scale, never
    opposite, its row saying so and what the last step alone reads (claim 19, issue 39's
    fourth review; "opposite on n <= n_max" before).  Counter-example: a curve that jumps
    late but levels off inside the range is opposite by the gain rule, and its critical
    size (8 < 16) is not flagged."""
    sizes = [1, 2, 4, 8, 16]
    late_jump = [[0.1, 0.2, 0.5, 0.97, 1.0], [0.1, 0.21, 0.52, 0.98, 1.01]]
    inside = V.saturates(late_jump, sizes)
    assert inside.verdict == OPPOSITE and "range's top" not in inside.row
    assert "critical size (mean reaches 0.95 of its value at 16) = 8" in inside.rule
    rising = [[0.1, 0.2, 0.4, 0.7, 1.0], [0.1, 0.2, 0.41, 0.72, 1.02]]
    edge = V.saturates(rising, sizes)
    assert edge.verdict == NOT_AT_SCALE
    assert edge.row.endswith(
        "critical size at the range's top (n = 16): no direction is seen past it; the gain "
        "over the last step alone reads opposite"
    )
    assert "the sizes past n = 16 not tested: not reproduced at this scale)" in edge.rule
    # a verdict inside the noise at the edge says the edge, with nothing for the last step
    # (gains 0, 0.2, 0: mean 0.067 +- 0.115 straddles 0.05; the mean at 8 is 0.8 < 0.95)
    noisy = [[0.1, 0.2, 1.0, 0.8, 1.0], [0.1, 0.2, 0.8, 0.8, 1.0], [0.1, 0.2, 1.0, 0.8, 1.0]]
    weak = V.saturates(noisy, sizes)
    assert weak.verdict == NOT_AT_SCALE
    assert weak.row.endswith(
        "critical size at the range's top (n = 16): no direction is seen past it"
    )


def test_the_verdict_legend_says_a_saturation_row_states_the_count() -> None:
    legend = " ".join(V.VERDICT_RULES.split())
    assert "*saturation claims* need the relative gain" in legend
    assert "the row stating how many seeds' gains are above the tolerance" in legend


def test_the_verdict_legend_states_the_mixed_and_bound_rules() -> None:
    """The legend printed in every report says what the rules do (issue 39): mixed only
    where corrected tests disagree, a level or bound rule among the sides refutes, a bound
    is opposite when more than half of the runs break it, and when these rules were set."""
    legend = " ".join(V.VERDICT_RULES.split())
    assert "**Mixed** is used only where corrected tests disagree" in legend
    assert (
        "the claim as stated is refuted by its opposite part: not reproduced (refuted as stated)"
        in legend
    )
    assert "opposite (the bound is refuted) when more than half of the runs break it" in legend
    assert "'k of n runs break the bound'" in legend
    assert "set after the verdicts they decide had been read (issue 39)" in legend
    assert "opposite when none is" not in legend  # the old bound rule


def test_the_verdict_legend_states_the_nested_bound_rule_and_which_wins() -> None:
    """Issue 39's third review: the legend states the every-regime bound rule (opposite
    when more than half of one regime's runs break it, however few break it pooled), that
    it wins over the pooled majority count, the conjunction reading of combined claims and
    the per-row note of a verdict a post-hoc rule moved."""
    legend = " ".join(V.VERDICT_RULES.split())
    assert "*bound claims in every regime*" in legend
    assert "more than half of the runs of one regime break the bound, however few" in legend
    assert "the every-regime rule wins over the pooled count" in legend
    assert "*combined claims* are conjunctions" in legend
    assert "no combined claim is called mixed" in legend
    assert "'rule set after this verdict was read; earlier: <the verdict it read>'" in legend


def test_discriminating_counter_examples() -> None:
    """Corollary 2.2's share at 100% for both encoders decides nothing."""
    assert V.discriminating([100.0] * 3, [100.0] * 3).verdict == NO_SIGNAL
    assert V.discriminating([80.0, 82.0, 81.0], [60.0, 61.0, 59.0]).verdict == REPRODUCED
    assert V.discriminating([60.0, 61.0, 59.0], [80.0, 82.0, 81.0]).verdict == OPPOSITE
    assert V.discriminating([80.0, 82.0, 70.0], [80.0, 79.0, 81.0]).verdict == NOT_AT_SCALE


# ---------------------------------------------------------------------------- registry
def test_every_registered_rule_names_a_test_here() -> None:
    here = sys.modules[__name__]
    for rule, test in RULE_TESTS.items():
        assert callable(getattr(here, test, None)), f"rule {rule!r}: no test {test!r} here"
        assert callable(getattr(V, rule, None)), f"rule {rule!r} is not a function of verdicts"


def test_the_report_refuses_a_rule_without_a_counter_example(tmp_path: Path) -> None:
    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    with pytest.raises(ValueError, match="counter-example"):
        rep.claim("k", "§1", "c", "p", "m", Verdict(REPRODUCED, "by hand"))
    with pytest.raises(ValueError, match="counter-example"):
        rep.claim("k2", "§1", "c", "p", "m", Verdict(REPRODUCED, "x", by="always_true"))
    # a registered rule's name written by hand is not its verdict: refused too
    with pytest.raises(ValueError, match="not computed by a rule function"):
        rep.claim("k5", "§1", "c", "p", "m", Verdict(REPRODUCED, "x", by="compare"))
    reworded = V.reworded(V.compare(HIGH, LOW), "the same test, other words")
    assert reworded.from_rule and reworded.rule == "the same test, other words"
    assert rep.claim("k6", "§1", "c", "p", "m", reworded).verdict == REPRODUCED
    assert rep.claim("k3", "§1", "c", "p", "m", V.not_run("no runs")).verdict == NOT_RUN
    assert rep.claim("k4", "§1", "c", "p", "m", V.compare(HIGH, LOW)).verdict == REPRODUCED


def test_combine_says_when_corrected_comparisons_inside_its_parts_disagree() -> None:
    """Two regimes, each a trend with one step inside the noise, whose clear steps go
    opposite ways (the falling one refuted as stated, the rising one not reproduced at
    this scale): read as parts (``every=False``) the whole stays not reproduced at this
    scale (no part is reproduced or opposite), but its row names each corrected step that
    is clear, with its direction and the p-value it decided on, then the regimes' own
    verdicts; a review
    found alignment claims 7 and 8 saying "regimes disagree: equal epochs opposite" where
    the regime itself was not reproduced.  Counter-examples: clear steps that go one way,
    or none clear, say nothing of it."""
    mid = [2.0, 2.1, 2.05, 1.95, 2.02]
    up_then_flat = V.trend([LOW, mid, [x + 0.01 for x in mid]])  # one step up, one flat
    down_then_flat = V.trend([HIGH, mid, [x + 0.01 for x in mid]])  # one down, one flat
    assert up_then_flat.verdict == NOT_AT_SCALE and down_then_flat.verdict == REFUTED
    assert up_then_flat.leans == (REPRODUCED,) and down_then_flat.leans == (OPPOSITE,)
    p = f"p = {V.welch(mid, LOW)[1]:.3g}"
    assert up_then_flat.clear == (("#0 -> #1", REPRODUCED, p, "step"),)
    both = V.combine({"equal epochs": down_then_flat, "equal steps": up_then_flat}, what="regimes")
    assert both.verdict == NOT_AT_SCALE and both.from_rule
    said = (
        f"corrected steps disagree: equal epochs #0 -> #1 opposite ({p}), "
        f"equal steps #0 -> #1 reproduced ({p}); regimes differ: equal epochs {REFUTED}, "
        f"equal steps {NOT_AT_SCALE}"
    )
    assert both.row == said, both.row
    assert both.rule.startswith(said + "; [equal epochs] not reproduced")
    assert both.leans == (OPPOSITE, REPRODUCED)
    # one level up every clear step is still named, each with its whole path, and no
    # part is said to be "opposite" unless its own verdict is
    outer = V.combine({"lr a": both, "lr b": up_then_flat}, what="rules")
    assert outer.row == (
        f"corrected steps disagree: lr a equal epochs #0 -> #1 opposite ({p}), lr a equal "
        f"steps #0 -> #1 reproduced ({p}), lr b #0 -> #1 reproduced ({p}); rules each not "
        f"reproduced at this scale; [lr a] regimes differ: equal epochs {REFUTED}, equal "
        f"steps {NOT_AT_SCALE}"
    ), outer.row
    # the same directions, or nothing clear: no such sentence
    same = V.combine({"x": up_then_flat, "y": up_then_flat}, what="regimes")
    flat = V.trend([NOISE, NOISE, NOISE])
    assert flat.leans == () and flat.clear == ()
    for quiet in (
        same,
        V.combine({"x": flat, "y": up_then_flat}),
        V.combine({"x": flat, "y": flat}),
    ):
        assert "disagree" not in quiet.row and quiet.verdict == NOT_AT_SCALE
    # a clear part beside a part that leans the other way: the tests, then "differ"
    mixed_below = V.combine({"x": V.compare(HIGH, LOW), "y": down_then_flat}, what="regimes")
    assert mixed_below.verdict == NOT_AT_SCALE
    assert mixed_below.row.startswith("corrected tests disagree: x reproduced (p = ")
    assert mixed_below.row.endswith(
        f"y #0 -> #1 opposite ({p}); regimes differ: x reproduced, y {REFUTED}"
    )
    # per setting, the same
    settings = V.per_setting({"a": down_then_flat, "b": up_then_flat})
    assert settings.verdict == NOT_AT_SCALE
    assert settings.row == (
        f"corrected steps disagree: a #0 -> #1 opposite ({p}), b #0 -> #1 reproduced ({p}); "
        f"settings differ: a {REFUTED}; 1 other(s) {NOT_AT_SCALE}"
    )

    # Holm-adjusted in a family: the adjusted p-value, so named
    def regimes() -> Verdict:
        return V.combine(
            {
                "equal epochs": V.trend([HIGH, mid, [x + 0.01 for x in mid]]),
                "equal steps": V.trend([LOW, mid, [x + 0.01 for x in mid]]),
            },
            what="regimes",
        )

    (in_family,), _ = V.holm_family("F", [regimes])
    assert "(Holm p = " in in_family.row and "(p = " not in in_family.row
    # the leanings and the clear comparisons are sealed: edited, the verdict is refused
    import dataclasses

    assert not dataclasses.replace(both, leans=(REPRODUCED,)).from_rule
    assert not dataclasses.replace(both, clear=both.clear[:1]).from_rule
    assert not dataclasses.replace(both, notes="").from_rule


def test_comparison_tests_name_a_test_two_claims_share() -> None:
    """The same two samples tested by two rules (in either order) have one identity; a
    different setting (min_gap, margin) or other samples another."""
    a, b = V.comparison_tests(lambda: V.compare(HIGH, LOW, names=("HSCL", "SCL")))[0]
    again = V.comparison_tests(
        lambda: V.combine({"x": V.compare(LOW, HIGH, names=("beta=0", "beta=5"))})
    )
    assert again == [(a, "beta=0 vs beta=5")] and b == "HSCL vs SCL"
    other = V.comparison_tests(lambda: V.compare(HIGH, LOW, min_gap=0.5))
    assert other[0][0] != a
    assert V.comparison_tests(lambda: V.at_least(HIGH, 0.0)) == []


def test_the_seal_binds_the_verdicts_content(tmp_path: Path) -> None:
    """A sealed verdict whose fields are changed afterwards, or a verdict handed another
    verdict's seal, is refused: the seal vouches for the content it was made with."""
    import dataclasses

    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    lost = V.compare(LOW, HIGH)
    assert lost.verdict == OPPOSITE and lost.from_rule
    flipped = dataclasses.replace(lost, verdict=REPRODUCED)
    assert not flipped.from_rule
    with pytest.raises(ValueError, match="not computed by a rule function"):
        rep.claim("k1", "§1", "c", "p", "m", flipped)
    edited = dataclasses.replace(lost, rule=lost.rule.replace("p =", "p ~"))
    assert not edited.from_rule
    moved = dataclasses.replace(lost, by="at_most")  # another registered rule's name
    assert not moved.from_rule
    won = V.compare(HIGH, LOW)
    borrowed = Verdict(REPRODUCED, lost.rule, "compare", won._seal)  # a real seal, copied
    assert not borrowed.from_rule
    with pytest.raises(ValueError, match="not computed by a rule function"):
        rep.claim("k2", "§1", "c", "p", "m", borrowed)
    assert not Verdict(REPRODUCED, "x", "compare", "0" * 64).from_rule
    # the untouched verdicts still pass, and rewording keeps a seal only where there was one
    assert rep.claim("k3", "§1", "c", "p", "m", won).verdict == REPRODUCED
    assert not V.reworded(flipped, "other words").from_rule


def _committed_metrics(name: str) -> dict:
    path = Path(__file__).resolve().parents[1] / "docs" / "results" / name / "results.json"
    return dict(json.loads(path.read_text()))


@pytest.mark.parametrize("study", ["hard-negatives", "alignment"])
def test_study_claim_tables_use_registered_rules(study: str) -> None:
    """Every claim of these studies, evaluated on their committed metrics, comes from a rule
    with a counter-example test, or says that its runs are missing (no verdict, why)."""
    results = _committed_metrics(study)
    if study == "hard-negatives":
        from spacl.studies.hard_negatives.claims import claims as hn_claims
        from spacl.studies.hard_negatives.config import FULL as HN_FULL

        specs = hn_claims(HN_FULL, 150, "clinc150")
    else:
        from spacl.studies.alignment_study.claims import claims as al_claims
        from spacl.studies.alignment_study.config import FULL as AL_FULL

        specs = al_claims(AL_FULL)
    assert [s.key for s in specs] == [c["key"] for c in results["claims"]]
    for spec in specs:
        verdict = spec.rule(results["metrics"])
        assert verdict.from_rule or (
            verdict.verdict == NOT_RUN and verdict.rule.startswith("runs missing: ")
        ), (spec.key, verdict.by)


# ---------------------------------------------------------------------------- families
def _holm_loop(p: list[float]) -> list[float]:
    """Holm's adjusted p-values by their definition, one at a time."""
    m = len(p)
    ranked = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    for pos, i in enumerate(ranked):
        out[i] = max(min(1.0, (m - j) * p[ranked[j]]) for j in range(pos + 1))
    return out


def test_holm_matches_its_definition() -> None:
    import random

    rng = random.Random(0)
    for m in (1, 2, 5, 30):
        p = [rng.random() ** 3 for _ in range(m)]
        assert V.holm(p) == pytest.approx(_holm_loop(p), abs=1e-12)
    assert V.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def _lucky(shift: float) -> tuple[list[float], list[float]]:
    """Two samples whose Welch test gives the p-value of ``shift`` (0.7: p = 0.048)."""
    return [x + shift for x in NOISE], list(NOISE)


def test_a_lucky_p_in_a_family_is_not_a_mixed_verdict(tmp_path: Path) -> None:
    """Counter-example of the correction: one per-setting claim over five settings, one of
    them at p = 0.048 and four null.  Uncorrected (its rule alone) the lucky setting is
    reproduced; in a family (Holm over the five), or outside any family (Holm within the
    claim, a family of its own) no setting is, and nothing says they differ.  A p far
    below 0.05/5 survives, and the row names its setting."""
    from spacl.studies.claim_table import ClaimSpec, evaluate_claims

    hi, lo = _lucky(0.7)
    assert 0.04 < V.welch(hi, lo)[1] < 0.05

    def claim(key: str, first: tuple[list[float], list[float]], family: str | None) -> ClaimSpec:
        def rule(m: object) -> Verdict:
            parts = {"s0": V.compare(*first)}
            parts.update({f"s{i}": V.compare(NOISE, NOISE) for i in range(1, 5)})
            return V.per_setting(parts)

        return ClaimSpec(key, "§", "c", "q", "none", lambda m: "m", rule, family)

    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    specs = [claim("alone", (hi, lo), None), claim("in_family", (hi, lo), "F")]
    uncorrected = specs[0].rule({})  # its rule alone: the lucky setting counts as clear
    assert uncorrected.row.startswith("settings differ: s0 reproduced")
    alone, fam = evaluate_claims(rep, specs, {})
    assert alone.verdict == NOT_AT_SCALE and "differ" not in alone.measured
    assert "differ" not in fam.measured
    assert "Holm-adjusted p = 0.24 (family 'claim 1', 5 tests)" in alone.rule
    assert fam.verdict == NOT_AT_SCALE and "Holm-adjusted p = 0.24" in fam.rule
    assert rep.families == [
        "'F': claims 2: 5 comparison test(s), Holm-corrected together",
        "'claim 1' (`alone`): 5 comparison tests, Holm-corrected within the claim",
    ]
    strong = evaluate_claims(
        StudyReport("t", "T", tmp_path / "t", "cmd", {}, [0, 1, 2]),
        [claim("strong", (HIGH, LOW), "F")],
        {},
    )[0]
    # a real effect in one setting, none in four: not "mixed" (nothing contradicts it),
    # not reproduced "in every setting" either; the row says which setting differs
    assert strong.verdict == NOT_AT_SCALE and "settings differ: s0 reproduced" in strong.measured


def test_a_lucky_p_among_a_claims_own_tests_is_not_mixed(tmp_path: Path) -> None:
    """Counter-example of the within-claim correction (alignment claim 8's shape): a
    combined claim outside any family, one part a trend whose steps are all reproduced
    (p far below 0.05/m), another part "opposite" at p = 0.04, a third null.  Its rule
    alone says 'mixed'; decided with its tests Holm-corrected within the claim the lucky
    test is not significant, so the claim is 'not reproduced at this scale', and the
    report names the claim as a family with its size."""
    from spacl.studies.claim_table import ClaimSpec, evaluate_claims

    hi, lo = _lucky(0.73)
    assert 0.04 < V.welch(hi, lo)[1] < 0.045

    def rule(m: object) -> Verdict:
        return V.combine(
            {
                "rises": V.trend([LOW, HIGH, [x + 2 for x in HIGH]]),
                "higher": V.compare(lo, hi),  # "opposite" at p = 0.04
                "null": V.compare(NOISE, NOISE),
            },
            what="regimes",
        )

    spec = ClaimSpec("lucky", "§", "c", "q", "none", lambda m: "m", rule)
    assert spec.rule({}).verdict == MIXED  # uncorrected: one part opposite at p = 0.04
    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    (row,) = evaluate_claims(rep, [spec], {})
    assert row.verdict == NOT_AT_SCALE
    assert "family 'claim 1', 4 tests" in row.rule and "regimes disagree" not in row.rule
    assert rep.families == [
        "'claim 1' (`lucky`): 4 comparison tests, Holm-corrected within the claim"
    ]
    # a claim of one comparison test: its raw p decides, named as a family of one; a
    # claim of no comparison test is named as such
    single = ClaimSpec("one", "§", "c", "q", "none", lambda m: "m", lambda m: V.compare(hi, lo))
    level = ClaimSpec("lvl", "§", "c", "q", "none", lambda m: "m", lambda m: V.at_least(hi, 0))
    rep1 = StudyReport("u", "U", tmp_path / "u", "cmd", {}, [0, 1, 2])
    one, _ = evaluate_claims(rep1, [single, level], {})
    assert one.verdict == REPRODUCED and "Holm" not in one.rule
    assert rep1.families == [
        "'claim 1' (`one`): 1 comparison test, a family of one (its own family: nothing "
        "to correct)",
        "no comparison test, so no family (a level, bound or saturation rule, or no runs "
        "to test): claim(s) 2",
    ]
    assert rep1.shared_tests == []


def test_a_lucky_opposite_beside_a_strong_setting_is_not_mixed(tmp_path: Path) -> None:
    """The family counter-example that can show "mixed": five settings, one strongly
    reproduced, one "opposite" at p = 0.04, three null.  Uncorrected the settings disagree
    ("mixed"); Holm-corrected over the five (a family, or the claim alone as its own
    family) the lucky opposite is not significant: not "mixed", but a clear setting beside
    settings inside the noise, not reproduced at this scale."""
    from spacl.studies.claim_table import ClaimSpec, evaluate_claims

    hi, lo = _lucky(0.73)
    assert 0.04 < V.welch(hi, lo)[1] < 0.045

    def rule(m: object) -> Verdict:
        parts = {"strong": V.compare(HIGH, LOW), "lucky": V.compare(lo, hi)}
        parts.update({f"null{i}": V.compare(NOISE, NOISE) for i in range(3)})
        return V.per_setting(parts)

    uncorrected = rule({})
    assert uncorrected.verdict == MIXED  # the test can fail: raw p-values say "mixed"
    assert uncorrected.row == "settings disagree: strong reproduced, lucky opposite"
    specs = [
        ClaimSpec("alone", "§", "c", "q", "none", lambda m: "m", rule),
        ClaimSpec("in_family", "§", "c", "q", "none", lambda m: "m", rule, "F"),
    ]
    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    for row in evaluate_claims(rep, specs, {}):
        assert row.verdict == NOT_AT_SCALE, row.key
        assert "settings differ: strong reproduced; 4 other(s)" in row.measured
        assert "disagree" not in row.rule and "lucky opposite" not in row.measured
        assert "[lucky] not reproduced at this scale" in row.rule
    assert len(rep.families) == 2 and "5 comparison test" in rep.families[0]


def test_a_bound_row_states_how_many_runs_break_it(tmp_path: Path) -> None:
    """Every bound row (at_most / at_least) states beside its measured numbers how many
    runs break the bound, whatever its own measured text says (a counter-example: a
    measured cell of the mean alone, 0.83 +- 0.01 against a bound of 0.5, all 5 above)."""
    from spacl.studies.claim_table import ClaimSpec, evaluate_claims

    drift = [0.82, 0.83, 0.84, 0.83, 0.825]
    mixed_runs = [0.3, 0.4, 0.6, 0.2, 0.45]
    specs = [
        ClaimSpec(
            "drift",
            "§",
            "c",
            "q",
            "none",
            lambda m: "ratio 0.83 ± 0.01",
            lambda m: V.at_most(drift, 0.5),
        ),
        ClaimSpec(
            "some", "§", "c", "q", "none", lambda m: "ratios", lambda m: V.at_most(mixed_runs, 0.5)
        ),
        ClaimSpec(
            "level",
            "§",
            "c",
            "q",
            "none",
            lambda m: "level",
            lambda m: V.at_least(mixed_runs, 0.35),
        ),
        # a measured cell that already states the count keeps it once
        ClaimSpec(
            "said",
            "§",
            "c",
            "q",
            "none",
            lambda m: "5 of 5 runs break the bound; ratio 0.83",
            lambda m: V.at_most(drift, 0.5),
        ),
    ]
    rows = evaluate_claims(StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2]), specs, {})
    assert rows[0].verdict == OPPOSITE
    assert rows[0].measured == "ratio 0.83 ± 0.01; 5 of 5 runs break the bound"
    assert rows[1].measured == "ratios; 1 of 5 runs break the bound"
    assert rows[2].measured == "level; 2 of 5 runs fall below the threshold"
    assert rows[3].measured == "5 of 5 runs break the bound; ratio 0.83"
    assert "5 of 5 runs break the bound" in rows[0].rule
    # the count is sealed with the verdict: a changed count is refused
    v = V.at_most(drift, 0.5)
    assert v.from_rule and not dataclasses.replace(v, row="0 of 5 runs break the bound").from_rule


def test_a_claim_whose_family_changes_its_verdict_says_so(tmp_path: Path) -> None:
    """Two single-test claims in one family: one at p in (0.04, 0.05), reproduced alone,
    is not reproduced once Holm-corrected with a null neighbour, and its row says both
    verdicts; the neighbour, the same either way, says nothing."""
    from spacl.studies.claim_table import ClaimSpec, evaluate_claims

    hi, lo = _lucky(0.7)
    assert 0.04 < V.welch(hi, lo)[1] < 0.05

    def spec(key: str, a: list[float], b: list[float]) -> ClaimSpec:
        return ClaimSpec(key, "§", "c", "q", "none", lambda m: "m", lambda m: V.compare(a, b), "F")

    rep = StudyReport("s", "S", tmp_path, "cmd", {}, [0, 1, 2])
    lucky, null = evaluate_claims(rep, [spec("lucky", hi, lo), spec("null", NOISE, NOISE)], {})
    assert lucky.verdict == NOT_AT_SCALE
    assert lucky.measured == (
        "m (decided alone (its own tests, Holm within the claim): reproduced; in its family "
        "'F': not reproduced at this scale)"
    )
    assert null.measured == "m"
