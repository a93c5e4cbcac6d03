"""The confirmation on fresh class draws (docs/results/open_intent/PREREGISTRATION_confirm.md):
its seeds never mix with the table's, no number is shown before a setting's five seeds are
in, and the verdict follows the pre-registered rule (means at or above DA-ADB's published
macro-F1 and F1-open), with a counter-example on each side."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench_modules import benchmark_module

ROOT = Path(__file__).resolve().parents[1]
OPEN_INTENT = ROOT / "docs" / "results" / "open_intent"


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_module("open_intent")


def test_the_confirmation_seeds_run_alone_with_their_methods_and_store(bench: Any) -> None:
    frozen_top = ("frozen", "da_adb_top1")
    assert bench.confirm_plan([10, 11], frozen_top, None) is True
    assert bench.confirm_plan([0, 1], ("da_adb", "frozen"), None) is False
    with pytest.raises(SystemExit, match="command of their own"):
        bench.confirm_plan([9, 10], frozen_top, None)
    with pytest.raises(SystemExit, match="only TEXTOIR's 0-9"):
        bench.confirm_plan([15], frozen_top, None)
    with pytest.raises(SystemExit, match="--methods"):
        bench.confirm_plan([10], ("adb_top1",), None)
    with pytest.raises(SystemExit, match="--store"):
        bench.confirm_plan([10], frozen_top, OPEN_INTENT / "runs.jsonl")
    assert bench.confirm_plan([12], frozen_top, bench.CONFIRM_STORE) is True


def test_the_pre_registration_names_what_the_runner_runs(bench: Any) -> None:
    text = " ".join(bench.PREREG_CONFIRM.read_text().split())
    assert "10, 11, 12, 13, 14" in text and bench.CONFIRM_SEEDS == (10, 11, 12, 13, 14)
    assert "--methods frozen da_adb_top1 --settings stackoverflow:0.25" in text
    assert bench.CONFIRM_SETTINGS[0] == "stackoverflow:0.25"
    assert bench.CONFIRM_STORE.name in text and "--render-confirm" in text


def _row(bench: Any, method: str, seed: int, macro: float, open_f1: float) -> dict[str, Any]:
    metrics = {"accuracy": 80.0, "f1_ind": 70.0, "f1_ood": open_f1, "macro_f1": macro}
    row = {
        "dataset": "stackoverflow",
        "ratio": 0.25,
        "seed": seed,
        "method": method,
        "test": {"boundary": {**metrics, "auroc": 90.0}},
        "prereg_confirm_commit": "a" * 40,
        "dirty": False,
        "seconds": 100.0,
    }
    if method == "frozen":
        row["reject_all"] = {"accuracy": 75.0, "f1_ind": 0.0, "f1_ood": 85.71, "macro_f1": 14.29}
    return row


def _setting_text(report: str) -> str:
    return report.split("### StackOverflow, 25% known")[1].split("###")[0]


def test_no_number_before_all_five_seeds_are_in(bench: Any) -> None:
    rows = [_row(bench, m, s, 90.0, 95.0) for m in ("frozen", "da_adb_top1") for s in (10, 11)]
    text = _setting_text(bench.confirmation_report(rows))
    assert "Not judged: the detector's seeds 10, 11 in" in text
    assert "90.00" not in text and "95.00" not in text
    assert "--settings stackoverflow:0.25 --seeds 12 13 14" in text
    # the frozen baseline missing on one seed keeps the setting open too
    rows = [_row(bench, "da_adb_top1", s, 90.0, 95.0) for s in bench.CONFIRM_SEEDS]
    rows += [_row(bench, "frozen", s, 60.0, 80.0) for s in (10, 11, 12, 13)]
    assert "Not judged" in _setting_text(bench.confirmation_report(rows))


@pytest.mark.parametrize(
    ("macro", "open_f1", "verdict"),
    [
        ((83.0, 83.5, 82.9, 83.1, 83.0), (93.0, 92.8, 93.1, 92.9, 93.0), "Met"),
        # macro-F1 above the published 82.81, F1-open just below 92.61 on the mean: short
        ((83.0, 83.5, 82.9, 83.1, 83.0), (92.7, 92.5, 92.6, 92.6, 92.5), "Short"),
        # F1-open above, macro-F1 below: short
        ((82.0, 82.5, 83.0, 82.9, 82.6), (93.0, 92.8, 93.1, 92.9, 93.0), "Short"),
    ],
)
def test_the_verdict_is_the_pre_registered_rule(
    bench: Any, macro: tuple[float, ...], open_f1: tuple[float, ...], verdict: str
) -> None:
    seeds = bench.CONFIRM_SEEDS
    rows = [
        _row(bench, "da_adb_top1", s, m, o) for s, m, o in zip(seeds, macro, open_f1, strict=True)
    ]
    rows += [_row(bench, "frozen", s, 60.0, 80.0) for s in seeds]
    text = _setting_text(bench.confirmation_report(rows))
    assert f"**{verdict}** on seeds 10-14" in text
    mean_macro = sum(macro) / 5
    assert f"macro-F1 {mean_macro:.2f} ± " in text and "vs 82.81" in text and "vs 92.61" in text
    assert "| reject-all (every input open) | 5 | 75.00 ± 0.00 | 0.00 ± 0.00 | 85.71 ± 0.00" in text
    assert "| frozen MiniLM, ADB's closed-form boundary (untrained) | 5 |" in text
    # a short setting says what was tried on dev for the row; the summary gives the time
    assert ("**Tried on dev for this row:**" in text) == (verdict == "Short")
    assert f"| {verdict.lower()} | 100 |" in bench.confirmation_report(rows)
    # the other settings have no runs: not judged
    assert bench.confirmation_report(rows).count("Not judged: no detector seed in") == 8


def test_the_confirmation_file_is_the_render_of_its_store(bench: Any) -> None:
    store = bench.CONFIRM_STORE
    rows = bench.load_runs(store) if store.is_file() else []
    selection = bench.load_runs(OPEN_INTENT / "selection_runs.jsonl")
    heldout = bench.load_runs(bench.HELDOUT_STORE)
    top = bench.HELDOUT_TOP_STORE
    heldout_top = bench.load_runs(top) if top.is_file() else []
    written = (OPEN_INTENT / "confirmation.md").read_text()
    assert written == bench.confirmation_report(rows, selection, heldout, heldout_top), (
        "confirmation.md differs from `python benchmarks/open_intent.py --render-confirm`"
    )


def _confirm_runs(bench: Any) -> list[dict[str, Any]]:
    if not bench.CONFIRM_STORE.is_file():
        pytest.skip("no confirmation run stored yet (PREREGISTRATION_confirm.md's runs)")
    return list(bench.load_runs(bench.CONFIRM_STORE))


def test_every_confirmation_run_ran_after_its_pre_registration(bench: Any) -> None:
    """Each run records the commit of PREREGISTRATION_confirm.md, an ancestor of the
    commit it ran at; its seed, method and known classes are the pre-registered ones."""
    from spacl.data.textoir import textoir_known_classes

    runs = _confirm_runs(bench)
    prereg = subprocess.run(
        ["git", "log", "-1", "--format=%H", "--", str(bench.PREREG_CONFIRM.relative_to(ROOT))],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert prereg
    for run in runs:
        assert run["prereg_confirm_commit"] == prereg and not run["dirty"]
        ancestor = subprocess.run(
            ["git", "merge-base", "--is-ancestor", prereg, run["commit"]], cwd=ROOT, check=False
        )
        assert ancestor.returncode == 0, (run["seed"], run["commit"])
        assert run["seed"] in bench.CONFIRM_SEEDS and run["method"] in bench.CONFIRM_METHODS
        key = (run["dataset"], run["ratio"], run["seed"])
        assert run["known_classes"] == textoir_known_classes(*key)


def test_every_confirmation_run_has_scores_that_give_its_test_numbers(bench: Any) -> None:
    from test_open_intent_store import check_scores

    for run in _confirm_runs(bench):  # the detector's and the untrained baseline's
        check_scores(run)


def test_the_runner_refuses_test_scores_before_a_committed_pre_registration(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_check_preregistered``: no test score while a pre-registration file is uncommitted
    or differs from its commit; the commits it records otherwise."""
    answers = {"log": "", "status": "", "rev-parse": "c0ffee"}
    monkeypatch.setattr(bench, "_git", lambda *args: answers[args[0]])
    monkeypatch.setattr(bench, "tree_is_modified", lambda root, stores: False)
    with pytest.raises(SystemExit, match=r"PREREGISTRATION\.md is not committed"):
        bench._check_preregistered()
    answers["log"] = "feed"
    answers["status"] = " M docs/results/open_intent/PREREGISTRATION.md"
    with pytest.raises(SystemExit, match=r"PREREGISTRATION\.md differs from its commit"):
        bench._check_preregistered()
    with pytest.raises(SystemExit, match="differs from its commit"):
        bench._check_preregistered(top=True, confirm=True)
    answers["status"] = ""
    prov = bench._check_preregistered(top=True, confirm=True)
    assert prov["prereg_commit"] == prov["prereg_confirm_commit"] == "feed"
    assert prov["commit"] == "c0ffee" and prov["dirty"] is False


def test_a_new_untracked_source_file_makes_the_tree_modified(bench: Any, tmp_path: Path) -> None:
    """``tree_is_modified``: an untracked (not ignored) file counts as a change, as does an
    edited tracked one; the stores the benchmark appends to do not."""

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("*.pyc\n")
    stores = tmp_path / "out"
    stores.mkdir()
    (stores / "runs.jsonl").write_text("")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    assert not bench.tree_is_modified(tmp_path, stores)
    (stores / "runs.jsonl").write_text("{}\n")
    (stores / "scores.npz").write_bytes(b"x")
    (tmp_path / "cache.pyc").write_bytes(b"x")
    assert not bench.tree_is_modified(tmp_path, stores)
    (tmp_path / "new.py").write_text("y = 2\n")
    assert bench.tree_is_modified(tmp_path, stores)
    (tmp_path / "new.py").unlink()
    (tmp_path / "code.py").write_text("x = 2\n")
    assert bench.tree_is_modified(tmp_path, stores)
