"""Checkpoints of the index's write-ahead log, run on a thread of their own.

A checkpoint copies the WAL back into the database file and fsyncs both. As
SQLite's automatic checkpoint it ran inside whichever commit crossed the
threshold, so one append in a few hundred waited 10-20 ms for it. SQLite's
documentation suggests running checkpoints from a separate thread instead
(https://www.sqlite.org/wal.html, "Application-Initiated Checkpoints"); a
PASSIVE checkpoint never blocks writers or readers. The automatic
checkpoint stays on at a higher threshold, as a backstop for when this
thread falls behind or other processes do most of the writing.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

__all__ = ["Checkpointer"]

log = logging.getLogger("journal")


class Checkpointer:
    """A daemon thread with its own connection that checkpoints the WAL when asked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._changed = threading.Condition()
        self._requested = 0
        self._done = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._pid = 0

    def request(self) -> None:
        """Ask for a checkpoint soon; returns at once."""
        with self._changed:
            # A forked child inherits this object but not the thread: it starts its own.
            if not self._running():
                self._requested = self._done = 0
                self._closing = False
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="journal-checkpoint", daemon=True)
                self._thread.start()
            self._requested += 1
            self._changed.notify_all()

    def wait(self) -> None:
        """Return once every checkpoint requested so far has run."""
        with self._changed:
            if self._running():
                self._changed.wait_for(lambda: self._done >= self._requested)

    def close(self) -> None:
        """Finish the running checkpoint, if any, and end the thread."""
        with self._changed:
            if not self._running():
                self._thread = None
                return
            self._closing = True
            self._changed.notify_all()
            thread = self._thread
        assert thread is not None
        thread.join()
        self._thread = None

    def _running(self) -> bool:
        return self._thread is not None and self._pid == os.getpid() and self._thread.is_alive()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                self._serve(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            log.debug("background checkpoints of %s stopped: %s", self.path, exc)
        finally:
            with self._changed:  # nobody waits for a thread that has ended
                self._done = self._requested
                self._changed.notify_all()

    def _serve(self, conn: sqlite3.Connection) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._closing or self._done < self._requested)
                if self._closing:
                    return
                target = self._requested
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:  # the next request, or the automatic checkpoint, tries again
                log.debug("background checkpoint of %s failed: %s", self.path, exc)
            with self._changed:
                self._done = target
                self._changed.notify_all()
