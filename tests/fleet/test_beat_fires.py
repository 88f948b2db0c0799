"""The fleet's beat publishes the fires serve runs, slot for slot, across DST changes, whatever its ticks.

A real RedBeat scheduler (:class:`runner.fleet.beat.SlotScheduler`) on a real
redis-server ticks on a stepped clock, and serve's own rule
(:meth:`runner.schedule.scheduler.Scheduler.fire`) is asked on the same clock at the
same moments; the tasks found in the shard's queue in Redis are compared with
what serve dispatched, and the missed records with serve's.
"""

from __future__ import annotations

import base64
import json
import random
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog
from celery import Celery
from structlog.testing import capture_logs

from runner.fleet.app import fleet_app
from runner.fleet.beat import SlotScheduler, beat_schedule
from runner.schedule.scheduler import Scheduler
from runner.settings.config import RunnerConfig, load_config
from tests._redis import RedisServer
from tests._support import write_config
from tests.fleet._fleet import rewind

ROUTINES = """
[routines.night]
kind = "note"
schedule = "30 2 * * *"
slot = "day"
question = "what happened?"
prompt = "Write a note."

[routines.hourly]
kind = "note"
schedule = "0 * * * *"
slot = "hour"
question = "what happened?"
prompt = "Write a note."

[routines.early]
kind = "note"
schedule = "*/20 1-3 * * *"
slot = "minute"
question = "what happened?"
prompt = "Write a note."

[agents.motoko]
persona = "motoko.toml"
routines = ["night", "hourly", "early"]
"""

#: (zone, the UTC moment of a change): spring forward and fall back, one of them by half an hour.
CHANGES = [
    ("Europe/Berlin", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, 0, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, 0, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, 0, tzinfo=UTC)),
]


def _config(tmp_path: Path, zone: str, broker: str) -> RunnerConfig:
    body = ROUTINES + f'\n[fleet]\nbroker = "{broker}"\n[fleet.shards]\neast = ["motoko"]\n'
    return load_config(write_config(tmp_path / zone.replace("/", "-"), body, runner=f'timezone = "{zone}"\nmisfire_grace = "10m"\n'))


def _stepped_app(config: RunnerConfig, clock: list[datetime]) -> Celery:
    """The fleet's app for *config*, its beat schedule installed, its time read from ``clock[0]`` (a test steps it)."""
    app = fleet_app(config)
    app.conf.beat_schedule = beat_schedule(config)
    app.conf.ghostrunner_config = config
    app.now = lambda: clock[0]
    return app


def _published(server: RedisServer, queue: str) -> list[tuple[str, str]]:
    """The (routine, fire time in UTC) of every task waiting in *queue*, read from Redis as a worker would get them."""
    found = []
    for raw in server.client().lrange(queue, 0, -1):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        found.append((args[1], datetime.fromisoformat(args[2]).astimezone(UTC).isoformat()))
    return sorted(found)


def _steps(pattern: str, start: datetime, end: datetime) -> Iterator[datetime]:
    moment, rng = start, random.Random(pattern)
    while moment < end:
        moment += timedelta(minutes=5) if pattern == "regular" else timedelta(seconds=rng.randint(1, 25 * 60))
        yield min(moment, end)


@pytest.mark.parametrize(("zone", "change"), CHANGES, ids=[f"{zone}-{change:%m}" for zone, change in CHANGES])
@pytest.mark.parametrize("pattern", ["regular", "irregular"])
def test_beat_publishes_and_misses_what_serve_runs_and_misses(tmp_path: Path, redis_server: RedisServer, zone: str, change: datetime,
                                                              pattern: str) -> None:
    config = _config(tmp_path, zone, redis_server.url)
    start, end = change - timedelta(days=1), change + timedelta(days=1)
    clock = [start]
    app = _stepped_app(config, clock)
    serve = Scheduler(config, now=lambda: clock[0])
    dispatched: list[tuple[str, str]] = []

    def dispatch(agent: str, routine: str, scheduled: datetime | None = None, trigger: str = "cron") -> bool:
        assert scheduled is not None
        dispatched.append((routine, scheduled.astimezone(UTC).isoformat()))
        return True

    serve.dispatch = dispatch  # type: ignore[method-assign]  # serve's rule decides; the queue and its workers are not the question
    with capture_logs() as logs:
        beat = SlotScheduler(app=app)
        for routine in config.agent("motoko").routines:
            serve._last_fire[("motoko", routine)] = start
        for moment in _steps(pattern, start, end):
            clock[0] = moment
            beat.tick()
            for routine in config.agent("motoko").routines:
                serve.fire("motoko", routine)
        beat.close()
    missed = [event for event in logs if event["event"] == "scheduler.missed"]
    beat_missed = sorted((event["routine"], event["scheduled"]) for event in missed[::2])
    serve_missed = sorted((event["routine"], event["scheduled"]) for event in missed[1::2])
    assert _published(redis_server, "ghostrunner.east") == sorted(dispatched)
    assert len(dispatched) > 40  # a day of hourly fires on each side of the change, and the others
    assert beat_missed == serve_missed
    assert (pattern == "irregular") == bool(beat_missed)  # only steps longer than misfire_grace leave fires late
    structlog.reset_defaults()


