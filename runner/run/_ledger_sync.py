"""The budgets' ledger's log put on the disk in a thread, while the run does the work it has to do before its backend call.

An admission commits its reservation written, not synced (``synchronous = NORMAL``):
the commit is in the ledger's write-ahead log, safe from a crash of the process,
but a power cut could still drop it. Syncing the log there and then (``FULL``)
made every run wait for the disk (5.8 ms at the median on an ext4 disk, against
0.08 ms for the check itself). Instead, :meth:`LogSync.start` syncs the log in
a thread (an ``fdatasync`` releases the interpreter), and the run, which opens
its journal, takes its slot's lock and builds its prompt context meanwhile,
calls :meth:`LogSync.wait` just before it asks its backend: the reservation is
still on the disk before anything is paid for, and the run waits only for the
part of the sync that its own work did not cover.

Why a sync of the log file alone makes the commit durable: the log's header is
synced by SQLite whenever it starts the log afresh (also at ``NORMAL``), and a
commit's frames are valid after a power cut once they are on the disk; a log
copied into the database meanwhile (a checkpoint) was synced by the checkpoint.
Syncing any descriptor of the file syncs the file: the thread opens its own.
The log is not removed under it: only the last connection to close removes it,
and the admitting connection is open until the run has settled.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from runner.errors import StateFileError

__all__ = ["LogSync", "sync_now"]

_HOW_TO_FIX = "check the state directory's disk"


def _sync(path: Path) -> None:
    """``fdatasync`` the file at *path* through a descriptor of its own (raises OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)
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
        _sync(Path(f"{ledger}-wal"))
    except OSError as exc:
        raise _sync_error(ledger, exc) from None


class LogSync:
    """One sync of a ledger's log, running in a thread from :meth:`start` until :meth:`wait` (or :meth:`finish`) joins it."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="ledger-sync", daemon=True)

    @classmethod
    def start(cls, ledger: Path) -> LogSync:
        """Start syncing the log of the ledger at *ledger*; what was committed before this call is on the disk once :meth:`wait` returns."""
        sync = cls(ledger)
        sync._thread.start()
        return sync

    def _run(self) -> None:
        try:
            _sync(Path(f"{self.ledger}-wal"))
        except OSError as exc:  # kept for wait(): the run must not ask its backend on a reservation that may be lost
            self._error = exc

    def finish(self) -> None:
        """Return once the sync has ended, however it ended (a run that asks no backend needs no more)."""
        self._thread.join()

    def wait(self) -> None:
        """Return once the sync is done.

        Raises:
            StateFileError: the log could not be synced: the reservation may not survive a power cut.
        """
        self._thread.join()
        if self._error is not None:
            raise _sync_error(self.ledger, self._error)
