"""The task a fleet worker runs: one slot of one agent's routine, through :func:`runner.run.engine.run_at`.

The task carries the fire time beat published it for, never "now": a task
that waits in Redis (no worker of its shard was up) still runs its own
slot. A worker runs only its shard's agents. A task for an agent its
configuration puts in another shard (one published before a shard move) is
passed on to that shard's queue, once (``fleet.task_forwarded``). Any other
task no run can come of is refused with ``fleet.task_refused`` and
acknowledged, since no retry can fix it; when it names a slot of a routine
this configuration knows, that slot is recorded as ``scheduler.missed``
(reason ``refused``), which ``status --fleet`` shows.

A run that failed for a transient reason is run again, as under ``serve``
(:mod:`runner.schedule.reruns`): at most ``runner.slot_retries`` times, the
first ``runner.slot_retry_delay`` later and doubling, while the routine has
not fired again. A rerun is a new task of the same slot, so its client key
makes it find the entry if one got there meanwhile. It waits in Redis
(:data:`RERUNS_KEY`), not in a worker as a task with a countdown: Redis hands
a task a worker holds unacknowledged past ``fleet.visibility_timeout`` out
again, so a delay longer than that would run the rerun once per timeout. The
active beat publishes it when its time comes (:mod:`runner.fleet.beat`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from celery import Task

from runner.cron.slots import EARLIEST_TIME, LATEST_TIME
from runner.errors import NoScheduledTimeError, UnknownNameError
from runner.fleet.ledger import fleet_budgets
from runner.run.contract import RunIdentity, RunInterrupted, RunResult
from runner.run.engine import run_at
from runner.run.kept import KeptJournals
from runner.schedule.reruns import planned_rerun
from runner.settings.config import RunnerConfig

__all__ = [
    "FORWARDED_HEADER",
    "OPEN_AHEAD_SECONDS",
    "REFUSED",
    "RERUNS_KEY",
    "PlannedRerun",
    "ShardWork",
    "close_journals",
    "hold_shard",
    "open_journals",
    "run_slot_task",
    "served_slot",
]

log = structlog.get_logger()
#: The sorted set of planned reruns in Redis, each scored by its time (seconds since the epoch).
RERUNS_KEY: Final = "ghostrunner:reruns"
#: The header of a task one worker passed on to another shard's queue (its value: the shard it came from).
FORWARDED_HEADER: Final = "ghostrunner_forwarded_from"
#: The reason of the ``scheduler.missed`` line of a slot whose task every worker it reached refused.
REFUSED: Final = "refused"
#: How long a starting pool process spends opening its shard's journals ahead of their runs, at most (the rest open at their runs).
OPEN_AHEAD_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class PlannedRerun:
    """A slot's rerun waiting in Redis for its time: the task to publish then, and which rerun of the slot it is."""

    agent: str
    routine: str
    scheduled: str
    slot: str
    client_key: str
    queue: str
    task_id: str
    rerun: int

    def encode(self) -> str:
        """Its member of :data:`RERUNS_KEY`: the same text for the same rerun, so that planning it twice keeps one."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> PlannedRerun | None:
        """The rerun *text* encodes, or None for anything else (anyone who can write to Redis can add to the set)."""
        try:
            data = json.loads(text)
            values = {field.name: data[field.name] for field in fields(cls)}
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        if not all(type(value) is (int if name == "rerun" else str) for name, value in values.items()):
            return None
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ShardWork:
    """What this worker process serves: the configuration, the shard whose agents it holds, and their journals kept open.

    A pool process runs its shard's slots one after another and keeps their journals open between runs
    (:mod:`runner.run.kept`): opening and closing one cost about as much as the rest of a run. Each forked
    pool process keeps its own.
    """

    config: RunnerConfig
    shard: str
    journals: KeptJournals = field(default_factory=KeptJournals, compare=False)

    def holds(self, agent: str) -> bool:
        return self.config.fleet is not None and agent in self.config.fleet.shards.get(self.shard, ())


_work: ShardWork | None = None


def hold_shard(config: RunnerConfig, shard: str) -> None:
    """Make this process (and the pool processes it forks) run *shard*'s tasks under *config*."""
    global _work  # noqa: PLW0603 - one worker process serves one shard: the pool's children inherit it at fork
    _work = ShardWork(config, shard)


def open_journals(**_: object) -> None:
    """Open this process's shard's journals ahead of their runs, for at most :data:`OPEN_AHEAD_SECONDS` (Celery's ``worker_process_init``).

    A pool process starts before its first task: opening the journals then spares the first burst of runs
    after a start (every agent's first run) an open each.
    """
    if _work is not None and _work.config.fleet is not None:
        agents = [_work.config.agent(name) for name in _work.config.fleet.shards.get(_work.shard, ())]
        _work.journals.open_ahead(agents, until=time.monotonic() + OPEN_AHEAD_SECONDS)


def close_journals(**_: object) -> None:
    """Close the journals this process kept open (a pool process's end: Celery's ``worker_process_shutdown``)."""
    if _work is not None:
        _work.journals.close()


def _scheduled(text: object) -> datetime | None:
    """The fire time a task carries (an ISO 8601 time with its offset, within the times a run may be asked for), or None for anything else."""
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
        # astimezone: 0001-01-01T00:00+14:00 is a valid ISO time, yet in no year datetime holds.
        within = moment is not None and moment.tzinfo is not None and EARLIEST_TIME <= moment.astimezone(UTC) < LATEST_TIME
    except (ValueError, OverflowError):
        return None
    return moment if within else None


def _refuse(task: Task, agent: object, routine: object, scheduled: object, error: str) -> None:
    """Log a task no run can come of (acknowledged all the same: no retry can fix it)."""
    log.error("fleet.task_refused", agent=agent, routine=routine, scheduled=scheduled, task_id=task.request.id, error=error)


