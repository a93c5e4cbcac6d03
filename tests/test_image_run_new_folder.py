"""docs/using.md, "A trained image run on a new labelled folder": its block runs as written.

``spacl eval RUN data.root=NEW`` refuses a folder other than the run's own (its
``split.json``); the documented ways are ``predict`` on the new images (accuracy from the
folder names) and ``embed --data`` + ``geometry``.  The test runs every line of the block
(``spacl`` lines in-process, the shell's ``*`` and ``>`` done by the test, the ``python -c``
line executed) and checks the accuracy it prints against the class centres themselves.
"""

from __future__ import annotations

import glob
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from spacl.cli import main
from spacl.commands.predict import nearest_centres
from test_own_images import overrides, write_folder

DOC = Path(__file__).resolve().parents[1] / "docs" / "using.md"
HEADING = "## A trained image run on a new labelled folder"


def block_lines() -> list[str]:
    """The commands of the section's bash block, comments dropped."""
    section = DOC.read_text().split(HEADING, 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def run_line(line: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run one line of the block as a shell would (``*`` globs, ``> FILE``); its stdout."""
    words = shlex.split(line)
    target = None
    if ">" in words:
        at = words.index(">")
        words, target = words[:at], words[at + 1]
    capsys.readouterr()
    if words[0] == "python":
        assert words[1] == "-c"
        exec(compile(words[2], "<using.md>", "exec"), {})  # the doc's own line
    else:
        assert words[0] == "spacl"
        argv = [hit for w in words[1:] for hit in (sorted(glob.glob(w)) if "*" in w else [w])]
        assert main(argv) == 0, (line, capsys.readouterr().err)
    out = capsys.readouterr().out
    if target is not None:
        Path(target).write_text(out)
    return out


def test_the_new_folder_section_runs_and_its_accuracy_is_the_centres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_folder(tmp_path / "photos", per_class=8)
    write_folder(tmp_path / "newphotos", per_class=4, seed=1)
    shutil.rmtree(tmp_path / "newphotos" / "class0")  # its own numbering: class1 is 0 there
    argv = ["train", "imagefolder/supcon", *overrides(tmp_path / "photos"),
            "objective.name=supcon", "--out", "runs/photos", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    # the run's own evaluation refuses the new folder, and names the ways this section shows
    capsys.readouterr()
    assert main(["eval", "runs/photos", "data.root=newphotos", "--no-write"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not the one run" in err and "spacl embed RUN --data DIR" in err and "\n" not in err

    lines = block_lines()
    assert [line.split()[:2] for line in lines] == [
        ["spacl", "predict"], ["python", "-c"], ["spacl", "embed"], ["spacl", "geometry"]
    ]  # fmt: skip
    run_line(lines[0], capsys)
    rows = Path("predicted.jsonl").read_text().splitlines()
    assert len(rows) == 8  # every image of the two class folders
    accuracy = float(run_line(lines[1], capsys))
    run_line(lines[2], capsys)
    assert "nc1" in run_line(lines[3], capsys)

    # the printed accuracy is the nearest training centre's, on labels in the run's order
    saved = np.load("new.npz")
    assert sorted(set(saved["labels"].tolist())) == [1, 2]  # class1, class2: the run's ids
    classes, centres, _, names = nearest_centres(Path("runs/photos"), "main")
    assert names == ["class0", "class1", "class2"]
    nearest = torch.cdist(torch.from_numpy(saved["features"]).double(), centres.double())
    predicted = classes[nearest.argmin(dim=1)]
    expected = (predicted == torch.from_numpy(saved["labels"])).double().mean().item()
    assert accuracy == pytest.approx(expected, abs=1e-12)
