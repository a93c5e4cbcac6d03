"""Fixtures shared by the test files (pytest finds them here by name)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models: one torch thread avoids OpenMP oversubscription on busy machines (the
    previous count is restored afterwards).  A file opts in for every test with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (``KeyboardInterrupt``) for the test, as in a terminal:
    a pytest-xdist worker ignores SIGINT.  The previous handler is restored afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
