"""Starting a fleet process: the checks every start makes, then ``fleet beat`` or ``fleet worker --shard S``.

Each start refuses, with one line and exit 78, what would make the fleet
unsafe or useless: no ``[fleet]`` table; a Redis that does not answer;
``serve`` holding ``runner.lock_file`` for these agents (its runs and the
fleet's would both run each slot). A worker also refuses a shard the
configuration does not name.

Both log as ``serve`` does, with ``shard`` (workers) and ``host`` on every
line; the lines the runs record keeps (:mod:`runner.fleet.record`) also go
to Redis.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import os
import signal
import socket
import threading
from datetime import UTC, datetime
from types import FrameType
from typing import Any, Final

import redis
import structlog
from billiard import util as billiard_util
from celery.apps import worker as celery_worker
from celery.beat import Service
from celery.signals import setup_logging, worker_process_init, worker_process_shutdown, worker_ready, worker_shutting_down
from celery.worker import state as celery_state

from journal import JournalError
from runner.errors import FleetUnavailableError, RunnerError, UnknownNameError
from runner.fleet.app import RUN_TASK, broker_password, fleet_app, fleet_of, record_key
from runner.fleet.beat import BeatLostLock, SlotScheduler, beat_schedule
from runner.fleet.record import RECORDED_EVENTS, RunsRecord, redis_client
from runner.fleet.request import slot_identity
from runner.fleet.tasks import close_journals, hold_shard, open_journals
from runner.monitor.logs import configure_logging
from runner.run import open_journal
from runner.run.engine import open_failure
from runner.schedule.catchup import UnusableAgent
from runner.schedule.deployment_lock import DeploymentLock
from runner.settings import FleetConfig, RunnerConfig

__all__ = ["check_start", "purge_shard", "runs_record", "start_beat", "start_worker"]

log = structlog.get_logger()
_PING_SECONDS: Final = 5.0


def runs_record(config: RunnerConfig) -> RunsRecord:
    """The runs record of *config*'s fleet."""
    fleet = fleet_of(config)
    return RunsRecord(fleet.broker, broker_password(config), fleet.keep_runs, key=record_key(config))


def check_start(config: RunnerConfig) -> None:
    """Refuse a start this configuration cannot make safely (see the module's description).

    Raises:
        ConfigError: no [fleet] table, or its password or record key variable is not set.
        FleetUnavailableError: Redis does not answer, or serve runs these agents.
    """
    fleet = fleet_of(config)
    record_key(config)  # refused now, in one line, rather than when the first record is written
    try:
        redis_client(fleet.broker, broker_password(config), timeout=_PING_SECONDS).ping()
    except redis.RedisError as exc:
        raise FleetUnavailableError(
            f"cannot reach the fleet's Redis at {fleet.broker} (fleet.broker): {exc}",
            "start redis-server there, or correct fleet.broker in " + config.source,
        ) from None
    if DeploymentLock(config.lock_file).is_held():
        raise FleetUnavailableError(
            f"ghostrunner serve holds {str(config.lock_file)!r} (runner.lock_file) for these agents",
            "stop serve before starting the fleet: both would run every slot",
        )


def _log_to(config: RunnerConfig, level: str, **context: str) -> None:
    fields = {**context, "host": socket.gethostname()}
    structlog.contextvars.bind_contextvars(**fields)
    configure_logging(level=level, tee=(RECORDED_EVENTS, runs_record(config).add))
    # Celery's and its dependencies' warnings (SecurityWarning when run as root) go through logging, as JSON lines,
    # and so do the lines Celery's worker prints in plain text from its signal handlers ("worker: Warm shutdown").
    logging.captureWarnings(True)
    # Any receiver of setup_logging makes Celery leave logging as configure_logging set it; without one, Celery gives
    # billiard's pool logger a handler of its own, whose lines ("Process 'ForkPoolWorker-1' ... exited with 'signal 9
    # (SIGKILL)'") are raw text. That logger does not propagate: it gets the JSON handler the root logger has.
    setup_logging.connect(_keep_logging, weak=False)
    pool_logger = billiard_util.get_logger()
    pool_logger.handlers[:] = logging.getLogger().handlers
    pool_logger.setLevel(logging.ERROR)
    celery_worker.safe_say = functools.partial(_say, fields)
    # Celery narrates every task at INFO ("Task ghostrunner.run[...] received", "... succeeded in ...: {result}"),
    # two lines a run whose event is free text; the run's own run.started and run.finished say what matters.
    for narrator in ("celery.app.trace", "celery.worker.strategy"):
        logging.getLogger(narrator).setLevel(max(logging.getLogger().level, logging.WARNING))


