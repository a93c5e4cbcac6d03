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
    # nor a source checkout's (an installed package): nothing to read anywhere
    monkeypatch.setattr("spacl.data.sources.source_checkout", lambda: None)
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


def test_a_flagged_choice_says_why_its_grid_did_not_grow_further() -> None:
    """The growth cap (3 values past the method's own grid at that end), a grown value
    not in the store, or the best-chance bench's pre-registered grid."""
    from spacl.studies.spacl_bench.edges import BEST_CHANCE, why_not_grown

    capped = {f"{t:g}": 90.0 for t in (0.2, 0.5, 1.25, 3.12, 7.79)} | {"0.05": 80.0}
    assert why_not_grown("b s", "A", "ties the highest (7.79)", capped).startswith("the growth cap")
    short = {"0.05": 80.0, "0.1": 85.0, "0.2": 90.0, "0.5": 90.0}
    assert why_not_grown("b s", "A", "ties the highest (0.5)", short).startswith(
        "the grown value's run"
    )
    assert why_not_grown(BEST_CHANCE, "A", "highest", short).startswith("the pre-registered")
    barlow = {f"{t:g}": 90.0 for t in (0.005, 0.01, 0.02, 0.05, 0.125, 0.312, 0.781)}
    assert why_not_grown("b s", "Barlow Twins", "highest", barlow).startswith("the growth cap")
    m = {"benches": {"b": {"s": {"tuning": {"A": capped}, "temperatures": {"A": 0.2}}}}}
    caveat = edge_caveat(m, [("b s", "A")])
    assert "b s A: 0.2 ties the validation score of the highest grid value (7.79) (the " in caveat
    assert "growth cap" in caveat


def test_regeneration_adds_the_selected_settings_tuning_from_the_run_rows() -> None:
    """Results written before the selected setting's grid was recorded: its grid search
    replayed on the stored seed-0 rows (the tie rule included) gives the recorded choice,
    and the committed numbers: 61 choices, 24 grids grown (22 before the tie rule), no
    bench choice at or tied with an edge, the best-chance bench's 5 edge choices flagged."""
    stored = json.loads((COMMITTED / "results.json").read_text())
    metrics = stored["metrics"]
    for sets in metrics["benches"].values():
        for g in sets.values():
            if g["selected_name"] != g["base_name"]:  # the base's own grid stays
                g["tuning"].pop(g["selected_name"], None)
    selected_tuning(metrics, stored["runs"])
    ema = metrics["benches"]["clinc150"]["self-supervised"]
    name = ema["selected_name"]
    assert ema["temperatures"][name] == 1.25  # 0.2 tied 0.5: grown to 1.25, then 3.12
    assert list(ema["tuning"][name]) == ["0.05", "0.1", "0.2", "0.5", "1.25", "3.12"]
    assert ema["tuning"][name]["0.2"] == pytest.approx(87.9111, abs=1e-3)
    again = json.loads((COMMITTED / "results.json").read_text())["metrics"]
    rows, total = grid_edges(again)
    assert total == 61
    from spacl.studies.spacl_bench.edges import BEST_CHANCE, grown_grids

    assert grown_grids(again) == 24
    assert [r[0] for r in rows] == [BEST_CHANCE] * 5  # every bench choice is inside
    assert not [r for r in rows if r[3].startswith("ties")]
    oaa = next(
        (t, again["benches"]["clinc150"]["supervised"]["temperatures"][n])
        for n, t in again["benches"]["clinc150"]["supervised"]["tuning"].items()
        if n.endswith("oaa]")
    )
    assert list(oaa[0])[-1] == "7.79" and oaa[1] == 1.25  # grown to the cap, inside


def _group(values: list[float], tau: float = 0.1) -> dict:
    from spacl.studies.stats import summarize

    recs = [{"ncc": v, "linear": v, "knn": v} for v in values]
    summary = summarize(recs)
    return {"tau": tau, "seeds": list(range(len(values))), "val": summary, "test": summary}


