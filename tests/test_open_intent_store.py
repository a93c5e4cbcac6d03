"""The committed open-intent run store keeps what issue 37 asks of every run: the names of its
known classes (TEXTOIR's draw), the pre-registration commits it ran under, and, for every
trained run, a per-example score file from which its test numbers are recomputed.

Reads ``docs/results/open_intent/runs.jsonl`` and ``scores/*.npz`` (committed files; no data
set needed).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench_modules import benchmark_module
from spacl.data.textoir import textoir_known_classes
from spacl.evaluate.ood import open_intent_metrics

OPEN_INTENT = Path(__file__).resolve().parents[1] / "docs" / "results" / "open_intent"
#: the pre-registration file each run records the commit of, by the run's key in runs.jsonl
PREREGISTRATIONS = {
    "prereg_commit": "PREREGISTRATION.md",
    "prereg_top_commit": "PREREGISTRATION_top_layer.md",
    "prereg_top_all_commit": "PREREGISTRATION_top_layer_all.md",
    "prereg_adb_top_commit": "PREREGISTRATION_adb_top_layer.md",
}


def _runs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (OPEN_INTENT / "runs.jsonl").read_text().splitlines()]


def test_every_run_carries_textoirs_draw_of_its_known_classes() -> None:
    runs = _runs()
    assert len(runs) >= 9 * 5 * 2  # 9 settings x 5 seeds x (detector, ADB) at least
    draws: dict[tuple[str, float, int], list[str]] = {}
    for run in runs:
        key = (run["dataset"], run["ratio"], run["seed"])
        if key not in draws:
            draws[key] = textoir_known_classes(*key)
        assert run["known_classes"] == draws[key], key
        assert run["num_known"] == len(run["known_classes"])


def test_every_run_records_the_pre_registration_it_ran_under() -> None:
    """All runs carry the first pre-registration's commit; the top-layer (addendum) runs also
    carry their addendum's.  The results file names the same commit as the runs."""
    runs = _runs()
    results = (OPEN_INTENT / "results.md").read_text()
    first = {run["prereg_commit"] for run in runs}
    assert len(first) == 1
    (commit,) = first
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert f"commit {commit[:10]}" in results
    top = [run for run in runs if run["method"].endswith("_top1")]
    assert top and all(run.get("prereg_top_commit") for run in top)
    adb_top = [run for run in top if run["method"] == "adb_top1"]
    assert all(run.get("prereg_adb_top_commit") for run in adb_top)
    assert not any(
        run.get(key) for run in runs if run not in top for key in list(PREREGISTRATIONS)[1:]
    )
    for key, name in PREREGISTRATIONS.items():
        assert (OPEN_INTENT / name).is_file(), f"{name} (recorded as {key}) is missing"


@pytest.mark.parametrize("method", ["da_adb", "adb", "da_adb_top1", "adb_top1", "spacl", "frozen"])
def test_every_run_has_scores_that_give_its_test_numbers(method: str) -> None:
    """The boundary rule on the stored per-example scores (nearest centre, its distance, the
    radii) gives back the run's stored test metrics (rounded to 4 decimals when stored),
    the untrained ``frozen`` baseline's runs included."""
    runs = [run for run in _runs() if run["method"] == method]
    assert runs
    for run in runs:
        check_scores(run)


def check_scores(run: dict[str, Any]) -> None:
    """The boundary rule on ``run``'s score file gives back its stored test metrics."""
    name = benchmark_module("open_intent").scores_file(run)
    with np.load(OPEN_INTENT / name) as scores:
        arrays = {key: torch.from_numpy(scores[key]) for key in scores.files}
    k = run["num_known"]
    nearest, dist = arrays["test_nearest"].long(), arrays["test_dist"]
    radius = arrays["radii"][nearest]
    predicted = torch.where(dist < radius, nearest, torch.full_like(nearest, k))
    labels = arrays["test_label"].long()
    assert len(labels) == run["sizes"]["test"]
    got = open_intent_metrics(labels, predicted, k, ood_scores=dist - radius)
    for metric in ("accuracy", "macro_f1", "f1_ood", "f1_ind", "auroc"):
        assert got[metric] == pytest.approx(run["test"]["boundary"][metric], abs=6e-4), (
            name,
            metric,
        )


#: the stores of TEXTOIR-protocol runs, each run with a per-example score file
SCORED_STORES = ("runs.jsonl", "confirm_runs.jsonl", "reproductions.jsonl")


