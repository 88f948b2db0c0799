"""The fleet's beat: RedBeat's scheduler, publishing each due fire of each pair as one task that carries its time.

RedBeat keeps one entry per agent x routine in Redis (its definition, and
as ``last_run_at`` the last fire this beat handled, in UTC) and one lock.
:class:`SlotScheduler` changes three things about it:

* it takes the lock *before* it touches the schedule, so a standby beat
  waits without writing anything, and it says so (``fleet.beat_standby``,
  then ``fleet.beat_active`` and ``scheduler.started`` once it holds it);
* each tick hands every fire since ``last_run_at`` to :func:`runner.cron.slots.fires_since`,
  the rule ``serve`` uses: a fire at most ``misfire_grace`` late is
  published (``scheduler.run_queued``) to its agent's shard queue with its
  fire time; a later one is recorded as ``scheduler.missed`` (reason
  ``late``), and more than ``MISSED_LINES_PER_PAIR`` of them at once
  (a long outage) as one ``scheduler.missed_summary`` and the newest one's
  ``scheduler.missed``. A tick's fires go to Redis in batches
  (:mod:`runner.fleet.batch`): each batch's tasks and the move of each
  pair's ``last_run_at`` past them are written by one script, so a fire is
  noted exactly when its task is in Redis, and a beat killed at any moment
  neither loses a fire nor publishes one twice; the lines are logged once
  the batch is written;
* Redis going away is waited out, by the active beat and a standby alike
  (``fleet.broker_unreachable``, no fire is passed over);
* the lock is extended within a pass too, however long it is (many pairs, a
  slow Redis); a beat that finds its lock lapsed takes it again when no
  other beat took it meanwhile (``fleet.beat_active`` once more), and one
  that finds it taken by another beat stops (exit 75) before it publishes
  another fire. The script that writes a batch checks the lock first and
  writes nothing when it is not this beat's, so two beats never publish at once.

A pair new to the schedule starts at the moment the beat installs it: no
fire before that is run or recorded. So does a pair whose entry in Redis
is garbled (``fleet.beat_entry_reset``): one bad key stops no other pair.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Final, NoReturn
from zoneinfo import ZoneInfo

import redis
import structlog
from celery import Celery
from celery import beat as celery_beat
from celery.schedules import BaseSchedule, schedstate
from celery.signals import beat_init
from kombu.exceptions import OperationalError
from redbeat import schedulers as redbeat
from redbeat.decoder import RedBeatJSONDecoder, RedBeatJSONEncoder

from runner.cron.slots import CronSchedule, cron_trigger, fires_since, is_late
from runner.fleet.app import RUN_TASK, fleet_of
from runner.fleet.batch import FIRES_PER_BATCH, FireBatch
from runner.fleet.tasks import RERUNS_KEY, PlannedRerun
from runner.run.contract import RunIdentity
from runner.schedule.catchup import MISSED_LINES_PER_PAIR
from runner.settings.config import RunnerConfig

__all__ = ["BeatLostLock", "PairSchedule", "SlotEntry", "SlotScheduler", "beat_schedule"]

log = structlog.get_logger()
#: The most fires of one pair handled in one tick: a beat back after a long gap catches up in bounded steps.
_FIRES_PER_TICK: Final = 1000
_SCHEDULE_TYPE: Final = "ghostrunner-cron"
#: How often the active beat extends its lock within the lock's timeout while a pass goes on.
_EXTENSIONS_PER_TIMEOUT: Final = 3

# RedBeat takes its lock in a beat_init handler, after Celery has built the scheduler, and so after a
# standby has written the schedule it is not serving; SlotScheduler takes the lock itself, first.
beat_init.disconnect(redbeat.acquire_distributed_beat_lock)


class BeatLostLock(SystemExit):
    """Another beat holds the lock this one had (it lapsed while Redis was away): this one stops, exit 75 (EX_TEMPFAIL)."""

    code_of_exit: Final = 75

    def __init__(self) -> None:
        super().__init__(self.code_of_exit)


class PairSchedule(BaseSchedule):  # type: ignore[misc]  # celery ships no type hints
    """A pair's cron expression in the runner's zone, as beat stores and reads it."""

    def __init__(self, expression: str, zone: str, granularity: str, app: Celery | None = None) -> None:
        super().__init__(app=app)
        self.expression, self.zone, self.granularity = expression, zone, granularity
        self.trigger: CronSchedule = cron_trigger(expression, ZoneInfo(zone))

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire after *moment*."""
        return self.trigger.get_next_fire_time(moment, moment)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        following = self.next_after(last_run_at)
        return timedelta(days=36500) if following is None else following - self.now()

    def is_due(self, last_run_at: datetime) -> schedstate:
        following = self.next_after(last_run_at)
        if following is None:
            return schedstate(is_due=False, next=None)
        wait = (following - self.now()).total_seconds()
        return schedstate(is_due=wait <= 0, next=max(wait, 0.0))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PairSchedule) and (self.expression, self.zone, self.granularity) == (
            other.expression,
            other.zone,
            other.granularity,
        )

    def __hash__(self) -> int:
        return hash((self.expression, self.zone, self.granularity))

    def __repr__(self) -> str:
        return f"<PairSchedule {self.expression!r} in {self.zone}>"


