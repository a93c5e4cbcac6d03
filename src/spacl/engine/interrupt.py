"""Stop training cleanly on Ctrl-C or ``kill``: a checkpoint at the next step boundary.

:class:`StopOnSignal` installs handlers for SIGINT and SIGTERM that only set a flag; the
engine's loop (:class:`spacl.engine.loop.TrainLoop`) reads :meth:`StopOnSignal.requested`
at every step boundary, has the task's body save a checkpoint there and raises
:class:`~spacl.engine.loop.StopRequested`; ``spacl train`` turns that into one line saying
how to resume and the shell's exit status for the signal (:func:`exit_status`: 130 for
SIGINT, 143 for SIGTERM).  A second signal while the first is being handled stops at once
(``KeyboardInterrupt``), as a user pressing Ctrl-C twice expects.

Example:
    >>> with StopOnSignal() as stop:
    ...     stop.requested()
    False
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # its exit handler first, so that ours runs before it
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from spacl.engine.loop import StopRequested

__all__ = [
    "EXIT_INTERRUPTED",
    "InterruptOnTerm",
    "StopOnSignal",
    "TerminatedBySignal",
    "end_workers_at_exit",
    "exit_status",
    "leave_signals_to_the_main_process",
]

#: the exit status of a run stopped by Ctrl-C (128 + SIGINT, the shell's convention)
EXIT_INTERRUPTED = 128 + int(signal.SIGINT)


def exit_status(signum: int | None) -> int:
    """The shell's exit status of a process ended by signal ``signum``: ``128 + signum``
    (130 for SIGINT, 143 for SIGTERM); :data:`EXIT_INTERRUPTED` when it is not known.

    Example:
        >>> exit_status(signal.SIGTERM), exit_status(None)
        (143, 130)
    """
    return EXIT_INTERRUPTED if signum is None else 128 + int(signum)


def leave_signals_to_the_main_process(worker_id: int) -> None:
    """A ``DataLoader`` ``worker_init_fn``: the worker ignores SIGINT and SIGTERM.

    Ctrl-C, ``timeout``, systemd and Slurm signal the whole process group, workers
    included.  A worker killed by SIGTERM makes the main process fail with "DataLoader
    worker ... is killed by signal" before it reaches the step boundary where
    :class:`StopOnSignal` would checkpoint; ignoring the signals in the workers leaves the
    stop to the main process, which shuts its workers down as it exits.

    Example:
        >>> from torch.utils.data import DataLoader
        >>> loader = DataLoader(range(4), num_workers=0,
        ...                     worker_init_fn=leave_signals_to_the_main_process)
    """
    for sig in StopOnSignal.SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


#: seconds a daemonic child has to end on SIGTERM at exit before it is killed
EXIT_GRACE_SECONDS = 0.5
_exit_hook: list[bool] = []  # the hook is registered once per process


def _end_daemonic_children(grace: float = EXIT_GRACE_SECONDS) -> None:
    """At interpreter exit: SIGTERM every daemonic child (what ``multiprocessing`` does
    next anyway), then SIGKILL those still alive after ``grace`` seconds: workers of
    :func:`leave_signals_to_the_main_process` ignore SIGTERM, and ``multiprocessing``'s
    own exit handler would wait for them forever."""
    children = [p for p in multiprocessing.active_children() if p.daemon]
    for child in children:
        child.terminate()
    for child in children:
        child.join(grace)
        if child.is_alive():
            child.kill()
            child.join()


def end_workers_at_exit() -> None:
    """Make sure loader workers that ignore SIGTERM end when the process exits.

    Call it in the main process when building a ``DataLoader`` whose workers run
    :func:`leave_signals_to_the_main_process`.  A run that stops on an error (an
    unreadable image, say) can leave its persistent workers alive until interpreter exit,
    where ``multiprocessing`` terminates daemonic children with SIGTERM and joins them:
    with the signal ignored, that join never returns.  The hook registered here (once,
    and after ``multiprocessing``'s, so it runs first) ends them instead.

    Example:
        >>> end_workers_at_exit()  # idempotent
        >>> end_workers_at_exit()
    """
    if not _exit_hook:
        atexit.register(_end_daemonic_children)
        _exit_hook.append(True)


class TerminatedBySignal(KeyboardInterrupt):
    """``KeyboardInterrupt`` raised for a signal other than SIGINT (by
    :class:`InterruptOnTerm`), carrying its number for :func:`exit_status`."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = int(signum)


class StopOnSignal:
    """A context manager: while inside, SIGINT / SIGTERM request a stop instead of killing.

    Outside the main thread (where Python cannot install handlers) it installs nothing and
    :meth:`requested` stays false.  The previous handlers are restored on exit, and a
    :class:`~spacl.engine.loop.StopRequested` leaving the block records the signal that
    asked for it (``signum``).
    """

    SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def requested(self) -> bool:
        """Whether a signal arrived since entering."""
        return self.received is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:  # the second one: stop now
            raise KeyboardInterrupt
        self.received = signum

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if isinstance(error, StopRequested) and self.received is not None:
            error.signum = self.received


class InterruptOnTerm(StopOnSignal):
    """A context manager: while inside, SIGTERM raises ``KeyboardInterrupt`` as SIGINT
    does, so that ``kill`` and Ctrl-C end a run the same way where no loop checks a stop
    request yet (loading data, encoding texts): with the one line of ``spacl train``,
    not a silent exit.

    Outside the main thread it installs nothing.  The previous handler is restored on exit.
    """

    SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM,)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        raise TerminatedBySignal(signum)