def test_ablation_cells_read_the_holm_adjusted_p_of_the_claims_family() -> None:
    """One lucky raw p (about 0.01) among the family's 30 tests: the cell shows it and its
    Holm-adjusted p and says "not reproduced", as the claim does; an effect that survives
    the correction is "reproduced" in both."""
    from spacl.studies.spacl_bench.claims import (
        ABLATIONS,
        BENCH_SETTINGS,
        PAPER_ABLATION,
        claim_specs,
    )
    from spacl.studies.spacl_bench.report import _family_cells
    from spacl.studies.verdicts import NOT_AT_SCALE, REPRODUCED, holm_family

    noise = [91.0, 91.6, 90.4, 91.3, 90.7]
    benches: dict = {}
    for bench, setting in BENCH_SETTINGS:
        arms = {k: {"name": k, **_group(noise)} for k in (*PAPER_ABLATION, "ib")}
        benches.setdefault(bench, {})[setting] = {
            "criterion": "ncc",
            "seeds": list(range(5)),
            "spacl": {"base": _group(noise)},
            "ablations": arms,
        }
    lucky = benches["mnist5k"]["weak"]["ablations"]["no_anchor"]
    lucky.update(_group([x - 1.3 for x in [91.0, 91.3, 90.9, 91.2, 91.1]]))
    strong = benches["clinc150"]["supervised"]["ablations"]["oaa"]
    strong.update(_group([x - 9.0 for x in noise]))
    m = {"benches": benches}
    cells = _family_cells(m)
    assert len(cells) == 30
    cell = cells[("no_anchor", "mnist5k", "weak")]
    raw = float(cell.split("raw p = ")[1].split(",")[0])
    adjusted = float(cell.split("Holm-adjusted p = ")[1].split(" ")[0])
    assert raw < 0.05 <= adjusted and cell.endswith(NOT_AT_SCALE)
    assert cells[("oaa", "clinc150", "supervised")].endswith(f": {REPRODUCED}")
    # the claims read the same family the same way
    specs = [s for s in claim_specs() if s.family == ABLATIONS]
    verdicts, size = holm_family(ABLATIONS, [lambda s=s: s.rule(m) for s in specs])
    assert size == 30
    no_anchor = verdicts[[s.key for s in specs].index("ablation_no_anchor")]
    assert f"Holm-adjusted p = {adjusted:.3g}" in no_anchor.rule
    assert no_anchor.verdict == NOT_AT_SCALE


def test_protocol_states_the_grids_as_run_from_the_data() -> None:
    from spacl.studies.spacl_bench.report import protocol_text

    four = {"0.05": 1.0, "0.1": 2.0, "0.2": 3.0, "0.5": 2.0}
    six = {**four, "1.25": 4.0, "3.12": 3.0}
    m = {
        "benches": {
            "b": {"s": {"tuning": {"A": four, "B": six, "C": {}}, "temperatures": {"A": 0.2}}},
            "c": {"s": {"tuning": {"B": six}, "temperatures": {"B": 1.25}}},
        }
    }
    text = protocol_text(m)
    assert "4 values for 1 choice(s), 6 values for 1 choice(s)" in text
    assert "starts at {0.05, 0.1, 0.2, 0.5}" in text and "up to 3 values per end" in text
    assert "four-temperature" not in text and "{" not in text.replace("{0.0", "")


def test_best_chance_claim_rows_carry_the_grid_edge_caveat() -> None:
    from spacl.studies.spacl_bench.claims import claim_specs

    def arm(tau: float) -> dict:
        return {**_group([50.0, 51.0, 52.0, 50.5, 51.5], tau)}

    tune = {"0.05": 20.0, "0.1": 30.0, "0.2": 50.0, "0.5": 60.0}
    m = {
        "benches": {},
        "best_chance": {
            "seeds": list(range(5)),
            "arms": {n: arm(0.2) for n in ("SPACL IB+H", "SPACL IB", "SPACL full", "HSCL")},
            "tuning": {n: tune for n in ("SPACL IB+H", "SPACL IB", "SPACL full", "HSCL")},
            "temperatures": {"SPACL IB+H": 0.5, "SPACL IB": 0.2, "SPACL full": 0.2, "HSCL": 0.2},
        },
    }
    m["best_chance"]["arms"]["SupCon+queue"] = arm(0.2)
    rows = {s.key: s.measured(m) for s in claim_specs() if s.key.startswith("best_chance")}
    assert (
        "Caveat (grid edge): best chance SPACL IB+H: 0.5 is the highest value"
        in rows["best_chance_cut_helps"]
    )
    assert "Caveat" not in rows["best_chance_full_beats_best_baseline"]  # all inside


