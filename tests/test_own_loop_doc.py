"""docs/training.md's "SPACL in your own loop" runs as written (issue 38: discovery)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "training.md"
LOAD_LINE = 'loss_fn2.load_state_dict(state["loss"])'


def _own_loop_code() -> str:
    text = DOC.read_text()
    section = text.split("## SPACL in your own loop", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds one python block"
    return blocks[0]


def _run(code: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = where / "own_loop.py"
    script.write_text(code)
    monkeypatch.chdir(where)
    runpy.run_path(str(script), run_name="__main__")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_documented_loop_runs_and_resumes_to_the_same_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(_own_loop_code(), tmp_path, monkeypatch)
    assert (tmp_path / "checkpoint.pt").is_file()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_without_the_losss_state_the_resumed_step_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _own_loop_code()
    assert LOAD_LINE in code
    with pytest.raises(AssertionError):
        _run(code.replace(LOAD_LINE, "pass  #"), tmp_path, monkeypatch)