def _keep_logging(**_: object) -> None:
    """Celery's setup_logging receiver: logging is configured already (see :func:`_log_to`)."""


def _say(fields: dict[str, str], message: str, _stream: object = None) -> None:
    """Celery's ``safe_say``, as one JSON line: called from a signal handler, so one ``os.write`` and no lock."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    line = json.dumps({"event": message.strip(), **fields, "level": "info", "timestamp": stamp}) + "\n"
    with contextlib.suppress(OSError):
        os.write(2, line.encode())


def _unusable(config: RunnerConfig, agents: tuple[str, ...]) -> list[UnusableAgent]:
    """The agents among *agents* whose journal this host cannot open (each of their runs will fail with the reason)."""
    problems = []
    for name in agents:
        agent = config.agent(name)
        try:
            open_journal(agent).close()
        except (RunnerError, JournalError, OSError) as exc:
            problems.append(UnusableAgent(name, str(agent.journal_root), open_failure(agent, exc)[0]))
    return problems


def _checked_shard(config: RunnerConfig, shard: str, level: str) -> FleetConfig:
    """The fleet of *config*, once *shard* is one of its shards and a start can work; logging to the shard from then on."""
    fleet = fleet_of(config)
    if shard not in fleet.shards:
        raise UnknownNameError("shard", shard, sorted(fleet.shards))
    check_start(config)
    _log_to(config, level, shard=shard)
    return fleet


def start_worker(config: RunnerConfig, shard: str, *, concurrency: int | None = None, level: str = "info") -> int:
    """Run a worker of *shard* until SIGTERM (warm: in-flight runs finish); its exit status.

    Raises:
        UnknownNameError: the configuration has no such shard.
        FleetUnavailableError, ConfigError: see :func:`check_start`.
    """
    fleet = _checked_shard(config, shard, level)
    for problem in _unusable(config, fleet.shards[shard]):
        log.error("scheduler.agent_unusable", agent=problem.agent, journal_root=problem.journal_root, error=problem.error)
    hold_shard(config, shard)
    # Sent in each pool process as it starts, and as it ends: its shard's journals are opened ahead of their runs
    # and kept open between them, then closed, their logs checkpointed.
    worker_process_init.connect(open_journals, weak=False)
    worker_process_shutdown.connect(close_journals, weak=False)
    app = fleet_app(config)
    processes = concurrency or config.max_concurrent_runs
    # Said once the worker consumes: by then Celery's own SIGTERM handler (a warm stop) is in place, so a
    # stop sent on seeing this line is a clean one, never the start-up's unwinding.
    worker_ready.connect(
        lambda **_: log.info(
            "scheduler.started",
            agents=list(fleet.shards[shard]),
            timezone=config.timezone.key,
            pid=os.getpid(),
            max_concurrent_runs=processes,
            role="worker",
            queue=fleet.queue_of(shard),
        ),
        weak=False,
    )
    received: list[str] = []
    # Sent from Celery's signal handler: only noted there; logging then could meet a log line half written.
    worker_shutting_down.connect(lambda sig, **_: received.append(str(sig)), weak=False)
    worker = _logging_worker(app.Worker, received)(
        queues=[fleet.queue_of(shard)],
        concurrency=processes,
        pool="prefork",
        quiet=True,
        without_gossip=True,
        without_mingle=True,
        optimization="fair",
        hostname=f"{shard}@{socket.gethostname()}.{os.getpid()}",
        loglevel=level.upper(),
    )
    worker.start()
    log.info("scheduler.stopped", killed=worker.killed)
    code: int = worker.exitcode or 0
    return code


def _logging_worker(base: type[Any], received: list[str]) -> type[Any]:
    """Celery's worker class *base*, logging ``scheduler.stopping`` as ``serve`` does when its stop begins (a signal in *received*)."""

    class LoggingWorker(base):  # type: ignore[misc]  # celery ships no type hints
        killed = 0
        _stopping = False

        def _say_stopping(self) -> None:
            if not self._stopping:
                self._stopping = True
                active = len(celery_state.active_requests)
                waiting = len(celery_state.reserved_requests) - active
                log.info("scheduler.stopping", signal=received[0] if received else None, in_flight=active, waiting=max(0, waiting))

        def stop(self, *args: Any, **kwargs: Any) -> Any:  # a warm stop: the runs in flight finish
            self._say_stopping()
            return super().stop(*args, **kwargs)

        def terminate(self, *args: Any, **kwargs: Any) -> Any:  # a cold stop: the runs in flight are killed
            self._say_stopping()
            self.killed = max(self.killed, len(celery_state.active_requests))
            return super().terminate(*args, **kwargs)

    return LoggingWorker


