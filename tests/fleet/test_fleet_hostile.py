"""The fleet against a hostile user: records forged into the runs stream, a password full of URL syntax, forged tasks.

Anyone who can write to the fleet's Redis can add records to the runs stream
and tasks to a shard's queue; a reader or a worker must skip what is not a
runner's own, with no traceback, and go on.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import redis

from runner.fleet.app import BEAT_KEY_PREFIX, RUN_TASK, fleet_app
from runner.fleet.record import RUNS_STREAM, RunsRecord
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import ghostrunner
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, rewind, routine, write_fleet

AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'

#: What a writer with access to Redis can put in the stream besides the runner's own records.
FORGED: tuple[bytes, ...] = (
    b"\xff\xfe not UTF-8",
    b"not JSON",
    b"[1, 2]",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"event": "run.finished", "agent": "motoko", "routine": "tick", "slot": "\\ud800", "outcome": "appended"}',
    json.dumps({"event": "run.finished", "agent": ["motoko"], "routine": {"a": 1}, "slot": 5, "outcome": None}).encode(),
    json.dumps({"event": "run.finished"}).encode(),
    json.dumps({"event": "scheduler.started", "agents": 7}).encode(),
    b"x" * 2_000_000,
)


def test_forged_records_in_the_runs_stream_are_skipped_and_the_runners_own_still_read(tmp_path: Path, redis_server: RedisServer) -> None:
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
    config = write_fleet(tmp_path, routine("tick", f"{slot.minute} * * * *") + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT))
    RunsRecord(redis_server.url, None, timedelta(days=1)).add({
        "event": "run.finished", "agent": "motoko", "routine": "tick", "slot": f"{slot:%Y-%m-%dT%H:%M}", "client_key": f"motoko:tick:{slot:%Y-%m-%dT%H:%M}",
        "scheduled": slot.isoformat(), "outcome": "appended", "error": None, "dry_run": False, "level": "info",
        "timestamp": (slot + timedelta(seconds=2)).isoformat(), "shard": "east", "host": "here",
    })
    raw = redis.Redis(host="127.0.0.1", port=redis_server.port)
    for line in FORGED:
        raw.xadd(RUNS_STREAM, {"line": line})
    raw.xadd(RUNS_STREAM, {"not-a-line": b"\xff"})

    history = ghostrunner("--config", str(config), "history", "--fleet", "--json")
    assert history.returncode == 0, history.stderr
    assert [run["slot"] for run in json.loads(history.stdout)] == [f"{slot:%Y-%m-%dT%H:%M}"]
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", (slot + timedelta(minutes=1)).isoformat())
    assert "Traceback" not in status.stderr, status.stderr
    assert json.loads(status.stdout)["input"]["malformed"] >= len(FORGED) - 1, status.stdout
    report = ghostrunner("--config", str(config), "report", "--fleet", "--out", str(tmp_path / "report.html"))
    assert "Traceback" not in report.stderr and (tmp_path / "report.html").exists(), report.stderr


def test_a_password_with_url_syntax_in_it_authenticates_beat_worker_and_status_and_is_never_shown(tmp_path: Path) -> None:
    password = "p@ss/w#rd?%41:x"  # noqa: S105 - a made-up password for a server that lives for one test; each of @ / # ? % : means something in a URL
    server = RedisServer(tmp_path / "redis", password=password)
    schedule, fires = minutes_back(1)
    extra = 'password_env = "GHOSTRUNNER_REDIS_PASSWORD"'
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(server.url, {"east": ["motoko"]}, AGENT, extra=extra))
    env = {"GHOSTRUNNER_REDIS_PASSWORD": password}
    beat = FleetProcess(config, "beat", env=env)
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1", env=env)
    try:
        beat.wait_for("scheduler.started", role="beat")
        worker.wait_for("scheduler.started", role="worker")
        rewind(server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        finished = worker.wait_for("run.finished", agent="motoko")
    finally:
        codes = worker.stop(), beat.stop()
    try:
        assert codes == (0, 0)
        assert finished["outcome"] == "appended"
        history = ghostrunner("--config", str(config), "history", "--fleet", "--json", env=env)
        assert history.returncode == 0, history.stderr
        assert [run["slot"] for run in json.loads(history.stdout)] == [f"{fires[0]:%Y-%m-%dT%H:%M}"]
    finally:
        server.stop()
    assert not any(secret in line for line in [*beat.log.raw, *worker.log.raw] for secret in (password, quote(password, safe="")))


def test_forged_tasks_are_each_refused_with_one_line_and_acknowledged_and_the_worker_goes_on(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    agents = AGENT + '[agents.batou]\npersona = "motoko.toml"\nroutines = ["other"]\n'
    config = write_fleet(tmp_path, routine("tick", schedule) + routine("other", schedule) + fleet_body(redis_server.url, {"east": ["motoko"], "west": ["batou"]}, agents))
    fire = fires[0].isoformat()
    forged: dict[str, tuple[list[object], dict[str, object]]] = {
        "too-few": (["motoko", "tick"], {}),
        "too-many": (["motoko", "tick", fire, "more"], {}),
        "none": ([], {}),
        "a-keyword": (["motoko", "tick", fire], {"at": fire}),
        "a-list-routine": (["motoko", ["tick"], fire], {}),
        "a-dict-agent": ([{"name": "motoko"}, "tick", fire], {}),
        "another-shards-agent": (["batou", "other", fire], {}),
        "a-routine-it-lacks": (["motoko", "other", fire], {}),
        "a-naive-time": (["motoko", "tick", fires[0].replace(tzinfo=None).isoformat()], {}),
        "a-number-time": (["motoko", "tick", 5], {}),
        "before-year-1-in-utc": (["motoko", "tick", "0001-01-01T00:00:00+14:00"], {}),
        "past-year-9999-in-utc": (["motoko", "tick", "9999-12-31T23:59:00-14:00"], {}),
        "the-last-minute": (["motoko", "tick", "9999-12-31T23:59:00+00:00"], {}),
        "the-first-minute": (["motoko", "tick", "0001-01-01T00:00:00+00:00"], {}),
    }
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app = fleet_app(load_config(config))
        for task_id, (args, kwargs) in forged.items():
            app.send_task(RUN_TASK, args=args, kwargs=kwargs, queue="ghostrunner.east", task_id=task_id)
        app.send_task(RUN_TASK, args=["motoko", "tick", fire], queue="ghostrunner.east", task_id="the-real-one")
        finished = worker.wait_for("run.finished", agent="motoko")  # one worker process: the tasks run in the order sent
    finally:
        assert worker.stop() == 0
    refused = [event["task_id"] for event in worker.log.events if event.get("event") == "fleet.task_refused"]
    forwarded = [event["task_id"] for event in worker.log.events if event.get("event") == "fleet.task_forwarded"]
    assert sorted(refused) == sorted(set(forged) - {"another-shards-agent"})
    assert forwarded == ["another-shards-agent"]  # a task of batou's, passed on to its shard's queue
    assert redis_server.client().llen("ghostrunner.west") == 1
    assert not [event for event in worker.log.events if event.get("level") == "error" and event.get("event") != "fleet.task_refused"]
    assert finished["outcome"] == "appended"
    assert redis_server.client().llen("ghostrunner.east") == 0  # each acknowledged, none left to come back


def test_a_standby_beat_waits_out_a_redis_restart_and_takes_over_after_it(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, _ = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT))
    active = FleetProcess(config, "beat")
    standby: FleetProcess | None = None
    try:
        active.wait_for("scheduler.started", role="beat")
        standby = FleetProcess(config, "beat")
        standby.wait_for("fleet.beat_standby")
        redis_server.stop()
        standby.wait_for("fleet.broker_unreachable")
        redis_server.start()
        active.stop()  # 0, or 75 if its lock lapsed while Redis was away
        standby.wait_for("fleet.beat_active")
        standby.wait_for("scheduler.started", role="beat")
    finally:
        active.stop()
        code = standby.stop() if standby is not None else None
    assert code == 0
    assert not [line for line in standby.log.raw if "Traceback" in line]


def test_a_garbled_schedule_entry_is_installed_anew_and_the_beat_goes_on(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick", "tock"]\n'
    config = write_fleet(tmp_path, routine("tick", schedule) + routine("tock", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, agents))
    client = redis_server.client()
    first = FleetProcess(config, "beat")
    first.wait_for("scheduler.started", role="beat")
    assert first.stop() == 0
    client.hset(f"{BEAT_KEY_PREFIX}motoko:tick", "meta", "{not json")  # read when the beat installs the schedule
    beat = FleetProcess(config, "beat")
    try:
        reset = beat.wait_for("fleet.beat_entry_reset", key=f"{BEAT_KEY_PREFIX}motoko:tick")
        beat.wait_for("scheduler.started", role="beat")
        definition = json.loads(client.hget(f"{BEAT_KEY_PREFIX}motoko:tock", "definition") or "{}")
        client.hset(f"{BEAT_KEY_PREFIX}motoko:tock", "definition", json.dumps({**definition, "args": [1, 2]}))
        client.zadd(f"{BEAT_KEY_PREFIX}:schedule", {f"{BEAT_KEY_PREFIX}motoko:tock": 0})  # due: read at the next tick
        beat.wait_for("fleet.beat_entry_reset", key=f"{BEAT_KEY_PREFIX}motoko:tock")
        for name in ("tick", "tock"):
            rewind(redis_server, "motoko", name, schedule, fires[0] - timedelta(minutes=1))
        queued = {beat.wait_for("scheduler.run_queued")["routine"] for _ in range(2)}
    finally:
        code = beat.stop()
    assert code == 0 and reset["installed"] is True
    assert queued == {"tick", "tock"}
    assert not [line for line in beat.log.raw if "Traceback" in line]


def _fields(line: str) -> dict[str, object]:
    """The JSON object *line* holds, or {} when it holds none."""
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def test_every_line_a_worker_writes_from_start_to_sigterm_is_json_with_its_host_and_shard(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, _ = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT))
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    worker.wait_for("scheduler.started", role="worker")
    worker.log.wait(lambda line: str(line.get("event", "")).endswith(" ready."))  # Celery's own line: its signal handlers are set
    assert worker.stop() == 0
    lines = [line for line in worker.log.raw if line.strip()]
    assert [line for line in lines if not {"event", "host", "shard"} <= _fields(line).keys()] == []
