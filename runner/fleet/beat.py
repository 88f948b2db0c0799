"""The fleet's beat: RedBeat's scheduler, publishing each due fire of each pair as one task that carries its time.

RedBeat keeps one entry per agent x routine in Redis (its definition, and
as ``last_run_at`` the last fire this beat handled, in UTC) and one lock.
:class:`SlotScheduler` changes three things about it:

* it takes the lock *before* it touches the schedule, so a standby beat
  waits without writing anything, and it says so (``fleet.beat_standby``,
  then ``fleet.beat_active`` and ``scheduler.started`` once it holds it);
* each tick hands every fire since ``last_run_at`` to :func:`runner.cron.slots.fires_since`,
  the rule ``serve`` uses, as of the moment the tick read its due entries,
  once for all the pairs that share a schedule and a last fire
  (:mod:`runner.fleet.due`): a fire at most ``misfire_grace`` late is
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
from celery.schedules import BaseSchedule, schedstate
from celery.signals import beat_init
from kombu.exceptions import OperationalError
from redbeat import schedulers as redbeat
from redbeat.decoder import RedBeatJSONDecoder, RedBeatJSONEncoder

from runner.cron.slots import CronSchedule, client_key, cron_trigger
from runner.fleet.app import RUN_TASK, fleet_of
from runner.fleet.batch import FIRES_PER_BATCH, FireBatch
from runner.fleet.due import PassFires
from runner.fleet.tasks import RERUNS_KEY, PlannedRerun
from runner.settings.config import RunnerConfig

__all__ = ["BeatLostLock", "PairSchedule", "SlotEntry", "SlotScheduler", "beat_schedule"]

log = structlog.get_logger()
#: The most fires of one pair handled in one tick: a beat back after a long gap catches up in bounded steps.
_FIRES_PER_TICK: Final = 1000
_SCHEDULE_TYPE: Final = "ghostrunner-cron"
#: How often the active beat extends its lock within the lock's timeout while a pass goes on.
_EXTENSIONS_PER_TIMEOUT: Final = 3

# KEYS: entries; the reply: a JSON array of each one's [definition, meta], false for a field that is not there.
_READ_ENTRIES: Final = """
local found = {}
for position, key in ipairs(KEYS) do
  local stored = redis.call('hmget', key, 'definition', 'meta')
  found[position] = {stored[1], stored[2]}
end
return cjson.encode(found)
"""

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


class EntryTexts:
    """The entries' texts as a beat reads and writes them, each decoded or encoded once while it recurs.

    A pass reads every due entry's definition and meta: a definition changes only when a beat installs the
    schedule, and the pairs of a burst share their meta (the same last fire, the same count), as they share
    the note written after it. Decoding and encoding them once each is most of what reading and noting an
    entry cost. What is kept is dropped whole once it holds ``most`` texts, so it never outgrows a schedule.
    """

    def __init__(self, most: int = 8192) -> None:
        self._most = most
        self._definitions: dict[str, dict[str, Any]] = {}
        self._metas: dict[str, dict[str, Any]] = {}
        self._notes: dict[tuple[datetime, Any, int], str] = {}

    def definition(self, text: str) -> dict[str, Any]:
        """The fields of a definition's *text* (a copy: the caller adds to it); its decoder's errors as they come."""
        return dict(self._kept(self._definitions, text, lambda: SlotEntry.decode_definition(text)))

    def meta(self, text: str | None) -> dict[str, Any]:
        """The fields of a meta's *text* (none: no last run), as RedBeat decodes them."""
        if not text:
            return {"last_run_at": None}
        return dict(self._kept(self._metas, text, lambda: SlotEntry.decode_meta(text)))

    def note(self, last_run_at: datetime, total_run_count: int) -> str:
        """The meta's text that says *last_run_at* is the last fire handled, the *total_run_count*-th."""
        key = (last_run_at, last_run_at.tzinfo, total_run_count)  # equal instants in two zones are written apart
        text = self._notes.get(key)
        if text is None:
            if len(self._notes) >= self._most:
                self._notes.clear()
            text = self._notes[key] = json.dumps({"last_run_at": last_run_at, "total_run_count": total_run_count}, cls=_Encoder)
        return text

    def _kept(self, known: dict[str, Any], text: str, decode: Any) -> Any:
        found = known.get(text)
        if found is None:
            found = decode()
            if not isinstance(found, dict):  # a garbled entry's: the caller's checks refuse it, uncached
                return found
            if len(known) >= self._most:
                known.clear()
            known[text] = found
        return found