def test_best_chance_caveat_names_every_compared_methods_edge_choice() -> None:
    """Claim 23 compares SPACL full with the better of SupCon+queue and HSCL: the caveat
    names the edge choice of every one of them, the baseline not picked too (a
    counter-example: HSCL at its grid's top edge while SupCon+queue is the better)."""
    from spacl.studies.spacl_bench.claims import claim_specs

    def arm(tau: float, val: float) -> dict:
        g = dict(_group([50.0, 51.0, 52.0, 50.5, 51.5], tau))
        g["val"] = {"ncc": {"mean": val}}
        return g

    tune = {"0.05": 20.0, "0.1": 30.0, "0.2": 50.0, "0.5": 60.0}
    names = ("SPACL IB+H", "SPACL IB", "SPACL full", "HSCL", "SupCon+queue")
    temps = {"SPACL IB+H": 0.2, "SPACL IB": 0.2, "SPACL full": 0.2, "HSCL": 0.5}
    m = {
        "benches": {},
        "best_chance": {
            "seeds": list(range(5)),
            "arms": {
                n: arm(temps.get(n, 0.2), 60.0 if n == "SupCon+queue" else 50.0) for n in names
            },
            "tuning": {n: tune for n in names},
            "temperatures": {**temps, "SupCon+queue": 0.2},
        },
    }
    row = next(
        s.measured(m) for s in claim_specs() if s.key == "best_chance_full_beats_best_baseline"
    )
    assert "vs SupCon+queue" in row  # the better baseline on validation
    assert (
        "Caveat (grid edge): best chance HSCL: 0.5 is the highest value of its pre-registered "
        "grid: the pre-registered grid does not grow, and a value beyond it might score higher"
    ) in row
    # with the addendum's grown grids the caveat says where the choice went and what the
    # claim's rule gives there, not that a value beyond the grid might score higher
    grown_tune = {**tune, "1.25": 70.0, "3.12": 65.0}
    m["best_chance"]["grown"] = {
        "arms": {**m["best_chance"]["arms"], "HSCL": arm(1.25, 55.0)},
        "tuning": {n: (grown_tune if n == "HSCL" else tune) for n in names},
    }
    row = next(
        s.measured(m) for s in claim_specs() if s.key == "best_chance_full_beats_best_baseline"
    )
    assert "best chance HSCL: 0.5 is the highest value of its pre-registered grid; the " in row
    assert "addendum grows it (0.05-3.12): 0.5 -> 1.25, inside" in row
    picked = "validation still picks SupCon+queue (validation NCC SupCon+queue 60.0, HSCL 55.0)"
    assert picked in row
    assert "applies claim 23's rule to the grown choices: not reproduced at this scale" in row
    assert "might score higher" not in row


