"""Verdict rules of ``spacl reproduce`` and the one runner of declarative claim tables.

Every study measures numbers over several seeds, then states each paper claim next to
the paper's number and the number measured here, with a verdict computed by a rule
below - never written by hand.  A rule can fail: each has a test with a counter-example.

Statistics: ``mean`` and sample ``std`` (``ddof = 1``) over seeds.  **The comparison
test is Welch's unequal-variance t-test, two-sided, at** ``ALPHA = 0.05``.  A claim may
hold several such tests (a per-setting claim one per setting, a trend one per step), and
claims read together form a **family** (``ClaimSpec.family``, named in the report):
within a family every :func:`compare` test's p-value is **Holm-adjusted** over all of
the family's comparison tests (:func:`holm`, :func:`holm_family`) before the 5% rule,
so one lucky p among many does not decide a verdict.  A claim outside any family that
decides from more than one comparison test (best-option, trend, combined, per-setting)
is a family of its own (:func:`holm_within`, named in the report too): its tests are
Holm-adjusted within the claim; a claim of one comparison test is named as a family of
one (nothing to correct), and a test two claims run on the same samples
(:func:`comparison_tests`) is named as shared.  **Mixed** is the word of a claim made of
parts or settings (:func:`combine`, :func:`per_setting`) whose corrected tests disagree,
and only of that: parts that disagree where one side is a level, bound or saturation
rule (no test), or where the claim is stated for every part, refute the claim as stated
(:data:`REFUTED`, **not reproduced (refuted as stated)**, or opposite for a bound stated
in every regime); a best-option or trend claim one of whose corrected comparisons is
opposite (the claimed option is beaten, a step goes the other way), but not every one,
is refuted as stated: :data:`REFUTED`, its row naming the clear comparisons.  Refuted as
stated is no matter of scale: a significant part points against the claim as worded
(issue 39's fourth review; until then these verdicts read "not reproduced at this
scale").  A whole that is not reproduced while the clear corrected comparisons below
its parts point both ways names each of them with the p-value it decided on
("corrected steps disagree: ...").

* :func:`compare` - claim ``E[a] > E[b]``: **reproduced** if ``mean_a - mean_b >
  min_gap`` and Welch's ``p < 0.05``; **opposite** if ``mean_b - mean_a > min_gap`` and
  ``p < 0.05``; else **not reproduced at this scale** (a gap inside the noise, or fewer
  than 2 values on a side: no test).  ``min_gap >= 0`` is a per-claim absolute
  tolerance (a difference too small to matter even when significant).
* :func:`best_of` - "option ``k`` is the best": reproduced if ``k`` beats every other
  option by :func:`compare`; opposite if every other option beats ``k``; refuted as
  stated (:data:`REFUTED`) when some other option beats ``k`` (``"comparisons
  disagree: ..."`` when ``k`` also beats one, ``"differ"`` otherwise); otherwise not
  reproduced at this scale, the row naming the clear comparisons.  ``lowest=True`` for
  a metric where lower is better: each comparison prints ``mean(other) - mean(k)`` of
  the values themselves.
* :func:`trend` - "the metric rises (falls) along the sweep": **every step** between
  neighbouring sweep points must be reproduced by :func:`compare` in the claimed
  direction (a non-monotone sweep is not reproduced, whatever its endpoints); opposite
  if every step goes the other way; refuted as stated (:data:`REFUTED`) when some step
  goes the other way (``"steps disagree: ..."`` when another goes the claimed way); a
  row names the clear steps of a sweep that is neither.  ``test="spearman"``
  states a rank test instead: Spearman's rank correlation of (sweep position, value)
  over every seed's value, reproduced if ``rho`` has the claimed sign with ``p < 0.05``.
* :func:`at_most` - "the values never exceed ``bound``": reproduced if ``max <= bound``
  (no run breaks it); **opposite** (the bound is refuted) if more than half of the runs
  break it; otherwise (some runs, at most half) not reproduced at this scale.  The
  rule was set after the verdicts were read (issue 39: a bound broken by 85 of 90 runs
  read "not reproduced"); half is where a bound stops holding for the typical run.
* :func:`at_least` - "the value is high (``>= threshold``)": reproduced if ``mean - std
  >= threshold``, opposite if ``mean + std < threshold``.
  Both bound rules count the values on the wrong side (:attr:`Verdict.row`: "k of n runs
  break the bound" / "fall below the threshold"), and the claims row states that count
  beside the measured numbers.
* :func:`combine` - a claim made of parts: reproduced if every part is, opposite if
  every part is opposite, **mixed** if one part is reproduced and another opposite and
  both are corrected tests (the row says which parts disagree).  Where a side that
  disagrees is a level, bound or saturation rule, which runs no test, the claim as
  stated is refuted by its opposite part: :data:`REFUTED`, the row saying ``"test and
  level rule disagree: ..."`` (or ``"test and bound rule"``) and ``"the claim as stated
  is refuted by <part>"``.  ``every=True``, a claim stated for every part ("both
  regimes", "every temperature"; the claim text says so): a part that is opposite (or
  itself refuted as stated) refutes it as stated, :data:`REFUTED`, its row saying
  ``"regimes disagree"`` (or ``"differ"``) and in which part it is refuted; where every
  part is a bound rule (a bound stated for every regime), a regime in which more than
  half of the runs break the bound makes the whole **opposite**.  The studies' claims
  tables pass ``every=True`` to every :func:`combine`: each combined claim is a
  conjunction ("A and B", "A while B"), never "mixed" (issue 39).
* :func:`per_setting` - one claim checked in several settings (each part a verdict of
  its own, with its sign): reproduced / opposite / not reproduced when every setting
  that ran says so; **mixed** when the settings disagree (one reproduced, another
  opposite); a clear setting beside settings inside the noise is not reproduced, and
  its row says which settings differ; a setting that did not run makes an otherwise
  agreeing claim **no verdict (runs missing)**.
* :func:`equivalent` - "``a`` is as good as ``b``" as an equivalence test (TOST, two
  one-sided Welch tests at 5%) with a margin stated in advance: reproduced when the 90%
  interval of ``mean_a - mean_b`` lies inside ``(-margin, +margin)`` (the TOST p-value,
  the larger one-sided one, below 5%; in a family, its Holm-adjusted p-value), opposite
  when it lies wholly outside; the rule states the smallest margin the data could certify.
* :func:`saturates` - "beyond a critical number of negatives more add almost nothing":
  per seed, the relative gain of a curve over its last ``tail``-fold step; reproduced
  when ``mean + std`` of the gain is below ``tolerance``, opposite when ``mean - std``
  is above it.  Like the bound rules it counts the seeds on the wrong side
  (:attr:`Verdict.row`: "k of n seeds above the tolerance").  A critical size at the top
  of the range (the mean still 5% short of its last value one size below it) shows no
  direction past the range: such a curve is **not reproduced at this scale**, never
  opposite, its row saying ``"critical size at the range's top (n = 1024): no direction
  is seen past it; the gain over the last step alone reads opposite"`` (issue 39's fourth
  review, set after its "opposite on n <= 1024" had been read).
* :func:`discriminating` - :func:`compare` of two measures, unless every value of both
  is one and the same (a measure that does not discriminate here): then **no verdict
  (the measure does not discriminate here)**.

Every rule sets :attr:`Verdict.by`; :data:`RULE_TESTS` names, for every rule, the test
(in ``tests/test_verdict_rules.py``) with a counter-example it fails on, and the report
writer refuses a verdict whose rule is not listed there.

Budget (applied by :meth:`spacl.studies.report.StudyReport.claim`): a verdict needs
the full budget and at least :data:`MIN_SEEDS` seeds.  A ``--quick`` run states
**smoke run, no verdict**; fewer seeds state **no verdict (fewer than 3 seeds)**; the
rule's numbers are still printed.  :func:`seeds_needed`: 5 seeds where one run takes
under a minute, 3 elsewhere (the report says which).

Claim tables (:mod:`spacl.studies.claim_table`): a study lists ``ClaimSpec`` rows
(claim, the paper's number with its source, the measured quantity, the rule), each a
function of the study's metrics, and
:func:`~spacl.studies.claim_table.evaluate_claims` turns them into the report's claims.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from spacl._validation import check_choice
from spacl.studies.stats import (
    checked_values,
    mean_std,
    welch,
    welch_parts,
)

__all__ = [
    "ALPHA",
    "FAMILY_OF_ONE",
    "FEW_SEEDS",
    "MIN_SEEDS",
    "MIXED",
    "NON_VERDICTS",
    "NOT_AT_SCALE",
    "NOT_RUN",
    "NO_SIGNAL",
    "OPPOSITE",
    "REFUTED",
    "REPRODUCED",
    "RULE_TESTS",
    "SMOKE",
    "VERDICTS",
    "VERDICT_RULES",
    "Verdict",
    "above_tolerance",
    "at_least",
    "at_most",
    "best_of",
    "broken_count",
    "combine",
    "compare",
    "comparison_tests",
    "discriminating",
    "equivalent",
    "holm",
    "holm_family",
    "holm_within",
    "not_run",
    "per_setting",
    "reworded",
    "saturates",
    "trend",
]

REPRODUCED = "reproduced"
NOT_AT_SCALE = "not reproduced at this scale"
#: a claim stated for every part (every regime, every comparison of a best option, every
#: step of a trend) that a significantly opposite part refutes: not a matter of scale
REFUTED = "not reproduced (refuted as stated)"
OPPOSITE = "opposite"
SMOKE = "smoke run, no verdict"
FEW_SEEDS = "no verdict (fewer than 3 seeds)"
MIXED = "mixed"
NOT_RUN = "no verdict (runs missing)"
NO_SIGNAL = "no verdict (the measure does not discriminate here)"
VERDICTS: tuple[str, ...] = (
    REPRODUCED,
    NOT_AT_SCALE,
    REFUTED,
    OPPOSITE,
    MIXED,
    SMOKE,
    FEW_SEEDS,
    NOT_RUN,
    NO_SIGNAL,
)
#: outcomes that are no verdict at all (no rule needed): budget and missing runs
NON_VERDICTS: tuple[str, ...] = (SMOKE, FEW_SEEDS, NOT_RUN)
#: significance level of every test
ALPHA = 0.05
#: seeds a verdict needs
MIN_SEEDS = 3
#: every verdict rule -> the test (tests/test_verdict_rules.py) with a counter-example on
#: which the rule says "not reproduced" or "opposite"; the report refuses other rules
RULE_TESTS: dict[str, str] = {
    "compare": "test_compare_counter_examples",
    "best_of": "test_best_of_counter_examples",
    "trend": "test_trend_counter_examples",
    "combine": "test_combine_counter_examples",
    "at_most": "test_at_most_counter_examples",
    "at_least": "test_at_least_counter_examples",
    "per_setting": "test_per_setting_counter_examples",
    "equivalent": "test_equivalent_counter_examples",
    "saturates": "test_saturates_counter_examples",
    "discriminating": "test_discriminating_counter_examples",
}

#: the verdict rules as printed under every claims table
VERDICT_RULES = (
    "Verdicts are computed from the measured numbers (mean and sample std over seeds). "
    "*Ordering claims* (`a > b`) use Welch's t-test, two-sided, at 5%: **reproduced** when "
    "`mean_a - mean_b > min_gap` and p < 0.05, **opposite** when `mean_b - mean_a > "
    "min_gap` and p < 0.05, otherwise **not reproduced at this scale**; *best-option "
    "claims* need the option to beat every other (opposite: every other beats it); "
    "*trend claims* need every step of the sweep to move in the claimed direction by "
    "that test (a non-monotone sweep is not reproduced); a best-option or trend claim "
    "one of whose comparisons is opposite (the option is beaten, a step goes the other "
    "way), but not every one, is refuted as stated, **not reproduced (refuted as "
    "stated)**, and its row names the clear comparisons ('disagree' where one goes each "
    "way); *combined claims* are conjunctions ('A and B', "
    "'A while B', 'in both regimes', 'at every temperature'): every one must hold in "
    "every part, so each is reproduced when every part is, opposite when every part is, "
    "and a part that is opposite beside another refutes it as stated: **not reproduced "
    "(refuted as stated)**, "
    "its row saying 'disagree' or 'differ' and naming the part that refutes it (no "
    "combined claim is called mixed; a conjunction read as parts, hard-negatives claim "
    "8, was so read until issue 39's third review); *bound claims in every regime* "
    "(every alignment bound claim, 10-13, is judged per temperature, its one partition: "
    "the papers' bounds depend on the temperature; every run counts, those that satisfy "
    "the bound trivially counted within it and named) are **opposite** when more than "
    "half of the runs of one regime break the bound, however few break it pooled: the "
    "every-regime rule wins over the pooled count, the majority rule below applies "
    "within each regime, and the row leads with each regime's count; "
    "*per-setting claims* give each setting its own verdict with its sign "
    "and say **mixed** when one setting is reproduced and another opposite (settings "
    "that differ otherwise are not reproduced, the row naming them); *equivalence "
    "claims* use TOST (two "
    "one-sided Welch tests at 5%) with a margin stated in advance: reproduced when the "
    "90% interval of the difference lies inside the margin (its p-value, Holm-adjusted "
    "in a family, below 5%), opposite when it lies wholly outside; *saturation claims* "
    "need the relative gain over the last step of a curve "
    "to stay below a stated tolerance (`mean + std`; opposite: `mean - std` above it), "
    "the row stating how many seeds' gains are above the tolerance and flagging a "
    "critical size at the top of the range tested: such a curve shows no direction past "
    "the range, so it is not reproduced at this scale, never opposite (its row: 'critical "
    "size at the range's top (n = 1024): no direction is seen past it'); "
    "*families* of tests (named below the table: claims read together; every other claim "
    "with comparison tests is a family of its own, a family of one where it runs a single "
    "test, which nothing corrects; a test that two claims share is named there too) are "
    "corrected by Holm's step-down method: every Welch p-value of the family's comparisons is "
    "adjusted over all of them before the 5% rule, and every verdict above reads the "
    "corrected p-values; the rule line of a family of one says 'family of one, "
    "uncorrected' beside its p.  **Mixed** is used only where corrected tests disagree: "
    "settings of one per-setting claim that point opposite ways after that correction, "
    "the row saying 'settings disagree'; where one side is a level or "
    "bound rule, which runs no test, the claim as stated is refuted by its opposite part: "
    "not reproduced (refuted as stated), the row saying 'test and level rule disagree' "
    "(or 'test and bound rule disagree') and which part refutes it.  **Not reproduced "
    "(refuted as stated)** is no matter of scale: a claim stated for every part, "
    "comparison or step is refuted by one that is significantly opposite (or by a level "
    "rule's opposite side), while **not reproduced at this scale** is a claim no clear "
    "part refutes; "
    "*bound claims* are reproduced when every measured value is within "
    "the bound, opposite (the bound is refuted) when more than half of the runs break it, "
    "otherwise not reproduced; *level claims* (`>= threshold`) need `mean - std "
    ">= threshold` (opposite: `mean + std < threshold`); the row of either states how many "
    "runs are on the wrong side (for a bound: 'k of n runs break the bound').  The mixed, "
    "every-regime and bound rules in these words, the conjunction reading, the "
    "per-temperature partition of the bound claims, the words 'refuted as stated' and "
    "the saturation rule's range-top reading were set after the verdicts they "
    "decide had been read (issue 39); every verdict one of them moved says so in its row: "
    "'rule set after this verdict was read; earlier: <the verdict it read>'.  A verdict "
    "needs the full budget "
    "and at least 3 seeds: `--quick` runs say *smoke run, no verdict*.  `min_gap` is "
    'stated with each claim; "paper\'s number" cells name their source (paper table, '
    "SPEC, authors' code)."
)


# ------------------------------------------------------------------------------ verdicts
#: the key of this process's verdict seals: only the rule functions of this module use it
_SEAL_KEY = secrets.token_bytes(32)


#: one clear corrected comparison below a verdict (:attr:`Verdict.clear`): where it sits
#: (its part's path, ``""`` for the verdict's own test), its direction, the p-value it
#: decided on as written (``"Holm p = 0.036"``) and its kind (``"test"``, ``"step"`` of a
#: trend, ``"comparison"`` of a best-option claim)
Clear = tuple[str, str, str, str]


def _digest(
    verdict: str,
    rule: str,
    by: str,
    row: str = "",
    leans: tuple[str, ...] = (),
    clear: tuple[Clear, ...] = (),
    notes: str = "",
) -> str:
    """The seal of a verdict with this content: an HMAC of its outcome, rule text, rule
    function, row note, leanings, clear comparisons and notes under :data:`_SEAL_KEY`, so
    a seal vouches for these fields."""
    content = json.dumps(
        [verdict, rule, by, row, list(leans), [list(c) for c in clear], notes]
    ).encode()
    return hmac.new(_SEAL_KEY, content, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """A verdict (one of :data:`VERDICTS`) and the rule with the numbers that decided it.

    Only the rule functions here give a verdict its seal (:attr:`from_rule`): a digest of
    the verdict's own content (outcome, rule text, rule function) made when the rule
    decided it.  A ``Verdict(...)`` built elsewhere, whatever its ``by``, or a sealed one
    whose fields were changed afterwards (``dataclasses.replace``) is refused by
    :meth:`spacl.studies.report.StudyReport.claim`.  :func:`reworded` changes the rule
    text of a sealed verdict and seals it again (its outcome kept)."""

    verdict: str
    rule: str
    #: the rule function that computed it (a key of :data:`RULE_TESTS`; "" for a
    #: non-verdict of :data:`NON_VERDICTS`)
    by: str = ""
    _seal: str = field(default="", repr=False, compare=False)
    #: what the claims row states beside the measured numbers (a bound rule: how many
    #: runs break the bound); "" for none
    row: str = ""
    #: the directions (:data:`REPRODUCED`, :data:`OPPOSITE`, sorted) of the corrected
    #: comparisons that are clear inside a verdict that is neither (a trend with one
    #: significant step): what :func:`combine` reads to say that parts disagree below
    #: their own verdicts; () for none
    leans: tuple[str, ...] = ()
    #: every clear corrected comparison below the verdict (:data:`Clear`: path,
    #: direction, p-value, kind), its own test's included: what :func:`combine` and
    #: :func:`per_setting` name, each with its p-value, when the comparisons below their
    #: parts point both ways; () for none
    clear: tuple[Clear, ...] = ()
    #: what :attr:`row` says beside the clear comparisons (a bound's count, which parts
    #: differ): a parent that names every clear comparison itself states these instead of
    #: the part's row; "" for none
    notes: str = ""

    def __post_init__(self) -> None:
        check_choice(self.verdict, "verdict", VERDICTS)

    @property
    def from_rule(self) -> bool:
        """Computed by a registered rule function of this module, and unchanged since."""
        return (
            self.by in RULE_TESTS
            and isinstance(self._seal, str)
            and isinstance(self.row, str)
            and isinstance(self.leans, tuple)
            and isinstance(self.clear, tuple)
            and isinstance(self.notes, str)
            and hmac.compare_digest(
                self._seal,
                _digest(
                    self.verdict, self.rule, self.by, self.row, self.leans, self.clear, self.notes
                ),
            )
        )


def _ruled(
    verdict: str,
    rule: str,
    by: str,
    row: str = "",
    leans: tuple[str, ...] = (),
    clear: tuple[Clear, ...] = (),
    notes: str = "",
) -> Verdict:
    """A verdict of rule function ``by`` of this module, sealed over its content."""
    seal = _digest(verdict, rule, by, row, leans, clear, notes)
    return Verdict(verdict, rule, by, seal, row, leans, clear, notes)


def reworded(verdict: Verdict, rule: str) -> Verdict:
    """``verdict`` with another rule text (its outcome, rule function, row note, clear
    comparisons and notes kept), sealed again only if it was sealed (a hand-built verdict
    stays unsealed)."""
    v = verdict
    if v.from_rule:
        return _ruled(v.verdict, rule, v.by, v.row, v.leans, v.clear, v.notes)
    return Verdict(v.verdict, rule, v.by, row=v.row, leans=v.leans, clear=v.clear, notes=v.notes)


def not_run(what: str) -> Verdict:
    """No verdict: the runs a claim needs are not in the run store (a partial report)."""
    return Verdict(NOT_RUN, f"runs missing: {what}")


def _check_gap(min_gap: float) -> float:
    if not isinstance(min_gap, (int, float)) or not math.isfinite(min_gap) or min_gap < 0:
        raise ValueError(f"min_gap must be a finite number >= 0, got {min_gap!r}")
    return float(min_gap)


def compare(
    higher: Sequence[float],
    lower: Sequence[float],
    *,
    min_gap: float = 0.0,
    names: tuple[str, str] = ("a", "b"),
) -> Verdict:
    """Claim ``E[higher] > E[lower]`` by Welch's t-test (module docstring)."""
    a, b = checked_values(higher, names[0]), checked_values(lower, names[1])
    gap_min = _check_gap(min_gap)
    gap = mean_std(a)[0] - mean_std(b)[0]
    head = f"mean({names[0]}) - mean({names[1]}) = {gap:+.4g}"
    if len(a) < 2 or len(b) < 2:
        return _ruled(
            NOT_AT_SCALE,
            f"{head}; {len(a)} vs {len(b)} values: no test possible",
            by="compare",
        )
    t, p_raw = welch(a, b)
    p, note, adjusted = _family_p(p_raw)
    _signed("Welch", a, b, names, f"min_gap {gap_min:g}")
    rule = (
        f"{head}, Welch t = {t:+.3g}, p = {p_raw:.3g}{note} (n = {len(a)}, {len(b)}), "
        f"min_gap = {gap_min:g}"
    )
    said = f"{'Holm p' if adjusted else 'p'} = {p:.3g}" + (
        f", {FAMILY_OF_ONE.strip(' ()')}" if note == FAMILY_OF_ONE else ""
    )
    if p < ALPHA and gap > gap_min:
        return _ruled(REPRODUCED, rule, by="compare", clear=(("", REPRODUCED, said, "test"),))
    if p < ALPHA and -gap > gap_min:
        return _ruled(OPPOSITE, rule, by="compare", clear=(("", OPPOSITE, said, "test"),))
    return _ruled(NOT_AT_SCALE, rule, by="compare")