class _Encoder(RedBeatJSONEncoder):  # type: ignore[misc]  # redbeat ships no type hints
    def default(self, obj: Any) -> Any:
        if isinstance(obj, PairSchedule):
            return {"__type__": _SCHEDULE_TYPE, "expression": obj.expression, "zone": obj.zone, "granularity": obj.granularity}
        return super().default(obj)


class _Decoder(RedBeatJSONDecoder):  # type: ignore[misc]  # redbeat ships no type hints
    def dict_to_object(self, d: dict[str, Any]) -> Any:
        if d.get("__type__") == _SCHEDULE_TYPE:
            return PairSchedule(d["expression"], d["zone"], d["granularity"])
        return super().dict_to_object(d)


class SlotEntry(redbeat.RedBeatSchedulerEntry):  # type: ignore[misc]  # redbeat ships no type hints
    """A pair's entry: due at its next fire after the last one handled (not at Celery's estimate of it)."""

    @staticmethod
    def decode_definition(definition: str) -> Any:
        return json.loads(definition, cls=_Decoder)

    @classmethod
    def from_key(cls, key: str, app: Celery | None = None, stored: tuple[str | None, str | None] | None = None) -> SlotEntry:
        """The entry stored at *key* (*stored*: its definition and meta, already read); one that is garbled (anyone who can write to Redis can) is installed anew from the configuration.

        A new entry starts now, as a pair new to the schedule does: the fires since its last handled
        one are neither run nor recorded, so status shows them as not known to have run, never as well.
        An entry the configuration does not have is removed (KeyError, as for a missing one).
        """
        try:
            entry: SlotEntry = super().from_key(key, app=app) if stored is None else cls._decoded(key, app, *stored)
            agent, routine = entry.args
            if not (
                isinstance(agent, str)
                and isinstance(routine, str)
                and isinstance(entry.schedule, PairSchedule)
                and isinstance(entry.last_run_at, datetime)
                and entry.last_run_at.tzinfo is not None
            ):
                raise TypeError("not a pair's entry: [agent, routine], its schedule and an aware last_run_at")  # noqa: TRY301 - handled with the decoders' errors below
        except (KeyError, redis.exceptions.RedisError):  # missing, or Redis away: as RedBeat handles them
            raise
        except Exception as exc:  # whatever a garbled entry makes RedBeat's decoders and ours raise
            if app is None:
                raise
            name = key.removeprefix(app.redbeat_conf.key_prefix)
            static = app.conf.beat_schedule.get(name)
            redbeat.get_redis(app).delete(key)
            if static is not None:
                entry = cls(name=name, app=app, **static)
                entry.last_run_at = app.now()
                entry.save()
            # Logged once the entry is new in Redis.
            log.error("fleet.beat_entry_reset", key=key, error=f"{type(exc).__name__}: {exc}"[:500], installed=static is not None)  # noqa: TRY400 - garbled data, not a bug: one line, no traceback
            if static is None:
                raise KeyError(key) from None
        return entry

    @classmethod
    def _decoded(cls, key: str, app: Celery | None, definition: str | None, meta: str | None) -> SlotEntry:
        """The entry of *definition* and *meta* as RedBeat's from_key makes it from what it reads."""
        if not definition:
            raise KeyError(key)
        fields = cls.decode_definition(definition)
        stored_meta = cls.decode_meta(meta)
        fields.update(stored_meta)
        entry = cls(app=app, **fields)
        entry.last_run_at = stored_meta["last_run_at"]  # Celery's entry would say now
        return entry

    @property
    def due_at(self) -> datetime | None:
        if self.last_run_at is None:
            now: datetime = self._default_now()
            return now
        schedule: PairSchedule = self.schedule
        return schedule.next_after(self.last_run_at)

    def noted(self, last_run_at: datetime, following: datetime | None, batch: FireBatch) -> None:
        """Add to *batch* the note (meta and score, as RedBeat writes them) that *last_run_at* is this entry's last handled fire.

        *following* is the schedule's next fire after it (RedBeat's score is its time): the caller has it
        already, and a schedule that names few days of the year takes a scan of the calendar to find it.
        """
        entry: SlotEntry = celery_beat.ScheduleEntry._next_instance(self, last_run_at=last_run_at)  # RedBeat's own would write at once
        meta = {"last_run_at": entry.last_run_at, "total_run_count": entry.total_run_count}
        batch.note("hset", self.key, "meta", json.dumps(meta, cls=_Encoder))
        batch.note("zadd", self.app.redbeat_conf.schedule_key, -1 if following is None else redbeat.to_timestamp(following), self.key)

    def save(self) -> SlotEntry:
        definition = {
            "name": self.name,
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "options": self.options,
            "schedule": self.schedule,
            "enabled": self.enabled,
        }
        meta = {"last_run_at": self.last_run_at}
        with redbeat.get_redis(self.app).pipeline() as pipe:
            pipe.hset(self.key, "definition", json.dumps(definition, cls=_Encoder))
            pipe.hsetnx(self.key, "meta", json.dumps(meta, cls=_Encoder))
            pipe.zadd(self.app.redbeat_conf.schedule_key, {self.key: self.score})
            pipe.execute()
        return self


