"""APScheduler's blocking loop, made stoppable from a signal without racing its job processing."""

from __future__ import annotations

import threading
from threading import TIMEOUT_MAX
from typing import Any

from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.schedulers.blocking import BlockingScheduler

__all__ = ["StoppableScheduler"]


class StoppableScheduler(BlockingScheduler):  # type: ignore[misc]  # APScheduler 3.x ships no type hints
    """A BlockingScheduler whose loop can be ended without racing job processing.

    APScheduler 3.x's ``shutdown()`` from another thread can land in the
    middle of ``_process_jobs`` and make it raise ``JobLookupError`` (the
    state flips to stopped before the job store lock is taken). Here a stop
    request only ends the loop between two passes; ``shutdown()`` is then
    called by the same thread that ran the loop.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._stop_requested = threading.Event()

    def request_stop(self) -> None:
        """Ask the loop to end after the current pass (safe from any thread, also before ``start()``)."""
        self._stop_requested.set()
        # BlockingScheduler creates its wake-up event in start(); a signal that lands before
        # then needs no wake-up, since the loop checks the request before its first wait.
        event = getattr(self, "_event", None)
        if event is not None:
            event.set()

    def _main_loop(self) -> None:
        wait_seconds: float | None = TIMEOUT_MAX
        while self.state != STATE_STOPPED and not self._stop_requested.is_set():
            self._event.wait(wait_seconds)
            self._event.clear()
            if self._stop_requested.is_set():
                break
            wait_seconds = self._process_jobs()
        if self.state != STATE_STOPPED:
            self.shutdown(wait=False)