class SlotEntry(redbeat.RedBeatSchedulerEntry):  # type: ignore[misc]  # redbeat ships no type hints
    """A pair's entry: due at its next fire after the last one handled (not at Celery's estimate of it)."""

    @staticmethod
    def decode_definition(definition: str) -> Any:
        return json.loads(definition, cls=_Decoder)

    @classmethod
    def from_key(
        cls, key: str, app: Celery | None = None, stored: tuple[str | None, str | None] | None = None, texts: EntryTexts | None = None
    ) -> SlotEntry:
        """The entry stored at *key* (*stored*: its definition and meta, already read, decoded by *texts*); one that is garbled (anyone who can write to Redis can) is installed anew from the configuration.

        A new entry starts now, as a pair new to the schedule does: the fires since its last handled
        one are neither run nor recorded, so status shows them as not known to have run, never as well.
        An entry the configuration does not have is removed (KeyError, as for a missing one).
        """
        try:
            entry: SlotEntry = super().from_key(key, app=app) if stored is None else cls._decoded(key, app, *stored, texts or EntryTexts())
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
    def _decoded(cls, key: str, app: Celery | None, definition: str | None, meta: str | None, texts: EntryTexts) -> SlotEntry:
        """The entry of *definition* and *meta* as RedBeat's from_key makes it from what it reads."""
        if not definition:
            raise KeyError(key)
        fields = texts.definition(definition)
        stored_meta = texts.meta(meta)
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

    def noted(self, last_run_at: datetime, following: datetime | None, batch: FireBatch, texts: EntryTexts) -> None:
        """Add to *batch* the note (meta and score, as RedBeat writes them) that *last_run_at* is this entry's last handled fire.

        *following* is the schedule's next fire after it (RedBeat's score is its time): the caller has it
        already, and a schedule that names few days of the year takes a scan of the calendar to find it.
        The count goes up by one, as in the entry Celery's next instance would make.
        """
        batch.note("hset", self.key, "meta", texts.note(last_run_at, self.total_run_count + 1))
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
        #: The log lines of the batch's fires: logged once the batch is in Redis, as (level, event, fields).
        self._lines: list[tuple[str, str, dict[str, Any]]] = []
        self._texts = EntryTexts()
        self._read_entries = redbeat.get_redis(app).register_script(_READ_ENTRIES)
        #: The pass's due fires (set when it reads its due entries).
        self._passing: PassFires | None = None
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
        self._passing = None
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
        self._passing = None  # a pass judges its fires as of the moment it reads them
        now = redbeat.to_timestamp(self._pass_fires().now)
        with client.pipeline() as pipe:
            pipe.zrangebyscore(key, 0, now)
            pipe.zrangebyscore(key, f"({now}", now + self.max_interval, start=0, num=1)
            due, soon = pipe.execute()
        names = [*due, *soon]
        self._hold_lock()
        # Every entry in one round trip, as one reply: the client's cost of a reply is per string in it, its JSON's is small.
        stored = json.loads(self._read_entries(keys=names)) if names else []
        entries = {}
        for name, (definition, meta) in zip(names, stored, strict=True):
            self._hold_lock()
            try:
                entry = self.Entry.from_key(name, app=self.app, stored=(definition or None, meta or None), texts=self._texts)
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
                        "error",
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
                    "info",
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
        passing = self._pass_fires()
        due = passing.of(schedule.trigger, entry.last_run_at, schedule.granularity, routine.slot)
        following = due.following
        wait = longest if following is None else max(0.0, (following - passing.now).total_seconds())
        if not due.fires:
            return wait
        if self._batch.fires >= FIRES_PER_BATCH:
            self._send()
        lines = self._lines
        if due.summary is not None:
            count, first, last_late = due.summary
            lines.append(
                (
                    "warning",
                    "scheduler.missed_summary",
                    {"agent": agent, "routine": routine_name, "count": count, "first": first, "last": last_late, "reason": "late"},
                )
            )
        queue = entry.options.get("queue")
        with self._batch.capturing(producer or self.producer):
            for fire in due.fires:
                self._hold_lock()  # building a batch takes CPU time, more on a busy host: the standby must not take over meanwhile
                if fire.late:
                    lines.append(
                        (
                            "warning",
                            "scheduler.missed",
                            {"agent": agent, "routine": routine_name, "slot": fire.slot, "scheduled": fire.scheduled, "reason": "late"},
                        )
                    )
                    continue
                key = client_key(agent, routine_name, fire.slot)
                task_id = f"{key}@{fire.utc}"
                self._queue_task(producer or self.producer, [agent, routine_name, fire.scheduled], queue, task_id)
                lines.append(
                    (
                        "info",
                        "scheduler.run_queued",
                        {
                            "agent": agent,
                            "routine": routine_name,
                            "slot": fire.slot,
                            "client_key": key,
                            "scheduled": fire.scheduled,
                            "trigger": "cron",
                            "queue": queue,
                            "task_id": task_id,
                        },
                    )
                )
        # Noted in the same script as the fires' tasks, after them: a fire is noted exactly when its task is in Redis.
        entry.noted(due.fires[-1].moment.astimezone(UTC), following, self._batch, self._texts)
        return wait

    def _pass_fires(self) -> PassFires:
        """The pass's due fires, as of the moment it read its due entries (see runner.fleet.due)."""
        passing = self._passing
        if passing is None:
            config = self.runner_config
            passing = self._passing = PassFires(self.app.now(), config.misfire_grace, config.timezone, _FIRES_PER_TICK)
        return passing

    def _queue_task(self, producer: Any, args: list[str], queue: str | None, task_id: str, *, retries: int = 0) -> None:
        """Celery's message (and its ``task-sent`` event) for one run of *args*, into the batch while it captures *producer*.

        Celery makes a pass's first task of each queue and rerun count; the batch makes the others from it (runner.fleet.template).
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
        logger = log.bind()  # one logger for the batch's lines: the module's binds one anew for each line
        for level, event, fields in lines:
            getattr(logger, level)(event, **fields)
