"""The runs ``serve`` has accepted: at most ``max_concurrent_runs`` going at once, the rest waiting in order.

A :class:`RunQueue` starts each accepted run on a thread of its own, which
runs it (a worker process, in ``serve``) and returns. Its rules:

* at most ``limit`` runs go at once; a run beyond that waits, and is logged
  once as ``scheduler.run_queued`` (a run accepted before :meth:`RunQueue.open`,
  when the queue opens and it still has to wait);
* waiting runs start first in, first out, except that a run never starts
  while another run of its (agent, routine) goes: it keeps its place and the
  next run in line may start; so runs of one pair go one at a time, in order;
* a slot (client_key) that is already waiting or going is refused (logged as
  ``scheduler.run_skipped``): a run is never doubled, and an accepted one is
  never dropped, except by :meth:`RunQueue.discard` (its pair left the
  configuration) or :meth:`RunQueue.close` (serve stops; the journal still
  lacks the slot, so the next start catches it up or records it as missed).

Nothing here knows about processes or APScheduler: the run is a callable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime

import structlog

from runner.run.contract import RunIdentity

__all__ = ["QueuedRun", "RunQueue"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class QueuedRun:
    """One accepted run: who, which slot, its scheduled time, and what triggered it (``cron`` or ``catchup``)."""

    identity: RunIdentity
    scheduled: datetime
    trigger: str

    @property
    def pair(self) -> tuple[str, str]:
        """Its (agent, routine)."""
        return (self.identity.agent, self.identity.routine)


class RunQueue:
    """Runs accepted runs with *run*, at most *limit* at once, in order.

    Args:
        limit: how many runs may go at once (at least 1).
        run: called on a thread of its own with each run that starts.
        started: whether runs may start now; otherwise they wait until :meth:`open`.
    """

    def __init__(self, limit: int, run: Callable[[QueuedRun], object], *, started: bool = True) -> None:
        if limit < 1:
            raise ValueError(f"a run queue runs at least 1 run at once, got {limit}")
        self._limit = limit
        self._run = run
        self._open = started
        self._closed = False
        self._waiting: list[QueuedRun] = []
        self._going: dict[str, QueuedRun] = {}  # client_key -> run
        self._condition = threading.Condition()

    def submit(self, run: QueuedRun) -> bool:
        """Accept *run*; return False (logged) when its slot is already waiting or going, or the queue is closed."""
        with self._condition:
            if self._closed:
                return False
            key = run.identity.client_key
            if key in self._going or any(waiting.identity.client_key == key for waiting in self._waiting):
                log.warning(
                    "scheduler.run_skipped",
                    agent=run.identity.agent,
                    routine=run.identity.routine,
                    scheduled=run.identity.scheduled,
                    reason="a run of this slot is already waiting or going",
                )
                return False
            self._waiting.append(run)
            if self._open:
                self._start_what_can()
                if run in self._waiting:
                    self._log_queued(run, len(self._waiting))
            return True

    def open(self) -> None:
        """Let waiting runs start; those that still wait are logged as queued, in order."""
        with self._condition:
            if self._open:
                return
            self._open = True
            self._start_what_can()
            for position, run in enumerate(self._waiting, start=1):
                self._log_queued(run, position)

    def _log_queued(self, run: QueuedRun, waiting: int) -> None:
        busy = any(going.pair == run.pair for going in self._going.values())
        log.info(
            "scheduler.run_queued",
            **run.identity.fields(),
            trigger=run.trigger,
            running=len(self._going),
            waiting=waiting,
            reason="a run of this agent and routine is going" if busy else "max_concurrent_runs runs are going",
        )

    def set_limit(self, limit: int) -> None:
        """Change how many runs may go at once (a reload); a larger limit starts waiting runs now."""
        if limit < 1:
            raise ValueError(f"a run queue runs at least 1 run at once, got {limit}")
        with self._condition:
            self._limit = limit
            self._start_what_can()

    def discard(self, pairs: Collection[tuple[str, str]]) -> list[QueuedRun]:
        """Drop the waiting runs of *pairs* (they left the configuration); return them. Going runs finish."""
        with self._condition:
            dropped = [run for run in self._waiting if run.pair in pairs]
            self._waiting = [run for run in self._waiting if run.pair not in pairs]
            return dropped

    def close(self) -> list[QueuedRun]:
        """Accept and start nothing more; return the runs that were still waiting. Going runs finish."""
        with self._condition:
            self._closed = True
            dropped, self._waiting = self._waiting, []
            self._condition.notify_all()
            return dropped

    def counts(self) -> tuple[int, int]:
        """(going, waiting) now."""
        with self._condition:
            return len(self._going), len(self._waiting)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run is going or waiting (or *timeout* seconds); return whether that happened."""
        with self._condition:
            return self._condition.wait_for(lambda: not self._going and not self._waiting, timeout)

    def _start_what_can(self) -> None:
        """Start waiting runs in order while there is room (the condition is held)."""
        if not self._open or self._closed:
            return
        position = 0
        while len(self._going) < self._limit and position < len(self._waiting):
            run = self._waiting[position]
            if any(going.pair == run.pair for going in self._going.values()):
                position += 1  # its pair is going: it keeps its place, the next one may start
                continue
            del self._waiting[position]
            self._going[run.identity.client_key] = run
            threading.Thread(target=self._go, args=(run,), name=f"run-{run.identity.client_key}", daemon=True).start()

    def _go(self, run: QueuedRun) -> None:
        try:
            self._run(run)
        finally:
            with self._condition:
                del self._going[run.identity.client_key]
                self._start_what_can()
                self._condition.notify_all()