# --------------------------------------------------------------- families (Holm)
#: while a family's tests are recorded: the raw p-values in call order
_RECORDED: ContextVar[list[float] | None] = ContextVar("_RECORDED", default=None)
#: while a claim's tests are listed (:func:`comparison_tests`): each test's identity and name
_SIGNED: ContextVar[list[tuple[Any, str]] | None] = ContextVar("_SIGNED", default=None)


def _signed(
    test: str, a: Sequence[float], b: Sequence[float], names: tuple[str, str], how: str
) -> None:
    """Note a comparison test while :func:`comparison_tests` lists them: its identity
    (the test, its setting, the two samples in either order) and its name."""
    signed = _SIGNED.get()
    if signed is not None:
        samples = tuple(sorted((tuple(float(x) for x in a), tuple(float(x) for x in b))))
        signed.append(((test, how, samples), f"{names[0]} vs {names[1]}"))


def comparison_tests(rule: Callable[[], Any]) -> list[tuple[Any, str]]:
    """The comparison tests (:func:`compare`, :func:`equivalent`) that ``rule`` (a claim's
    rule, without arguments) runs, in call order: each one's identity (the test, its
    setting and the two samples, in either order: the same test run by two claims has the
    same identity) and a name (``"HSCL vs SCL"``).  The verdicts are not changed."""
    signing = _SIGNED.set([])
    try:
        rule()
        return list(_SIGNED.get() or [])
    finally:
        _SIGNED.reset(signing)


