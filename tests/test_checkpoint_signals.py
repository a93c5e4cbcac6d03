"""A Ctrl-C or ``kill`` while a checkpoint is written waits for the write (issue 38: a
second Ctrl-C during the checkpoint a first one asked for tore the file and ended in a
50-line traceback)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from spacl.engine import checkpoint
from spacl.engine.checkpoint import load_checkpoint, save_checkpoint, signals_held
from spacl.engine.interrupt import StopOnSignal


@pytest.fixture
def default_handlers() -> Iterator[None]:
    """Python's own handlers for the two signals (pytest-xdist's worker sets others)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


def signalled_save(monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    """``torch.save`` that receives ``signum`` as it starts writing."""
    real = torch.save

    def save(state: Any, handle: Any) -> None:
        os.kill(os.getpid(), signum)  # the handler would run at the next bytecode
        real(state, handle)

    monkeypatch.setattr(checkpoint.torch, "save", save)


@pytest.mark.usefixtures("default_handlers")
def test_a_second_ctrl_c_during_the_write_stops_after_a_whole_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "last.pt"
    save_checkpoint({"step": torch.tensor(1)}, path)
    signalled_save(monkeypatch, signal.SIGINT)
    with StopOnSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # the first: a stop request
        assert stop.requested()
        with pytest.raises(KeyboardInterrupt):  # the second: after the write, not in it
            save_checkpoint({"step": torch.tensor(2)}, path)
    assert int(load_checkpoint(path)["step"]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no torn temporary


@pytest.mark.usefixtures("default_handlers")
def test_signals_held_deliver_once_each_in_arrival_order_after_the_outermost_block() -> None:
    seen: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: seen.append(signum))
    with signals_held():
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == []  # the inner block hands them to the outer one
    assert seen == [signal.SIGTERM, signal.SIGINT]


@pytest.mark.usefixtures("default_handlers")
def test_a_handler_left_in_place_sees_nothing_held() -> None:
    seen: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    with signals_held():
        pass
    os.kill(os.getpid(), signal.SIGINT)
    assert seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored as it was
