"""``ghostrunner serve``: APScheduler wiring, catch-up, the run queue, reload and shutdown.

Each run is a :class:`runner.run.worker.Worker` process; one scheduler per
deployment is a :class:`runner.schedule.deployment_lock.DeploymentLock`.

The shape follows measured facts about APScheduler 3.x (see SPEC §4.3):

* one scheduler per deployment, guarded by an OS lock on ``runner.lock_file``;
  schedules live in memory, built from the configuration (no shared job store);
* a ``BlockingScheduler`` with one cron job per (agent, routine), in the
  configured timezone, ``coalesce=True`` and ``max_instances=1``. Its own
  misfire check is off (``misfire_grace_time=None``): it drops a late fire
  with a warning and drops coalesced fires without a word. Each job instead
  finds the fires of its pair since the one before (:meth:`Scheduler.fire`):
  a fire more than ``misfire_grace`` late (the host slept, the process was
  stopped) is recorded as ``scheduler.missed`` (reason ``late``), not run;
* a job only accepts the run into a :class:`runner.schedule.run_queue.RunQueue`: at
  most ``max_concurrent_runs`` workers at once, the rest waiting in order
  (``scheduler.run_queued``), one run per (agent, routine) at a time, a slot
  never twice;
* each run is a child process of the same ``ghostrunner run`` command the
  systemd timers use, in its own process group, killed at ``run_timeout``.
  A worker that dies without reporting is logged as crashed and the
  scheduler carries on. A run of a paused pair (:mod:`runner.run.pauses`) starts
  no worker: the scheduler logs its ``run.finished`` (``skipped``, reason
  ``paused``) itself, as the worker would have;
* on start, :func:`runner.schedule.catchup.plan_catchup` decides from the journals
  which missed slots run (at most ``catchup_max`` per pair, within
  ``catchup_grace``, spread over ``catchup_spread``) and which are recorded
  as ``scheduler.missed``;
* an agent whose journal cannot be used on start (a file in its place, a
  foreign manifest, a permission) is logged as ``scheduler.agent_unusable``
  and gets no catch-up; its cron jobs stay, so its runs fail with one clear
  line each until it is fixed, and every other agent is served as usual;
* SIGHUP rereads the configuration (:mod:`runner.schedule.reload`): a valid one is
  logged as ``scheduler.reloaded`` and takes effect (pairs added, with their
  catch-up; pairs removed, with their waiting runs; schedules and the
  concurrency cap changed); an invalid one is logged as
  ``scheduler.reload_failed`` and the old one keeps serving. In-flight runs
  finish either way;
* a slot whose run failed for a transient reason is run again later, with
  backoff, until the routine's next fire (:mod:`runner.schedule.reruns`);
  each rerun is logged as ``scheduler.retry_scheduled``;
* SIGTERM or SIGINT stops new runs, lets in-flight runs finish for up to
  ``shutdown_timeout`` (then kills them; a killed run leaves a complete
  entry or none), and returns 0. Runs still waiting are not started: their
  slots have no entry, so the next start catches them up or records them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import IO

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError

from runner.cron.slots import cron_trigger, fires_since, is_late, latest_fire_time
from runner.run.contract import RunIdentity, RunResult, log_missed
from runner.run.engine import held_by_pause
from runner.run.worker import Worker
from runner.schedule._loop import StoppableScheduler
from runner.schedule.catchup import LATE, MISSED_LINES_PER_PAIR, CatchupPlan, MissedSlot, UnusableAgent, plan_catchup, spread
from runner.schedule.deployment_lock import DeploymentLock
from runner.schedule.notify import WatchdogPinger
from runner.schedule.reload import ConfigChange, pairs_of
from runner.schedule.reruns import planned_rerun
from runner.schedule.run_queue import QueuedRun, RunQueue
from runner.settings.config import RunnerConfig, load_config

__all__ = ["MissedSlot", "Scheduler", "UnusableAgent", "missed_slots"]

log = structlog.get_logger()
#: How long a stop waits for the runs' threads to report, once their workers ended (or were killed).
_HAND_OFF_SECONDS = 30.0
_StoppableScheduler = StoppableScheduler  # its former name, for callers that import it from here


def missed_slots(config: RunnerConfig, now: datetime, unusable: list[UnusableAgent] | None = None) -> list[MissedSlot]:
    """The slots a serve started at *now* would catch up (see :func:`runner.schedule.catchup.plan_catchup`), oldest first.

    Args:
        config: the configuration.
        now: the moment catch-up is planned at.
        unusable: when given, an agent whose journal cannot be opened or read
            is appended here and skipped; without it, the error is raised.
    """
    plan = plan_catchup(config, now, strict=unusable is None)
    if unusable is not None:
        unusable += plan.unusable
    return plan.runs


def _log_missed(slots: list[MissedSlot]) -> None:
    """Record *slots* as missed: a ``scheduler.missed`` line each, except that a pair with more than :data:`MISSED_LINES_PER_PAIR`
    of them (a start after a long downtime, or after a simulated past; a host that slept for days) has one
    ``scheduler.missed_summary`` line for all but its newest, which keeps its own line: status judges a pair by its newest slot."""
    by_pair: dict[tuple[str, str], list[MissedSlot]] = {}
    for missed in sorted(slots, key=lambda missed: missed.scheduled.astimezone(UTC)):
        by_pair.setdefault((missed.agent, missed.routine), []).append(missed)
    for (agent, routine), of_pair in by_pair.items():
        older, own_lines = (of_pair[:-1], of_pair[-1:]) if len(of_pair) > MISSED_LINES_PER_PAIR else ([], of_pair)
        if older:
            log.warning(
                "scheduler.missed_summary",
                agent=agent,
                routine=routine,
                count=len(older),
                first=older[0].scheduled.isoformat(),
                last=older[-1].scheduled.isoformat(),
                reason=",".join(sorted({str(missed.reason) for missed in older})),
            )
        for missed in own_lines:
            log_missed(missed.agent, missed.routine, missed.slot, missed.scheduled.isoformat(timespec="seconds"), str(missed.reason))


class Scheduler:
    """One deployment's scheduler: cron jobs per (agent, routine), runs in worker processes, at most a few at once.

    Args:
        config: the validated configuration.
        now: the clock (injectable for tests): catch-up is planned, and fires are judged late, by it.
        log_stream: where workers' log lines go (the scheduler's own log stream).
        notify: called with systemd-style state strings (``READY=1``, ``RELOADING=1``, ``STOPPING=1``, ``WATCHDOG=1``).
        watchdog_interval: seconds between ``WATCHDOG=1`` pings from READY until
            serve returns (None: no pings); half of systemd's ``WatchdogSec=``.
        reload: reads the configuration again on SIGHUP (default: the file *config* came from).
    """

    def __init__(
        self,
        config: RunnerConfig,
        *,
        now: Callable[[], datetime] | None = None,
        log_stream: IO[str] | None = None,
        notify: Callable[[str], object] | None = None,
        watchdog_interval: float | None = None,
        reload: Callable[[], RunnerConfig] | None = None,
    ) -> None:
        self.config = config
        self._now = now or (lambda: datetime.now(self.config.timezone))
        self._log_stream = log_stream if log_stream is not None else sys.stdout
        self._notify = notify or (lambda state: None)
        self._watchdog_interval = watchdog_interval
        self._load = reload or (lambda: load_config(config.config_file))
        self._queue = RunQueue(config.max_concurrent_runs, self._run, started=False)
        self._last_fire: dict[tuple[str, str], datetime] = {}
        self._reruns: dict[str, int] = {}  # later runs so far of each slot that failed transiently, by client_key
        self._in_flight: dict[str, Worker] = {}
        self._in_flight_lock = threading.Condition()
        self._config_lock = threading.RLock()  # the configuration, its jobs and _last_fire change together
        self._reload_lock = threading.Lock()  # one reload at a time
        self._stopping = threading.Event()
        self._scheduler = StoppableScheduler(
            timezone=config.timezone,
            # Jobs only put runs into the queue, so a few threads serve any number of pairs.
            executors={"default": ThreadPoolExecutor(max_workers=4)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._received: str | None = None

    # -- accepting runs ------------------------------------------------------------

    def dispatch(self, agent: str, routine: str, scheduled: datetime | None = None, trigger: str = "cron") -> bool:
        """Accept one (agent, routine) slot's run into the queue; it runs in a worker process when its turn comes.

        *scheduled* defaults to the latest fire time at or before now. Returns
        False when nothing was accepted: the pair is no longer configured, the
        scheduler is stopping, or the slot is already waiting or going (logged).
        """
        with self._config_lock:
            config = self.config
            if self._stopping.is_set() or (agent, routine) not in pairs_of(config):
                return False
            routine_config = config.routines[routine]
            if scheduled is None:
                scheduled = latest_fire_time(cron_trigger(routine_config.schedule, config.timezone), self._now())
                if scheduled is None:
                    return False
            identity = RunIdentity.of(agent, routine_config, scheduled, config.timezone)
        return self._queue.submit(QueuedRun(identity, scheduled, trigger))

    def fire(self, agent: str, routine: str) -> None:
        """A cron job's call: accept each fire of the pair since the previous call; record a late one as missed.

        APScheduler calls this once however many fires it coalesced (after a
        suspend, say); each of them is accepted or recorded here, by its own time.
        """
        now = self._now()
        with self._config_lock:
            pair = (agent, routine)
            if pair not in self._last_fire:
                return  # removed by a reload
            routine_config = self.config.routines[routine]
            trigger = cron_trigger(routine_config.schedule, self.config.timezone)
            fires = fires_since(trigger, self._last_fire[pair], now, granularity=routine_config.slot)
            if fires:
                self._last_fire[pair] = fires[-1]
            grace = self.config.misfire_grace
        late = [moment for moment in fires if is_late(moment, now, grace)]
        _log_missed(
            [
                MissedSlot(agent, routine, moment, RunIdentity.of(agent, routine_config, moment, self.config.timezone).slot, LATE)
                for moment in late
            ]
        )
        for moment in fires:
            if not is_late(moment, now, grace):
                self.dispatch(agent, routine, moment, "cron")

    # -- runs ----------------------------------------------------------------------

    def _stderr_target(self) -> int | None:
        try:
            return self._log_stream.fileno()
        except (AttributeError, OSError, ValueError):
            return None

    def _run(self, run: QueuedRun) -> None:
        """One run's turn in the queue: its worker process, waited for, its result handed off.

        A run the pause file holds back ends here, as its worker would have ended it, and starts no process.
        """
        if self._stopping.is_set():
            return
        held = held_by_pause(self.config, run.identity)
        if held is not None:
            self._plan_rerun(run.identity, run.scheduled, held)
            return
        with self._in_flight_lock:
            if self._stopping.is_set():
                return
            worker = Worker(self.config, run.identity, run.scheduled, self._stderr_target())
            self._in_flight[run.identity.run_id] = worker
        try:
            worker.wait(self.config.run_timeout.total_seconds())
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(run.identity.run_id, None)
                self._in_flight_lock.notify_all()
        self._plan_rerun(run.identity, run.scheduled, worker.hand_off(run.trigger))

    def _plan_rerun(self, identity: RunIdentity, scheduled: datetime, result: RunResult | None) -> None:
        """Schedule the slot's next rerun after a run that failed for a transient reason, while the slot's time lasts.

        The reruns of a slot are counted here, by its client_key, and forgotten
        once it needs none (it succeeded, failed for good, or ran out of time).
        """
        key = identity.client_key
        with self._config_lock:
            rerun = self._reruns.get(key, 0) + 1
            still_served = not self._stopping.is_set() and (identity.agent, identity.routine) in pairs_of(self.config)
            when = (
                planned_rerun(
                    self.config,
                    result,
                    agent=identity.agent,
                    routine=identity.routine,
                    slot=identity.slot,
                    scheduled=scheduled,
                    scheduled_text=identity.scheduled,
                    rerun=rerun,
                    now=self._now(),
                )
                if still_served
                else None
            )
            if when is None:
                self._reruns.pop(key, None)
                return
            self._reruns[key] = rerun
        self._scheduler.add_job(
            self.dispatch,
            "date",
            run_date=when,
            args=[identity.agent, identity.routine, scheduled, "retry"],
            id=f"{identity.agent}:{identity.routine}:retry",
            replace_existing=True,
            misfire_grace_time=None,
        )

    # -- jobs ----------------------------------------------------------------------

    def _add_job(self, agent: str, routine: str, now: datetime) -> None:
        """The pair's cron job, firing first at its first fire after *now* (what catch-up planned at *now* left off)."""
        trigger = cron_trigger(self.config.routines[routine].schedule, self.config.timezone)
        # Explicit: APScheduler would count from when the loop starts (or the job is added), and a fire
        # between *now* and then would fall to neither the catch-up nor the job.
        first = trigger.get_next_fire_time(None, now + timedelta(microseconds=1))
        self._scheduler.add_job(
            self.fire,
            trigger,
            args=[agent, routine],
            id=f"{agent}:{routine}",
            name=f"{agent}:{routine}",
            replace_existing=True,
            next_run_time=first,
        )
        self._last_fire[(agent, routine)] = now

    def _remove_jobs(self, agent: str, routine: str) -> None:
        prefix = f"{agent}:{routine}:catchup:"
        for job in self._scheduler.get_jobs():
            if job.id in (f"{agent}:{routine}", f"{agent}:{routine}:retry") or job.id.startswith(prefix):
                try:
                    job.remove()
                except JobLookupError:
                    continue  # a catch-up job that just ran
        self._last_fire.pop((agent, routine), None)

    def _start_catchup(self, plan: CatchupPlan, now: datetime) -> None:
        """Log what *plan* records as missed, and schedule its catch-up runs spread over ``catchup_spread``."""
        _log_missed(plan.missed)
        for at, run in spread(plan.runs, now, self.config.catchup_spread):
            log.info(
                "scheduler.catchup",
                agent=run.agent,
                routine=run.routine,
                slot=run.slot,
                scheduled=run.scheduled.isoformat(),
                starts=at.isoformat(),
            )
            if at <= now:
                # Due now: into the queue at once, in the plan's order (date jobs due at one moment run on
                # the pool's threads in any order).
                self.dispatch(run.agent, run.routine, run.scheduled, "catchup")
                continue
            self._scheduler.add_job(
                self.dispatch,
                "date",
                run_date=at,
                args=[run.agent, run.routine, run.scheduled, "catchup"],
                id=f"{run.agent}:{run.routine}:catchup:{run.slot}",
                replace_existing=True,
            )

    # -- reload --------------------------------------------------------------------

    def reload(self) -> bool:
        """Read the configuration again and serve it; on any problem keep the old one. Return whether it was taken."""
        with self._reload_lock:
            if self._stopping.is_set():
                return False
            self._notify(f"RELOADING=1\nMONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
            try:
                taken = self._reload()
            finally:
                self._notify("READY=1")
            return taken

    def _reload(self) -> bool:
        source = self.config.source
        try:
            new = self._load()
            change = ConfigChange.between(self.config, new)
        # Whatever keeps the new configuration from loading (a ConfigError, or a bug in reading
        # it), the old one keeps serving: a reload must never take a working scheduler down.
        except Exception as exc:  # noqa: BLE001
            # The file's fault, said in one line: a traceback would bury it.
            log.error("scheduler.reload_failed", config=source, error=str(exc) or type(exc).__name__)  # noqa: TRY400
            return False
        now = self._now()
        with self._config_lock:
            self.config = new
            for pair in change.removed:
                self._remove_jobs(*pair)
            for pair in change.added | change.rescheduled:
                self._add_job(*pair, now)
            for run in self._queue.discard(change.removed):
                log.warning(
                    "scheduler.run_skipped",
                    agent=run.identity.agent,
                    routine=run.identity.routine,
                    scheduled=run.identity.scheduled,
                    reason="its agent or routine left the configuration",
                )
            self._queue.set_limit(new.max_concurrent_runs)
            plan = plan_catchup(new, now, pairs=change.added)
            self._start_catchup(plan, now)
            jobs = len(pairs_of(new))
        log.info(
            "scheduler.reloaded",
            config=new.source,
            agents=sorted(new.agents),
            jobs=jobs,
            **change.to_fields(),
            max_concurrent_runs=new.max_concurrent_runs,
        )
        for problem in plan.unusable:
            log.error("scheduler.agent_unusable", agent=problem.agent, journal_root=problem.journal_root, error=problem.error)
        return True

    # -- lifecycle -----------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._received = signal.Signals(signum).name
        # Event.set() takes a lock the interrupted main thread may hold; do it from another thread.
        threading.Thread(target=self._scheduler.request_stop, daemon=True).start()

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        if not self._stopping.is_set():
            threading.Thread(target=self.reload, name="reload", daemon=True).start()

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
        """Run until SIGTERM or SIGINT; return the exit code (0 after a clean stop). SIGHUP reloads.

        Raises:
            SchedulerBusyError: another scheduler holds the deployment lock.
            ConfigError: ``runner.lock_file`` names something that is not this lock's own file.
        """
        lock = DeploymentLock(self.config.lock_file, self.config.source)
        lock.acquire()
        pinger: WatchdogPinger | None = None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        try:
            with self._config_lock:  # a SIGHUP now waits for the start to be planned
                now = self._now()
                for agent, routine in sorted(pairs_of(self.config)):
                    self._add_job(agent, routine, now)
                plan = plan_catchup(self.config, now)
                self._start_catchup(plan, now)
                log.info(
                    "scheduler.started",
                    agents=sorted(self.config.agents),
                    jobs=len(self._last_fire),
                    timezone=str(self.config.timezone),
                    lock_file=str(self.config.lock_file),
                    pid=os.getpid(),
                    max_concurrent_runs=self.config.max_concurrent_runs,
                )
            for problem in plan.unusable:  # after scheduler.started, so that status knows which start each belongs to
                log.error("scheduler.agent_unusable", agent=problem.agent, journal_root=problem.journal_root, error=problem.error)
            self._notify("READY=1")
            if self._watchdog_interval:
                # Pings continue through the shutdown wait, which may take up to shutdown_timeout.
                pinger = WatchdogPinger(self._notify, self._watchdog_interval)
                pinger.start()
            self._queue.open()
            if not self._stopping.is_set():
                self._scheduler.start()
            self._stopping.set()  # the loop may also end without a signal (a test's request_stop)
            waiting = self._queue.close()
            with self._in_flight_lock:
                in_flight = len(self._in_flight)
            log.info("scheduler.stopping", signal=self._received, in_flight=in_flight, waiting=len(waiting))
            self._notify("STOPPING=1")
            killed = self._wait_for_runs()
            # A run's thread logs its run.finished (or the crash of a killed worker) after its worker ended.
            self._queue.wait_idle(_HAND_OFF_SECONDS)
            log.info("scheduler.stopped", killed=killed)
            return 0
        finally:
            if pinger is not None:
                pinger.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            lock.release()
