"""benchmarks/gpu_check.py: skips cleanly without CUDA, and its every section runs (on
the CPU, toy sizes, gloo) so that the prepared GPU check is known to work as a script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def test_without_cuda_it_skips_with_a_clear_message_and_exit_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no CUDA, even on a GPU machine
    out = tmp_path / "gpu.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "gpu_check: CUDA is not available here; skipping the GPU check (nothing was run)."
    )
    assert not out.exists()


def test_dry_run_runs_every_section_on_the_cpu(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        code = gpu_check.main(["--dry-run", "--out", str(tmp_path / "gpu.md")])
    finally:
        torch.set_num_threads(before)
    table = capsys.readouterr().out
    assert code == 0, table
    summary = table.split("\n\n")[0]  # the summary table; the sections' own tables follow
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "---" not in line]
    checks = [r.split(" | ")[0].lstrip("| ") for r in rows[1:]]
    assert checks == [
        "recipe cifar100/spacl_supervised",
        "recipe cifar100/supcon",
        "1-process gloo",
        "SPACL / SimCLR step time",
        "losses on cpu",
        "SPACL every view on cpu = CPU",
        "text fine-tune on cpu",
        "KG link prediction on cpu",
    ]
    assert all(" | ok | " in r for r in rows[1:])
    assert "2 steps at batch 8" in table and "DDP step = plain step" in table
    assert "SPACL every view, supervised" in table and "supervised max |diff| 0.0e+00" in table
    assert "8/8 checks passed" in (tmp_path / "gpu.md").read_text()


def test_synthetic_cifar100_is_read_by_the_loader(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from spacl.data import get_dataset

    gpu_check.write_synthetic_cifar100(tmp_path, 300, 200)
    train = get_dataset("cifar100", root=tmp_path, split="train")
    test = get_dataset("cifar100", root=tmp_path, split="test")
    assert train.inputs.shape == (300, 3, 32, 32) and test.inputs.shape == (200, 3, 32, 32)
    assert torch.bincount(test.labels, minlength=100).min() == 2  # balanced
    assert torch.equal(test.coarse_labels, test.labels // 5)
    with pytest.raises(SystemExit):
        gpu_check.main(["--steps", "0"])
