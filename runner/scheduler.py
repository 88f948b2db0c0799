"""``ghostrunner serve``: APScheduler wiring, catch-up and shutdown.

Each run is a :class:`runner.worker.Worker` process; one scheduler per
deployment is a :class:`runner.deployment_lock.DeploymentLock`.

The shape follows measured facts about APScheduler 3.x (see SPEC §4.3):

* one scheduler per deployment, guarded by an OS lock on ``runner.lock_file``;
  schedules live in memory, built from the configuration (no shared job store);
* a ``BlockingScheduler`` with one cron job per (agent, routine), in the
  configured timezone, ``coalesce=True``, ``max_instances=1`` and an explicit
  ``misfire_grace_time``;
* each run is a child process of the same ``ghostrunner run`` command the
  systemd timers use, in its own process group, killed at ``run_timeout``.
  A per-(agent, routine) lock keeps at most one run of a pair at a time; a
  worker that dies without reporting is logged as crashed and the scheduler
  carries on;
* on start, the most recent missed slot of each (agent, routine) within
  ``catchup_grace`` runs once; "missed" is decided by the journal (no entry
  with the slot's client_key), never by a burst of every missed slot;
* an agent whose journal cannot be used on start (a file in its place, a
  foreign manifest, a permission) is logged as ``scheduler.agent_unusable``
  and gets no catch-up; its cron jobs stay, so its runs fail with one clear
  line each until it is fixed, and every other agent is served as usual;
* a slot whose run failed for a transient reason is run again later, with
  backoff, until the routine's next fire (:mod:`runner.slot_retries`);
  each rerun is logged as ``scheduler.retry_scheduled``;
* SIGTERM or SIGINT stops new runs, lets in-flight runs finish for up to
  ``shutdown_timeout`` (then kills them; a killed run leaves a complete
  entry or none), and returns 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from threading import TIMEOUT_MAX
from types import FrameType
from typing import IO, Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.schedulers.blocking import BlockingScheduler

from journal import Journal
from runner.config import AgentConfig, RunnerConfig
from runner.deployment_lock import DeploymentLock
from runner.notify import WatchdogPinger
from runner.run_contract import RunIdentity, RunResult
from runner.slot_retries import needs_rerun, next_fire_after, rerun_time
from runner.slots import cron_trigger, latest_fire_time
from runner.worker import Worker

__all__ = ["MissedSlot", "Scheduler", "UnusableAgent", "missed_slots"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class MissedSlot:
    """The most recent slot of a pair that has no entry yet and is still within the grace window."""

    agent: str
    routine: str
    scheduled: datetime
    slot: str


@dataclass(frozen=True, slots=True)
class UnusableAgent:
    """An agent whose journal could not be opened or read while planning catch-up."""

    agent: str
    journal_root: str
    error: str


def _journal_error(agent: AgentConfig, exc: Exception) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return (f"cannot use the journal at {str(agent.journal_root)!r}: {reason}; its runs fail until it is fixed "
            "(the other agents are served)")


def missed_slots(config: RunnerConfig, now: datetime, unusable: list[UnusableAgent] | None = None) -> list[MissedSlot]:
    """For each (agent, routine): its latest fire time within ``catchup_grace`` before *now*, if the journal lacks it.

    Only the most recent slot per pair is considered, so a long downtime
    causes one run per pair, not a burst.

    Args:
        config: the configuration.
        now: the moment catch-up is planned at.
        unusable: when given, an agent whose journal cannot be opened or read
            is appended here and skipped, so that the other agents are still
            planned; without it, the error is raised.
    """
    missed = []
    since = now.astimezone(UTC) - config.catchup_grace  # real time: wall-clock arithmetic is an hour off across a DST change
    for agent in config.agents.values():
        found = []
        try:
            with Journal(agent.journal_root) as journal:
                for name in agent.routines:
                    routine = config.routines[name]
                    latest = latest_fire_time(cron_trigger(routine.schedule, config.timezone), now, not_before=since)
                    if latest is None:
                        continue
                    run = RunIdentity.of(agent.name, routine, latest, config.timezone)
                    if journal.find_by_client_key(run.client_key, agent=agent.name) is None:
                        found.append(MissedSlot(agent.name, name, latest, run.slot))
        # Any failure of one agent's journal (a file in its place, a foreign
        # manifest, a corrupt entry, a permission) is that agent's alone.
        except Exception as exc:
            if unusable is None:
                raise
            unusable.append(UnusableAgent(agent.name, str(agent.journal_root), _journal_error(agent, exc)))
            continue
        missed += found
    return missed


class _StoppableScheduler(BlockingScheduler):  # type: ignore[misc]  # APScheduler 3.x ships no type hints
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


class Scheduler:
    """One deployment's scheduler: cron jobs per (agent, routine), runs in worker processes.

    Args:
        config: the validated configuration.
        now: the clock used to plan catch-up (injectable for tests).
        log_stream: where workers' log lines go (the scheduler's own log stream).
        notify: called with systemd-style state strings (``READY=1``, ``STOPPING=1``, ``WATCHDOG=1``).
        watchdog_interval: seconds between ``WATCHDOG=1`` pings from READY until
            serve returns (None: no pings); half of systemd's ``WatchdogSec=``.
    """

    def __init__(
        self, config: RunnerConfig, *, now: Callable[[], datetime] | None = None, log_stream: IO[str] | None = None,
        notify: Callable[[str], object] | None = None, watchdog_interval: float | None = None,
    ) -> None:
        self.config = config
        self._now = now or (lambda: datetime.now(config.timezone))
        self._log_stream = log_stream if log_stream is not None else sys.stdout
        self._notify = notify or (lambda state: None)
        self._watchdog_interval = watchdog_interval
        pairs = [(agent.name, name) for agent in config.agents.values() for name in agent.routines]
        self._pair_locks = {pair: threading.Lock() for pair in pairs}
        self._in_flight: dict[str, Worker] = {}
        self._in_flight_lock = threading.Condition()
        self._stopping = threading.Event()
        self._scheduler = _StoppableScheduler(
            timezone=config.timezone,
            executors={"default": ThreadPoolExecutor(max_workers=len(pairs) + 2)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": int(config.misfire_grace.total_seconds()) or 1},
        )
        self._received: str | None = None

    # -- runs ----------------------------------------------------------------------

    def _stderr_target(self) -> int | None:
        try:
            return self._log_stream.fileno()
        except (AttributeError, OSError, ValueError):
            return None

    def dispatch(self, agent: str, routine: str, scheduled: datetime | None = None, trigger: str = "cron", rerun: int = 0) -> RunResult | None:
        """Run one (agent, routine) slot in a worker process and wait for it.

        *rerun* counts the later runs of the slot (0 for its first run). Returns
        the worker's result (or None when skipped because the pair is busy or the
        scheduler is stopping).
        """
        lock = self._pair_locks[(agent, routine)]
        if self._stopping.is_set():
            return None
        if scheduled is None:
            expression = self.config.routines[routine].schedule
            scheduled = latest_fire_time(cron_trigger(expression, self.config.timezone), self._now())
            if scheduled is None:
                return None
        if not lock.acquire(blocking=False):
            log.warning("scheduler.run_skipped", agent=agent, routine=routine, scheduled=scheduled.isoformat(), reason="a run of this agent and routine is still going")
            return None
        try:
            return self._run_worker(agent, routine, scheduled, trigger, rerun)
        finally:
            lock.release()

    def _plan_rerun(self, identity: RunIdentity, scheduled: datetime, result: RunResult | None, rerun: int) -> None:
        """Schedule the slot's next rerun after a run that failed for a transient reason, while the slot's time lasts."""
        if self._stopping.is_set() or not needs_rerun(result):
            return
        routine = self.config.routines[identity.routine]
        when = rerun_time(rerun=rerun + 1, retries=self.config.slot_retries, delay=self.config.slot_retry_delay, failed_at=self._now(),
                          deadline=next_fire_after(cron_trigger(routine.schedule, self.config.timezone), scheduled))
        if when is None:
            return
        log.info("scheduler.retry_scheduled", agent=identity.agent, routine=identity.routine, slot=identity.slot, scheduled=identity.scheduled,
                 rerun=rerun + 1, run_date=when.isoformat())
        self._scheduler.add_job(
            self.dispatch, "date", run_date=when, args=[identity.agent, identity.routine, scheduled, "retry"], kwargs={"rerun": rerun + 1},
            id=f"{identity.agent}:{identity.routine}:retry", replace_existing=True, misfire_grace_time=None,
        )

    def _run_worker(self, agent: str, routine: str, scheduled: datetime, trigger: str, rerun: int = 0) -> RunResult | None:
        identity = RunIdentity.of(agent, self.config.routines[routine], scheduled, self.config.timezone)
        with self._in_flight_lock:
            if self._stopping.is_set():
                return None
            worker = Worker(self.config, identity, scheduled, self._stderr_target())
            self._in_flight[identity.run_id] = worker
        try:
            worker.wait(self.config.run_timeout.total_seconds())
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(identity.run_id, None)
                self._in_flight_lock.notify_all()
        result = worker.hand_off(trigger)
        self._plan_rerun(identity, scheduled, result, rerun)
        return result

    # -- lifecycle -----------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._received = signal.Signals(signum).name
        # Event.set() takes a lock the interrupted main thread may hold; do it from another thread.
        threading.Thread(target=self._scheduler.request_stop, daemon=True).start()

    def _wait_for_runs(self) -> int:
        """Wait up to shutdown_timeout for in-flight runs; kill what is left. Return how many were killed."""
        deadline = time.monotonic() + self.config.shutdown_timeout.total_seconds()
        with self._in_flight_lock:
            while self._in_flight and time.monotonic() < deadline:
                self._in_flight_lock.wait(max(0.0, deadline - time.monotonic()))
            left = list(self._in_flight.values())
        for worker in left:
            worker.kill()
        return len(left)

    def serve(self) -> int:
        """Run until SIGTERM or SIGINT; return the exit code (0 after a clean stop).

        Raises:
            SchedulerBusyError: another scheduler holds the deployment lock.
            ConfigError: ``runner.lock_file`` names something that is not this lock's own file.
        """
        lock = DeploymentLock(self.config.lock_file, self.config.source)
        lock.acquire()
        pinger: WatchdogPinger | None = None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            jobs = 0
            for agent in self.config.agents.values():
                for name in agent.routines:
                    routine = self.config.routines[name]
                    self._scheduler.add_job(
                        self.dispatch, cron_trigger(routine.schedule, self.config.timezone), args=[agent.name, name],
                        id=f"{agent.name}:{name}", name=f"{agent.name}:{name}",
                    )
                    jobs += 1
            now = self._now()
            unusable: list[UnusableAgent] = []
            for missed in missed_slots(self.config, now, unusable):
                log.info("scheduler.catchup", agent=missed.agent, routine=missed.routine, slot=missed.slot, scheduled=missed.scheduled.isoformat())
                self._scheduler.add_job(
                    self.dispatch, "date", run_date=now, args=[missed.agent, missed.routine, missed.scheduled, "catchup"],
                    id=f"{missed.agent}:{missed.routine}:catchup", misfire_grace_time=None,
                )
            log.info("scheduler.started", agents=sorted(self.config.agents), jobs=jobs, timezone=str(self.config.timezone),
                     lock_file=str(self.config.lock_file), pid=os.getpid())
            for problem in unusable:  # after scheduler.started, so that status knows which start each belongs to
                log.error("scheduler.agent_unusable", agent=problem.agent, journal_root=problem.journal_root, error=problem.error)
            self._notify("READY=1")
            if self._watchdog_interval:
                # Pings continue through the shutdown wait, which may take up to shutdown_timeout.
                pinger = WatchdogPinger(self._notify, self._watchdog_interval)
                pinger.start()
            if not self._stopping.is_set():
                self._scheduler.start()
            with self._in_flight_lock:
                in_flight = len(self._in_flight)
            log.info("scheduler.stopping", signal=self._received, in_flight=in_flight)
            self._notify("STOPPING=1")
            killed = self._wait_for_runs()
            log.info("scheduler.stopped", killed=killed)
            return 0
        finally:
            if pinger is not None:
                pinger.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            lock.release()
