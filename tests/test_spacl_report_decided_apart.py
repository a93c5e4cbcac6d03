"""Claims of the SPACL report that read the same runs but are decided apart (a review of
issue 39 asked why they are not families): the report names each as its own family with
its reason, and correcting each group together by Holm would change no verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

from spacl.studies.spacl_bench.claims import DECIDED_APART
from spacl.studies.verdicts import holm

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "docs" / "results" / "spacl" / "results.json"
#: the groups of claims that share runs, by key (the claim decided apart first)
GROUPS = (
    ("corollary_2_2_spacl_certifies_more", "theorem_2_1_spacl_farther_from_collapse"),
    ("best_chance_cut_helps", "best_chance_full_beats_best_baseline"),
    ("fb15k237_cut_helps", "fb15k237_mrr_beats_best_baseline"),
)
#: one Welch test of a rule text: its raw p-value (before any Holm adjustment)
RAW_P = re.compile(r"Welch t = [-+]?[\d.e+-]+, p = ([\d.e+-]+)")


def _claims() -> dict[str, dict]:
    return {c["key"]: c for c in json.loads(STORED.read_text())["claims"]}


def test_each_claim_decided_apart_is_named_with_its_reason() -> None:
    families = json.loads(STORED.read_text())["families"]
    assert {group[0] for group in GROUPS} == set(DECIDED_APART)
    for key, reason in DECIDED_APART.items():
        (line,) = [f for f in families if f"(`{key}`)" in f]
        assert "its own family" in line and reason in line


def test_holm_over_each_group_changes_no_verdict() -> None:
    """Every Welch test of a group, Holm-adjusted over the group: significant at 5%
    exactly where it was (the verdicts stand whether or not the group is a family)."""
    claims = _claims()
    for group in GROUPS:
        raw = [float(p) for key in group for p in RAW_P.findall(claims[key]["rule"])]
        assert len(raw) >= 2, group
        adjusted = holm(raw)
        # within its own claim each test was at most Holm-adjusted over that claim: its
        # 5% decision is the raw one unless the claim held several tests
        own = [
            q for key in group for q in holm([float(p) for p in RAW_P.findall(claims[key]["rule"])])
        ]
        assert [q < 0.05 for q in adjusted] == [q < 0.05 for q in own], (group, raw)