#: while a family's claims are decided: (adjusted p-values left, family name, size)
_ADJUSTED: ContextVar[tuple[list[float], str, int] | None] = ContextVar("_ADJUSTED", default=None)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    With the ``m`` p-values sorted ``p_(1) <= ... <= p_(m)``:
    ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where ``p~ < alpha``
    is Holm's procedure at family-wise error ``alpha`` (Holm 1979).

    Example:
        >>> holm([0.01, 0.04, 0.03])
        [0.03, 0.06, 0.06]
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        out[i] = running
    # 15 significant digits: (m - j + 1) p sums carry float noise in the 16th
    return [float(f"{v:.15g}") for v in out]


#: while a claim whose one comparison test is a family of one is decided (:func:`holm_within`)
_ALONE: ContextVar[bool] = ContextVar("_ALONE", default=False)
#: what the rule of a family of one's test says beside its p-value: nothing corrects it
FAMILY_OF_ONE = " (family of one, uncorrected)"


def _family_p(p_raw: float) -> tuple[float, str, bool]:
    """The p-value :func:`compare` decides on (raw, recorded, or Holm-adjusted), the note
    its rule prints beside the raw p (the adjusted p and its family, or
    :data:`FAMILY_OF_ONE` for a claim's only test) and whether it is adjusted."""
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.append(p_raw)
    adjusted = _ADJUSTED.get()
    if adjusted is None:
        return p_raw, FAMILY_OF_ONE if _ALONE.get() else "", False
    left, name, size = adjusted
    if not left:
        raise RuntimeError("a family's claims ran more comparisons than were recorded")
    p = left.pop(0)
    return p, f", Holm-adjusted p = {p:.3g} (family '{name}', {size} tests)", True


