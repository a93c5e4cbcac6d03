"""The alignment study's two batch-size claims are one family (issue 39): both read the
same batch-size sweep, so their comparison tests are Holm-corrected together, and the
report names the family beside the rules."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from spacl.studies import alignment_study
from spacl.studies.alignment_study.claims import BATCH_FAMILY, BATCH_FAMILY_NOTE, claims
from spacl.studies.alignment_study.config import FULL
from spacl.studies.claim_table import evaluate_claims
from spacl.studies.report import StudyReport
from spacl.studies.stats import welch
from spacl.studies.verdicts import MIXED, NOT_AT_SCALE, REFUTED, REPRODUCED, holm_within

ROOT = Path(__file__).resolve().parents[1]
BATCH_KEYS = ("lr_linear_alignment_falls", "lr_sublinear_alignment_rises")
NOISE = [-0.02, -0.01, 0.0, 0.01, 0.02]
#: a step of this size between two batch sizes gives Welch p ~ 0.008 (5 seeds a side)
STEP = 0.035


def _point(level: float) -> dict[str, Any]:
    return {"cka_NSCL": {"values": [level + e for e in NOISE]}}


def _metrics() -> dict[str, Any]:
    """Claim 7 (lr ∝ B: alignment falls) has four clear steps, p ~ 0.008 each; claim 8's
    twelve steps are flat (p = 1)."""
    falling = {"100": _point(0.9), "200": _point(0.9 - STEP), "400": _point(0.9 - 2 * STEP)}
    flat = {b: _point(0.9) for b in ("100", "200", "400")}
    sweep = {"B": falling, **{lbl: flat for lbl in ("sqrt(B)", "B^(1/4)", "constant")}}
    return {"batch": sweep, "batch_steps": sweep}


def _decide(tmp_path: Path, specs: list[Any], metrics: dict[str, Any]) -> StudyReport:
    report = StudyReport("alignment", "t", tmp_path, "cmd", {}, [0, 1, 2, 3, 4])
    evaluate_claims(report, specs, metrics)
    return report


def test_the_two_batch_size_claims_are_one_named_family() -> None:
    specs = {s.key: s for s in claims(FULL)}
    assert [specs[k].family for k in BATCH_KEYS] == [BATCH_FAMILY, BATCH_FAMILY]
    # no other claim is in it
    assert [s.key for s in specs.values() if s.family == BATCH_FAMILY] == list(BATCH_KEYS)


def test_a_p_that_passes_within_its_claim_fails_under_the_joint_holm(tmp_path: Path) -> None:
    """The counter-example: claim 7's four steps each have p ~ 0.008, so Holm over its own
    four tests (about 0.03) reproduces it; Holm over the family's sixteen tests (claim 8's
    twelve flat steps beside them, about 0.13) does not."""
    m = _metrics()
    p = welch([0.9 + e for e in NOISE], [0.9 - STEP + e for e in NOISE])[1]
    assert 0.05 / 16 < p < 0.05 / 4  # passes among 4 tests, not among 16
    specs = [s for s in claims(FULL) if s.key in BATCH_KEYS]
    alone = _decide(tmp_path / "alone", [dataclasses.replace(s, family=None) for s in specs], m)
    assert alone.claims[0].verdict == REPRODUCED
    assert "(family 'claim 1', 4 tests)" in alone.claims[0].rule
    joint = _decide(tmp_path / "joint", specs, m)
    assert joint.claims[0].verdict == NOT_AT_SCALE
    assert f"(family '{BATCH_FAMILY}', 16 tests)" in joint.claims[0].rule
    assert joint.claims[1].verdict == NOT_AT_SCALE
    assert joint.families == [
        f"'{BATCH_FAMILY}': claims 1, 2: 16 comparison test(s), Holm-corrected together"
        f" ({BATCH_FAMILY_NOTE})"
    ]
    # the report names the family beside the rules
    assert f"'{BATCH_FAMILY}': claims 1, 2: 16 comparison test(s)" in joint.claims_table()


def test_committed_claim_7_reads_the_joint_holm(tmp_path: Path) -> None:
    """On the committed results: claim 7's equal-epochs step B=100 -> B=200 (raw p =
    0.0313) is significant within the claim alone (Holm over its 4 tests: the two
    regimes opposite ways, which read "mixed" when the family was formed; the claim is
    stated for both regimes, so since issue 39 that reads "regimes disagree", not
    reproduced) but not among the family's 16 tests; there claims 7 and 8 each hold a
    step that is significantly opposite (claim 7: equal epochs B=200 -> B=400), so both
    are refuted as stated (issue 39's fourth review; not reproduced at this scale
    before)."""
    committed = ROOT / "docs" / "results" / "alignment"
    metrics = json.loads((committed / "results.json").read_text())["metrics"]
    spec = next(s for s in claims(FULL) if s.key == BATCH_KEYS[0])
    alone, size = holm_within("claim 7", lambda: spec.rule(metrics))
    assert size == 4 and alone.verdict == REFUTED and alone.verdict != MIXED
    assert alone.row.startswith("regimes disagree: equal epochs opposite (test), equal steps")
    assert "in every one of the regimes, is refuted in equal epochs" in alone.row
    out = alignment_study.regenerate(committed, tmp_path)
    decided = {c["key"]: c for c in out["claims"]}
    assert [decided[k]["verdict"] for k in BATCH_KEYS] == [REFUTED, REFUTED]
    assert NOT_AT_SCALE not in [decided[k]["verdict"] for k in BATCH_KEYS]
    assert "p = 0.0313, Holm-adjusted p = 0.156" in decided[BATCH_KEYS[0]]["rule"]
    assert f"(family '{BATCH_FAMILY}', 16 tests)" in decided[BATCH_KEYS[1]]["rule"]
    numbers = [i for i, c in enumerate(out["claims"], 1) if c["key"] in BATCH_KEYS]
    assert numbers == [7, 8]
    assert out["families"][0] == (
        f"'{BATCH_FAMILY}': claims 7, 8: 16 comparison test(s), Holm-corrected together"
        f" ({BATCH_FAMILY_NOTE})"
    )
    # the family was formed after the per-claim verdicts were read: the report says so
    assert "formed after the verdicts had been read" in BATCH_FAMILY_NOTE
    report = (tmp_path / "report.md").read_text()
    assert f"Families of tests (Holm's correction within each): '{BATCH_FAMILY}'" in report