def start_beat(config: RunnerConfig, *, level: str = "info") -> int:
    """Run a beat until SIGTERM: the active one while it holds the lock, a standby until it gets it.

    Raises:
        FleetUnavailableError, ConfigError: see :func:`check_start`.
    """
    check_start(config)
    _log_to(config, level)
    app = fleet_app(config)
    app.conf.beat_schedule = beat_schedule(config)
    app.conf.ghostrunner_config = config
    active = app.conf.ghostrunner_active = threading.Event()
    stop_asked = app.conf.ghostrunner_stop = threading.Event()
    received: list[str] = []
    service = Service(app=app, scheduler_cls=SlotScheduler, max_interval=app.conf.beat_max_loop_interval)

    def stop(signum: int, frame: FrameType | None) -> None:
        # Nothing is logged here: the signal may have come in the middle of writing a log line.
        received.append(signal.Signals(signum).name)
        stop_asked.set()  # the active beat stops at its next tick, between two Redis calls, and frees the lock
        if not active.is_set():
            raise SystemExit(0)  # a standby, waiting for the lock: it holds nothing and has written nothing

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # What the beat holds for its life (Celery, kombu, the configuration, the modules) is left out of the garbage
    # collector's full passes: a burst of fires allocates enough to trigger them, and each scanned all of it (a quarter
    # of the beat's CPU time a fire).
    gc.collect()
    gc.freeze()
    with contextlib.suppress(SystemExit):  # raised by a standby, before Service.start's own loop (which catches it itself)
        service.start()
    if active.is_set() and service.scheduler.lost_lock:
        return BeatLostLock.code_of_exit
    log.info("scheduler.stopping", signal=received[0] if received else None, in_flight=0, waiting=0)
    log.info("scheduler.stopped", killed=0)
    return 0


def purge_shard(config: RunnerConfig, shard: str, *, level: str = "info") -> tuple[int, int]:
    """Empty *shard*'s queue, each run task logged as its slot's ``scheduler.missed`` (reason ``purged``); (slots, other messages).

    ``celery purge`` deletes the messages and leaves no word of the slots they were; here each one
    is taken, recorded, then acknowledged, so that ``status --fleet`` shows its slot missed.

    Raises:
        UnknownNameError: the configuration has no such shard.
        FleetUnavailableError, ConfigError: see :func:`check_start`.
    """
    fleet = _checked_shard(config, shard, level)
    hold_shard(config, shard)
    slots = other = 0
    with fleet_app(config).connection_for_write() as connection:
        queue = connection.SimpleQueue(fleet.queue_of(shard))
        try:
            while True:
                try:
                    message = queue.get(block=False)
                except queue.Empty:
                    break
                payload = message.payload
                args = payload[0] if message.headers.get("task") == RUN_TASK and isinstance(payload, list) and payload else None
                identity = slot_identity(args)
                if identity is None:
                    other += 1
                else:
                    identity.log_missed("purged")
                    slots += 1
                message.ack()
        finally:
            queue.close()
    return slots, other
