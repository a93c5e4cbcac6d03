"""The Python examples in README.md run as written (with small stand-in tensors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def namespace() -> dict[str, object]:
    g = torch.Generator().manual_seed(0)
    b, d = 16, 8
    lin = torch.nn.Linear(12, d)
    lin_views = torch.nn.Linear(12, d)
    return {
        "torch": torch,
        "B": b,
        "V": 5,
        "encoder": lin,
        "x0": torch.randn(b, 12, generator=g),
        "x1": torch.randn(b, 12, generator=g),
        "labels": torch.arange(b) % 4,
        "ema_feats": torch.randn(b, 2, d, generator=g),
        "views": torch.randn(b, 5, 12, generator=g),
        "target_encoder": lambda v: lin_views(v).detach(),
        "online_encoder": lin_views,
        "features": torch.randn(200, d, generator=g),
        "X": torch.randn(50, 6, generator=g),
        "Y": torch.randn(50, 4, generator=g),
    }


def test_readme_has_python_examples() -> None:
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index: int) -> None:
    ns = namespace()
    ns["labels"] = (
        torch.arange(200) % 5 if "geometry_report" in python_blocks()[index] else ns["labels"]
    )
    exec(compile(python_blocks()[index], f"README block {index}", "exec"), ns)
