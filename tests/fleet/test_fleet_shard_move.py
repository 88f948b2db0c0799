"""A task a worker refuses is no fire lost: after a shard move, and when the hosts disagree, with real workers on a real redis-server.

The tasks a beat published to an agent's old shard before the move wait in
that shard's queue; the old shard's worker, on the new configuration, must
pass them on to the new shard, whose worker runs them. A task no worker it
reaches can run must be recorded as missed where ``status --fleet`` reads.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import ghostrunner
from tests.fleet._fleet import FleetProcess, entries_by_key, fleet_body, minutes_back, rewind, routine, write_fleet

AGENTS = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


def _refused(*workers: FleetProcess) -> list[dict[str, object]]:
    return [event for worker in workers for event in worker.log.drain() if event.get("event") == "fleet.task_refused"]


def test_tasks_queued_to_the_old_shard_run_on_the_new_one_after_a_move(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(2)
    before = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, AGENTS))
    beat = FleetProcess(before, "beat")
    try:
        beat.wait_for("scheduler.started", role="beat")
        rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        for fire in fires:
            beat.wait_for("scheduler.run_queued", agent="motoko", scheduled=fire.isoformat())
    finally:
        assert beat.stop() == 0
    assert redis_server.client().llen("ghostrunner.east") == len(fires)  # no worker of east took them before the move
    # The move, as docs/fleet.md has it: motoko to the new shard west in the configuration of every host (here, one).
    after = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["batou"], "west": ["motoko"]}, AGENTS))
    east = FleetProcess(after, "worker", "--shard", "east", "--concurrency", "1")
    west = FleetProcess(after, "worker", "--shard", "west", "--concurrency", "1")
    try:
        runs = [west.wait_for("run.finished", agent="motoko") for _ in fires]
    finally:
        codes = east.stop(), west.stop()
    assert codes == (0, 0)
    forwarded = [event for event in east.log.drain() if event.get("event") == "fleet.task_forwarded"]
    assert sorted((event["scheduled"], event["queue"]) for event in forwarded) == [(fire.isoformat(), "ghostrunner.west") for fire in fires]
    assert _refused(east, west) == []
    assert sorted((run["scheduled"], run["outcome"]) for run in runs) == [(fire.isoformat(), "appended") for fire in fires]
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{fire:%Y-%m-%dT%H:%M}": 1 for fire in fires}
    client = redis_server.client()
    assert client.llen("ghostrunner.east") == client.llen("ghostrunner.west") == 0


def test_a_task_no_worker_can_run_is_recorded_missed_where_status_fleet_sees_it(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    # Two hosts whose configurations disagree on motoko's shard: each worker takes it for the other's.
    east_config = write_fleet(
        tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["batou"], "west": ["motoko"]}, AGENTS), name="east.toml"
    )
    west_config = write_fleet(
        tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"], "west": ["batou"]}, AGENTS), name="west.toml"
    )
    east = FleetProcess(east_config, "worker", "--shard", "east", "--concurrency", "1")
    west = FleetProcess(west_config, "worker", "--shard", "west", "--concurrency", "1")
    try:
        east.wait_for("scheduler.started", role="worker")
        west.wait_for("scheduler.started", role="worker")
        fleet_app(load_config(west_config)).send_task(
            RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id="published-to-east"
        )
        missed = west.wait_for("scheduler.missed", agent="motoko")
    finally:
        codes = east.stop(), west.stop()
    assert codes == (0, 0)
    assert [event["task_id"] for event in east.log.drain() if event.get("event") == "fleet.task_forwarded"] == ["published-to-east"]
    assert [event["task_id"] for event in _refused(east, west)] == ["published-to-east"]  # passed on once, not back and forth
    assert (missed["slot"], missed["reason"]) == (slot, "refused")
    status = ghostrunner("--config", str(east_config), "status", "--fleet", "--json", "--now", (fires[0] + timedelta(minutes=5)).isoformat())
    pair = next(pair for pair in json.loads(status.stdout)["pairs"] if pair["agent"] == "motoko")
    assert [(record["slot"], record["reason"]) for record in pair["missed"]] == [(slot, "refused")], status.stdout
    assert pair["state"] != "ok"
    assert not (tmp_path / "journal" / "motoko" / "entries").exists() or entries_by_key(tmp_path / "journal" / "motoko") == {}
