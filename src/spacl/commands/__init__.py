"""Sub-commands of the ``spacl`` CLI; each module exposes ``register(subparsers)``."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(err: BaseException) -> str:
    """The message of ``err``; for an error re-raised from a ``DataLoader`` worker (``Caught
    ValueError in DataLoader worker process 0.`` and the worker's traceback), the worker's
    own one-line message."""
    text = str(err)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Caught ") and "Original Traceback" in text:
        last = lines[-1]  # "module.ErrorType: message"
        return last.split(": ", 1)[1] if ": " in last else last
    return text
