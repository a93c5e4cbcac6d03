"""Issue 39's third review: the rules set after their verdicts had been read, each with a
counter-example.

* The alignment study's four bound claims (Theorem 1, Corollaries 1 and 2, the loss
  inequality) share one partition (temperature) and one denominator (a run that satisfies
  the bound trivially is counted apart, never "within the bound"), so claims 11 and 12 are
  judged exactly as claims 10 and 13.
* Every combined claim of the three claims tables is a conjunction (``every=True``): a
  part that is opposite refutes it as stated, never "mixed" (hard-negatives claim 8).
* Every verdict a post-hoc rule moved names its earlier verdict in its row
  (:attr:`~spacl.studies.claim_table.ClaimSpec.earlier`).
* The fourth review: a claim refuted as stated reads so (``REFUTED``), never "not
  reproduced at this scale" beside a row that says "refuted"; a saturation curve whose
  critical size is the range's top reads not reproduced at this scale (claim 19).
"""

from __future__ import annotations

import ast
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from spacl.studies import alignment_study, hard_negatives
from spacl.studies.alignment_study.claims import BOUND_PARTITION, per_temperature
from spacl.studies.alignment_study.claims import claims as alignment_claims
from spacl.studies.alignment_study.report import bound_records, sandwich_runs
from spacl.studies.claim_table import POST_HOC, ClaimSpec, evaluate_claims
from spacl.studies.hard_negatives.claims import claims as hard_negative_claims
from spacl.studies.report import StudyReport
from spacl.studies.spacl_bench.claims import THEOREM_D4_NOTE, claim_specs
from spacl.studies.verdicts import (
    MIXED,
    NOT_AT_SCALE,
    NOT_RUN,
    OPPOSITE,
    REFUTED,
    REPRODUCED,
    at_most,
    compare,
)

#: the module (the package re-exports its ``claims`` function under the same name)
alignment_claims_module = importlib.import_module("spacl.studies.alignment_study.claims")
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BOUND_KEYS = (
    "theorem1_bound_holds",
    "corollary1_cka_bound_holds",
    "rsa_bound_holds",
    "nscl_dcl_sandwich",
)


def _metrics(name: str) -> dict[str, Any]:
    return dict(json.loads((RESULTS / name / "results.json").read_text())["metrics"])


def _spec(specs: Sequence[ClaimSpec], key: str) -> ClaimSpec:
    return next(s for s in specs if s.key == key)