def holm_family(name: str, rules: Sequence[Callable[[], Verdict]]) -> tuple[list[Verdict], int]:
    """Decide the claims of family ``name`` with Holm-adjusted p-values.

    Each of ``rules`` (a claim's rule, without arguments) is run twice: once recording
    the raw p-value of every :func:`compare` it calls, then, after :func:`holm` over all
    of the family's p-values, again with each comparison deciding on its adjusted
    p-value (the same calls in the same order: the rules are deterministic).  Returns
    the verdicts and the number of tests in the family.
    """
    per_rule: list[list[float]] = []
    for rule in rules:
        recording = _RECORDED.set([])
        try:
            rule()
            per_rule.append(list(_RECORDED.get() or []))
        finally:
            _RECORDED.reset(recording)
    flat = holm([p for ps in per_rule for p in ps])
    size = len(flat)
    verdicts = []
    start = 0
    for rule, ps in zip(rules, per_rule, strict=True):
        mine = flat[start : start + len(ps)]
        start += len(ps)
        adjusting = _ADJUSTED.set((mine, name, size))
        try:
            verdicts.append(rule())
        finally:
            _ADJUSTED.reset(adjusting)
    return verdicts, size


def holm_within(name: str, rule: Callable[[], Verdict]) -> tuple[Verdict, int]:
    """Decide one claim, its comparison tests a family of their own when it has several.

    ``rule`` (the claim's rule, without arguments) is run once recording the raw p-value
    of every :func:`compare` it calls; with more than one, the claim is decided again by
    :func:`holm_family` (family ``name``: Holm within the claim), so a verdict word reads
    the adjusted p-values.  Returns the verdict and the number of comparison tests (0 or
    1: nothing to correct; with 1, the claim is decided again so that its test's rule
    says so beside its raw p, :data:`FAMILY_OF_ONE`).
    """
    recording = _RECORDED.set([])
    try:
        verdict = rule()
        count = len(_RECORDED.get() or [])
    finally:
        _RECORDED.reset(recording)
    if count == 1:
        alone = _ALONE.set(True)
        try:
            return rule(), count
        finally:
            _ALONE.reset(alone)
    if count == 0:
        return verdict, count
    verdicts, size = holm_family(name, [rule])
    return verdicts[0], size


def best_of(
    samples: Mapping[Any, Sequence[float]],
    claimed: Any,
    *,
    min_gap: float = 0.0,
    lowest: bool = False,
) -> Verdict:
    """Claim: option ``claimed`` has the largest expected value (module docstring).

    ``lowest=True``: the smallest is the best (a deviation, an error).  Each comparison
    is then :func:`compare` of the other option over ``claimed``, so its printed
    difference is ``mean(other) - mean(claimed)`` of the values as given: positive when
    ``claimed`` is lower (never the difference of negated values under their names)."""
    if claimed not in samples or len(samples) < 2:
        raise ValueError(
            f"samples must hold the claimed option {claimed!r} and at least one other, "
            f"got options {list(samples)}"
        )
    mine = samples[claimed]
    parts = {
        str(key): (
            compare(other, mine, min_gap=min_gap, names=(str(key), str(claimed)))
            if lowest
            else compare(mine, other, min_gap=min_gap, names=(str(claimed), str(key)))
        )
        for key, other in samples.items()
        if key != claimed
    }
    verdicts = [v.verdict for v in parts.values()]
    best = " (the lowest value is the best)" if lowest else ""
    rule = f"best-option claim for {claimed}{best}: " + "; ".join(
        f"vs {k}: {v.verdict} ({v.rule})" for k, v in parts.items()
    )
    clear = _clear_below({f"vs {k}": v for k, v in parts.items()}, kind="comparison")
    if all(v == REPRODUCED for v in verdicts):
        return _ruled(REPRODUCED, rule, by="best_of", clear=clear)
    if all(v == OPPOSITE for v in verdicts):
        return _ruled(OPPOSITE, rule, by="best_of", clear=clear)
    row = _clear_comparisons({f"vs {k}": v for k, v in parts.items()}, "comparisons")
    leans = _leanings(parts.values())
    return _ruled(
        _split_outcome(parts.values()),
        f"{row}; {rule}" if row else rule,
        by="best_of",
        row=row,
        leans=leans,
        clear=clear,
    )