@pytest.mark.parametrize("store", SCORED_STORES)
def test_every_run_row_names_a_score_file_that_exists(store: str) -> None:
    """Every run row of the table, the confirmation and the reproductions has its score file
    under the one name ``scores_file`` derives (the ``frozen`` rows stored before the
    baseline kept its scores record none; a row that records one records that name), and
    the file holds the arrays the diagnosis reads."""
    bench = benchmark_module("open_intent")
    runs = bench.load_runs(OPEN_INTENT / store)
    assert runs
    for run in runs:
        name = bench.scores_file(run)  # raises where a recorded name differs
        path = OPEN_INTENT / name
        assert path.is_file(), (store, name)
        with np.load(path) as scores:
            assert {"test_label", "test_nearest", "test_dist", "radii"} <= set(scores.files)


def test_a_recorded_score_file_must_be_the_derived_name() -> None:
    bench = benchmark_module("open_intent")
    row = {"dataset": "oos", "ratio": 0.5, "seed": 3, "method": "frozen"}
    assert bench.scores_file(row) == "scores/oos_0.5_3_frozen.npz"
    assert bench.scores_file({**row, "scores_file": "scores/oos_0.5_3_frozen.npz"})
    with pytest.raises(ValueError, match=r"oos_0\.5_4_frozen"):
        bench.scores_file({**row, "scores_file": "scores/oos_0.5_4_frozen.npz"})


#: every committed open-intent run store (issue 37: "Every stored run carries its known
#: class names"): the TEXTOIR-protocol stores and the earlier frozen and fine-tuned ones
ROOT = OPEN_INTENT.parents[2]
STORES = (
    OPEN_INTENT / "runs.jsonl",
    OPEN_INTENT / "selection_runs.jsonl",
    OPEN_INTENT / "reproductions.jsonl",
    OPEN_INTENT / "heldout_runs.jsonl",
    *[OPEN_INTENT / "heldout_top_runs.jsonl"] * (OPEN_INTENT / "heldout_top_runs.jsonl").is_file(),
    *[OPEN_INTENT / "confirm_runs.jsonl"] * (OPEN_INTENT / "confirm_runs.jsonl").is_file(),
    ROOT / "benchmarks" / "results" / "ood_runs" / "fixed_rule.jsonl",
    ROOT / "benchmarks" / "results" / "ood_finetune_runs.jsonl",
)


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.name)
def test_every_run_of_every_open_intent_store_names_its_known_classes(store: Path) -> None:
    runs = [json.loads(line) for line in store.read_text().splitlines() if line.strip()]
    assert runs
    for number, run in enumerate(runs, 1):
        names = run.get("known_classes")
        assert isinstance(names, list) and names, (store.name, number)
        assert all(isinstance(name, str) and name for name in names), (store.name, number)
        assert len(set(names)) == len(names), (store.name, number)
        if "num_known" in run:
            assert len(names) == run["num_known"], (store.name, number)


def test_no_open_intent_store_is_left_out() -> None:
    """A run store added beside these (docs/results/open_intent, the ``ood`` stores of
    benchmarks/results) is listed in STORES, so the test above reads it too."""
    results = ROOT / "benchmarks" / "results"
    found = {*OPEN_INTENT.rglob("*.jsonl"), *results.rglob("ood*.jsonl")}
    found |= set((results / "ood_runs").rglob("*.jsonl"))
    assert found == set(STORES), sorted(str(p) for p in found ^ set(STORES))


def _is_ancestor(older: str, newer: str) -> bool:
    root = OPEN_INTENT.parents[2]
    found = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=root)
    return found.returncode == 0


def test_every_run_ran_after_the_pre_registrations_it_records() -> None:
    """Issue 37: no TEXTOIR-seed test score before its pre-registration.  Every commit a run
    records for a pre-registration file is an ancestor of the commit the run ran at, and
    that commit is in this repository's history (an ancestor of HEAD)."""
    pairs: set[tuple[str, str]] = set()
    for run in _runs():
        assert _is_ancestor(run["commit"], "HEAD"), run["commit"]
        pairs.update((run[key], run["commit"]) for key in PREREGISTRATIONS if run.get(key))
    late = [pair for pair in sorted(pairs) if not _is_ancestor(*pair)]
    assert not late, f"runs at commits that do not descend from their pre-registration: {late}"


def test_the_ancestry_check_sees_a_run_before_its_pre_registration() -> None:
    """The counter-example: a commit before PREREGISTRATION.md's is not its descendant."""
    root = OPEN_INTENT.parents[2]
    prereg = subprocess.run(
        ["git", "log", "-1", "--format=%H", "--", "docs/results/open_intent/PREREGISTRATION.md"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    before = subprocess.run(
        ["git", "rev-parse", f"{prereg}~1"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert _is_ancestor(before, prereg) and not _is_ancestor(prereg, before)
