"""The issue's command, literally: ``spacl reproduce NAME --report-only`` in a fresh clone.

A ``git clone`` of this checkout holds the committed files alone (HEAD: no run store, no
untracked or modified file), so each study's report regenerates there from what is
committed, by the committed code (``PYTHONPATH=<clone>/src``), with no ``--from``; the
report must equal the committed ``docs/results/NAME/report.md`` but for its stamp line
(``- Regenerated ...``, naming the code that wrote it), and its ``results.json`` the
committed one but for that stamp among its ``stamps`` (every other field, every other
stamp, every claim and metric, compared as parsed JSON).  It checks HEAD: uncommitted
edits in the working tree are not in the clone, which is the point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("alignment", "hard-negatives", "spacl")


def _stamped(line: str) -> bool:
    """A stamp line: it names the code and invocation that regenerated the report."""
    return line.startswith("- Regenerated")


def _kept(text: str) -> list[str]:
    return [x for x in text.splitlines() if not _stamped(x)]


def _kept_results(results: dict[str, Any]) -> dict[str, Any]:
    """``results.json`` without the regeneration's stamp: its ``stamps`` list keeps every
    stamp but the one that names the code that regenerated it (the report's stamp line
    without its ``"- "``); every other field as stored."""
    return {
        **results,
        "stamps": [x for x in results.get("stamps", []) if not _stamped(f"- {x}")],
    }


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh ``git clone`` of this checkout's HEAD; skipped where there is none."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: no fresh clone to regenerate in")
    inside = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
    )
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.skip(f"{ROOT} is not a git checkout: no committed files to clone")
    where = tmp_path_factory.mktemp("fresh") / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(where)],
        check=True,
        capture_output=True,
    )
    return where


def _env(clone: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(clone / "src")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def test_the_clone_runs_its_own_code(clone: Path) -> None:
    """``PYTHONPATH=<clone>/src`` imports the clone's package, not this checkout's."""
    out = subprocess.run(
        [sys.executable, "-c", "import spacl; print(spacl.__file__)"],
        cwd=clone,
        env=_env(clone),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out).resolve().is_relative_to(clone.resolve())


def test_a_fresh_clone_regenerates_every_committed_report(clone: Path, tmp_path: Path) -> None:
    """``python -m spacl reproduce NAME --report-only --out DIR`` in the clone, no
    ``--from``, for all three studies (run side by side): each report equals the
    committed one but for its stamp line."""
    env = _env(clone)
    jobs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spacl",
                "reproduce",
                name,
                "--report-only",
                "--quiet",
                "--out",
                str(tmp_path / name),
            ],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in STUDIES
    }
    for name, job in jobs.items():
        _, err = job.communicate(timeout=600)
        assert job.returncode == 0, f"{name}: exit {job.returncode}: {err.strip()[-2000:]}"
        again = (tmp_path / name / "report.md").read_text()
        committed = (clone / "docs" / "results" / name / "report.md").read_text()
        assert [x for x in again.splitlines() if _stamped(x)], f"{name}: no stamp line"
        assert _kept(again) == _kept(committed), f"{name}: the regenerated report differs"
        stored = json.loads((tmp_path / name / "results.json").read_text())
        kept = json.loads((clone / "docs" / "results" / name / "results.json").read_text())
        assert [x for x in stored["stamps"] if _stamped(f"- {x}")], f"{name}: no stamp"
        for key in sorted(set(stored) | set(kept)):
            assert _kept_results(stored).get(key) == _kept_results(kept).get(key), (
                f"{name}: the regenerated results.json differs in {key!r}"
            )


def test_the_results_comparison_sees_a_changed_field() -> None:
    """Counter-example: only the regeneration stamp is left out of the results.json
    comparison; another stamp, a verdict or a metric changed is not."""
    results = {
        "claims": [{"key": "a", "verdict": "reproduced"}],
        "metrics": {"x": [1.0, 2.0]},
        "stamps": ["Runs' own commits: 5 clean", "Regenerated from the stored results.json (abc)"],
    }
    other_code = {**results, "stamps": [results["stamps"][0], "Regenerated (code at def)"]}
    assert _kept_results(results) == _kept_results(other_code)
    changed = [
        {**results, "claims": [{"key": "a", "verdict": "opposite"}]},
        {**results, "metrics": {"x": [1.0, 2.5]}},
        {**results, "stamps": ["Runs' own commits: 4 clean", results["stamps"][1]]},
    ]
    for edit in changed:
        assert _kept_results(edit) != _kept_results(results)


def test_the_comparison_sees_a_changed_line() -> None:
    """Counter-example: only the stamp line is left out of the comparison; a changed
    claim row is not."""
    text = (
        "# r\n- Regenerated from the stored results.json (code at abc)\n| 1 | a | **reproduced** |"
    )
    assert _kept(text) == _kept(text.replace("code at abc", "code at def"))
    assert _kept(text) != _kept(text.replace("reproduced", "opposite"))