def _leanings(parts: Iterable[Verdict]) -> tuple[str, ...]:
    """The directions of the clear verdicts among ``parts`` (a part's own outcome when it
    is reproduced or opposite, else its :attr:`Verdict.leans`), sorted."""
    found: set[str] = set()
    for part in parts:
        if part.verdict in (REPRODUCED, OPPOSITE):
            found.add(part.verdict)
        else:
            found.update(part.leans)
    return tuple(sorted(found))


def _clear_below(parts: Mapping[str, Verdict], kind: str | None = None) -> tuple[Clear, ...]:
    """The clear corrected comparisons of ``parts`` (:attr:`Verdict.clear`), each path
    led by its part's name; ``kind``: the kind they take here (a trend's ``"step"``, a
    best-option claim's ``"comparison"``), else their own."""
    return tuple(
        (f"{name} {path}".strip(), direction, p, kind or own)
        for name, v in parts.items()
        for path, direction, p, own in v.clear
    )


#: the plural of each kind of comparison (:data:`Clear`)
_KINDS = {"test": "tests", "step": "steps", "comparison": "comparisons"}


def _tests_disagree(clear: Sequence[Clear]) -> str:
    """``"corrected steps disagree: equal epochs B=200 -> B=400 opposite (Holm p =
    0.036), equal steps B=100 -> B=200 reproduced (Holm p = 0.0077)"``: every clear
    corrected comparison below a verdict, with the p-value it decided on, when they go
    both ways (so a row whose parts are each "not reproduced" still says which corrected
    tests point opposite ways); ``""`` otherwise."""
    if {REPRODUCED, OPPOSITE} - {direction for _, direction, _, _ in clear}:
        return ""
    kinds = {kind for *_, kind in clear}
    noun = _KINDS.get(kinds.pop(), "tests") if len(kinds) == 1 else "tests"
    named = ", ".join(f"{path} {direction} ({p})".lstrip() for path, direction, p, _ in clear)
    return f"corrected {noun} disagree: {named}"


def _clear_comparisons(parts: Mapping[str, Verdict], what: str) -> str:
    """The row note of a best-option or step-trend claim that is neither reproduced nor
    opposite: ``"<what> disagree: ..."`` when one comparison is reproduced and another
    opposite, ``"<what> differ: ..."`` when the clear ones go one way beside others inside
    the noise, ``""`` when none is clear."""
    clear = {k: v.verdict for k, v in parts.items() if v.verdict in (REPRODUCED, OPPOSITE)}
    if not clear:
        return ""
    named = ", ".join(f"{k} {v}" for k, v in clear.items())
    if len(set(clear.values())) > 1:
        return f"{what} disagree: {named}"
    return f"{what} differ: {named}; {len(parts) - len(clear)} other(s) {NOT_AT_SCALE}"


def _split_outcome(parts: Iterable[Verdict]) -> str:
    """The verdict of a best-option or step-trend claim that is neither reproduced nor
    opposite: :data:`REFUTED` where one of its comparisons (``parts``) is opposite (the
    claimed option is beaten, or a step of the sweep goes the other way, significantly:
    the claim, stated for every comparison, is refuted as stated), else
    :data:`NOT_AT_SCALE` (no clear comparison against it)."""
    return REFUTED if any(p.verdict == OPPOSITE for p in parts) else NOT_AT_SCALE


def _spearman_trend(
    sweep: Sequence[Sequence[float]], increasing: bool, names: list[str]
) -> Verdict:
    from scipy import stats

    xs = [i for i, point in enumerate(sweep) for _ in point]
    ys = [float(v) for point in sweep for v in point]
    if len(set(ys)) < 2:
        return _ruled(NOT_AT_SCALE, "Spearman rank test: every value equal", by="trend")
    res = stats.spearmanr(xs, ys)
    rho, p = float(res.statistic), float(res.pvalue)
    rule = (
        f"Spearman rank test over {names[0]}..{names[-1]} ({len(ys)} values): "
        f"rho = {rho:+.3g}, p = {p:.3g}"
    )
    sign = 1.0 if increasing else -1.0
    if p < ALPHA and sign * rho > 0:
        return _ruled(REPRODUCED, rule, by="trend")
    if p < ALPHA and sign * rho < 0:
        return _ruled(OPPOSITE, rule, by="trend")
    return _ruled(NOT_AT_SCALE, rule, by="trend")


def trend(
    sweep: Sequence[Sequence[float]],
    *,
    increasing: bool = True,
    min_gap: float = 0.0,
    labels: Sequence[Any] | None = None,
    test: str = "steps",
) -> Verdict:
    """Claim: the metric rises (``increasing``) or falls along the sweep (module docstring).

    ``test="steps"`` (default): every neighbouring step by :func:`compare`;
    ``test="spearman"``: one rank test over the whole sweep.
    """
    if len(sweep) < 2:
        raise ValueError(f"sweep must hold at least 2 points, got {len(sweep)}")
    if labels is not None and len(labels) != len(sweep):
        raise ValueError(f"labels must name the {len(sweep)} sweep points, got {len(labels)}")
    names = [str(x) for x in labels] if labels is not None else [f"#{i}" for i in range(len(sweep))]
    direction = "rising" if increasing else "falling"
    if test == "spearman":
        v = _spearman_trend(sweep, increasing, names)
        return _ruled(v.verdict, f"{direction}-trend claim: {v.rule}", by="trend")
    if test != "steps":
        raise ValueError(f"test must be 'steps' or 'spearman', got {test!r}")
    steps = []
    for i in range(len(sweep) - 1):
        lo, hi = (i, i + 1) if increasing else (i + 1, i)
        steps.append(compare(sweep[hi], sweep[lo], min_gap=min_gap, names=(names[hi], names[lo])))
    verdicts = [v.verdict for v in steps]
    rule = f"{direction}-trend claim, every step: " + "; ".join(
        f"[{names[i]} -> {names[i + 1]}] {v.verdict}: {v.rule}" for i, v in enumerate(steps)
    )
    named = {f"{names[i]} -> {names[i + 1]}": v for i, v in enumerate(steps)}
    clear = _clear_below(named, kind="step")
    if all(v == REPRODUCED for v in verdicts):
        return _ruled(REPRODUCED, rule, by="trend", clear=clear)
    if all(v == OPPOSITE for v in verdicts):
        return _ruled(OPPOSITE, rule, by="trend", clear=clear)
    row = _clear_comparisons(named, "steps")
    leans = _leanings(steps)
    return _ruled(
        _split_outcome(steps),
        f"{row}; {rule}" if row else rule,
        by="trend",
        row=row,
        leans=leans,
        clear=clear,
    )


