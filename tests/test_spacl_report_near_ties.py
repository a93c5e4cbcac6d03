"""Near-ties at a grid edge (issue 39): the selection rule counts a tie only at equal
validation scores (``same_score``, 1e-9) and stays as it ran; the report flags, beside
its "at an edge" flags, every choice whose grid-edge value scores within one validation
example of it, with both scores, and its header says how ties are defined and how many
near-ties there are."""

from __future__ import annotations

import json
from pathlib import Path

from spacl.studies import spacl_bench
from spacl.studies.spacl_bench.edges import (
    VAL_EXAMPLES,
    edge_caveat,
    near_edge,
    near_ties,
    one_example,
    val_examples,
)
from spacl.studies.spacl_bench.methods import same_score

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "spacl"


def test_validation_sizes_come_from_the_data_notes() -> None:
    notes = json.loads((RESULTS / "results.json").read_text())["data"]
    assert val_examples(notes) == {"best chance": 768, "mnist5k": 800, "clinc150": 2250}
    assert val_examples(["something else: 10 train / 5 val / 5 test"]) == {}
    m = {VAL_EXAMPLES: {"mnist5k": 800, "best chance": 768}}
    assert one_example(m, "mnist5k weak") == 0.125
    assert one_example(m, "best chance") == 100 / 768
    assert one_example(m, "clinc150 supervised") is None  # size not known: no near-tie


def test_a_near_tie_is_one_example_from_an_edge_and_not_a_tie() -> None:
    unit = 0.125  # one of 800 validation examples, in %
    grid = {"0.05": 90.0, "0.1": 94.75, "0.2": 94.0, "0.5": 94.625}
    assert not same_score(94.75, 94.625)  # the selection rule: no tie, the grid stays
    assert near_edge(0.1, grid, unit) == [("highest", 0.5, 94.625, 94.75)]
    # counter-examples: two examples away; an exact tie (flagged as a tie instead); a
    # choice at the edge itself (flagged as at the edge)
    assert near_edge(0.1, {**grid, "0.5": 94.5}, unit) == []
    assert near_edge(0.1, {**grid, "0.5": 94.75}, unit) == []
    assert near_edge(0.5, {**grid, "0.5": 95.0}, unit) == []
    # both ends can be near
    both = {"0.05": 94.625, "0.1": 94.75, "0.5": 94.625}
    assert [e[0] for e in near_edge(0.1, both, unit)] == ["lowest", "highest"]


def test_near_ties_are_listed_and_stated_in_the_claim_rows() -> None:
    m = {
        "benches": {
            "mnist5k": {
                "weak": {
                    "tuning": {"A": {"0.05": 90.0, "0.1": 94.75, "0.5": 94.625}},
                    "temperatures": {"A": 0.1},
                }
            }
        },
        VAL_EXAMPLES: {"mnist5k": 800},
    }
    rows = near_ties(m)
    assert rows == [
        ["mnist5k weak", "A", "0.1", "94.750", "highest value 0.5", "94.625", "+0.125", "0.125"]
    ]
    caveat = edge_caveat(m, [("mnist5k weak", "A")])
    assert "mnist5k weak A: 0.1 (validation 94.750) is within one validation example" in caveat
    assert "of the grid's highest value 0.5 (94.625)" in caveat
    assert edge_caveat({**m, VAL_EXAMPLES: {}}, [("mnist5k weak", "A")]) == ""


def test_the_committed_report_counts_and_flags_its_near_ties(tmp_path: Path) -> None:
    """The committed results hold no tie with an edge and 5 near-ties, all one example
    below the top of their grid; the header defines a tie and counts both."""
    out = spacl_bench.regenerate(RESULTS, tmp_path)
    m = out["metrics"]
    near = near_ties(m)
    assert len(near) == 5
    assert {(r[0], r[2], r[4]) for r in near} == {
        ("mnist5k supervised", "0.1", "highest value 0.5"),
        ("mnist5k weak", "0.5", "highest value 1.25"),
        ("mnist5k weak", "1.25", "highest value 3.12"),
        ("clinc150 self-supervised", "0.02", "highest value 0.05"),
        ("clinc150 self-supervised", "0.1", "highest value 0.5"),
    }
    report = (tmp_path / "report.md").read_text()
    stamp = next(x for x in report.splitlines() if x.startswith("- Grid edges:"))
    assert "0 tied with an edge value (a tie: the same validation score, to 1e-9)" in stamp
    assert "and 5 near-tie(s) (an edge value within one validation example" in stamp
    assert "0.125 points on mnist5k (800 examples)" in stamp
    assert "**Near-ties** (5)" in report
    # the claims comparing Barlow Twins on CLINC150 self-supervised (5 and 10) say so
    claims = {c["key"]: c["measured"] for c in out["claims"]}
    for key in (
        "paper_form_beats_best_baseline_clinc150_self_supervised",
        "spacl_beats_best_baseline_clinc150_self_supervised",
    ):
        assert "clinc150 self-supervised Barlow Twins: 0.02 (validation 87.511)" in claims[key]


def test_the_grown_best_chance_table_flags_a_near_tie_by_the_same_rule(tmp_path: Path) -> None:
    """The addendum's "grown choice in its grid" reads ``near_edge``'s rule: SPACL IB+H on
    the grown grid scores 58.724 at 0.5 and 58.594 at 1.25, exactly one validation example
    (100 / 768) apart: a near-tie, flagged; SPACL full (58.854 vs 58.333) stays inside."""
    from spacl.studies.spacl_bench.grown import grown_edge as _grown_edge

    unit = 100 / 768
    tune = {"0.05": 21.875, "0.2": 55.46875, "0.5": 58.723958333333336, "1.25": 58.59375}
    flag = _grown_edge("SPACL IB+H", 0.5, tune, unit)
    assert flag.startswith("inside, **near-tie**: within one validation example (0.130 points)")
    assert "of the highest value 1.25 (58.724 vs 58.594)" in flag
    assert _grown_edge("SPACL IB+H", 0.5, {**tune, "1.25": 58.4}, unit) == "inside"
    assert _grown_edge("SPACL IB+H", 0.5, tune) == "inside"  # no validation size known
    assert _grown_edge("A", 1.25, tune, unit).startswith("highest (")  # at the edge itself
    spacl_bench.regenerate(RESULTS, tmp_path)
    report = (tmp_path / "report.md").read_text()
    addendum = report.split("## Addendum: SPACL's best chance on a grown grid")[1]
    rows = {r.split(" | ")[0]: r for r in addendum.splitlines() if r.startswith("| SPACL")}
    assert "**near-tie**" in rows["| SPACL IB+H"]
    assert "| inside |" in rows["| SPACL full"] and "| inside |" in rows["| SPACL IB"]
