"""One beat publishes at a time, however long its pass: a real beat and its standby on a real redis-server that stalls.

A pass over many pairs on a slow Redis outlasts ``beat_lock_timeout``; the
Redis here is made slow with ``DEBUG SLEEP`` issued back to back from a
thread, so that every command of the beats waits behind one, as on a loaded
server. The active beat must keep its lock through the pass (the standby
stays a standby), or, when Redis stalls past the lock's timeout, stop before
it publishes another fire.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests._redis import RedisServer
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, rewind, routine, write_fleet

PAIRS = 300  # 2,400 fires: a pass of ten batches, each a round trip the stalling Redis holds
NAMES = [f"r{number:03d}" for number in range(PAIRS)]
LOCK_SECONDS = 2


@contextlib.contextmanager
def stalling(server: RedisServer, seconds: float) -> Iterator[None]:
    """Redis busy in ``DEBUG SLEEP seconds`` again and again while the block runs: each other client's command waits behind one."""
    done = threading.Event()
    client = server.client()

    def stall() -> None:
        while not done.is_set():
            client.execute_command("DEBUG", "SLEEP", str(seconds))

    thread = threading.Thread(target=stall, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(30)


def _many_pairs(tmp_path: Path, server: RedisServer) -> tuple[Path, str, list[datetime]]:
    schedule, fires = minutes_back(8)
    agents = f'[agents.motoko]\npersona = "motoko.toml"\nroutines = {json.dumps(NAMES)}\n'
    body = "".join(routine(name, schedule) for name in NAMES) + fleet_body(server.url, {"east": ["motoko"]}, agents, lock=f"{LOCK_SECONDS}s")
    return write_fleet(tmp_path, body), schedule, fires


def _handled(event: dict[str, object]) -> bool:
    return event.get("event") in ("scheduler.run_queued", "scheduler.missed")


def _queued_task_ids(server: RedisServer) -> list[str]:
    return [json.loads(raw)["headers"]["id"] for raw in server.client().lrange("ghostrunner.east", 0, -1)]


def _timestamp(event: dict[str, object]) -> datetime:
    return datetime.fromisoformat(str(event["timestamp"]))


def test_a_pass_longer_than_the_lock_keeps_it_and_the_standby_publishes_nothing(tmp_path: Path, redis_server: RedisServer) -> None:
    config, schedule, fires = _many_pairs(tmp_path, redis_server)
    active = FleetProcess(config, "beat")
    standby: FleetProcess | None = None
    try:
        active.wait_for("scheduler.started", role="beat")
        standby = FleetProcess(config, "beat")
        standby.wait_for("fleet.beat_standby")
        with stalling(redis_server, 0.05):
            began = datetime.now(UTC)
            rewind(redis_server, "motoko", NAMES, schedule, fires[0] - timedelta(minutes=1))
            handled = [active.log.wait(_handled, timeout=240) for _ in range(PAIRS * len(fires))]
        active_code = active.stop()  # it lets the lock go: the standby takes over and finds nothing left to publish
        standby.wait_for("scheduler.started", role="beat", timeout=60)
    finally:
        active.stop()
        standby_code = standby.stop() if standby is not None else None
    # The beat logs its fires once they are in Redis, a batch at a time: the pass is timed from the rewind that made them due.
    assert (_timestamp(handled[-1]) - began).total_seconds() > LOCK_SECONDS, "the pass was not slow: the test proves nothing"
    published = [event["task_id"] for event in handled if event["event"] == "scheduler.run_queued"]
    assert standby is not None
    by_standby = [event for event in standby.log.drain() if event.get("event") == "scheduler.run_queued"]
    assert by_standby == []
    assert sorted(_queued_task_ids(redis_server)) == sorted(published)  # each fire one task, none twice
    assert (active_code, standby_code) == (0, 0)
    assert not [event for event in active.log.events if event.get("event") == "fleet.beat_lost_lock"]


def test_a_beat_whose_lock_lapses_while_redis_stalls_stops_before_its_next_publish(tmp_path: Path, redis_server: RedisServer) -> None:
    config, schedule, fires = _many_pairs(tmp_path, redis_server)
    active = FleetProcess(config, "beat")
    standby: FleetProcess | None = None
    try:
        active.wait_for("scheduler.started", role="beat")
        standby = FleetProcess(config, "beat")
        standby.wait_for("fleet.beat_standby")
        with stalling(redis_server, 0.01):
            rewind(redis_server, "motoko", NAMES, schedule, fires[0] - timedelta(minutes=1))
            active.log.wait(_handled, timeout=120)  # the pass is under way
            redis_server.client().execute_command("DEBUG", "SLEEP", str(LOCK_SECONDS + 1))  # Redis stalls past the lock's timeout
            lost = active.wait_for("fleet.beat_lost_lock", timeout=120)
            standby.wait_for("scheduler.started", role="beat", timeout=120)
        active_code = active.process.wait(60)
        standby.stop()
    finally:
        active.stop()
        if standby is not None:
            standby.stop()
    assert standby is not None
    by_active = [event for event in active.log.drain() if event.get("event") == "scheduler.run_queued"]
    by_standby = [event for event in standby.log.drain() if event.get("event") == "scheduler.run_queued"]
    assert active_code == 75 and lost["lock"]
    assert by_standby, "the standby took over the rest of the pass"
    assert all(_timestamp(event) <= _timestamp(lost) for event in by_active)  # nothing published once the lock was gone
    ids = _queued_task_ids(redis_server)
    # The script that writes a batch checks the lock first: a batch Redis held while the lock lapsed is written by neither
    # beat or by the one holding the lock, never by both.
    assert len(ids) == len(set(ids))
    assert {_fire(raw) for raw in redis_server.client().lrange("ghostrunner.east", 0, -1)} <= {
        (name, fire.isoformat()) for name in NAMES for fire in fires
    }


def _fire(raw: str) -> tuple[str, str]:
    args = json.loads(base64.b64decode(json.loads(raw)["body"]))[0]
    return args[1], args[2]