#: the rules that decide without a comparison test, and what a row calls each
_NO_TEST = {"at_most": "bound rule", "at_least": "level rule", "saturates": "saturation rule"}


def _kind(v: Verdict) -> str:
    """What decided ``v``: ``"test"`` (corrected comparison tests) or the rule without a
    test (:data:`_NO_TEST`: ``"level rule"``, ``"bound rule"``, ``"saturation rule"``)."""
    if v.by in _NO_TEST:
        return _NO_TEST[v.by]
    if v.by in ("combine", "per_setting") and not v.clear:  # parts without a clear test
        tested = any(w in v.rule for w in ("Welch t", "TOST", "Spearman"))
        if not tested and "within the bound" in v.rule:
            return "bound rule"
        if not tested and "threshold = " in v.rule:
            return "level rule"
    return "test"


def _evidence(v: Verdict) -> str:
    """What decided ``v``, for a row naming the parts that disagree: the p-value of its
    clear test (``"p = 2.7e-09"``, ``"Holm p = 0.036"``) or its rule's count."""
    if _kind(v) != "test":
        return f"{_kind(v)}: {v.row}" if v.row else _kind(v)
    said = [p for path, direction, p, _ in v.clear if direction == v.verdict and not path]
    return f"test, {said[0]}" if said else "test"


def _refuted(parts: Mapping[str, Verdict], what: str, every: bool) -> str:
    """The note naming the parts that refute a claim as stated, each with what decided it:
    ``every=True`` (a claim for every one of ``parts``): ``"the claim as stated, in every
    one of the regimes, is refuted in d = 64 (opposite, test, Holm p = 0.00032)"``; else
    (every part must hold): ``"the claim as stated is refuted by CKA high (opposite, level
    rule: 5 of 5 runs fall below the threshold)"``; a part itself refuted as stated
    (:data:`REFUTED`, a trend or best option below) is named ``"<part> (refuted as
    stated)"``; ``""`` where no part is opposite or refuted."""
    refuted = [
        f"{k} (opposite, {_evidence(v)})" if _kind(v) == "test" or v.by in _NO_TEST else k
        for k, v in parts.items()
        if v.verdict == OPPOSITE
    ] + [f"{k} (refuted as stated)" for k, v in parts.items() if v.verdict == REFUTED]
    if not refuted:
        return ""
    where = f", in every one of the {what}, is refuted in" if every else " is refuted by"
    return f"the claim as stated{where} {', '.join(refuted)}"


def _bound_in_every(parts: Mapping[str, Verdict], every: bool) -> bool:
    """A bound stated for every one of ``parts`` (``every=True``, each part decided by a
    bound rule) that more than half of the runs break in some part: refuted outright."""
    return (
        every
        and any(v.verdict == OPPOSITE for v in parts.values())
        and all(_kind(v) == "bound rule" for v in parts.values())
    )


def combine(parts: Mapping[str, Verdict], *, what: str = "parts", every: bool = False) -> Verdict:
    """All parts must agree (module docstring); the rule lists each part's verdict.

    Parts that disagree outright (one reproduced, another opposite, or a part itself
    :data:`MIXED`): :func:`_disagreeing`, :data:`MIXED` only where every side is a
    corrected test.  Parts that differ otherwise (a clear part beside parts inside the
    noise): :func:`_differing`, :data:`NOT_AT_SCALE`.  ``what`` names the parts
    (``"regimes"``).  ``every=True``: the claim must hold in every part (a bound at every
    temperature), so a part that is opposite refutes it as stated: :data:`NOT_AT_SCALE`
    (never :data:`MIXED`), or :data:`OPPOSITE` where every part is a bound rule (a bound
    broken by more than half of the runs in one regime is broken)."""
    if not parts:
        raise ValueError("parts must hold at least one verdict, got none")
    verdicts = [v.verdict for v in parts.values()]
    rule = "; ".join(f"[{k}] {v.verdict}: {v.rule}" for k, v in parts.items())
    clear = _clear_below(parts)
    if all(v == REPRODUCED for v in verdicts):
        return _ruled(REPRODUCED, rule, by="combine", clear=clear)
    if all(v == OPPOSITE for v in verdicts):
        return _ruled(OPPOSITE, rule, by="combine", clear=clear)
    if (REPRODUCED in verdicts and OPPOSITE in verdicts) or MIXED in verdicts:
        return _disagreeing(parts, rule, clear, what, every)
    return _differing(parts, rule, clear, what, every)


def _disagreeing(
    parts: Mapping[str, Verdict], rule: str, clear: tuple[Clear, ...], what: str, every: bool
) -> Verdict:
    """:func:`combine` of parts that disagree outright.  The row opens ``"<what> disagree:
    <part> reproduced (test, p = ...), <part> opposite (...)"``, each side named with what
    decided it (:func:`_evidence`); where the sides are decided by different kinds of rule
    it names the kinds instead (``"test and level rule disagree: ..."``).

    :data:`MIXED` only where every side is a corrected test and the claim is not stated
    for every part.  A side decided by a level, bound or saturation rule (no test), or a
    claim stated for every part (``every``), is refuted as stated by its opposite part:
    :data:`NOT_AT_SCALE` (:data:`OPPOSITE` for a bound in every part,
    :func:`_bound_in_every`), the row adding which part refutes it (:func:`_refuted`)."""
    sides = {k: v for k, v in parts.items() if v.verdict in (REPRODUCED, OPPOSITE, MIXED)}
    split = ", ".join(
        f"{k} {v.verdict}" + (f" ({_evidence(v)})" if v.verdict != MIXED else "")
        for k, v in sides.items()
    )
    kinds = list(dict.fromkeys(_kind(v) for v in sides.values()))
    disagree = f"{' and '.join(kinds) if len(kinds) > 1 else what} disagree: {split}"
    if kinds == ["test"] and not every:
        return _ruled(
            MIXED, f"{disagree}; {rule}", by="combine", row=disagree, clear=clear, notes=disagree
        )
    refuted = _refuted(parts, what, every)
    row = f"{disagree}; {refuted}" if refuted else disagree
    if _bound_in_every(parts, every):
        return _ruled(OPPOSITE, f"{row}; {rule}", by="combine", row=row, clear=clear, notes=row)
    leans = _leanings(parts.values())
    outcome = REFUTED if refuted else NOT_AT_SCALE
    return _ruled(
        outcome, f"{row}; {rule}", by="combine", row=row, leans=leans, clear=clear, notes=row
    )


