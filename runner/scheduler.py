"""``ghostrunner serve``: APScheduler wiring, worker processes, catch-up and shutdown.

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
* SIGTERM or SIGINT stops new runs, lets in-flight runs finish for up to
  ``shutdown_timeout`` (then kills them; a killed run leaves a complete
  entry or none), and returns 0.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from threading import TIMEOUT_MAX
from types import FrameType
from typing import IO, Any, Final

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.schedulers.blocking import BlockingScheduler

from journal import Journal
from runner.backends.command import WORKER_MARKER_VARIABLE, kill_marked, signal_name
from runner.config import AgentConfig, RunnerConfig
from runner.errors import ConfigError, SchedulerBusyError
from runner.notify import WatchdogPinger
from runner.slots import client_key, cron_trigger, latest_fire_time, slot_for

__all__ = ["MissedSlot", "Scheduler", "UnusableAgent", "missed_slots", "worker_command"]

log = structlog.get_logger()
_KILL_GRACE_SECONDS = 5.0
#: What a deployment lock file may hold: nothing, or the process id a scheduler wrote.
_LOCK_CONTENT = re.compile(rb"(?:[0-9]{1,19}\n?)?")
_LOCK_MAX_BYTES = 32


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
                    slot = slot_for(latest, routine.slot, config.timezone)
                    if journal.find_by_client_key(client_key(agent.name, name, slot), agent=agent.name) is None:
                        found.append(MissedSlot(agent.name, name, latest, slot))
        # Any failure of one agent's journal (a file in its place, a foreign
        # manifest, a corrupt entry, a permission) is that agent's alone.
        except Exception as exc:
            if unusable is None:
                raise
            unusable.append(UnusableAgent(agent.name, str(agent.journal_root), _journal_error(agent, exc)))
            continue
        missed += found
    return missed


def worker_command(config: RunnerConfig, agent: str, routine: str, scheduled: datetime, run_id: str) -> list[str]:
    """The argv of the worker process for one run: ``ghostrunner run`` with this interpreter."""
    argv = [sys.executable, "-m", "runner", "run", routine, "--agent", agent, "--at", scheduled.isoformat(), "--run-id", run_id]
    if config.config_file is not None:
        argv += ["--config", str(config.config_file)]
    return argv


class _StoppableScheduler(BlockingScheduler):
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


class _DeploymentLock:
    """An OS-held exclusive lock: released by the kernel if the process dies.

    The lock file is the scheduler's own: empty, or holding one scheduler's
    process id. Whatever else ``runner.lock_file`` names (a symlink, a
    directory, a FIFO or device, a hard link, a file with other content, such
    as a persona after a configuration slip) is refused with a ConfigError
    and left exactly as it was: the path is opened without following a
    symlink, without O_TRUNC and without blocking, and nothing is written
    before the checks pass.
    """

    def __init__(self, path: Path, source: str = "the configuration") -> None:
        self.path = path
        self.source = source
        self._fd: int | None = None

    def _refuse(self, what: str) -> ConfigError:
        return ConfigError(
            self.source, "runner.lock_file",
            "a path of the scheduler's own (no file yet, or a regular file holding only a process id); "
            "point runner.lock_file at a new file",
            f"{str(self.path)!r}, {what}",
        )

    def _check(self, info: os.stat_result) -> None:
        if stat.S_ISLNK(info.st_mode):
            raise self._refuse("a symbolic link")
        if not stat.S_ISREG(info.st_mode):
            raise self._refuse("not a regular file")
        if info.st_nlink != 1:
            raise self._refuse(f"a file with {info.st_nlink} hard links")
        if info.st_size > _LOCK_MAX_BYTES:
            raise self._refuse(f"a file of {info.st_size} bytes, not a lock")

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise  # the filesystem refusing (read-only, full, no permission): exit 73, 74 or 77, not a configuration error
            raise self._refuse(f"its directory cannot be created ({exc.strerror or exc})") from None
        try:
            self._check(os.lstat(self.path))  # refuses a device or FIFO before it is even opened
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise
            raise self._refuse(exc.strerror or str(exc)) from None  # a name too long, a file where a directory should be
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise
            raise self._refuse("a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
        try:
            self._check(os.fstat(fd))  # what was opened, not what the name pointed to a moment ago
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SchedulerBusyError(self.path) from None
            held = os.pread(fd, _LOCK_MAX_BYTES + 1, 0)
            if not _LOCK_CONTENT.fullmatch(held):
                raise self._refuse("a file whose content is not a scheduler's process id")
            own = f"{os.getpid()}\n".encode()
            os.pwrite(fd, own, 0)
            os.ftruncate(fd, len(own))  # only ever shortens a process id written by a scheduler
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


#: errnos of a filesystem that refuses the lock file, which serve reports with their own exit code (73, 74, 77).
_FS_REFUSALS: Final = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM})


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
        self._in_flight: dict[str, subprocess.Popen[bytes]] = {}
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

    def dispatch(self, agent: str, routine: str, scheduled: datetime | None = None, trigger: str = "cron") -> dict[str, Any] | None:
        """Run one (agent, routine) slot in a worker process and wait for it.

        Returns the worker's result (or None when skipped because the pair
        is busy or the scheduler is stopping).
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
            return self._run_worker(agent, routine, scheduled, trigger)
        finally:
            lock.release()

    def _run_worker(self, agent: str, routine: str, scheduled: datetime, trigger: str) -> dict[str, Any] | None:
        run_id = str(uuid.uuid4())
        argv = worker_command(self.config, agent, routine, scheduled, run_id)
        timeout = self.config.run_timeout.total_seconds()
        with self._in_flight_lock:
            if self._stopping.is_set():
                return None
            # Its own session: a Ctrl-C on the terminal reaches the scheduler, which decides, not the run.
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr_target(), start_new_session=True,
                                       env={**os.environ, WORKER_MARKER_VARIABLE: run_id})
            self._in_flight[run_id] = process
        error = None
        try:
            try:
                out, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill(process, run_id)
                out, _ = process.communicate()
                error = f"the worker ran past run_timeout ({timeout:g} s) and was killed"
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(run_id, None)
                self._in_flight_lock.notify_all()
        result = self._parse_result(out)
        if result is not None:
            return result
        code = process.returncode
        if error is None:
            how = f"was killed by signal {signal_name(-code)}" if code < 0 else f"exited with status {code}"
            error = f"the worker {how} before reporting a result"
        slot = slot_for(scheduled, self.config.routines[routine].slot, self.config.timezone)
        fields = {"run_id": run_id, "agent": agent, "routine": routine, "slot": slot, "client_key": client_key(agent, routine, slot)}
        log.error("scheduler.worker_crashed", **fields, returncode=code, trigger=trigger, error=error)
        log.error("run.finished", **fields, scheduled=scheduled.isoformat(), entry_id=None, outcome="failed", duration_ms=None, error=error,
                  dry_run=False)
        return None

    @staticmethod
    def _parse_result(out: bytes) -> dict[str, Any] | None:
        try:
            result = json.loads(out.decode("utf-8").strip().splitlines()[-1])
        except (ValueError, IndexError, UnicodeDecodeError):
            return None
        return result if isinstance(result, dict) and "outcome" in result else None

    @staticmethod
    def _kill(process: subprocess.Popen[bytes], run_id: str) -> None:
        """SIGTERM the worker's process group, then SIGKILL it if it lingers; then end its backend helpers.

        A worker that dies by SIGTERM kills its own helpers on the way out; one that had to be
        SIGKILLed cleaned up nothing, and a ``command`` helper in its own session (perhaps ignoring
        SIGTERM) would outlive it. Every process that inherited the worker's run marker is ended here.
        """
        for sig, wait in ((signal.SIGTERM, _KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            if wait is None:
                break
            try:
                process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        kill_marked(process.pid, f"{WORKER_MARKER_VARIABLE}={run_id}".encode())

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
            left = list(self._in_flight.items())
        for run_id, process in left:
            self._kill(process, run_id)
        return len(left)

    def serve(self) -> int:
        """Run until SIGTERM or SIGINT; return the exit code (0 after a clean stop).

        Raises:
            SchedulerBusyError: another scheduler holds the deployment lock.
            ConfigError: ``runner.lock_file`` names something that is not this lock's own file.
        """
        lock = _DeploymentLock(self.config.lock_file, self.config.source)
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