def _forward(task: Task, work: ShardWork, agent: str, routine: str, scheduled: object) -> bool:
    """Pass a task on to the queue of the shard this configuration puts *agent* in; whether it was.

    After a shard move, the old shard's queue still holds the tasks published before the beat's
    restart. A task is passed on once (:data:`FORWARDED_HEADER`): a worker whose configuration
    disagrees again refuses it, so two hosts that disagree cannot hand it back and forth.
    """
    fleet = work.config.fleet
    shard = next((name for name, agents in fleet.shards.items() if agent in agents), None) if fleet is not None else None
    if fleet is None or shard is None or shard == work.shard or task.request.get(FORWARDED_HEADER):
        return False
    queue = fleet.queue_of(shard)
    task.app.send_task(
        task.name,
        args=[agent, routine, scheduled],
        queue=queue,
        task_id=task.request.id,
        retries=int(task.request.retries or 0),
        headers={FORWARDED_HEADER: work.shard},
        add_to_parent=False,
    )
    log.warning("fleet.task_forwarded", agent=agent, routine=routine, scheduled=scheduled, task_id=task.request.id, queue=queue)
    return True


def _record_missed(work: ShardWork, agent: str, routine: str, at: datetime | None) -> None:
    """Record a refused task's slot as missed (reason ``refused``), in the runs record ``status --fleet`` reads, when it names one.

    It names one when its fire time is good and this configuration knows the routine (the slot's
    length comes from it): a task forged with other arguments is no slot of any pair.
    """
    definition = work.config.routines.get(routine)
    if at is None or definition is None:
        return
    identity = RunIdentity.of(agent, definition, at, work.config.timezone)
    identity.log_missed(REFUSED)


def _plan_rerun(task: Task, work: ShardWork, result: RunResult | None, agent: str, routine: str, scheduled: datetime) -> None:
    """Plan the slot's next run after a transient failure, while retries and the slot's time last: into Redis, for the beat."""
    config = work.config
    now = datetime.now(UTC)
    rerun = int(task.request.retries or 0) + 1
    identity = RunIdentity.of(agent, config.routines[routine], scheduled, config.timezone)
    when = planned_rerun(
        config,
        result,
        agent=agent,
        routine=routine,
        slot=identity.slot,
        scheduled=scheduled,
        scheduled_text=scheduled.isoformat(),
        rerun=rerun,
        now=now,
    )
    if when is None or config.fleet is None:
        return
    planned = PlannedRerun(
        agent,
        routine,
        scheduled.isoformat(),
        identity.slot,
        identity.client_key,
        config.fleet.queue_of(work.shard),
        str(task.request.id),
        rerun,
    )
    # The result store is the fleet's Redis; its client is this process's own (a pool process reconnects after the fork).
    task.app.backend.client.zadd(RERUNS_KEY, {planned.encode(): when.timestamp()})


def run_slot_task(task: Task, *args: object, **kwargs: object) -> dict[str, Any] | None:
    """Run the routine of the agent for the fire time the task carries (agent, routine, scheduled); the run's result, or None when refused.

    Any arguments are taken, not only those three, so that a task someone else put in the queue
    (anyone who can write to Redis can) is refused with one line rather than failing in Celery's call.
    """
    work = _work
    if work is None:
        raise RuntimeError("this process serves no shard: start it with ghostrunner fleet worker")
    agent, routine, scheduled = (*args, None, None, None)[:3]
    if len(args) != 3 or kwargs or not isinstance(agent, str) or not isinstance(routine, str):
        _refuse(
            task,
            agent,
            routine,
            scheduled,
            f"the task's arguments are not [agent, routine, fire time] as strings: got {len(args)} "
            f"argument(s) and keyword(s) {sorted(kwargs)}",
        )
        return None
    at = _scheduled(scheduled)
    if not work.holds(agent):
        if _forward(task, work, agent, routine, scheduled):
            return None
        _refuse(
            task,
            agent,
            routine,
            scheduled,
            f"agent {agent!r} is not in shard {work.shard!r} here: check that every host has the same [fleet.shards]",
        )
        _record_missed(work, agent, routine, at)
        return None
    if at is None:
        _refuse(
            task,
            agent,
            routine,
            scheduled,
            f"the task's fire time is no ISO 8601 time with a UTC offset from {EARLIEST_TIME:%Y-%m-%d} to {LATEST_TIME:%Y-%m-%d}",
        )
        return None
    try:
        result = run_at(
            work.config,
            agent,
            routine,
            at=at,
            run_timeout=work.config.run_timeout.total_seconds(),
            ledger=fleet_budgets,
            journals=work.journals,
        )
    except (UnknownNameError, NoScheduledTimeError) as exc:
        _refuse(task, agent, routine, scheduled, str(exc))
        _record_missed(work, agent, routine, at)
        return None
    except RunInterrupted as exc:  # the worker is going down: the run logged its end; the slot may run again
        _plan_rerun(task, work, exc.result, agent, routine, at)
        raise
    _plan_rerun(task, work, result, agent, routine, at)
    return result.to_dict()


def served_slot(args: object) -> tuple[ShardWork, str, str, datetime] | None:
    """What a task's arguments *args* name and this process serves: (work, agent, routine, fire time), else None."""
    work = _work
    if work is None or not isinstance(args, list | tuple) or len(args) != 3:
        return None
    agent, routine, scheduled = args
    at = _scheduled(scheduled)
    if not (isinstance(agent, str) and isinstance(routine, str) and work.holds(agent) and routine in work.config.routines) or at is None:
        return None
    return work, agent, routine, at
