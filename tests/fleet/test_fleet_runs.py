"""A fleet of real processes on a real redis-server: beat publishes, each shard's worker runs its agents, status --fleet judges.

Each test sets a pair's last handled fire a few minutes back (the state of a
beat that was down over them, see tests/fleet/_fleet.py) and lets the real
beat and workers do the rest.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from runner.schedule.deployment_lock import DeploymentLock
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import ghostrunner
from tests.fleet._fleet import FleetProcess, entries_by_key, fleet_body, minutes_back, rewind, routine, write_fleet

TWO_AGENTS = """
[agents.motoko]
persona = "motoko.toml"
routines = ["tick"]

[agents.batou]
persona = "motoko.toml"
routines = ["tick"]
"""


def test_each_shards_worker_runs_its_agents_slots_once_and_status_fleet_sees_a_missing_shard(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(3)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"], "west": ["batou"]}, TWO_AGENTS))
    beat = FleetProcess(config, "beat")
    east = FleetProcess(config, "worker", "--shard", "east")
    try:
        beat.wait_for("scheduler.started", role="beat")
        east.wait_for("scheduler.started", role="worker")
        for agent in ("motoko", "batou"):
            rewind(redis_server, agent, "tick", schedule, fires[0] - timedelta(minutes=1))
        finished = [east.wait_for("run.finished", agent="motoko") for _ in fires]
        queued = [beat.wait_for("scheduler.run_queued", agent="batou") for _ in fires]
    finally:
        assert east.stop() == 0
        assert beat.stop() == 0
    assert sorted(event["scheduled"] for event in finished) == [fire.isoformat() for fire in fires]
    assert {event["outcome"] for event in finished} == {"appended"}
    assert {event["shard"] for event in finished} == {"east"} and all(event["host"] for event in finished)
    assert len(queued) == len(fires)
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{fire:%Y-%m-%dT%H:%M}": 1 for fire in fires}
    assert not (tmp_path / "journal" / "batou").exists()  # west has no worker: its tasks wait in Redis, nothing ran

    now = (fires[-1] + timedelta(seconds=30)).isoformat()
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", now, "--grace", "10s")
    report = json.loads(status.stdout)
    states = {pair["agent"]: pair["state"] for pair in report["pairs"]}
    # The record starts when the beat did, after the fires it was rewound over: batou's slot is not known to have run.
    assert states == {"motoko": "ok", "batou": "unknown"}, status.stdout
    assert status.returncode == 5  # never "all well" with a slot that has no run
    told = ghostrunner("--config", str(config), "status", "--fleet", "--text", "--now", now, "--grace", "10s").stdout.splitlines()
    assert told[-2].startswith(f"input: the fleet's runs record, {len(fires)} runs, 0 malformed records; from "), told  # not "log lines"
    assert told[-1] == ("status: unknown: what was read does not reach back to a due slot (the runs record keeps fleet.keep_runs of runs; "
                        "a slot older than that cannot be judged) (exit 5)"), told

    history = ghostrunner("--config", str(config), "history", "--fleet", "--json", "--agent", "motoko")
    assert history.returncode == 0, history.stderr
    assert sorted(slot["slot"] for slot in json.loads(history.stdout)) == [f"{fire:%Y-%m-%dT%H:%M}" for fire in fires]


def test_a_fleet_start_that_cannot_work_is_one_line_and_exit_78(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, _ = minutes_back(1)
    body = routine("tick", schedule) + TWO_AGENTS
    nowhere = write_fleet(tmp_path / "nowhere", body + '\n[fleet]\nbroker = "redis://127.0.0.1:9/0"\n[fleet.shards]\neast = ["motoko", "batou"]\n')
    for command in (["fleet", "beat"], ["fleet", "worker", "--shard", "east"]):
        result = ghostrunner("--config", str(nowhere), *command)
        assert result.returncode == 78, result.stderr
        assert result.stderr.count("\n") == 1 and "cannot reach the fleet's Redis at redis://127.0.0.1:9/0" in result.stderr
    plain = write_fleet(tmp_path / "plain", body)
    result = ghostrunner("--config", str(plain), "fleet", "beat")
    assert result.returncode == 78 and "a [fleet] table" in result.stderr and result.stderr.count("\n") == 1
    config = write_fleet(tmp_path / "fleet", body + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, "").split("\n", 1)[1])
    unknown = ghostrunner("--config", str(config), "fleet", "worker", "--shard", "north")
    assert unknown.returncode == 2 and "north" in unknown.stderr and "east" in unknown.stderr


def test_the_fleet_and_serve_refuse_to_run_the_same_agents(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, _ = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, TWO_AGENTS))
    serve = ghostrunner("--config", str(config), "serve")
    assert serve.returncode == 78 and "fleet: expected no [fleet] table for serve" in serve.stderr
    lock = DeploymentLock(load_config(config).lock_file)
    lock.acquire()  # a serve of these agents, as far as the lock file tells
    try:
        for command in (["fleet", "beat"], ["fleet", "worker", "--shard", "east"]):
            result = ghostrunner("--config", str(config), *command)
            assert result.returncode == 78, result.stderr
            assert "ghostrunner serve holds" in result.stderr and result.stderr.count("\n") == 1
    finally:
        lock.release()
    assert not redis_server.client().exists("ghostrunner:beat:motoko:tick")  # refused before it wrote a schedule
