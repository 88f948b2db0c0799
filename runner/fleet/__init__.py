"""A fleet of runners on Celery with Redis: one schedule for many hosts, each slot run once (``ghostrunner fleet``).

The parts, each a process of its own, all reading the same configuration
with a ``[fleet]`` table (:mod:`runner.settings._fleet`):

* **beat** (:mod:`runner.fleet.beat`): Celery beat with RedBeat's scheduler.
  The schedule lives in Redis, one entry per agent x routine, and a Redis
  lock makes one beat active; a second beat on another host waits on that
  lock and takes over when it expires (``fleet.beat_lock_timeout``). Each
  due fire of a pair is published as one task to its agent's shard queue,
  carrying the fire time; a fire found more than ``misfire_grace`` late (no
  beat was active then) is recorded as missed instead;
* **worker** (:mod:`runner.fleet.tasks`): a Celery worker of one shard holds
  that shard's journals on its own disk and runs each task through
  :func:`runner.run.engine.run_at`, the path of ``ghostrunner run``: the pause
  file, the slot lock, the client key, memory, retries within the run.
  Tasks are acknowledged only after the run (``acks_late``): a worker killed
  mid-run leaves its task unacknowledged, and Redis delivers it again after
  ``fleet.visibility_timeout``; the slot's client key makes that run find
  the entry (``duplicate``) or append it once;
* **the runs record** (:mod:`runner.fleet.record`): every ``run.finished``
  and ``scheduler.missed`` line a worker or beat logs also goes to one Redis
  stream, kept for ``fleet.keep_runs``; ``status --fleet`` and
  ``history --fleet`` read it as they read a log.

Nothing here is imported by the rest of the runner: the ``fleet`` extra
(Celery, RedBeat, redis-py) is needed only by the fleet's commands.
A run Celery ended without the run's own word (its hard time limit, a
revoke) is logged by the worker's main process (:mod:`runner.fleet.request`);
:mod:`runner.fleet.celery_app` is the application for Celery's own command
line and Flower (``celery -A runner.fleet.celery_app``).

Dependencies run one way: ``cli -> service -> beat -> app -> request -> tasks``, ``beat -> batch -> template``, ``beat -> due``,
``service -> record``, ``app -> record``, ``tasks -> ledger -> record`` (the budgets' ledger in Redis,
:mod:`runner.fleet.ledger`), and ``celery_app -> app``.
"""

from typing import Final

__all__ = ["FLEET_EVENTS"]

#: The log events only the fleet's processes write (docs/fleet.md, "The fleet's log lines", lists their fields).
FLEET_EVENTS: Final = (
    "fleet.beat_standby",
    "fleet.beat_active",
    "fleet.beat_lost_lock",
    "fleet.broker_unreachable",
    "fleet.task_refused",
    "fleet.task_forwarded",
    "fleet.beat_entry_reset",
    "fleet.record_refused",
)
