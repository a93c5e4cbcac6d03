"""Per-claim provenance where runs are not there (issue 39): an arm with no runs is never
"at one clean commit", and results whose metrics name seeds that ``runs`` does not hold
(a truncated store) give a partial report, the arms named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spacl.studies import spacl_bench
from spacl.studies.spacl_bench.claim_runs import (
    NO_RUNS,
    Arm,
    arm_versions,
    claim_arms,
    missing_runs,
    provenance_rows,
)
from spacl.studies.spacl_bench.claims import claim_specs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "spacl"


def _results() -> dict[str, Any]:
    return json.loads((RESULTS / "results.json").read_text())


def _without(
    runs: list[dict[str, Any]], bench: str, setting: str, method: str, seeds: set[int]
) -> list[dict[str, Any]]:
    return [
        r
        for r in runs
        if not (
            r.get("bench") == bench
            and r.get("setting") == setting
            and r.get("method") == method
            and r.get("seed") in seeds
        )
    ]


def test_an_arm_with_no_runs_is_not_clean() -> None:
    assert arm_versions(Arm("a", ())) == (NO_RUNS, "")
    assert arm_versions(Arm("a", ("abc",))) == ("no", "")  # one clean run: clean
    assert NO_RUNS == "no runs read"


def test_a_claim_whose_arm_has_no_runs_says_so_and_names_the_missing_seeds() -> None:
    """VarCon's runs on MNIST-5k supervised removed: claims 1 and 6 read none of its runs;
    their rows say "no runs read" for it and list its seeds as missing, never "each of
    its arms at one clean commit".  The untouched claims keep their rows (the
    counter-example: nothing is missing there)."""
    results = _results()
    m = results["metrics"]
    g = m["benches"]["mnist5k"]["supervised"]
    assert g["best_baseline"] == "VarCon"
    runs = _without(results["runs"], "mnist5k", "supervised", "VarCon", set(range(10)))
    specs = claim_specs()
    rows = {r[1].strip("`"): r for r in provenance_rows(specs, m, runs)}
    one = rows["paper_form_beats_best_baseline_mnist5k_supervised"]
    seeds = ", ".join(str(s) for s in g["baselines"]["VarCon"]["seeds"])
    assert f"{NO_RUNS}: mnist5k_supervised VarCon" in one[6]
    assert (
        f"**seeds without runs** (not counted): mnist5k_supervised VarCon (seed(s) {seeds}: named "
        "by the results, not in the runs)"
    ) in one[6]
    assert "at one clean commit" not in one[6]
    base = next(a for a in claim_arms(m, runs)[one[1].strip("`")] if "base" in a.label)
    assert one[2] == f"{len(base.commits)} (2 arm(s))"  # only the base's runs are read
    whole = {r[1].strip("`"): r for r in provenance_rows(specs, m, results["runs"])}
    assert "seeds without runs" not in whole["paper_form_beats_best_baseline_mnist5k_supervised"][6]
    assert rows["stackoverflow_f1_open_25"] == whole["stackoverflow_f1_open_25"]


def test_an_arm_with_no_runs_and_no_seeds_named_is_no_runs_read_only() -> None:
    """An arm whose group names no chosen value (nothing ran) reads no run: "no runs
    read", and nothing is listed as missing."""
    results = _results()
    m = json.loads(json.dumps(results["metrics"]))
    m["benches"]["mnist5k"]["supervised"]["baselines"]["VarCon"]["tau"] = None
    arms = claim_arms(m, results["runs"])["paper_form_beats_best_baseline_mnist5k_supervised"]
    varcon = next(a for a in arms if a.label.endswith("VarCon"))
    assert varcon.commits == () and varcon.missing == ()
    assert arm_versions(varcon) == (NO_RUNS, "")
    assert missing_runs(m, results["runs"]) == []


def test_truncated_runs_make_the_report_partial(tmp_path: Path) -> None:
    """A results.json whose ``runs`` lost CLINC150 self-supervised seeds 3 and 4: the
    regenerated report's header says it is partial and names the arms; the provenance
    table marks them.  The committed results (every named seed's run there) are not
    partial: the counter-example."""
    results = _results()
    assert missing_runs(results["metrics"], results["runs"]) == []
    results["runs"] = [
        r
        for r in results["runs"]
        if not (
            r.get("bench") == "clinc150"
            and r.get("setting") == "self-supervised"
            and r.get("seed") in (3, 4)
        )
    ]
    gaps = missing_runs(results["metrics"], results["runs"])
    assert gaps and all("(seed(s) 3, 4: named by the results, not in the runs)" in x for x in gaps)
    assert all(x.startswith("clinc150_self_supervised ") for x in gaps)
    assert "clinc150_self_supervised Barlow Twins (seed(s) 3, 4" in " ".join(gaps)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "results.json").write_text(json.dumps(results))
    spacl_bench.regenerate(tmp_path / "in" / "results.json", tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    status = [x for x in report.splitlines() if x.startswith("- Status:")]
    assert len(status) == 1
    assert status[0].startswith(
        f"- Status: **partial**: {len(gaps)} compared arm(s) name seeds whose runs "
        "results.json's `runs` does not hold"
    )
    assert "clinc150_self_supervised SPACL base (seed(s) 3, 4" in status[0]
    ten = next(
        x for x in report.splitlines() if x.startswith("| 10 | `spacl_beats_best_baseline_clinc")
    )
    assert "**seeds without runs** (not counted): clinc150_self_supervised SPACL selected" in ten


def test_the_committed_report_is_not_partial(tmp_path: Path) -> None:
    spacl_bench.regenerate(RESULTS, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert not [x for x in report.splitlines() if x.startswith("- Status:")]
    assert "**seeds without runs** (not counted)" not in report
