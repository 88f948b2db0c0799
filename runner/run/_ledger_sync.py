"""The budgets' ledger's log put on the disk in a thread, while the run does the work it has to do before its backend call.

An admission commits its reservation without syncing it (:meth:`runner.run.budgets.Budgets.writing`,
``synced_after``, says when SQLite still syncs a log's header): the commit is
in the ledger's write-ahead log, safe from a crash of the process, but a power
cut could still drop it. Syncing it there
and then made every run wait for the disk (5.8 ms at the median on an ext4
disk, against 0.08 ms for the check itself): the log's sync, and, when the run
was the first to write since the log was removed (the last connection to
close a ledger copies its log into the database and removes it, so nearly
every ``ghostrunner run``), the sync of the new log's header and of its
directory. Instead, :meth:`LogSync.start` makes those syncs in a thread (a
sync releases the interpreter), and the run, which opens its journal, takes its
slot's lock and builds its prompt context meanwhile, calls :meth:`LogSync.wait`
just before it asks its backend: the reservation is still on the disk before
anything is paid for, and the run waits only for what its own work did not cover.

Why syncing the log file and its directory makes the commit durable: the log's
header and frames are in that one file, and a commit's frames, checksummed from
the header on, are valid after a power cut once the file is on the disk (and
its name, for a log just made, in the directory). A log copied into the
database meanwhile (a checkpoint by another commit) was synced by the
checkpoint before being copied. Syncing any descriptor of a file syncs the
file: the thread opens its own. The log is not removed under it: only the last
connection to close removes it, and the admitting connection is open until the
run has settled.
"""

from __future__ import annotations

import _thread
import os
from pathlib import Path

from runner.errors import StateFileError

__all__ = ["LogSync", "sync_now"]

_HOW_TO_FIX = "check the state directory's disk"


def _sync(ledger: Path) -> None:
    """``fdatasync`` the log of the ledger at *ledger*, then ``fsync`` its directory (raises OSError)."""
    fd = os.open(f"{ledger}-wal", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
    # The log may have been made by this very commit: its name must be on the disk too.
    fd = os.open(ledger.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_error(ledger: Path, exc: OSError) -> StateFileError:
    return StateFileError(ledger, f"the budgets' ledger cannot be synced to the disk ({exc.strerror or exc})", _HOW_TO_FIX)


def sync_now(ledger: Path) -> None:
    """Sync the log of the ledger at *ledger* before returning.

    Raises:
        StateFileError: the log cannot be opened or synced.
    """
    try:
        _sync(ledger)
    except OSError as exc:
        raise _sync_error(ledger, exc) from None


class LogSync:
    """One sync of a ledger's log, running in a thread from :meth:`start` until :meth:`wait` (or :meth:`finish`) joins it."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self._error: OSError | None = None
        # Held while the sync runs. A bare thread and a lock rather than threading.Thread, whose start() waits until
        # the new thread is running: on a loaded host that wait alone was milliseconds, what the thread is there to save.
        self._running = _thread.allocate_lock()

    @classmethod
    def start(cls, ledger: Path) -> LogSync:
        """Start syncing the log of the ledger at *ledger*; what was committed before this call is on the disk once :meth:`wait` returns."""
        sync = cls(ledger)
        sync._running.acquire()
        try:
            _thread.start_new_thread(sync._run, ())
        except BaseException:
            sync._running.release()
            raise
        return sync

    def _run(self) -> None:
        try:
            _sync(self.ledger)
        except OSError as exc:  # kept for wait(): the run must not ask its backend on a reservation that may be lost
            self._error = exc
        finally:
            self._running.release()

    def finish(self) -> None:
        """Return once the sync has ended, however it ended (a run that asks no backend needs no more)."""
        with self._running:
            pass

    def wait(self) -> None:
        """Return once the sync is done.

        Raises:
            StateFileError: the log could not be synced: the reservation may not survive a power cut.
        """
        self.finish()
        if self._error is not None:
            raise _sync_error(self.ledger, self._error)