def test_the_best_chance_addendum_grows_its_own_grids_and_leaves_the_preregistered_alone(
    tmp_path: Path,
) -> None:
    """The addendum (not pre-registered) grows each arm's grid by the benches' rule on
    the runs the store holds (nothing trained here): an arm at the top grows past it,
    a tie with the top grows too, an interior arm does not; the pre-registered choices
    (the four-value grid) stay as they were, and the report states both, labelled."""
    from spacl.studies.report import StudyReport
    from spacl.studies.spacl_bench.best_chance import (
        ARMS,
        CRITERION,
        NAME,
        SETTING,
        collect,
        collect_grown,
        run_best_chance,
        run_grown,
    )
    from spacl.studies.spacl_bench.report import _grown_best_chance_section

    curves = {
        "SupCon+queue": {0.05: 0.60, 0.1: 0.62, 0.2: 0.58, 0.5: 0.5},  # inside
        "HSCL": {0.05: 0.3, 0.1: 0.4, 0.2: 0.5, 0.5: 0.6, 1.25: 0.65, 3.12: 0.61},  # top
        "SPACL IB": {0.05: 0.2, 0.1: 0.4, 0.2: 0.6, 0.5: 0.6, 1.25: 0.55},  # ties the top
        "SPACL IB+H": {0.05: 0.2, 0.1: 0.4, 0.2: 0.5, 0.5: 0.6},  # top, 1.25 not stored
        "SPACL full": {0.05: 0.2, 0.1: 0.4, 0.2: 0.5, 0.5: 0.6, 1.25: 0.7, 3.12: 0.8, 7.79: 0.9},
    }
    store = RunStore(tmp_path / "bc.jsonl")
    for name, curve in curves.items():
        for tau, score in curve.items():
            for seed in range(5):
                rec = {"val": {"ncc": score, "knn": score}, "test": {"ncc": score, "knn": score}}
                store.add(RunKey(NAME, SETTING, name, tau, seed), {"steps": 1, **rec})
    tuned = run_best_chance(store, train=False)
    assert tuned == {
        "SupCon+queue": 0.1, "HSCL": 0.5, "SPACL IB": 0.2, "SPACL IB+H": 0.5, "SPACL full": 0.5
    }  # fmt: skip
    grown = run_grown(store, train=False)
    assert set(grown) == set(ARMS) and CRITERION == "ncc"
    assert grown["SupCon+queue"] == (0.1, [0.05, 0.1, 0.2, 0.5])
    assert grown["HSCL"] == (1.25, [0.05, 0.1, 0.2, 0.5, 1.25, 3.12])
    assert grown["SPACL IB"] == (0.2, [0.05, 0.1, 0.2, 0.5, 1.25])
    assert grown["SPACL IB+H"] == (0.5, [0.05, 0.1, 0.2, 0.5])
    assert grown["SPACL full"] == (7.79, [0.05, 0.1, 0.2, 0.5, 1.25, 3.12, 7.79])
    bc = collect(store, tuned)
    bc["grown"] = collect_grown(store, grown)
    assert bc["temperatures"] == tuned  # the pre-registered choices, unchanged
    assert set(bc["tuning"]["HSCL"]) == {"0.05", "0.1", "0.2", "0.5"}
    report = StudyReport("t", "T", tmp_path / "t", "cmd", {}, list(range(5)))
    _grown_best_chance_section(report, bc)
    text = "\n".join(report.blocks)
    assert "grown grid, not pre-registered" in text.lower()
    assert "highest (the growth cap" in text  # SPACL full, still rising at the cap
    assert "highest (the grown value's run not in the store)" in text  # SPACL IB+H
    assert "| 0.5 -> 1.25 |" in text  # HSCL
    assert "22: **" in text and "23: **" in text


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('{"x": 1}', "lacks 'bench'"),
        ("not json", "not a JSON run record"),
        ("[1, 2]", "a run record is a JSON object, got list"),
        (
            '{"bench": "mnist5k", "setting": "supervised", "method": "m", "tau": "hot", "seed": 0}',
            "tau is not a number",
        ),
    ],
)
def test_a_damaged_run_store_is_one_line_naming_the_file_and_line(
    tmp_path: Path, line: str, words: str
) -> None:
    """A run store line that is not a run record (a review found ``{"x":1}`` in
    ``runs/mnist5k.jsonl`` ending ``--report-only`` in a ``KeyError`` traceback): one line
    naming the file and the line, exit 2; the store reader says the same as a
    ``ValueError``."""
    good = json.dumps(
        {"bench": "mnist5k", "setting": "supervised", "method": "m", "tau": 0.1, "seed": 0}
    )
    store = tmp_path / "runs" / "mnist5k.jsonl"
    store.parent.mkdir()
    store.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(ValueError, match="line 3") as err:
        RunStore(store)
    assert words in str(err.value) and str(store) in str(err.value)
    done = subprocess.run(
        [sys.executable, "-m", "spacl.studies.spacl_bench", "--bench", "all", "--report-only",
         "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    err_line = done.stderr.strip()
    assert "Traceback" not in done.stderr and "\n" not in err_line, done.stderr
    assert f"{store}, line 3" in err_line and words in err_line


def _arm_rows(name: str, scores: dict[float, float], seeds: tuple[int, ...] = (0,)) -> list:
    return [
        {
            "bench": "b",
            "setting": "s",
            "method": name,
            "tau": tau,
            "seed": seed,
            "val": {"linear": score / 100},
        }
        for tau, score in scores.items()
        for seed in seeds
    ]


def test_an_arm_no_table_reads_is_flagged_when_its_best_value_is_at_an_edge() -> None:
    """A review found a tuned arm outside every table whose best seed-0 value was its
    grid's top; such arms are flagged.  Counter-examples: an interior best, and a tie
    between the top and an interior value resolved toward the lower (still flagged as a
    tie with the edge), are told apart from a strict interior optimum."""
    from spacl.studies.spacl_bench.report import untabled_edges

    m = {"benches": {"b": {"s": {"tuning": {"read": {}}, "criterion": "linear"}}}}
    top = _arm_rows("top", {0.05: 94.6, 0.1: 94.2, 0.2: 95.2, 0.5: 95.4})
    inside = _arm_rows("inside", {0.05: 94.6, 0.1: 96.0, 0.2: 95.2, 0.5: 95.4})
    tied = _arm_rows("tied", {0.05: 90.0, 0.1: 90.0, 0.2: 96.0, 0.5: 96.0})
    read = _arm_rows("read", {0.05: 90.0, 0.5: 99.0})  # in a table: not this check's
    rows = untabled_edges(m, top + inside + tied + read)
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("top", "0.5", "highest"),
        ("tied", "0.2", "ties the highest (0.5)"),
    ]
    assert rows[0][4] == "0.05: 94.6, 0.1: 94.2, 0.2: 95.2, 0.5: 95.4"


def test_the_committed_report_flags_every_arm_at_an_edge() -> None:
    """The committed report names the unread arm at its grid's top in the edges table and
    the header's grid-edge line."""
    text = (COMMITTED / "report.md").read_text()
    stamp = next(x for x in text.splitlines() if x.startswith("- Grid edges:"))
    assert "1 arm(s) no claim reads with their best value at or tied with an edge" in stamp
    assert "SPACL[cut=exp, sup=instance_class, grad=shared, gen=1]: 0.5, highest" in stamp
    assert "no table or claim reads this arm, so its grid did not grow |" in text


def test_a_results_json_copied_alone_regenerates_the_same_report(tmp_path: Path) -> None:
    """The stores beside the results (open-intent runs, FB15k-237 seeds) are read again
    where present; a results.json copied alone uses the copies it stores: the report is
    the same, not one with claims 24-27 missing."""
    from spacl.studies.spacl_bench import regenerate

    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "results.json").write_text((COMMITTED / "results.json").read_text())
    regenerate(alone / "results.json", tmp_path / "a")
    regenerate(COMMITTED / "results.json", tmp_path / "b")
    a = _kept((tmp_path / "a" / "report.md").read_text())
    b = _kept((tmp_path / "b" / "report.md").read_text())
    assert a == b
    assert "runs missing" not in "\n".join(a)


def test_a_report_only_invocations_wall_time_says_it_trained_nothing() -> None:
    text = (COMMITTED / "report.md").read_text()
    wall = next(x for x in text.splitlines() if x.startswith("- Wall time:"))
    assert "--report-only" in text.splitlines()[2]
    assert "trained nothing" in wall and "full" not in wall