# ------------------------------------------------------------ one partition, one denominator
def test_the_four_bound_claims_use_one_partition_and_one_denominator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every bound claim is decided by :func:`per_temperature` alone (no pooled
    :func:`at_most` beside it), over the same temperatures, each regime holding every run
    (Theorem 1 and the corollaries) or every network (the loss inequality) at that
    temperature, trivially satisfied ones flagged for the same rule to count apart."""
    cfg = alignment_study.FULL
    m = _metrics("alignment")
    calls: dict[str, list[tuple[dict[float, int], dict[float, int]]]] = {}
    inside = [False]
    current = [""]

    def recording(
        values: Mapping[float, Sequence[float]],
        bound: float,
        *,
        trivial: Mapping[float, Sequence[bool]] | None = None,
        runs: str = "runs",
    ) -> Any:
        sizes = {t: len(v) for t, v in values.items()}
        apart = {t: sum(trivial[t]) if trivial else 0 for t in values}
        calls.setdefault(current[0], []).append((sizes, apart))
        inside[0] = True
        try:
            return per_temperature(values, bound, trivial=trivial, runs=runs)
        finally:
            inside[0] = False

    def guarded(*args: Any, **kwargs: Any) -> Any:
        assert inside[0], f"claim {current[0]}: a pooled bound rule beside the partition"
        return at_most(*args, **kwargs)

    monkeypatch.setattr(alignment_claims_module, "per_temperature", recording)
    monkeypatch.setattr(alignment_claims_module, "at_most", guarded)
    specs = alignment_claims(cfg)
    for key in BOUND_KEYS:
        current[0] = key
        assert _spec(specs, key).rule(m).verdict == OPPOSITE, key
        assert BOUND_PARTITION in _spec(specs, key).claim, key
    runs: dict[float, int] = {}
    for r in bound_records(m, cfg):
        runs[r["tau"]] = runs.get(r["tau"], 0) + 1
    networks: dict[float, int] = {}
    for r in sandwich_runs(m, cfg) or []:
        networks[r["tau"]] = networks.get(r["tau"], 0) + 1
    assert set(runs) == set(networks) == {0.1, 0.5, 1.0}
    assert [len(calls[k]) for k in BOUND_KEYS] == [1, 1, 2, 1]  # claim 12: two forms of r_T
    for key in BOUND_KEYS[:3]:
        for sizes, _ in calls[key]:
            assert sizes == runs, key
    assert calls["nscl_dcl_sandwich"][0][0] == networks
    # the runs counted apart: Theorem 1's bound >= sqrt(2) N at tau = 0.1, Corollary 1's
    # lower bound <= 0, none for RSA (a correlation can be negative), the literal
    # e^2/(C-1) at tau = 1 (it is the proven form there)
    assert calls["theorem1_bound_holds"][0][1] == {0.1: 5, 0.5: 0, 1.0: 0}
    assert calls["corollary1_cka_bound_holds"][0][1] == {0.1: 5, 0.5: 8, 1.0: 0}
    assert [c[1] for c in calls["rsa_bound_holds"]] == [{0.1: 0, 0.5: 0, 1.0: 0}] * 2
    assert calls["nscl_dcl_sandwich"][0][1] == {0.1: 0, 0.5: 0, 1.0: 10}


def test_a_bound_broken_in_one_temperature_is_not_hidden_by_the_pooled_count() -> None:
    """The counter-example of the partition: every run at tau = 1 breaks the bound, none
    of the 90 at tau = 0.5 do.  Pooled, 5 of 95 is a minority (not reproduced); per
    temperature, the bound stated for every run is broken by the tau = 1 majority
    (opposite), and the every-regime rule wins over the pooled count."""
    values = {0.5: [0.5] * 90, 1.0: [2.0] * 5}
    assert at_most([x for xs in values.values() for x in xs], 1.0).verdict == NOT_AT_SCALE
    split = per_temperature(values, 1.0)
    assert split.verdict == OPPOSITE
    assert "is refuted in tau = 1 (opposite, bound rule: 5 of 5 runs break the bound)" in (
        split.row
    )
    # a temperature whose runs all hold the bound trivially is left out (no evidence),
    # never "within the bound"; with no run left anywhere, no verdict
    apart = per_temperature(
        {0.1: [0.0] * 5, 0.5: [0.5] * 4}, 1.0, trivial={0.1: [True] * 5, 0.5: [False] * 4}
    )
    assert apart.verdict == REPRODUCED and "tau = 0.1" not in apart.rule
    assert per_temperature({0.1: [0.0]}, 1.0, trivial={0.1: [True]}).verdict == NOT_RUN
    # a trivially satisfied run does not dilute a regime's majority: 3 of 5 informative
    # runs break it (opposite), although 3 of 9 with the trivial ones would not
    diluted = per_temperature(
        {0.5: [2.0, 2.0, 2.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0]},
        1.0,
        trivial={0.5: [False] * 5 + [True] * 4},
    )
    assert diluted.verdict == OPPOSITE


# ---------------------------------------------------------------------------- conjunctions
def _combine_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "combine"
    ]


@pytest.mark.parametrize("study", ["alignment_study", "hard_negatives", "spacl_bench"])
def test_every_combined_claim_is_read_as_a_conjunction(study: str) -> None:
    """Every ``combine`` of a claims table passes ``every=True`` ("A and B", "A while B",
    "in both regimes"), so no combined claim reads "mixed" (the legend says so)."""
    calls = _combine_calls(ROOT / "src" / "spacl" / "studies" / study / "claims.py")
    assert calls
    for call in calls:
        every = [k for k in call.keywords if k.arg == "every"]
        assert every and isinstance(every[0].value, ast.Constant), call.lineno
        assert every[0].value.value is True, f"{study}/claims.py:{call.lineno}"


def test_hard_negatives_claim_8_is_refuted_by_its_etf_part_not_mixed(tmp_path: Path) -> None:
    """Claim 8 ("ETF deviation and CDNV grow"): its ETF part is opposite, its CDNV part
    reproduced.  Read as parts (``every=False``, the rule at ef2c178) it is mixed; read as
    the conjunction it states, the ETF part refutes it: not reproduced, the row naming it."""
    m = _metrics("hard-negatives")
    spec = _spec(
        hard_negative_claims(hard_negatives.FULL, 150, "clinc150"), "hucl_large_beta_drifts"
    )
    report = StudyReport("hard-negatives", "t", tmp_path, "cmd", {}, [0, 1, 2, 3, 4])
    (claim,) = evaluate_claims(report, [spec], m)
    assert claim.verdict == REFUTED and claim.verdict != MIXED
    assert "is refuted in ETF deviation (opposite, test, Holm p = " in claim.measured
    assert "; before that mixed (at ef2c178" in claim.measured
    assert POST_HOC.format("not reproduced at this scale (at 03e7086") in claim.measured
    # the counter-example: the same two tests read as parts
    a, b = m["unsupervised"]["beta=5"], m["unsupervised"]["beta=30"]
    from spacl.studies.study import values as v
    from spacl.studies.verdicts import combine

    parts = {
        "ETF deviation": compare(v(b, "etf_deviation"), v(a, "etf_deviation"), min_gap=0.01),
        "CDNV": compare(v(b, "cdnv"), v(a, "cdnv"), min_gap=0.002),
    }
    assert combine(parts).verdict == MIXED
    assert combine(parts, every=True).verdict == REFUTED


# ------------------------------------------------------------------ earlier verdicts named
#: study -> claim keys whose verdict a rule set after it had been read moved, relative to
#: the committed reports before issue 39's rules (18aadd9) or at ef2c178
MOVED: dict[str, set[str]] = {
    "alignment": {
        "weights_diverge_representations_align",
        "alignment_rises_with_classes",
        "lr_linear_alignment_falls",
        "lr_sublinear_alignment_rises",
        "theorem1_bound_holds",
        "corollary1_cka_bound_holds",
        "rsa_bound_holds",
        "nscl_dcl_sandwich",
    },
    "hard-negatives": {
        "beta5_best_accuracy",
        "hucl_beta5_best_nc",
        "hucl_large_beta_drifts",
        "small_batch_hurts_nc",
    },
    "spacl": {"lemma_2_4_negatives_saturate", "theorem_2_1_spacl_farther_from_collapse"},
}
#: the claims issue 39's fourth review moved: refuted as stated (from "not reproduced at
#: this scale", at 03e7086), and claim 19's range-top curve (from "opposite")
FOURTH_REVIEW: dict[str, dict[str, str]] = {
    "alignment": dict.fromkeys(
        [
            "weights_diverge_representations_align",
            "alignment_rises_with_classes",
            "lr_linear_alignment_falls",
            "lr_sublinear_alignment_rises",
        ],
        REFUTED,
    ),
    "hard-negatives": dict.fromkeys(
        [
            "beta5_best_accuracy",
            "hucl_beta5_best_nc",
            "hucl_large_beta_drifts",
            "small_batch_hurts_nc",
        ],
        REFUTED,
    ),
    "spacl": {
        "lemma_2_4_negatives_saturate": NOT_AT_SCALE,
        "theorem_2_1_spacl_farther_from_collapse": REFUTED,
    },
}


def _tables() -> dict[str, list[ClaimSpec]]:
    return {
        "alignment": alignment_claims(alignment_study.FULL),
        "hard-negatives": hard_negative_claims(hard_negatives.FULL, 150, "clinc150"),
        "spacl": claim_specs(),
    }


@pytest.mark.parametrize("study", sorted(MOVED))
def test_each_moved_verdict_names_its_earlier_one(study: str) -> None:
    specs = _tables()[study]
    assert {s.key for s in specs if s.earlier} == MOVED[study]
    verdicts = {"mixed", "opposite", "not reproduced at this scale", "reproduced"}
    for s in specs:
        if s.earlier:
            assert any(s.earlier.startswith(v) for v in verdicts), s.key


def test_claim_21_says_d4_came_after_the_d64_verdict() -> None:
    spec = _spec(claim_specs(), "theorem_2_1_spacl_farther_from_collapse")
    assert spec.family_note == THEOREM_D4_NOTE
    assert "d = 4 added after the d = 64 verdict (opposite" in spec.family_note
    assert spec.earlier.startswith("not reproduced at this scale (at 03e7086")
    assert "before that opposite (d = 64 alone" in spec.earlier


def test_evaluate_claims_writes_the_earlier_verdict_in_the_row(tmp_path: Path) -> None:
    """The note is the report's, from :attr:`ClaimSpec.earlier`: a claim without it has
    none (the counter-example)."""

    def rule(_: Any) -> Any:
        return compare([2.0, 2.1, 2.2], [1.0, 1.1, 1.2])

    text: Callable[[Any], str] = lambda _: "measured"  # noqa: E731
    moved = ClaimSpec("a", "§1", "a > b", "none", "none", text, rule, earlier="mixed")
    kept = ClaimSpec("b", "§1", "a > b", "none", "none", text, rule)
    report = StudyReport("s", "t", tmp_path, "cmd", {}, [0, 1, 2])
    first, second = evaluate_claims(report, [moved, kept], {})
    assert first.measured == f"measured ({POST_HOC.format('mixed')})"
    assert second.measured == "measured"


@pytest.mark.parametrize("study", sorted(MOVED))
def test_the_committed_reports_name_each_moved_verdict(study: str) -> None:
    """The regenerated reports carry the note in exactly the moved claims' rows, in
    results.json and in report.md alike; the legend says what the note means."""
    stored = json.loads((RESULTS / study / "results.json").read_text())
    said = POST_HOC.format("")
    assert {c["key"] for c in stored["claims"] if said in c["measured"]} == MOVED[study]
    report = (RESULTS / study / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and said in line]
    assert len(rows) == len(MOVED[study])
    assert "'rule set after this verdict was read; earlier: <the verdict it read>'" in report


def test_the_committed_verdicts_the_third_review_moved() -> None:
    """Relative to the reports at ef2c178: alignment claims 11 and 12 (one partition, per
    temperature: a bound every run at tau = 1 breaks) and hard-negatives claim 8 (read as
    the conjunction it states)."""
    verdicts = {
        study: {
            c["key"]: c["verdict"]
            for c in json.loads((RESULTS / study / "results.json").read_text())["claims"]
        }
        for study in ("alignment", "hard-negatives")
    }
    assert verdicts["alignment"]["corollary1_cka_bound_holds"] == OPPOSITE
    assert verdicts["alignment"]["rsa_bound_holds"] == OPPOSITE
    assert verdicts["hard-negatives"]["hucl_large_beta_drifts"] == REFUTED
    assert MIXED not in verdicts["hard-negatives"].values()


# ------------------------------------------------------------------ the fourth review
def _stored_claims(study: str) -> list[dict[str, Any]]:
    return list(json.loads((RESULTS / study / "results.json").read_text())["claims"])


@pytest.mark.parametrize("study", sorted(FOURTH_REVIEW))
def test_a_committed_row_that_says_refuted_has_a_verdict_that_says_so(study: str) -> None:
    """The audit's finding: claim rows saying "the claim as stated ... is refuted" beside
    the verdict "not reproduced at this scale".  In the committed reports every such row
    reads "not reproduced (refuted as stated)" (or "opposite", a bound refuted in one
    regime), and the claims the review moved read their new verdicts, each naming its
    earlier one (the counter-example: the reports at 03e7086 held four such rows)."""
    claims = _stored_claims(study)
    for c in claims:
        if "is refuted" in c["measured"]:
            assert c["verdict"] in (REFUTED, OPPOSITE), (study, c["key"], c["verdict"])
        if c["verdict"] == NOT_AT_SCALE:
            assert "is refuted" not in c["measured"], (study, c["key"])
    verdicts = {c["key"]: c["verdict"] for c in claims}
    for key, verdict in FOURTH_REVIEW[study].items():
        assert verdicts[key] == verdict, (study, key)
    report = (RESULTS / study / "report.md").read_text()
    assert "**Not reproduced (refuted as stated)** is no matter of scale" in " ".join(
        report.split()
    )


def test_claim_19_sees_no_direction_past_its_range() -> None:
    """Claim 19's curves still rise at n = 1024, the range's top: not reproduced at this
    scale (no direction past the range), the row saying why the range was not extended;
    its earlier verdict (opposite on n <= 1024) named."""
    claim = next(c for c in _stored_claims("spacl") if c["key"] == "lemma_2_4_negatives_saturate")
    assert claim["verdict"] == NOT_AT_SCALE
    assert (
        "critical size at the range's top (n = 1024): no direction is seen past it"
        in (claim["measured"])
    )
    assert "Range not extended to n = 4096" in claim["measured"]
    assert POST_HOC.format("opposite (on n <= 1024") in claim["measured"]
