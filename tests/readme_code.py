"""Run the Python code of an exported folder's README.md the way a user would: a fresh
process that never imports spacl (the ``spacl export`` tests of text and KG runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_readme_code(folder: Path, expression: str, tmp_path: Path) -> Any:
    """The JSON value of ``expression`` evaluated after the README's first ``python`` block.

    The block's ``folder = '.'`` is pointed at ``folder``; the process fails the test if
    its code (or ``expression``) imported spacl.
    """
    readme = (folder / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace("folder = '.'", f"folder = {str(folder)!r}")
    out = tmp_path / "readme_out.json"
    script = (
        code
        + f"\nimport json, sys\nout = {expression}\n"
        + "assert not any(m.split('.')[0] == 'spacl' for m in sys.modules), 'spacl imported'\n"
        + f"json.dump(out, open({str(out)!r}, 'w'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())
