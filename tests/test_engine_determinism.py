"""A CPU run is repeatable with the default thread count, so a resumed run can equal the
uninterrupted one (docs/training.md).  With more than one thread the backward of
advanced indexing summed in thread order: two runs of one seed on ``digits/supcon``
ended up to 8.5e-3 apart, and ``--resume`` was not bitwise (found by a new-user audit;
the resume tests forced one thread)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from spacl import load_recipe
from spacl.engine.device import deterministic_algorithms
from spacl.tasks.image import Trainer


@pytest.fixture
def process_settings() -> Iterator[None]:
    """Restore the process-wide settings a run changes (threads, deterministic mode)."""
    threads = torch.get_num_threads()
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def test_the_default_is_deterministic_on_a_cpu_and_off_on_cuda(
    process_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.use_deterministic_algorithms(False)
    assert not deterministic_algorithms(None, torch.device("cuda"))
    assert not torch.are_deterministic_algorithms_enabled()
    assert not deterministic_algorithms(False, torch.device("cpu"))
    assert not torch.are_deterministic_algorithms_enabled()
    assert deterministic_algorithms(None, torch.device("cpu"))
    assert torch.are_deterministic_algorithms_enabled()
    # a CUDA run after it in the same process (a notebook): what the CPU run set goes
    assert not deterministic_algorithms(None, torch.device("cuda"))
    assert not torch.are_deterministic_algorithms_enabled()
    assert deterministic_algorithms(None, torch.device("cpu"))
    assert not deterministic_algorithms(False, torch.device("cuda"))
    # but the user's own setting stays, and True on CUDA sets cuBLAS's workspace
    torch.use_deterministic_algorithms(False)
    torch.use_deterministic_algorithms(True)
    assert deterministic_algorithms(None, torch.device("cuda"))
    assert deterministic_algorithms(False, torch.device("cuda"))
    assert torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert deterministic_algorithms(True, torch.device("cuda"))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_an_indexing_backward_on_two_threads_is_repeatable_once_on(
    process_settings: None,
) -> None:
    """The op behind the difference, in the mode a CPU run now sets."""
    torch.set_num_threads(2)
    deterministic_algorithms(None, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 64, generator=g, requires_grad=True)
    index = torch.randint(0, 1024, (1024, 8), generator=g)
    weight = torch.randn(1024, 8, 64, generator=g)
    grads = []
    for _ in range(10):
        x.grad = None
        (x[index] * weight).sum().backward()
        assert x.grad is not None
        grads.append(x.grad.clone())
    assert all(torch.equal(grads[0], other) for other in grads[1:])


#: digits/supcon (SupCon's indexed positives, batch 256) on two threads: before, two runs
#: already differed after these 2 epochs (14 steps); a smaller synthetic run did not
RUN = [
    "train.epochs=2",
    "train.threads=2",
    "train.progress=false",
    "eval.linear_probe=false",
    "log.tensorboard=false",
]


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    return saved["arms"]["main"]["model"]


def test_two_runs_of_one_seed_on_two_threads_are_bitwise_equal(
    tmp_path: Path, process_settings: None
) -> None:
    """``train.deterministic`` left at its default (``null``), two threads, SupCon with its
    indexed positives: the same weights to the bit, and the same eval.json."""
    torch.use_deterministic_algorithms(False)  # as a fresh process starts
    results = [
        Trainer(load_recipe("digits/supcon", RUN).config, tmp_path / name, quiet=True).fit()
        for name in ("first", "second")
    ]
    first, second = (final_weights(tmp_path / n) for n in ("first", "second"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert results[0].metrics == results[1].metrics
    assert load_recipe("digits/supcon", RUN).config.train.deterministic is None