def test_a_pair_new_to_the_schedule_starts_at_the_beats_start_and_a_restart_resumes_where_it_stopped(
        tmp_path: Path, redis_server: RedisServer) -> None:
    config = _config(tmp_path, "UTC", redis_server.url)
    start = datetime(2026, 6, 1, 0, 10, tzinfo=UTC)
    clock = [start]
    app = _stepped_app(config, clock)
    first = SlotScheduler(app=app)
    clock[0] = start + timedelta(minutes=55)
    first.tick()
    first.close()  # releases the lock, as a beat stopped by SIGTERM does
    assert [fire for routine, fire in _published(redis_server, "ghostrunner.east") if routine == "hourly"] == ["2026-06-01T01:00:00+00:00"]
    clock[0] = start + timedelta(hours=2, minutes=25)  # down over the 02:00 fire, back 35 minutes after it: past misfire_grace
    second = SlotScheduler(app=app)
    with capture_logs() as logs:
        second.tick()
    second.close()
    hourly = [fire for routine, fire in _published(redis_server, "ghostrunner.east") if routine == "hourly"]
    assert hourly == ["2026-06-01T01:00:00+00:00"]  # the 02:00 fire was 35 minutes late: not published, recorded missed
    assert [(event["routine"], event["scheduled"], event["reason"]) for event in logs if event["event"] == "scheduler.missed"
            and event["routine"] == "hourly"] == [("hourly", "2026-06-01T02:00:00+00:00", "late")]
    structlog.reset_defaults()




def test_pairs_that_share_a_schedule_and_last_fire_each_get_their_own_tasks_and_one_whose_last_fire_differs_its_own_fires(
        tmp_path: Path, redis_server: RedisServer) -> None:
    body = ROUTINES + '\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["night", "hourly", "early"]\n'
    body += f'\n[fleet]\nbroker = "{redis_server.url}"\n[fleet.shards]\neast = ["motoko", "batou"]\n'
    config = load_config(write_config(tmp_path / "two", body, runner='timezone = "UTC"\nmisfire_grace = "10m"\n'))
    start = datetime(2026, 6, 1, 0, 10, tzinfo=UTC)
    clock = [start]
    app = _stepped_app(config, clock)
    beat = SlotScheduler(app=app)  # installs both agents' pairs, each handled up to now
    rewind(redis_server, "batou", "hourly", "0 * * * *", datetime(2026, 5, 31, 23, 0, tzinfo=UTC))
    clock[0] = datetime(2026, 6, 1, 1, 5, tzinfo=UTC)
    with capture_logs() as logs:
        beat.tick()
    beat.close()
    tasks = []
    for raw in redis_server.client().lrange("ghostrunner.east", 0, -1):
        message = json.loads(raw)
        tasks.append((message["headers"]["id"], json.loads(base64.b64decode(message["body"]))[0]))
    at_one = "2026-06-01T01:00:00+00:00"
    assert sorted(tasks) == sorted(
        (f"{agent}:{routine}:{slot}@{at_one}", [agent, routine, at_one])
        for agent in ("motoko", "batou")
        for routine, slot in (("hourly", "2026-06-01T01"), ("early", "2026-06-01T01:00"))
    )
    # batou's hourly was handled up to 23:00: its 00:00 fire, 65 minutes late, is batou's alone to miss
    assert [(event["agent"], event["routine"], event["slot"]) for event in logs if event["event"] == "scheduler.missed"] == [
        ("batou", "hourly", "2026-06-01T00")
    ]
    queued = [event for event in logs if event["event"] == "scheduler.run_queued"]
    assert sorted(event["client_key"] for event in queued) == sorted(task_id.split("@")[0] for task_id, _ in tasks)
    structlog.reset_defaults()


def test_a_redis_gone_between_the_schedules_read_and_the_first_publish_is_waited_out_and_the_fire_goes_out_after(
        tmp_path: Path, durable_redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, "UTC", durable_redis.url)
    start = datetime(2026, 6, 1, 0, 10, tzinfo=UTC)
    clock = [start]
    app = _stepped_app(config, clock)
    beat = SlotScheduler(app=app)  # nothing was due yet: its producer, and the connection under it, are not made
    read = SlotScheduler.schedule.fget
    assert read is not None

    gone: list[bool] = []

    def read_then_redis_goes(scheduler: SlotScheduler) -> dict[str, object]:
        entries: dict[str, object] = read(scheduler)
        if not gone:
            durable_redis.stop()  # after the first pass read what is due, before it publishes any of it
            gone.append(True)
        return entries

    monkeypatch.setattr(SlotScheduler, "schedule", property(read_then_redis_goes))
    clock[0] = start + timedelta(minutes=55)  # the 01:00 fires are due
    def hung(signum: int, frame: object) -> None:
        raise AssertionError("the tick waited for a Redis that went away instead of returning")

    # Celery's own retry would hold this tick until Redis is back, which is never here; the tick runs on this thread,
    # as the lock it holds is this thread's.
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        with capture_logs() as logs:
            beat.tick()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [event["event"] for event in logs if event["event"] == "fleet.broker_unreachable"] == ["fleet.broker_unreachable"]
    assert durable_redis.process is None
    durable_redis.start()
    beat.tick()
    beat.close()
    assert _published(durable_redis, "ghostrunner.east") == [("early", "2026-06-01T01:00:00+00:00"), ("hourly", "2026-06-01T01:00:00+00:00")]
    structlog.reset_defaults()