def _differing(
    parts: Mapping[str, Verdict], rule: str, clear: tuple[Clear, ...], what: str, every: bool
) -> Verdict:
    """:func:`combine` of parts that differ without disagreeing outright (a clear part
    beside parts inside the noise, or every part inside it): :data:`NOT_AT_SCALE`, the
    rule and row saying ``"<what> differ: <part> reproduced, <part> not reproduced at
    this scale"`` and carrying the parts' row notes (``"[<part>] <note>"``), led by
    ``"corrected <tests> disagree: ..."`` when the clear corrected comparisons inside the
    parts point both ways (:func:`_not_reproduced_row`).  ``every``: an opposite part
    refutes the claim as stated, and the row says where (:func:`_refuted`); a bound in
    every part that one part breaks by a majority is :data:`OPPOSITE`
    (:func:`_bound_in_every`)."""
    differ = (
        f"{what} differ: " + ", ".join(f"{k} {v.verdict}" for k, v in parts.items())
        if len({v.verdict for v in parts.values()}) > 1
        else ""
    )
    row, notes, lead = _not_reproduced_row(parts, clear, what, differ)
    refuted = _refuted(parts, what, every) if every else ""
    if refuted:
        row, notes = (
            f"{row}; {refuted}" if row else refuted,
            f"{notes}; {refuted}" if notes else refuted,
        )
    said = "; ".join(x for x in [lead, differ, refuted, rule] if x)
    if _bound_in_every(parts, every):
        return _ruled(OPPOSITE, said, by="combine", row=row, clear=clear, notes=notes)
    return _ruled(
        REFUTED if refuted else NOT_AT_SCALE,
        said,
        by="combine",
        row=row,
        leans=_leanings(parts.values()),
        clear=clear,
        notes=notes,
    )


def _not_reproduced_row(
    parts: Mapping[str, Verdict],
    clear: Sequence[Clear],
    what: str,
    differ: str,
    *,
    part_rows: bool = True,
) -> tuple[str, str, str]:
    """The row note, the notes (:attr:`Verdict.notes`) and the rule's lead of a whole
    that is not reproduced, made of ``parts`` (``differ``: which of them differ, or "").
    When the clear corrected comparisons below (``clear``) point both ways, the row names
    every one with its p-value (:func:`_tests_disagree`), then what the parts' verdicts
    are (``differ``, or "<what> each <verdict>") and the parts' notes; otherwise it is
    ``differ`` and the parts' rows (``part_rows``: a per-setting claim's rows name no
    part's row)."""
    lead = _tests_disagree(clear)
    below = [f"[{k}] {v.notes}" for k, v in parts.items() if v.notes] if part_rows else []
    if lead:
        outcomes = {v.verdict for v in parts.values()}
        each = differ or f"{what} each {outcomes.pop()}"
        notes = "; ".join([each, *below])
        return f"{lead}; {notes}", notes, lead
    rows = [f"[{k}] {v.row}" for k, v in parts.items() if v.row] if part_rows else []
    return (
        "; ".join(x for x in [differ, *rows] if x),
        "; ".join(x for x in [differ, *below] if x),
        "",
    )


def broken_count(broken: int, total: int, *, runs: str = "runs") -> str:
    """The row note of a bound claim (:func:`at_most`): ``"k of n runs break the bound"``."""
    return f"{broken} of {total} {runs} break the bound"


def at_most(values: Sequence[float], bound: float, *, runs: str = "runs") -> Verdict:
    """Claim: every value is ``<= bound`` (module docstring).

    Reproduced when no value breaks the bound; opposite (the bound is refuted) when more
    than half of the values do; otherwise not reproduced at this scale.  The verdict's
    :attr:`~Verdict.row` counts the values above ``bound`` (``runs``: what a value is,
    e.g. ``"non-vacuous runs"``)."""
    v = checked_values(values)
    inside = sum(x <= bound for x in v)
    broken = len(v) - inside
    row = broken_count(broken, len(v), runs=runs)
    rule = (
        f"max = {max(v):.4g}, min = {min(v):.4g}, bound = {bound:.4g}; "
        f"{inside}/{len(v)} within the bound ({row}; opposite when more than half break it)"
    )
    if broken == 0:
        return _ruled(REPRODUCED, rule, by="at_most", row=row, notes=row)
    if 2 * broken > len(v):
        return _ruled(OPPOSITE, rule, by="at_most", row=row, notes=row)
    return _ruled(NOT_AT_SCALE, rule, by="at_most", row=row, notes=row)


def at_least(values: Sequence[float], threshold: float, *, runs: str = "runs") -> Verdict:
    """Claim: the expected value is ``>= threshold`` (module docstring).

    The verdict's :attr:`~Verdict.row` counts the values below ``threshold``."""
    v = checked_values(values)
    m, s = mean_std(v)
    row = f"{sum(x < threshold for x in v)} of {len(v)} {runs} fall below the threshold"
    rule = f"mean = {m:.4g}, std = {s:.3g}, threshold = {threshold:.4g} ({row})"
    if m - s >= threshold:
        return _ruled(REPRODUCED, rule, by="at_least", row=row, notes=row)
    if m + s < threshold:
        return _ruled(OPPOSITE, rule, by="at_least", row=row, notes=row)
    return _ruled(NOT_AT_SCALE, rule, by="at_least", row=row, notes=row)


def per_setting(parts: Mapping[str, Verdict]) -> Verdict:
    """One claim in several settings, each part its own verdict (module docstring).

    As :func:`combine`: settings that disagree outright (one reproduced, another
    opposite, or a setting itself :data:`MIXED`) give :data:`MIXED`, the rule opening with
    ``"settings disagree: ..."``; a clear setting beside settings inside the noise gives
    :data:`NOT_AT_SCALE`, its rule and row opening with ``"settings differ: <setting>
    reproduced; k other(s) not reproduced at this scale"``.  Parts that did not run
    (:data:`NOT_RUN`) are listed and left out of the agreement; they turn an otherwise
    agreeing outcome into :data:`NOT_RUN` (a claim "in every setting" cannot be decided on
    some of them), never a disagreement into agreement.
    """
    if not parts:
        raise ValueError("parts must hold at least one verdict, got none")
    ran = {k: v for k, v in parts.items() if v.verdict != NOT_RUN}
    missing = [k for k in parts if k not in ran]
    rule = "; ".join(f"[{k}] {v.verdict}: {v.rule}" for k, v in parts.items())
    outcomes = {v.verdict for v in ran.values()}
    clear = {k: v for k, v in ran.items() if v.verdict in (REPRODUCED, OPPOSITE, MIXED, REFUTED)}
    below = _clear_below(ran)
    if (REPRODUCED in outcomes and OPPOSITE in outcomes) or MIXED in outcomes:
        split = ", ".join(f"{k} {v.verdict}" for k, v in clear.items())
        disagree = f"settings disagree: {split}"
        return _ruled(
            MIXED,
            f"{disagree}; {rule}",
            by="per_setting",
            row=disagree,
            clear=below,
            notes=disagree,
        )
    if missing:
        return Verdict(NOT_RUN, f"{len(missing)} setting(s) not run ({missing}): {rule}")
    leans = _leanings(ran.values())
    differ = ""
    if len(outcomes) > 1:  # a clear setting beside settings inside the noise: said
        others = len(ran) - len(clear)
        differ = "settings differ: " + ", ".join(f"{k} {v.verdict}" for k, v in clear.items())
        differ += f"; {others} other(s) {NOT_AT_SCALE}"
    outcome = outcomes.pop() if len(outcomes) == 1 else NOT_AT_SCALE
    if outcome not in (REPRODUCED, OPPOSITE, NOT_AT_SCALE, REFUTED):
        outcome = NOT_AT_SCALE
    if outcome != NOT_AT_SCALE:
        return _ruled(outcome, rule, by="per_setting", clear=below)
    row, notes, lead = _not_reproduced_row(ran, below, "settings", differ, part_rows=False)
    return _ruled(
        outcome,
        "; ".join(x for x in [lead, differ, rule] if x),
        by="per_setting",
        row=row,
        leans=leans,
        clear=below,
        notes=notes,
    )


