"""What the open-intent documents state is what the committed files hold (issue 37):

- docs/results/open_intent/results.md is exactly what ``benchmarks/open_intent.py
  --render`` writes from the committed run stores and score files (no hand edit);
- the shipped detector recipes state the training time recipe_time.md measured;
- benchmarks/RESULTS.md's open-intent row names every top-layer setting whose verdict on
  seeds 0-4 alone differs from the one on every seed run, with those seeds' means;
- every text recipe on the conformal 95% rule says, in its ``spacl recipes`` summary, that it
  reproduces a benchmark and is not the detector, and points to ``text/stackoverflow``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench_modules import benchmark_module

ROOT = Path(__file__).resolve().parents[1]
OPEN_INTENT = ROOT / "docs" / "results" / "open_intent"
BENCH = ROOT / "benchmarks"
RECIPES = ROOT / "src" / "spacl" / "recipes"


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_module("open_intent")


def test_results_file_is_the_render_of_the_committed_stores(bench: Any) -> None:
    rows = bench.load_runs(OPEN_INTENT / "runs.jsonl")
    selection = bench.load_runs(OPEN_INTENT / "selection_runs.jsonl")
    written = (OPEN_INTENT / "results.md").read_text()
    assert written == bench.results_report(rows, selection), (
        "results.md differs from `python benchmarks/open_intent.py --render`"
    )


def _measured_seconds() -> str:
    text = (OPEN_INTENT / "recipe_time.md").read_text()
    match = re.search(r"Wall time of `spacl train`: \*\*([\d.]+) s\*\*", text)
    assert match is not None, "recipe_time.md states no wall time"
    return match.group(1)


def test_the_recipes_state_the_measured_training_time() -> None:
    """Each recipe citing recipe_time.md states its wall time, to the digit."""
    stated = {}
    for path in sorted(RECIPES.rglob("*.yaml")):
        comments = " ".join(
            line.lstrip("# ").strip()
            for line in path.read_text().splitlines()
            if line.startswith("#")
        )
        if "recipe_time.md" in comments:
            match = re.search(r"trained in ([\d.]+) s\b", comments)
            assert match is not None, f"{path.name} cites recipe_time.md without a time"
            stated[path.name] = match.group(1)
    assert {"stackoverflow.yaml", "banking.yaml", "oos.yaml"} <= set(stated), stated
    assert set(stated.values()) == {_measured_seconds()}, stated


#: the shipped open-intent detectors (TEXTOIR's protocol, DA-ADB with ADB's boundaries)
DETECTORS = {"text/stackoverflow", "text/banking", "text/oos"}


def test_text_recipes_on_the_conformal_rule_say_they_are_not_the_detector() -> None:
    """The benchmark reproductions (the conformal 95% rule on the project's own class draw:
    ``ood.method: quantile`` once their base is flattened) name the results file they
    reproduce and the detector to use instead; the detectors name themselves."""
    from spacl.recipes import list_recipes
    from spacl.schema_files import flat_recipe

    text = [r for r in list_recipes() if r.task == "text"]
    reproductions = [r for r in text if "method: quantile" in flat_recipe(r.name)]
    assert {r.name for r in text} - {r.name for r in reproductions} == DETECTORS
    assert len(reproductions) == 7  # 4 fine-tuned (ood_finetune.md), 3 frozen (ood.md)
    for recipe in reproductions:
        summary = recipe.summary
        assert summary.startswith("Reproduces benchmarks/results/ood"), recipe.name
        linked = re.search(r"benchmarks/results/(\w+\.md)", summary)
        assert linked is not None and (BENCH / "results" / linked.group(1)).is_file()
        assert "not a detector" in summary or "not the shipped detector" in summary
        assert summary.endswith("use text/stackoverflow"), recipe.name
    for recipe in text:
        if recipe.name in DETECTORS:
            assert "open-intent detector" in recipe.summary, recipe.name


def test_results_index_states_where_the_first_five_seeds_fall_short(bench: Any) -> None:
    rows = bench.load_runs(OPEN_INTENT / "runs.jsonl")
    row = next(
        line
        for line in (BENCH / "RESULTS.md").read_text().splitlines()
        if line.startswith("| [../docs/results/open_intent/results.md]")
    )
    assert "after the head-only table's test scores" in row
    lines = [line for line in bench.first_seeds_lines(rows) if line.startswith("- ")]
    assert lines, "no setting's verdict differs on seeds 0-4: update this test"
    for line in lines:
        setting = line[2:].split(":")[0]
        alone = re.search(r"alone, the seeds of the other settings \(([\d.]+) / ([\d.]+)", line)
        assert alone is not None, line
        assert setting in row and f"{alone.group(1)} / {alone.group(2)}" in row, setting


def test_every_reproduction_equals_the_stored_run_it_reran(bench: Any) -> None:
    """reproductions.jsonl holds runs redone on a clean clone to check a stored run
    trained on a modified tree: each names the run it redoes, from a commit with no
    uncommitted code, and gives the same known classes, test metrics and training record
    (its times aside).  The per-example scores were compared bit for bit when it ran
    (equal, so only the stored run's score file is committed)."""
    stored = bench.load_runs(OPEN_INTENT / "runs.jsonl")
    redone = bench.load_runs(OPEN_INTENT / "reproductions.jsonl")
    assert redone, "no reproduction recorded"
    for row in redone:
        target = row["reproduces"]
        (original,) = [
            r
            for r in stored
            if all(r[k] == target[k] for k in ("method", "dataset", "ratio", "seed"))
        ]
        assert original["dirty"] and original["commit"].startswith(target["stored_commit"])
        assert not row["dirty"] and row["commit"] != original["commit"]
        assert row["known_classes"] == original["known_classes"]
        assert row["test"] == original["test"]

        def untimed(record: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in record.items() if not k.endswith("seconds")}

        assert untimed(row["record"]) == untimed(original["record"])
        assert row["scores_file"] == original["scores_file"]