def beat_schedule(config: RunnerConfig) -> dict[str, dict[str, Any]]:
    """RedBeat's static entries for *config*: one per agent x routine, routed to the agent's shard queue."""
    fleet = fleet_of(config)
    zone = config.timezone.key
    entries = {}
    for agent in config.agents.values():
        queue = fleet.queue_of(fleet.shard_of(agent.name))
        for name in agent.routines:
            routine = config.routines[name]
            entries[f"{agent.name}:{name}"] = {
                "task": RUN_TASK,
                "schedule": PairSchedule(routine.schedule, zone, routine.slot),
                "args": [agent.name, name],
                "options": {"queue": queue},
            }
    return entries


class SlotScheduler(redbeat.RedBeatScheduler):  # type: ignore[misc]  # redbeat ships no type hints
    """RedBeat's scheduler, publishing fires by :mod:`runner.cron.slots`'s rule (see the module's description)."""

    Entry = SlotEntry
    #: Set when the lock lapsed or another beat took it: this one stopped.
    lost_lock = False
    #: When the lock was last taken or extended (time.monotonic()).
    _extended_at = 0.0

    def __init__(self, app: Celery, **kwargs: Any) -> None:
        self.runner_config: RunnerConfig = app.conf.ghostrunner_config
        # Shared with whoever runs this beat (runner.fleet.service): set once the lock is held; set to ask for a stop.
        self._active: threading.Event = app.conf.get("ghostrunner_active") or threading.Event()
        self._stop: threading.Event = app.conf.get("ghostrunner_stop") or threading.Event()
        self._batch = FireBatch(redbeat.get_redis(app), app.clock.forward)
        #: The queues this beat has declared (by its first task to each).
        self._declared: set[str | None] = set()
        #: The log lines of the batch's fires: logged once the batch is in Redis, as (logger method, event, fields).
        self._lines: list[tuple[Any, str, dict[str, Any]]] = []
        super().__init__(app, **kwargs)

    def _ensure_connected(self) -> Any:
        """The broker connection the beat's producer is made on, tried once.

        Celery's own retries for as long as ``broker_connection_max_retries`` allows (without
        end, as the workers need): a Redis gone between a pass's read of the schedule and its
        first publish would hold the pass there, logging only Celery's retries. Raised at once
        instead, the tick logs ``fleet.broker_unreachable`` and the next tick tries again, as
        for every other Redis call of the pass.
        """
        return self.connection.ensure_connection(max_retries=0)

    # -- the lock, before the schedule ---------------------------------------------------

    def setup_schedule(self) -> None:
        # Called from Celery's Scheduler.__init__, before RedBeat's __init__ has set these itself.
        self.lock_key = self.app.redbeat_conf.lock_key
        self.lock_timeout = self.app.redbeat_conf.lock_timeout
        client = redbeat.get_redis(self.app)
        lock = client.lock(self.lock_key, timeout=self.lock_timeout, sleep=min(1.0, self.max_interval))
        lock.lua_extend = client.register_script(redbeat.LUA_EXTEND_TO_SCRIPT)
        standby = False
        while not self._acquire(lock):
            if not standby:
                log.info("fleet.beat_standby", lock=self.lock_key, lock_timeout=self.lock_timeout)
                standby = True
            time.sleep(lock.sleep)
        self.lock = lock
        self._extended_at = time.monotonic()
        self._active.set()
        log.info("fleet.beat_active", lock=self.lock_key, lock_timeout=self.lock_timeout)
        try:
            super().setup_schedule()
        except BeatLostLock:
            return  # Celery is building this scheduler: raising here would build another; the first tick stops it instead
        fleet = fleet_of(self.runner_config)
        log.info(
            "scheduler.started",
            agents=sorted(self.runner_config.agents),
            jobs=len(self.app.conf.beat_schedule),
            timezone=self.runner_config.timezone.key,
            shards=sorted(fleet.shards),
            role="beat",
        )

    @staticmethod
    def _acquire(lock: redis.lock.Lock) -> bool:
        """Whether this beat got *lock* now; a Redis that is away is waited out, as the active beat waits it out in tick."""
        try:
            return bool(lock.acquire(blocking=False))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            log.warning("fleet.broker_unreachable", error=str(exc))
            return False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.lost_lock:
            raise BeatLostLock  # lost while the schedule was being installed
        if self._stop.is_set():
            raise SystemExit(0)  # celery's Service ends its loop on it, and closes the scheduler: the lock goes at once
        self._extended_at = time.monotonic()  # RedBeat's tick extends the lock first, or raises
        try:
            try:
                interval: float = super().tick(*args, **kwargs)
                self._send()
                self._publish_reruns()
                self._send()
            finally:  # what a failed pass left unsent was not noted either: the next pass reads it from Redis again
                self._batch.clear()
                self._lines = []
        except redis.exceptions.LockError:  # RedBeat's extension failed: the lock lapsed, or another beat has it
            try:
                self._retake_or_lose()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                log.warning("fleet.broker_unreachable", error=str(exc))
            return min(1.0, float(self.max_interval))  # the next tick goes on with the pass, the lock held again
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError) as exc:
            log.warning("fleet.broker_unreachable", error=str(exc))
            return min(1.0, float(self.max_interval))
        return interval

    def _hold_lock(self) -> None:
        """Keep the lock through a pass however long it takes: extended once a third of its timeout has gone since it last was.

        Called before each fire is published and each entry read or written, so that a pass over
        many pairs, or on a slow Redis, never outlasts the lock while a standby waits on it. What
        is left of the timeout after the check is the margin for one Redis call: a call stalled
        past it lets the lock lapse, and the next check stops this beat before it publishes again.

        Raises:
            BeatLostLock: the lock lapsed or is another beat's (logged ``fleet.beat_lost_lock``).
        """
        if self.lock is None:
            return
        checked = time.monotonic()
        if checked - self._extended_at < self.lock_timeout / _EXTENSIONS_PER_TIMEOUT:
            return
        try:
            self.lock.extend(int(self.lock_timeout))
        except redis.exceptions.LockError:
            self._retake_or_lose()
        self._extended_at = checked  # from before the call: the lock's new expiry is no earlier than this plus its timeout

    def _retake_or_lose(self) -> None:
        """After the lock could not be extended: take it again when it lapsed and no other beat took it, else stop.

        A lock that lapsed while Redis stalled or was away, and that no other beat took meanwhile,
        is this beat's to take again: no other beat published since, so it goes on where it was.

        Raises:
            BeatLostLock: another beat holds it (logged ``fleet.beat_lost_lock``).
        """
        lock = self.lock
        if lock is None:
            self._lose_lock()
        try:
            if lock.owned():  # still this beat's token, without its expiry
                lock.reacquire()
            elif not lock.acquire(blocking=False):
                self._lose_lock()
        except redis.exceptions.LockError:  # taken by another between the two calls
            self._lose_lock()
        self._extended_at = time.monotonic()
        log.info("fleet.beat_active", lock=self.lock_key, lock_timeout=self.lock_timeout)

    def _lose_lock(self) -> NoReturn:
        log.error("fleet.beat_lost_lock", lock=self.lock_key, error="another beat holds the lock now; this one stops")
        self.lock = None
        self.lost_lock = True
        raise BeatLostLock

    def update_from_dict(self, dict_: dict[str, Any]) -> None:
        for name, definition in dict_.items():  # installing thousands of pairs may outlast the lock too
            self._hold_lock()
            super().update_from_dict({name: definition})

    @property
    def schedule(self) -> dict[str, SlotEntry]:
        """The entries due now, and the first due within a loop (to size the sleep), each read with the lock held."""
        client = redbeat.get_redis(self.app)
        key = self.app.redbeat_conf.schedule_key
        now = redbeat.to_timestamp(self.app.now())
        with client.pipeline() as pipe:
            pipe.zrangebyscore(key, 0, now)
            pipe.zrangebyscore(key, f"({now}", now + self.max_interval, start=0, num=1)
            due, soon = pipe.execute()
        names = [*due, *soon]
        self._hold_lock()
        with client.pipeline(transaction=False) as pipe:  # every entry in one round trip
            for name in names:
                pipe.hget(name, "definition")
                pipe.hget(name, "meta")
            stored = pipe.execute()
        entries = {}
        for number, name in enumerate(names):
            self._hold_lock()
            try:
                entry = self.Entry.from_key(name, app=self.app, stored=(stored[2 * number], stored[2 * number + 1]))
            except KeyError:  # gone, or not the configuration's: out of the schedule
                client.zrem(key, name)
                continue
            entries[entry.name] = entry
        return entries

    # -- the slots' reruns -----------------------------------------------------------------

    def _publish_reruns(self) -> None:
        """Add each rerun a worker planned whose time has come (runner.fleet.tasks) to the batch, with its removal from the plan.

        Its task and its removal are written by one script, as a fire and its note are: a rerun
        is published once, with the lock held, and a kill at any moment loses none.
        """
        client = redbeat.get_redis(self.app)
        now = self.app.now()
        for member in client.zrangebyscore(RERUNS_KEY, "-inf", now.timestamp(), start=0, num=_FIRES_PER_TICK):
            if self._batch.fires >= FIRES_PER_BATCH:
                self._send()
            self._hold_lock()
            rerun = PlannedRerun.decode(member)
            if rerun is None:
                self._batch.note("zrem", RERUNS_KEY, member)
                self._lines.append(
                    (
                        log.error,
                        "fleet.task_refused",
                        {
                            "agent": None,
                            "routine": None,
                            "scheduled": None,
                            "task_id": None,
                            "error": f"a planned rerun in {RERUNS_KEY} that is not the runner's own, dropped: {member[:200]!r}",
                        },
                    )
                )
                continue
            with self._batch.capturing(self.producer):
                self._queue_task(
                    self.producer, [rerun.agent, rerun.routine, rerun.scheduled], rerun.queue, rerun.task_id, retries=rerun.rerun
                )
            self._batch.note("zrem", RERUNS_KEY, member)
            self._lines.append(
                (
                    log.info,
                    "scheduler.run_queued",
                    {
                        "agent": rerun.agent,
                        "routine": rerun.routine,
                        "slot": rerun.slot,
                        "client_key": rerun.client_key,
                        "scheduled": rerun.scheduled,
                        "trigger": "retry",
                        "queue": rerun.queue,
                        "task_id": rerun.task_id,
                        "rerun": rerun.rerun,
                    },
                )
            )

    # -- one pair's fires ------------------------------------------------------------------

    def maybe_due(self, entry: SlotEntry, producer: Any = None, **kwargs: Any) -> float:
        """Add *entry*'s due fires and its note to the pass's batch (sent by :meth:`_send`); the seconds to its next fire."""
        config = self.runner_config
        agent, routine_name = entry.args
        routine = config.routines.get(routine_name)
        schedule: PairSchedule = entry.schedule
        longest = float(self.max_interval)
        if routine is None or entry.last_run_at is None:
            return longest
        now = self.app.now()
        fires = fires_since(schedule.trigger, entry.last_run_at, now, granularity=schedule.granularity)
        if not fires:
            following = schedule.next_after(entry.last_run_at)
            return longest if following is None else max(0.0, (following - now).total_seconds())
        if self._batch.fires >= FIRES_PER_BATCH:
            self._send()
        overdue = [moment for moment in fires if is_late(moment, now, config.misfire_grace)]  # the oldest ones: a prefix
        lines = self._lines
        if len(overdue) > MISSED_LINES_PER_PAIR:  # as serve does: a summary, and the newest its own line
            lines.append(
                (
                    log.warning,
                    "scheduler.missed_summary",
                    {
                        "agent": agent,
                        "routine": routine_name,
                        "count": len(overdue) - 1,
                        "first": overdue[0].isoformat(),
                        "last": overdue[-2].isoformat(),
                        "reason": "late",
                    },
                )
            )
            fires = fires[len(overdue) - 1 :]
        fires = fires[:_FIRES_PER_TICK]
        queue = entry.options.get("queue")
        with self._batch.capturing(producer or self.producer):
            for moment in fires:
                self._hold_lock()  # building a batch takes CPU time, more on a busy host: the standby must not take over meanwhile
                identity = RunIdentity.of(agent, routine, moment, config.timezone)
                if is_late(moment, now, config.misfire_grace):
                    lines.append(
                        (
                            log.warning,
                            "scheduler.missed",
                            {
                                "agent": agent,
                                "routine": routine_name,
                                "slot": identity.slot,
                                "scheduled": moment.isoformat(),
                                "reason": "late",
                            },
                        )
                    )
                    continue
                task_id = f"{identity.client_key}@{moment.astimezone(UTC).isoformat()}"
                self._queue_task(producer or self.producer, [agent, routine_name, moment.isoformat()], queue, task_id)
                lines.append(
                    (
                        log.info,
                        "scheduler.run_queued",
                        {
                            "agent": agent,
                            "routine": routine_name,
                            "slot": identity.slot,
                            "client_key": identity.client_key,
                            "scheduled": moment.isoformat(),
                            "trigger": "cron",
                            "queue": queue,
                            "task_id": task_id,
                        },
                    )
                )
        # Noted in the same script as the fires' tasks, after them: a fire is noted exactly when its task is in Redis.
        last = fires[-1].astimezone(UTC)
        following = schedule.next_after(last)
        entry.noted(last, following, self._batch)
        return longest if following is None else max(0.0, (following - self.app.now()).total_seconds())

    def _queue_task(self, producer: Any, args: list[str], queue: str | None, task_id: str, *, retries: int = 0) -> None:
        """Celery's message (and its ``task-sent`` event) for one run of *args*, into the batch while it captures *producer*.

        Celery makes the batch's first task of each queue and rerun count; the batch makes the others from it (runner.fleet.template).
        """

        def send() -> None:
            declared = queue in self._declared
            self._declared.add(queue)
            self.app.send_task(
                RUN_TASK,
                args=args,
                queue=queue,
                task_id=task_id,
                producer=producer,
                retry=False,
                ignore_result=True,  # no result is stored (task_ignore_result): nothing to subscribe to for it
                declare=[] if declared else None,  # the first task declares its queue; kombu would bind a copy of it for each one
                argsrepr=repr(args),  # three short strings: Celery's bounded repr of them is the same text, at a cost per task
                kwargsrepr="{}",
                retries=retries,
            )

        self._batch.task((queue, retries), task_id, args, send)

    def _send(self) -> None:
        """Write the batch (its fires' tasks and notes) in one script, then log its lines; nothing when the lock is no longer this beat's.

        Raises:
            redis.exceptions.LockError: another beat held the lock at the script (nothing written):
                tick takes it again or stops, and the pass starts over from the entries in Redis.
        """
        self._hold_lock()
        lock = self.lock
        token = lock.local.token if lock is not None else None
        lines, self._lines = self._lines, []
        if not self._batch.send(self.lock_key if lock is not None else None, token):
            raise redis.exceptions.LockError(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                "the lock was not this beat's when its batch was written; nothing was published"
            )
        for emit, event, fields in lines:
            emit(event, **fields)
