"""The fleet's Celery application, built from the configuration: broker, result store, delivery rules, routes.

Delivery is at least once and the run is idempotent, so a slot ends with one
entry: a task is acknowledged after its run (``acks_late``), also when the
run failed; a worker process that dies mid-run leaves it unacknowledged
(``task_reject_on_worker_lost``), and Redis hands it out again once it has
been out for ``fleet.visibility_timeout`` (longer than ``run_timeout``, so
never while its run may still be going). Each worker process takes one task
at a time (``worker_prefetch_multiplier = 1``): a task waits in Redis, not in
a busy worker's memory.

The Redis password (from the variable ``fleet.password_env`` names) is in
no URL: each part gets it in a setting Celery masks wherever it shows its
configuration (``celery inspect conf`` and ``report``, Flower's worker page,
the worker's banner), and every URL setting, shown as it is, holds none.
"""

from __future__ import annotations

import os
from typing import Final

from celery import Celery

from runner.errors import ConfigError
from runner.fleet.record import broker_password, fleet_of
from runner.fleet.request import SlotRequest
from runner.fleet.tasks import OPEN_AHEAD_SECONDS, run_slot_task
from runner.settings.config import RunnerConfig

__all__ = ["BEAT_KEY_PREFIX", "LEAST_RECORD_KEY", "RUN_TASK", "broker_password", "fleet_app", "fleet_of", "record_key"]

#: The name of the task that runs one slot.
RUN_TASK: Final = "ghostrunner.run"
#: Where RedBeat keeps the schedule and its lock in Redis.
BEAT_KEY_PREFIX: Final = "ghostrunner:beat:"
#: The shortest key the runs record is signed with: 128 bits as hex digits, and no pass phrase a guess finds.
LEAST_RECORD_KEY: Final = 32
#: How often a worker looks for tasks whose worker died (kombu's default is 10 s): at most a tenth of the visibility timeout.
_RESTORE_INTERVALS: Final = 10
#: How long a starting pool process may take to say it is up beyond opening its journals ahead (Celery's own wait is 4 s).
_UP_MARGIN: Final = 20.0
#: How long past run_timeout Celery kills a run's process, at most (half the time to visibility_timeout when that is nearer).
_HARD_LIMIT_MARGIN: Final = 60.0


def record_key(config: RunnerConfig) -> bytes | None:
    """The key the runs record is signed with, from the variable ``fleet.record_key_env`` names, if any.

    Raises:
        ConfigError: that variable is not set, or holds fewer than :data:`LEAST_RECORD_KEY` characters.
    """
    fleet = fleet_of(config)
    if fleet.record_key_env is None:
        return None
    key = os.environ.get(fleet.record_key_env, "")
    if len(key) < LEAST_RECORD_KEY:
        raise ConfigError(
            config.source,
            "fleet.record_key_env",
            f"the environment variable {fleet.record_key_env} to hold the runs record's key, at least {LEAST_RECORD_KEY} characters "
            "(such as the output of: openssl rand -hex 32)",
            "it is not set" if not key else f"a key of {len(key)} characters (not shown)",
        )
    return key.encode("utf-8")


def fleet_app(config: RunnerConfig) -> Celery:
    """A Celery application for *config*'s fleet, with the run task registered (not the current app of the process)."""
    fleet = fleet_of(config)
    url = fleet.broker
    password = broker_password(config)
    visibility = fleet.visibility_timeout.total_seconds()
    transport = {
        "visibility_timeout": visibility,
        "unacked_restore_interval": max(1.0, min(10.0, visibility / _RESTORE_INTERVALS)),
        "unacked_restore_throttle": 1,
    }
    app = Celery("ghostrunner", set_as_current=False)
    app.conf.update(
        broker_url=url,
        result_backend=url,
        # Never in a URL: Celery shows redbeat_redis_url (and any setting not named as a secret) as it is, while it
        # masks these three (a name with PASS in it, and so a key "password" in a table) in all it shows.
        broker_password=password,
        redis_password=password,
        broker_transport_options=transport,
        result_backend_transport_options={"visibility_timeout": visibility},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        # A pool process says it is up once it has opened its shard's journals ahead (at most OPEN_AHEAD_SECONDS):
        # Celery's 4 s wait for it would kill and restart one that is opening many.
        worker_proc_alive_timeout=OPEN_AHEAD_SECONDS + _UP_MARGIN,
        # Nothing reads a run's result back (the runs record is what status reads): none is stored.
        task_ignore_result=True,
        # Task events for Celery's monitors (celery events, Flower): published to whoever listens, kept by no one.
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=fleet.keep_runs,
        timezone="UTC",
        enable_utc=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        task_default_queue="ghostrunner.unrouted",
        redbeat_redis_url=url,
        redbeat_redis_options={} if password is None else {"password": password},
        redbeat_key_prefix=BEAT_KEY_PREFIX,
        redbeat_lock_timeout=int(fleet.beat_lock_timeout.total_seconds()),
        # A beat wakes at least this often: to extend its lock well within the lock's timeout, and to see a due fire soon.
        beat_max_loop_interval=max(1.0, min(5.0, fleet.beat_lock_timeout.total_seconds() / 4)),
    )
    # Celery's hard limit, a backstop behind the run's own deadline (run_timeout): it kills the run's process before
    # visibility_timeout hands the task to a second worker, so that a run is never delivered again while it may go on.
    run_timeout = config.run_timeout.total_seconds()
    time_limit = run_timeout + min(_HARD_LIMIT_MARGIN, (visibility - run_timeout) / 2)
    # shared=False: Celery would otherwise give every app the process makes later this app's task, with this time limit.
    app.task(name=RUN_TASK, bind=True, acks_late=True, time_limit=time_limit, shared=False, Request=SlotRequest)(run_slot_task)
    return app
