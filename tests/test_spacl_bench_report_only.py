"""The SPACL study's report from committed files (issue 39): ``--report-only`` with no run
store, a partial store, and every validation choice checked against its grid's edges."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spacl.studies.spacl_bench import main, selected_tuning
from spacl.studies.spacl_bench.collect import METRICS, collect_setting
from spacl.studies.spacl_bench.edges import edge_caveat, edge_of, grid_edges
from spacl.studies.spacl_bench.methods import BASE, spacl_method
from spacl.studies.spacl_bench.protocol import RunKey, RunStore
from spacl.studies.spacl_bench.stages import SettingResult

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "results" / "spacl"


def _kept(text: str) -> list[str]:
    return [x for x in text.splitlines() if not x.startswith(("- Date:", "- Regenerated"))]


def test_the_reports_command_line_regenerates_it_into_an_empty_dir(tmp_path: Path) -> None:
    """The module entry point, as the report's ``Command:`` line runs it, into an empty
    directory (no run store): the committed report again, identical but for stamps."""
    committed = (COMMITTED / "report.md").read_text()
    command = committed.splitlines()[2]
    assert command.startswith("- Command: `python -m spacl.studies.spacl_bench --bench all ")
    out = tmp_path / "empty"
    out.mkdir()
    args = ["--bench", "all", "--report-only", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "spacl.studies.spacl_bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert _kept((out / "report.md").read_text()) == _kept(committed)


@pytest.mark.parametrize("bench", ["mnist5k", "clinc150", "best_chance"])
def test_report_only_writes_the_whole_report_whatever_the_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bench: str
) -> None:
    monkeypatch.chdir(ROOT)
    main(["--bench", bench, "--report-only", "--out", str(tmp_path)])
    assert _kept((tmp_path / "report.md").read_text()) == _kept(
        (COMMITTED / "report.md").read_text()
    )


def test_report_only_with_nothing_to_read_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no docs/results/spacl here
    with pytest.raises(SystemExit) as stop:
        main(["--bench", "all", "--report-only", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no run store" in err and "--from" in err and "\n" not in err
    with pytest.raises(SystemExit):
        main(["--bench", "all", "--report-only", "--out", "x", "--from", str(tmp_path / "no")])
    assert "no stored results.json" in capsys.readouterr().err


def _runs(store: RunStore, name: str, scores: dict[float, float]) -> None:
    for tau, score in scores.items():
        store.add(
            RunKey("b", "supervised", name, tau, 0),
            {
                "steps": 1,
                "val": dict.fromkeys(METRICS, score),
                "test": dict.fromkeys(METRICS, score),
            },
        )


def test_collect_tunes_the_selected_setting_too_and_skips_missing_runs(tmp_path: Path) -> None:
    """The validation-chosen setting's grid is in ``tuning`` (so the edge check sees it);
    options and untrained rows missing from a partial store are left out, not a KeyError."""
    base = spacl_method(BASE, "supervised", 8).name
    selected = "SPACL[selected]"
    store = RunStore(tmp_path / "b.jsonl")
    _runs(store, selected, {0.05: 0.80, 0.1: 0.85, 0.2: 0.9, 0.5: 0.9})
    res = SettingResult(
        "b",
        "supervised",
        {selected: 0.2},
        base,
        selected,
        [base, selected, "SPACL[never ran]"],
        "linear",
        [0],
        grids={selected: [0.05, 0.1, 0.2, 0.5]},
    )
    g = collect_setting(store, res, 8)
    assert g["tuning"][selected] == {"0.05": 80.0, "0.1": 85.0, "0.2": 90.0, "0.5": 90.0}
    assert g["options"] == {} and g["untrained"] == {}
    rows, total = grid_edges({"benches": {"b": {"supervised": g}}})
    assert total == 1
    assert rows == [["b supervised", selected, "0.2", "ties the highest (0.5)", rows[0][4]]]


def test_a_tie_with_a_grid_edge_is_flagged_and_an_interior_optimum_is_not() -> None:
    grid = {"0.05": 80.0, "0.1": 85.0, "0.2": 90.0, "0.5": 88.0}
    assert edge_of(0.2, grid) == ""  # a strict interior optimum
    assert edge_of(0.2, {**grid, "0.5": 90.0}) == "ties the highest (0.5)"
    assert edge_of(0.1, {**grid, "0.05": 85.0, "0.2": 80.0}) == "ties the lowest (0.05)"
    assert edge_of(0.1, {**grid, "0.2": 85.0}) == ""  # a tie between interior values
    assert edge_of(0.5, grid) == "highest" and edge_of(0.05, grid) == "lowest"
    assert edge_of(0.1, {"0.1": 85.0}) == ""  # a one-value grid (a quick run)
    m = {
        "benches": {
            "b": {
                "s": {
                    "tuning": {"A": {**grid, "0.5": 90.0}, "B": grid},
                    "temperatures": {"A": 0.2, "B": 0.2},
                }
            }
        }
    }
    rows, total = grid_edges(m)
    assert total == 2 and [(r[1], r[3]) for r in rows] == [("A", "ties the highest (0.5)")]
    caveat = edge_caveat(m, [("b s", "A"), ("b s", "B")])
    assert "b s A: 0.2 ties the validation score of the highest grid value (0.5)" in caveat
    assert "B" not in caveat.replace("Caveat", "")
    assert edge_caveat(m, [("b s", "B")]) == ""


def test_regeneration_adds_the_selected_settings_tuning_from_the_run_rows() -> None:
    """Results written before the selected setting's grid was recorded: its grid search
    replayed on the stored seed-0 rows gives the recorded choice, and the committed
    numbers: 61 choices (not 58), 22 grids grown (not 20), the seed-0 ties flagged."""
    stored = json.loads((COMMITTED / "results.json").read_text())
    metrics = stored["metrics"]
    for sets in metrics["benches"].values():
        for g in sets.values():
            if g["selected_name"] != g["base_name"]:  # the base's own grid stays
                g["tuning"].pop(g["selected_name"], None)
    selected_tuning(metrics, stored["runs"])
    ema = metrics["benches"]["clinc150"]["self-supervised"]
    assert ema["tuning"][ema["selected_name"]]["0.2"] == pytest.approx(87.9111, abs=1e-3)
    again = json.loads((COMMITTED / "results.json").read_text())["metrics"]
    rows, total = grid_edges(again)
    assert total == 61
    from spacl.studies.spacl_bench.edges import grown_grids

    assert grown_grids(again) == 22
    ties = {(r[0], r[1].split(", ")[-1], r[2], r[3]) for r in rows if r[3].startswith("ties")}
    assert ("clinc150 self-supervised", "gen=1]", "0.2", "ties the highest (0.5)") in ties
    assert ("clinc150 supervised", "no_anchor]", "0.5", "ties the highest (1.25)") in ties
    assert ("clinc150 supervised", "oaa]", "1.25", "ties the highest (3.12)") in ties
