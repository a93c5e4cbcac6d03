"""Atomic checkpoints and the random-number state they must carry for exact resumes.

* :func:`save_checkpoint` writes ``torch.save`` output to a temporary file in the
  target directory, flushes and ``fsync``\\ s it, then ``os.replace``\\ s it over the
  destination: a process killed mid-write leaves the previous checkpoint intact (and
  at worst a stray ``*.tmp`` file, removed by :func:`remove_stale_temporaries`).
* Ctrl-C or ``kill`` arriving while a checkpoint is written are held until the write is
  done (:func:`signals_held`), then delivered: a second Ctrl-C during the checkpoint a
  first one asked for stops the run right after it, never with a torn write in between.
* :func:`load_checkpoint` uses ``torch.load(..., weights_only=True)``: only tensors and
  plain containers are unpickled, never arbitrary objects.  So everything saved here
  is a tensor, number, string, ``None`` or a list/dict of those: the NumPy and Python
  RNG states are encoded as tensors by :func:`capture_rng_state`.
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "capture_rng_state",
    "load_checkpoint",
    "remove_stale_temporaries",
    "restore_rng_state",
    "save_checkpoint",
    "signals_held",
]

_TMP_SUFFIX = ".tmp"


#: the signals :func:`signals_held` holds: Ctrl-C and ``kill``
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while inside; deliver them, once each in arrival order, to
    the handlers that were in place, on leaving.

    What a handler would do (set a stop request, raise ``KeyboardInterrupt``, end the
    process) then happens after the block, not in the middle of it.  Nested blocks hold
    until the outermost one leaves.  Outside the main thread, or where a handler was not
    set from Python, nothing is held.

    Example:
        >>> with signals_held():  # a Ctrl-C in here is delivered after the block
        ...     total = sum(range(3))
        >>> total
        3
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in HELD_SIGNALS}
    if any(handler is None for handler in previous.values()):
        yield
        return
    for sig in HELD_SIGNALS:
        signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Atomically write ``state`` to ``path`` (temporary file + ``os.replace``), Ctrl-C
    and ``kill`` held until it is written (:func:`signals_held`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with signals_held():
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=path.parent
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                torch.save(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        _fsync_dir(path.parent)
    return path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` with ``weights_only=True``.

    Raises ``FileNotFoundError`` naming the path, or ``ValueError`` if the file is not a
    readable checkpoint (e.g. truncated).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        raise ValueError(
            f"checkpoint {path} could not be read ({type(err).__name__}: {err})"
        ) from err
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {path} holds {type(state).__name__}, expected a dict")
    return state


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Delete temporary files left by interrupted :func:`save_checkpoint` calls."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = [p for p in directory.glob(f".*{_TMP_SUFFIX}") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def capture_rng_state() -> dict[str, Any]:
    """Torch (CPU and every CUDA device), NumPy and Python RNG states, as plain tensors."""
    # the legacy global NumPy RNG is the state user code may draw from
    np_state: tuple[Any, ...] = tuple(np.random.get_state(legacy=True))  # noqa: NPY002
    py_version, py_internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": {
            "version": int(py_version),
            "internal": torch.tensor(py_internal, dtype=torch.int64),
            "gauss": py_gauss,
        },
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state` (a bare tensor, as checkpoints written before
    it kept, restores torch's CPU state alone)."""
    if isinstance(state, torch.Tensor):
        torch.set_rng_state(state)
        return
    torch.set_rng_state(state["torch"])
    npk = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        (
            npk["kind"],
            npk["keys"].numpy().astype(np.uint32),
            int(npk["pos"]),
            int(npk["has_gauss"]),
            float(npk["cached_gaussian"]),
        )
    )
    py = state["python"]
    random.setstate(
        (int(py["version"]), tuple(int(v) for v in py["internal"].tolist()), py["gauss"])
    )
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)
