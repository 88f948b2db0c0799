"""The fleet's durations are refused at load past what Redis and Celery take, and a write Redis refuses is never silent.

``fleet.keep_runs`` becomes the runs record's trim floor (now minus it, a
stream ID that Redis refuses before 1970) and the result store's expiry;
``fleet.beat_lock_timeout`` the lock's expiry; ``fleet.visibility_timeout``
the broker's redelivery. The longest value each one loads with is tried on a
real redis-server here.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from runner.fleet.app import fleet_app
from runner.fleet.record import RUNS_STREAM, RunsRecord
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import write_config
from tests.fleet._fleet import fleet_body, routine

AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


def _event(name: str) -> dict[str, object]:
    return {"event": name, "agent": "motoko", "routine": "tick", "level": "info"}


def test_the_longest_durations_the_fleet_loads_are_taken_by_redis_and_celery(tmp_path: Path, redis_server: RedisServer) -> None:
    """keep_runs 3650d records and stores results, beat_lock_timeout 1h locks, visibility_timeout 100 years delivers: no refusal."""
    extra = 'keep_runs = "3650d"'
    body = routine("tick", "0 * * * *") + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT, extra=extra)
    body = body.replace('visibility_timeout = "25s"', 'visibility_timeout = "36525d"').replace('beat_lock_timeout = "4s"', 'beat_lock_timeout = "1h"')
    config = load_config(write_config(tmp_path, body))
    assert config.fleet is not None
    assert config.fleet.keep_runs == timedelta(days=3650)
    record = RunsRecord(redis_server.url, None, config.fleet.keep_runs)
    with capture_logs() as logs:
        record.add(_event("run.finished"))
    assert logs == [] and record.waiting == 0
    assert [json.loads(line)["event"] for line in record.lines()] == ["run.finished"]
    app = fleet_app(config)
    app.backend.store_result("a-task", {"outcome": "appended"}, "SUCCESS")
    assert app.backend.client.ttl(app.backend.get_key_for_task("a-task")) > 0
    lock = app.conf.redbeat_lock_timeout
    assert redis_server.client().set("a-lock", "x", nx=True, px=lock * 1000) and redis_server.client().pttl("a-lock") > 0
    with app.connection_for_write() as connection:
        queue = connection.SimpleQueue("ghostrunner.east")
        queue.put({"a": 1})
        message = queue.get(timeout=30)
        assert message.payload == {"a": 1}
        message.ack()
        connection.default_channel.qos.restore_visible()  # what a worker does every few seconds, with this visibility timeout
        queue.close()


@pytest.mark.parametrize("cause", ["a key of another type at the stream's name", "a trim floor before 1970"])
def test_a_write_redis_refuses_is_one_error_line_each_time_and_the_record_waits(redis_server: RedisServer, cause: str) -> None:
    """Each refused write is one fleet.record_refused line with Redis's answer, and the records wait in memory."""
    if cause.startswith("a key"):
        redis_server.client().set(RUNS_STREAM, "not a stream")  # anyone who can write to Redis can
        record = RunsRecord(redis_server.url, None, timedelta(days=14))
    else:
        record = RunsRecord(redis_server.url, None, timedelta(days=60 * 366))  # what keep_runs = "21960d" loaded as before
    with capture_logs() as logs:
        record.add(_event("scheduler.started"))
        record.add(_event("run.finished"))
    assert [(event["event"], event["log_level"], event["waiting"], event["record_event"]) for event in logs] == [
        ("fleet.record_refused", "error", 1, "scheduler.started"),
        ("fleet.record_refused", "error", 2, "run.finished"),
    ]
    assert all(event["stream"] == RUNS_STREAM for event in logs)
    assert ("WRONGTYPE" if cause.startswith("a key") else "Invalid stream ID") in str(logs[0]["error"])
    assert record.waiting == 2
    structlog.reset_defaults()


def test_a_refused_record_goes_in_with_the_first_write_redis_takes(redis_server: RedisServer) -> None:
    """Once the cause is gone, the waiting records go in first, in order, and nothing more is logged."""
    client = redis_server.client()
    client.set(RUNS_STREAM, "not a stream")
    record = RunsRecord(redis_server.url, None, timedelta(days=14))
    with capture_logs():
        record.add(_event("scheduler.started"))
    client.delete(RUNS_STREAM)
    with capture_logs() as logs:
        record.add(_event("run.finished"))
    assert logs == [] and record.waiting == 0
    assert [json.loads(line)["event"] for line in record.lines()] == ["scheduler.started", "run.finished"]
    structlog.reset_defaults()
