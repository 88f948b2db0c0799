"""APScheduler's blocking loop, made stoppable from a signal without racing its job processing or missing the signal."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Iterator
from typing import Any, Final

from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.schedulers.blocking import BlockingScheduler

__all__ = ["StoppableScheduler"]

#: The longest single sleep of the loop, in seconds: poll() takes milliseconds in a C int, and a spurious
#: pass over the jobs is harmless (APScheduler computes the next wake-up from the jobs each time).
_LONGEST_SLEEP: Final = 86400.0


class _Bell:
    """A pipe the loop sleeps on: rung by other threads, and by every signal with a Python handler.

    A process-directed signal may be taken by any thread of the process that
    does not block it: a thread that starts a process or a thread at that
    moment takes it, since unblocking signals after the clone lets it see the
    pending one. Python then runs the handler on the main thread, but only once
    the main thread runs again, and a main thread asleep on a lock would sleep
    on until its next job (a SIGTERM left unanswered for hours). The C-level
    handler writes the signal's number to the file given to
    :func:`signal.set_wakeup_fd` from whichever thread it ran on, so with that
    file this pipe's write end, the sleeping main thread wakes and runs the handler.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a ring never writes to a descriptor closed (and maybe reused) meanwhile
        self._reader: int | None = None
        self._writer: int | None = None

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        """The pipe for the block; signals ring it too while the block runs on the main thread."""
        reader, writer = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with self._lock:
            self._reader, self._writer = reader, writer
        hooked = threading.current_thread() is threading.main_thread()
        previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False) if hooked else -1
        try:
            yield
        finally:
            if hooked:
                signal.set_wakeup_fd(previous)
            with self._lock:
                self._reader = self._writer = None
                os.close(reader)
                os.close(writer)

    def ring(self) -> None:
        """Wake the sleeper now, or at its next sleep (safe from any thread; a no-op while the pipe is closed)."""
        with self._lock:
            if self._writer is None:
                return
            with contextlib.suppress(BlockingIOError):  # a full pipe already wakes the sleeper
                os.write(self._writer, b"\0")

    def sleep(self, seconds: float | None) -> None:
        """Sleep until rung, or for *seconds* (None: until rung); then empty the pipe."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("the scheduler's wake-up pipe is not open: sleep() runs only inside open()")
        timeout = None if seconds is None else round(min(max(seconds, 0.0), _LONGEST_SLEEP) * 1000)
        poller = select.poll()
        poller.register(reader, select.POLLIN)
        poller.poll(timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(reader, 4096):
                pass


class StoppableScheduler(BlockingScheduler):  # type: ignore[misc]  # APScheduler 3.x ships no type hints
    """A BlockingScheduler whose loop can be ended without racing job processing, and wakes for every signal.

    APScheduler 3.x's ``shutdown()`` from another thread can land in the
    middle of ``_process_jobs`` and make it raise ``JobLookupError`` (the
    state flips to stopped before the job store lock is taken). Here a stop
    request only ends the loop between two passes; ``shutdown()`` is then
    called by the same thread that ran the loop.

    The loop sleeps on a :class:`_Bell` rather than on an Event, so that a
    signal taken by another thread still wakes it and its handler runs at once.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._stop_requested = threading.Event()
        self._bell = _Bell()

    def start(self, *args: Any, **kwargs: Any) -> None:
        """Run the loop until a stop request or ``shutdown()``; signals wake it while it runs on the main thread."""
        with self._bell.open():
            super().start(*args, **kwargs)

    def shutdown(self, wait: bool = True) -> None:  # APScheduler's signature
        """Stop the scheduler; a loop asleep on another thread wakes and ends."""
        super().shutdown(wait)
        self._bell.ring()

    def wakeup(self) -> None:
        """APScheduler's call after a job changed: the loop looks at the jobs again now."""
        self._bell.ring()

    def request_stop(self) -> None:
        """Ask the loop to end after the current pass (safe from any thread, also before ``start()``)."""
        self._stop_requested.set()
        # Before start() the pipe is closed and the ring a no-op: the loop checks the request before its first sleep.
        self._bell.ring()

    def _main_loop(self) -> None:
        wait_seconds: float | None = None  # BaseScheduler.start() rang already: the first sleep returns at once
        while self.state != STATE_STOPPED and not self._stop_requested.is_set():
            self._bell.sleep(wait_seconds)
            if self._stop_requested.is_set():
                break
            wait_seconds = self._process_jobs()
        if self.state != STATE_STOPPED:
            self.shutdown(wait=False)
