"""One backend call per slot at a time: the per-(agent, routine) lock a run holds while it works on its slot.

``ghostrunner run`` (and so each of ``serve``'s workers and each timer run)
takes this lock before it asks the journal for its slot's entry, and so before
the backend, and holds it until its entry is appended or the run has failed.
A second run of the same pair waits for it up to ``runner.slot_lock_wait``
(default 5 s); holding the lock, it asks the journal, so the loser of a race
finds the winner's entry and reports ``duplicate`` without a backend call. A run that finds the lock taken
logs ``run.waiting`` before it waits. A run that does not get the
lock in time reports ``busy`` (reason ``slot_locked``): another run of the
pair is still working, and its own ``run.finished`` says how the slot went.

The lock is an OS advisory lock (``filelock``, ``flock(2)`` on Linux) on
``slots/AGENT+ROUTINE.lock`` in the runner's state directory
(:mod:`runner.settings.state_dir`), released by the kernel when its process dies, so a
killed run never leaves its slot locked. Its cost, about 1 ms a run (the
directory checks, open, flock and close; measured on a loaded 2-core machine),
is nothing beside a backend call or the run's process start. It does not replace the journal's own writer
lock, nor the ``client_key`` check of the append, which is what guarantees
one entry per slot; this lock only spares the backend calls that the losers
of a race would make.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock
import structlog

from journal import JournalStorageError
from runner.errors import RunnerError
from runner.run.contract import REASON_SLOT_LOCKED, Outcome, RunEnding, RunIdentity, RunInterrupted, RunResult
from runner.settings.state_dir import ensure_state_dir, hand_over

__all__ = ["SlotLock", "Turn", "run_in_turn", "take_turn"]

log = structlog.get_logger()


class SlotLock:
    """The lock of *agent*'s *routine* in the state directory *directory*, waited for up to *wait* seconds."""

    def __init__(self, directory: Path, agent: str, routine: str, wait: float) -> None:
        self.directory = directory
        self.agent = agent
        self.routine = routine
        self.wait = wait
        self._lock: filelock.BaseFileLock | None = None

    @property
    def path(self) -> Path:
        """The lock file; agent names and routine names never hold ``+`` or ``/``, so each pair has its own."""
        return self.directory / "slots" / f"{self.agent}+{self.routine}.lock"

    def acquire(self, on_wait: Callable[[], object] | None = None) -> bool:
        """Take the lock, waiting up to ``wait`` seconds: True when held, False when another process held it throughout.

        *on_wait* is called once when the lock is not free at once, before the wait.

        Raises:
            StateFileError: a symlink or file is where the state directory should be.
            OSError: the filesystem refused to create the lock file or its directory (read-only, full, no permission).
        """
        ensure_state_dir(self.directory)
        ensure_state_dir(self.path.parent)
        lock = filelock.FileLock(self.path, timeout=self.wait, mode=0o600, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            if on_wait is not None:
                on_wait()
            try:
                lock.acquire()
            except filelock.Timeout:
                return False
        self._lock = lock
        hand_over(self.path)
        return True

    def release(self) -> None:
        """Release the lock if this object holds it."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None


@dataclass(slots=True)
class Turn:
    """A run's turn at its slot: go on (``outcome`` None, holding the lock if one was needed), or end now with ``outcome``."""

    outcome: Outcome | None = None
    waited_ms: float = 0.0
    error: str | None = None
    fault: str | None = None
    reason: str | None = None
    lock: SlotLock | None = None

    def release(self) -> None:
        """Release the slot lock this turn holds, if any."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def take_turn(identity: RunIdentity, lock: SlotLock | None) -> Turn:
    """The turn of the run *identity* at its slot under *lock* (None: no lock, go on).

    The run waits up to ``lock.wait`` for the lock: held, it goes on (and the
    run's own check of the journal, made under the lock with signals held,
    finds the entry a previous holder appended); not in time, it ends
    ``busy``. The lock is taken before the journal is asked, never after a
    look of its own: a signal that lands while the journal is asked must be
    recorded in the run's outcome, which only the run's own check does. A
    state directory the filesystem refuses fails the run, naming the path
    (``fault`` is the errno name, for the exit code).
    """
    if lock is None:
        return Turn()
    started = time.perf_counter()

    def waiting() -> None:
        log.info("run.waiting", **identity.fields(scheduled=False), lock=str(lock.path), wait_s=lock.wait)

    try:
        held = lock.acquire(waiting)
    except RunnerError as exc:
        return Turn(Outcome.FAILED, error=str(exc))
    except OSError as exc:
        refused = JournalStorageError.for_errno(
            exc.filename or lock.path,
            exc.errno or 0,
            "take the slot lock in",
            "make the runner's state directory (beside runner.lock_file) writable by this user",
        )
        return Turn(Outcome.FAILED, error=str(refused), fault=refused.errno_name)
    waited_ms = round((time.perf_counter() - started) * 1000, 3)
    if not held:
        return Turn(Outcome.BUSY, waited_ms=waited_ms, reason=REASON_SLOT_LOCKED)
    return Turn(waited_ms=waited_ms, lock=lock)


def run_in_turn(ending: RunEnding, lock: SlotLock | None, work: Callable[[], RunResult]) -> RunResult:
    """Do the run's *work* holding *lock*; or end the run (*ending*): busy, a refused state directory, or a signal while waiting.

    Raises:
        RunInterrupted: SIGTERM or SIGINT while the run waited for the lock (or
            right after a busy run was reported); its one ``run.finished`` is logged and reported first.
    """
    try:
        turn = take_turn(ending.identity, lock)
        if turn.outcome is not None:
            return ending.end(turn.outcome, duration_ms=turn.waited_ms, error=turn.error, fault=turn.fault, reason=turn.reason)
        try:
            return work()
        finally:
            turn.release()
    except RunInterrupted:
        raise  # the work's own: logged and reported already
    except (KeyboardInterrupt, SystemExit) as exc:
        raise ending.interrupted(
            exc, error="interrupted by a signal while waiting for the slot lock; the slot has no entry from this run and can be run again"
        ) from exc
