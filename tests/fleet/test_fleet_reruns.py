"""A slot's rerun runs once, whatever its delay: real beat and worker processes on a real redis-server.

A task a worker holds unacknowledged is handed out again by Redis each time
``fleet.visibility_timeout`` passes; a rerun delayed longer than that, held
as a task with a countdown, would run once per timeout. Here the delay is
longer than the visibility timeout, and the rerun must run exactly once.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import structlog
from structlog.testing import capture_logs

from runner.fleet.app import fleet_app
from runner.fleet.beat import SlotScheduler, beat_schedule
from runner.fleet.tasks import RERUNS_KEY, PlannedRerun
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import script
from tests.fleet._fleet import FleetProcess, entries_by_key, fleet_body, minutes_back, rewind, routine, write_fleet

#: Fails with "try again later" (75) on its first call, then answers; its calls are counted in a file beside it.
FLAKY = """
import json, os, sys
request = json.load(sys.stdin)
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls")
calls = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(calls + 1))
if calls < 1:
    print("model server not up yet", file=sys.stderr)
    sys.exit(75)
print(json.dumps({"voice": "on call %d" % (calls + 1), "theme": "t"}))
"""


def test_a_rerun_delayed_past_the_visibility_timeout_runs_once(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    argv = script(tmp_path, "flaky.py", FLAKY)
    agents = f'[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\nbackend = {{ type = "command", command = {json.dumps(argv)}, attempts = 1 }}\n'
    # The rerun waits 35 s; Redis hands out a task held unacknowledged for 25 s again.
    body = routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, agents, visibility="25s")
    config = write_fleet(tmp_path, body, runner='slot_retry_delay = "35s"\n', slot_retries=1)
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    beat = FleetProcess(config, "beat")
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        beat.wait_for("scheduler.started", role="beat")
        worker.wait_for("scheduler.started", role="worker")
        rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        planned = worker.wait_for("scheduler.retry_scheduled", slot=slot)
        appended = worker.wait_for("run.finished", timeout=120, slot=slot, outcome="appended")
        _wait_until_nothing_is_queued_or_held(redis_server)  # a copy of the rerun a worker held, run or not, would show here
    finally:
        worker_code = worker.stop()  # a task it still held would go back to the queue
        beat_code = beat.stop()
    assert (worker_code, beat_code) == (0, 0)
    runs = [event["outcome"] for event in worker.log.drain() if event.get("event") == "run.finished"]
    assert runs == ["failed", "appended"]
    assert redis_server.client().zcard(RERUNS_KEY) == 0
    queued = [event for event in beat.log.drain() if event.get("event") == "scheduler.run_queued" and event["slot"] == slot]
    assert [(event["trigger"], event.get("rerun")) for event in queued] == [("cron", None), ("retry", 1)]  # the beat published the rerun, once
    assert planned["rerun"] == 1 and appended["client_key"] == f"motoko:tick:{slot}"
    assert (tmp_path / "calls").read_text() == "2"
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{slot}": 1}


def _wait_until_nothing_is_queued_or_held(server: RedisServer, timeout: float = 120) -> None:
    """Wait until the shard's queue is empty and no task is out unacknowledged, read at one moment (kombu restores atomically)."""
    deadline = time.monotonic() + timeout
    client = server.client()
    while True:
        with client.pipeline(transaction=True) as pipe:
            queued, held = pipe.llen("ghostrunner.east").hlen("unacked").execute()
        if queued == held == 0:
            return
        assert time.monotonic() < deadline, f"{queued} task(s) queued and {held} held after {timeout} s"
        time.sleep(0.2)


def test_a_garbled_planned_rerun_is_dropped_with_one_line_and_the_good_one_is_published_once(tmp_path: Path, redis_server: RedisServer) -> None:
    """Anyone who can write to Redis can add to the planned reruns: the beat drops what is not a rerun, and publishes the rest once."""
    schedule, fires = minutes_back(1)
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    config = load_config(write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, agents)))
    app = fleet_app(config)
    app.conf.beat_schedule = beat_schedule(config)
    app.conf.ghostrunner_config = config
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    good = PlannedRerun("motoko", "tick", fires[0].isoformat(), slot, f"motoko:tick:{slot}", "ghostrunner.east", "the-task", 1)
    garbled = ["not JSON", "[1, 2]", json.dumps({**json.loads(good.encode()), "rerun": "1"}), json.dumps({**json.loads(good.encode()), "rerun": True}),
               "[" * 100_000, json.dumps({"agent": "motoko"})]
    client = redis_server.client()
    client.zadd(RERUNS_KEY, dict.fromkeys([*garbled, good.encode()], 0))
    client.zadd(RERUNS_KEY, {json.dumps({**json.loads(good.encode()), "task_id": "later"}, sort_keys=True): 4_000_000_000})  # not due
    with capture_logs() as logs:
        beat = SlotScheduler(app=app)
        beat.tick()
        beat.tick()
        beat.close()
    structlog.reset_defaults()
    refused = [event for event in logs if event["event"] == "fleet.task_refused"]
    queued = [event for event in logs if event["event"] == "scheduler.run_queued"]
    assert len(refused) == len(garbled)
    assert [(event["task_id"], event["trigger"], event["rerun"]) for event in queued] == [("the-task", "retry", 1)]
    tasks = [json.loads(raw) for raw in client.lrange("ghostrunner.east", 0, -1)]
    assert [(task["headers"]["id"], task["headers"]["retries"]) for task in tasks] == [("the-task", 1)]
    assert client.zrange(RERUNS_KEY, 0, -1) == [json.dumps({**json.loads(good.encode()), "task_id": "later"}, sort_keys=True)]
