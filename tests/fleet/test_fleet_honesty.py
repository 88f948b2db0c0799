"""The fleet says what happened: a run Celery's hard time limit killed, a beat whose lock lapsed, a long outage, the runs record's author.

Each of these once went unsaid or was said wrongly: a killed run logged no
``run.finished`` (``serve`` logs one for the same case), and so on; each
test here drives the real processes on a real redis-server.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog
from structlog.testing import capture_logs

from journal import Journal
from runner.fleet.app import BEAT_KEY_PREFIX, RUN_TASK, fleet_app
from runner.fleet.beat import SlotScheduler, beat_schedule
from runner.fleet.record import RUNS_STREAM
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import ghostrunner, write_config
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, rewind, routine, write_fleet

#: RedBeat's lock key under the fleet's prefix (docs/architecture.md, the locks' table).
LOCK_KEY = f"{BEAT_KEY_PREFIX}:lock"
AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


@contextmanager
def writer_lock_held(root: Path) -> Iterator[None]:
    """Hold the journal's writer lock, as another writer (a long reindex, a backup) does: a run's append waits on it."""
    with Journal(root):
        pass
    descriptor = os.open(root / ".write.lock", os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def test_a_run_killed_by_celerys_hard_time_limit_has_its_run_finished_failed(tmp_path: Path, redis_server: RedisServer) -> None:
    """As serve logs a worker it killed at run_timeout, the worker's main process logs the run its pool process lost."""
    schedule, fires = minutes_back(1)
    body = routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT).replace('"25s"', '"8s"')
    config = write_fleet(tmp_path, body)
    config.write_text(config.read_text(encoding="utf-8").replace('run_timeout = "20s"', 'run_timeout = "4s"'), encoding="utf-8")
    app = fleet_app(load_config(config))
    limit = app.tasks[RUN_TASK].time_limit
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        with writer_lock_held(tmp_path / "journal" / "motoko"):
            app.send_task(RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id="held-up")
            crashed = worker.wait_for("scheduler.worker_crashed")
            finished = worker.wait_for("run.finished")
    finally:
        assert worker.stop() == 0
    assert (finished["agent"], finished["routine"], finished["scheduled"], finished["outcome"]) == ("motoko", "tick", fires[0].isoformat(), "failed")
    assert finished["slot"] == f"{fires[0]:%Y-%m-%dT%H:%M}" and finished["attempts"] is None and finished["shard"] == "east"
    assert f"hard time limit ({limit:g} s)" in finished["error"] and "run_timeout (4 s)" in finished["error"]
    assert crashed["client_key"] == finished["client_key"] and crashed["error"] == finished["error"]
    assert [line for line in worker.log.events if line.get("event") == "run.finished"] == [finished]
    # Celery's and its pool's own lines about the kill ("Hard time limit ... exceeded", "Process ... exited with 'signal 9'") are JSON too.
    assert [line for line in worker.log.raw if line.strip() and not line.startswith("{")] == []


def test_a_beat_whose_lock_lapsed_in_a_redis_outage_takes_it_again_and_goes_on(tmp_path: Path, durable_redis: RedisServer) -> None:
    """No other beat took the lapsed lock: the beat takes it again and publishes, rather than exiting 75 over a beat that is not there."""
    schedule, fires = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(durable_redis.url, {"east": ["motoko"]}, AGENT))
    beat = FleetProcess(config, "beat")
    try:
        beat.wait_for("scheduler.started", role="beat")
        durable_redis.stop()
        beat.wait_for("fleet.broker_unreachable")
        durable_redis.start()
        durable_redis.client().delete(LOCK_KEY)  # lapsed: its expiry passed while Redis was away
        again = beat.wait_for("fleet.beat_active")
        rewind(durable_redis, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        queued = beat.wait_for("scheduler.run_queued")
    finally:
        code = beat.stop()
    assert code == 0
    assert again["lock"] == LOCK_KEY and queued["scheduled"] == fires[0].isoformat()
    assert not [event for event in beat.log.events if event.get("event") == "fleet.beat_lost_lock"]


def test_a_beat_that_finds_its_lock_held_by_another_stops_with_75_and_says_so(tmp_path: Path, redis_server: RedisServer) -> None:
    """Another beat's token at the lock: this beat stops publishing at once, exit 75, and its line says another beat holds it."""
    schedule, _ = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT))
    beat = FleetProcess(config, "beat")
    try:
        beat.wait_for("scheduler.started", role="beat")
        redis_server.client().set(LOCK_KEY, "another-beats-token", px=60_000)  # what another beat's acquire leaves
        lost = beat.wait_for("fleet.beat_lost_lock")
        code = beat.process.wait(60)
    finally:
        beat.stop()
    assert code == 75
    assert "another beat holds the lock" in lost["error"]
    assert redis_server.client().get(LOCK_KEY) == "another-beats-token"  # left to its holder


