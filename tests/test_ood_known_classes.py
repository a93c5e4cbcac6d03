"""benchmarks/ood.py's backfill of ``known_classes``: the runs stored before they were
recorded get the draw recomputed from their dataset, known ratio and seed, checked first
against every field of the run the draw decides (a run that disagrees is left and listed);
nothing else of the store changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench_modules import benchmark_module
from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.evaluate.ood import reject_all_metrics
from test_ood import write_topic_dataset


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_module("ood")


def _stored_run(root: Path, ratio: float, seed: int, method: str) -> dict[str, Any]:
    """A run as the benchmarks stored it before ``known_classes`` was kept (its fields
    from the draw, the rest made up)."""
    split = open_intent_split(load_intent_dataset("topics", root), ratio, seed)
    k = split.num_known
    run = {
        "name": f"topics-{method}",
        "known_ratio": ratio,
        "split_seed": seed,
        "test": {"macro_f1": 61.23456789012345},
        "dev_accuracy": 100.0 * 3 / len(split.dev_labels),
        "losses": [1.5, 0.75, 0.5],
        "reject_all": reject_all_metrics(split.test_labels, k),
        "method": method,
        "dataset": "topics",
        "test_size": len(split.test_texts),
        "num_known": k,
        "test_ood": int((split.test_labels == k).sum()),
    }
    if method != "frozen":
        run["steps"] = 3 * (len(split.train_labels) // 8)
    return run


def test_backfill_adds_the_recomputed_draw_and_changes_nothing_else(
    bench: Any, tmp_path: Path
) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    runs = [
        _stored_run(root, 0.5, 0, "frozen"),
        _stored_run(root, 0.25, 3, "spacl"),
        _stored_run(root, 0.75, 1, "supcon"),
    ]
    # the counter-examples: a run whose recorded open-test count is not its draw's, one
    # whose steps are not (the draw is not that run's: left as it is, listed)
    runs[1]["test_ood"] += 10
    runs[2]["steps"] += 1
    done = {**_stored_run(root, 0.5, 1, "frozen"), "known_classes": ["t0"]}  # kept as is
    store = tmp_path / "store.jsonl"
    lines = [json.dumps(r) for r in [*runs, done]]
    store.write_text("\n".join(lines) + "\n")
    filled, left = bench.backfill_known_classes(store, str(root))
    assert filled == 1 and len(left) == 2
    assert "line 2" in left[0] and "test_ood" in left[0]
    assert "line 3" in left[1] and "steps" in left[1]
    after = store.read_text().splitlines()
    assert after[1:] == lines[1:]  # the runs left and the run that had them: unchanged
    first = json.loads(after[0])
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    assert first.pop("known_classes") == split.known_classes
    assert json.dumps(first) == lines[0]  # every other field, in its order
    # again: nothing more to add
    assert bench.backfill_known_classes(store, str(root))[0] == 0


def test_a_wrong_count_of_known_classes_or_dev_size_disagrees_with_the_draw(
    bench: Any, tmp_path: Path
) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    run = _stored_run(root, 0.5, 0, "spacl")
    assert bench.draw_disagreements(run, split) == []
    assert bench.draw_disagreements({**run, "num_known": 3}, split) == ["num_known"]
    # 100 / 31 is no dev accuracy of the 32 known-class dev texts
    assert bench.draw_disagreements({**run, "dev_accuracy": 100 / 31}, split) == ["dev_accuracy"]
    other = open_intent_split(load_intent_dataset("topics", root), 0.25, 0)
    assert "reject_all" in bench.draw_disagreements(run, other)
