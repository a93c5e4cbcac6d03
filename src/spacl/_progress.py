"""Progress bars (tqdm) for long library loops, and the one switch that silences them.

Library code shows a bar only when asked (``progress=True``) or, by default
(``progress=None``), when stderr is a terminal; :func:`set_progress` (the CLI's
``--quiet``) turns every bar off for the process.  Messages go through :mod:`logging`
(logger names under ``spacl``), never ``print``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

__all__ = ["console_logging", "iterate", "progress", "progress_enabled", "set_progress"]

T = TypeVar("T")

_override: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """Force every progress bar on (``True``) or off (``False``); ``None``: per call."""
    global _override
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool or None, got {type(enabled).__name__}")
    _override = enabled


def progress_enabled(mode: bool | None = None) -> bool:
    """Whether a bar is shown: a forced :func:`set_progress` value wins (off), then
    ``mode``, then whether stderr is a terminal."""
    if _override is False:
        return False
    if mode is not None:
        return bool(mode)
    if _override is True:
        return True
    return sys.stderr.isatty()


def progress(
    iterable: Iterable[T] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    mode: bool | None = None,
    leave: bool = False,
    unit: str = "it",
) -> Any:
    """A ``tqdm`` bar over ``iterable`` (or a manual one with ``total``), disabled unless
    :func:`progress_enabled` ``(mode)``."""
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        disable=not progress_enabled(mode),
        leave=leave,
        unit=unit,
        dynamic_ncols=True,
        file=sys.stderr,
    )


def iterate(iterable: Iterable[T], **kwargs: Any) -> Iterator[T]:
    """``progress(iterable, **kwargs)`` typed as an iterator of the items."""
    yield from progress(iterable, **kwargs)


class _ConsoleHandler(logging.Handler):
    """Writes records to the *current* ``sys.stderr`` through ``tqdm.write`` (so that a
    message never breaks a progress bar)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # pragma: no cover - logging's own error path
            self.handleError(record)


def console_logging(quiet: bool = False) -> None:
    """The command line's logging: ``spacl.*`` messages (INFO and up) on stderr, and
    progress bars when stderr is a terminal; ``quiet``: warnings only and no bars.

    Idempotent (one handler on the ``spacl`` logger however often it is called).
    """
    logger = logging.getLogger("spacl")
    if not any(isinstance(h, _ConsoleHandler) for h in logger.handlers):
        handler = _ConsoleHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    set_progress(False if quiet else None)