def test_a_long_outage_is_one_summary_line_per_pair_and_the_newest_missed_fire_its_own(tmp_path: Path, redis_server: RedisServer) -> None:
    """Five days of a minute routine slept through: one scheduler.missed_summary, one scheduler.missed, the fires within grace published."""
    body = routine("tick", "* * * * *") + f'\n[fleet]\nbroker = "{redis_server.url}"\n[fleet.shards]\neast = ["motoko"]\n' + AGENT
    config = load_config(write_config(tmp_path, body, runner='misfire_grace = "10m"\n'))
    start = datetime(2026, 6, 1, 0, 0, 30, tzinfo=UTC)
    clock = [start]
    app = fleet_app(config)
    app.conf.beat_schedule = beat_schedule(config)
    app.conf.ghostrunner_config = config
    app.now = lambda: clock[0]
    beat = SlotScheduler(app=app)
    clock[0] = start + timedelta(days=5)  # the beat's host slept (or Redis was away) that long
    with capture_logs() as logs:
        beat.tick()
        clock[0] += timedelta(seconds=5)
        beat.tick()
    beat.close()
    late_before = clock[0] - timedelta(seconds=5) - timedelta(minutes=10)  # the first tick's now, less misfire_grace
    newest_late = late_before.replace(second=0)
    summaries = [event for event in logs if event["event"] == "scheduler.missed_summary"]
    missed = [event for event in logs if event["event"] == "scheduler.missed"]
    queued = [event for event in logs if event["event"] == "scheduler.run_queued"]
    assert [(event["agent"], event["routine"], event["reason"]) for event in summaries] == [("motoko", "tick", "late")]
    assert summaries[0]["first"] == (start + timedelta(seconds=30)).isoformat()
    assert summaries[0]["last"] == (newest_late - timedelta(minutes=1)).isoformat()
    assert summaries[0]["count"] == 5 * 24 * 60 - 10 - 1  # every fire of the five days but the newest late one and the ten in grace
    assert [(event["scheduled"], event["reason"]) for event in missed] == [(newest_late.isoformat(), "late")]
    assert [event["scheduled"] for event in queued] == [(newest_late + timedelta(minutes=n)).isoformat() for n in range(1, 11)]
    assert len(logs) == 1 + 1 + 10  # nothing more of the outage at the second tick
    structlog.reset_defaults()


RECORD_KEY = "0123456789abcdef" * 4  # a made-up key for a record that lives for one test
TWO_AGENTS = AGENT + '\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


def test_with_a_record_key_no_record_forged_in_redis_makes_status_fleet_say_ok(tmp_path: Path, redis_server: RedisServer) -> None:
    """A genuine run is read; one forged without the key, with another key, or with a genuine signature over changed words is not."""
    schedule, fires = minutes_back(1)
    extra = 'record_key_env = "GHOSTRUNNER_RECORD_KEY"'
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"], "west": ["batou"]}, TWO_AGENTS, extra=extra))
    env = {"GHOSTRUNNER_RECORD_KEY": RECORD_KEY}
    beat = FleetProcess(config, "beat", env=env)
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1", env=env)
    try:
        beat.wait_for("scheduler.started", role="beat")
        worker.wait_for("scheduler.started", role="worker")
        rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        worker.wait_for("run.finished", agent="motoko")
    finally:
        assert (worker.stop(), beat.stop()) == (0, 0)
    client = redis_server.client()
    genuine = next(fields for _, fields in client.xrange(RUNS_STREAM) if '"run.finished"' in fields["line"])
    assert genuine["sig"].startswith("hmac-sha256:")
    forged = json.loads(genuine["line"]) | {"agent": "batou", "client_key": f"batou:tick:{fires[0]:%Y-%m-%dT%H:%M}"}
    line = json.dumps(forged)
    client.xadd(RUNS_STREAM, {"line": line})  # no signature
    client.xadd(RUNS_STREAM, {"line": line, "sig": "hmac-sha256:" + hmac.new(b"another key", line.encode(), hashlib.sha256).hexdigest()})
    client.xadd(RUNS_STREAM, {"line": line, "sig": genuine["sig"]})  # a genuine signature, over other words
    client.xadd(RUNS_STREAM, {"line": line, "sig": "\u00e9" * 70})

    now = (fires[0] + timedelta(seconds=30)).isoformat()
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", now, "--grace", "10s", env=env)
    report = json.loads(status.stdout)
    assert {pair["agent"]: pair["state"] for pair in report["pairs"]} == {"motoko": "ok", "batou": "unknown"}, status.stdout
    assert report["input"]["malformed"] == 4 and status.returncode == 5
    keyless = ghostrunner("--config", str(config), "status", "--fleet", env={"GHOSTRUNNER_RECORD_KEY": ""})
    assert keyless.returncode == 78 and keyless.stderr.count("\n") == 1 and "fleet.record_key_env" in keyless.stderr
    short = ghostrunner("--config", str(config), "status", "--fleet", env={"GHOSTRUNNER_RECORD_KEY": "short"})
    assert short.returncode == 78 and "at least 32 characters" in short.stderr and "short" not in short.stderr