def equivalent(
    a: Sequence[float],
    b: Sequence[float],
    *,
    margin: float,
    names: tuple[str, str] = ("a", "b"),
) -> Verdict:
    """Claim "``a`` is as good as ``b``": TOST equivalence within ``+-margin`` (module docstring).

    Two one-sided Welch tests at :data:`ALPHA` (``H0: diff <= -margin`` and ``H0: diff >=
    margin``), i.e. the ``1 - 2 ALPHA`` (90%) interval of ``diff = mean_a - mean_b`` inside
    ``(-margin, margin)``: reproduced; the interval wholly outside: opposite; otherwise not
    reproduced at this scale.  The TOST p-value (the larger one-sided one; below
    :data:`ALPHA` exactly when the interval lies inside) is a test of its family like
    :func:`compare`'s: in a family it is Holm-adjusted (:func:`holm_family`) and the
    adjusted value decides "reproduced".  The rule states the smallest margin these data
    could certify (the interval's farther end), so a pass by default shows as a wide margin.
    """
    if not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin <= 0:
        raise ValueError(f"margin must be a finite number > 0, got {margin!r}")
    x, y = checked_values(a, names[0]), checked_values(b, names[1])
    if len(x) < 2 or len(y) < 2:
        return _ruled(
            NOT_AT_SCALE,
            f"{len(x)} vs {len(y)} values: no test possible",
            by="equivalent",
        )
    from scipy import stats

    diff, se, df = welch_parts(x, y)
    t_crit = float(stats.t.ppf(1.0 - ALPHA, df)) if se > 0 else 0.0
    lo, hi = diff - t_crit * se, diff + t_crit * se
    smallest = max(abs(lo), abs(hi))
    if se > 0:
        p_lower = float(stats.t.sf((diff + margin) / se, df))  # H0: diff <= -margin
        p_upper = float(stats.t.cdf((diff - margin) / se, df))  # H0: diff >= margin
        p = max(p_lower, p_upper)
    else:
        p = 0.0 if abs(diff) < margin else 1.0
    p_decided, note, _ = _family_p(p)
    _signed("TOST", x, y, names, f"margin {margin:g}")
    rule = (
        f"TOST: mean({names[0]}) - mean({names[1]}) = {diff:+.4g}, 90% interval "
        f"[{lo:+.3g}, {hi:+.3g}], margin = +-{margin:g} (stated with the claim), p = {p:.3g}"
        f"{note} (n = {len(x)}, {len(y)}); smallest margin these data certify = {smallest:.3g}"
    )
    if p_decided < ALPHA:  # unadjusted: the interval inside the margin
        return _ruled(REPRODUCED, rule, by="equivalent")
    if lo >= margin or hi <= -margin:
        return _ruled(OPPOSITE, rule, by="equivalent")
    return _ruled(NOT_AT_SCALE, rule, by="equivalent")


def saturates(
    curves: Sequence[Sequence[float]],
    sizes: Sequence[int],
    *,
    tail: int = 4,
    tolerance: float = 0.05,
) -> Verdict:
    """Claim: beyond a critical size, growing the size adds almost nothing (module docstring).

    ``curves[s][i]`` is seed ``s``'s value at ``sizes[i]`` (ascending).  Per seed the
    relative gain over the last ``tail``-fold step, ``(G(n_max) - G(n')) / G(n_max)`` with
    ``n'`` the largest size ``<= n_max / tail``; reproduced when ``mean + std`` of the gains
    is below ``tolerance``, opposite when ``mean - std`` is above it.  The rule also names
    the critical size: the smallest size whose mean value reaches ``(1 - tolerance)`` of
    the mean value at ``n_max``; its :attr:`~Verdict.row` counts the seeds whose gain is
    above ``tolerance`` (:func:`above_tolerance`).
    """
    n = [int(v) for v in sizes]
    if len(n) < 2 or n != sorted(n) or len(set(n)) != len(n):
        raise ValueError(f"sizes must be at least 2 increasing sizes, got {list(sizes)}")
    if not curves or any(len(c) != len(n) for c in curves):
        raise ValueError(f"every curve must hold one value per size ({len(n)})")
    early = [i for i, v in enumerate(n) if v * tail <= n[-1]]
    if not early:
        raise ValueError(f"no size is <= {n[-1]} / {tail}: the tail step needs one")
    j = early[-1]
    gains = [(float(c[-1]) - float(c[j])) / float(c[-1]) for c in curves]
    m, s = mean_std(gains)
    means = [mean_std([float(c[i]) for c in curves])[0] for i in range(len(n))]
    critical = next(v for v, g in zip(n, means, strict=True) if g >= (1 - tolerance) * means[-1])
    counted = above_tolerance(gains, tolerance)
    rule = (
        f"relative gain from {n[j]} to {n[-1]}: mean = {m:+.4g}, std = {s:.3g} over "
        f"{len(gains)} seed(s), tolerance = {tolerance:g} ({counted}); critical size "
        f"(mean reaches {1 - tolerance:g} of its value at {n[-1]}) = {critical}"
    )
    verdict = REPRODUCED if m + s < tolerance else OPPOSITE if m - s > tolerance else NOT_AT_SCALE
    row = counted
    if critical == n[-1]:  # the curve still rises at the top of the range: flagged
        # "beyond a critical size" is not seen where that size is the range's top: an
        # opposite gain over the last step says nothing of the sizes past it (issue 39)
        read = f"; the gain over the last step alone reads {verdict}" if verdict == OPPOSITE else ""
        verdict = NOT_AT_SCALE if verdict == OPPOSITE else verdict
        row = (
            f"{counted}; critical size at the range's top (n = {critical}): no direction "
            f"is seen past it{read}"
        )
        rule = (
            f"{rule} (critical size at the range's top, the sizes past n = {n[-1]} not "
            f"tested: {verdict})"
        )
    return _ruled(verdict, rule, by="saturates", row=row, notes=row)


def above_tolerance(gains: Sequence[float], tolerance: float) -> str:
    """The row note of a saturation claim (:func:`saturates`): ``"k of n seeds above the
    tolerance"``, ``k`` the seeds whose relative gain exceeds ``tolerance``.

    Example:
        >>> above_tolerance([0.01, 0.07, 0.09], 0.05)
        '2 of 3 seeds above the tolerance'
    """
    return f"{sum(float(g) > tolerance for g in gains)} of {len(gains)} seeds above the tolerance"


def discriminating(
    higher: Sequence[float],
    lower: Sequence[float],
    *,
    min_gap: float = 0.0,
    names: tuple[str, str] = ("a", "b"),
) -> Verdict:
    """:func:`compare`, unless every value of both sides is the same (module docstring)."""
    a, b = checked_values(higher, names[0]), checked_values(lower, names[1])
    if len(set(a + b)) == 1:
        return _ruled(
            NO_SIGNAL,
            f"every value of {names[0]} and {names[1]} is {a[0]:g}: the measure does not "
            "tell them apart here",
            by="discriminating",
        )
    v = compare(a, b, min_gap=min_gap, names=names)
    return _ruled(v.verdict, v.rule, by="discriminating", clear=v.clear)
