"""A fleet worker's pool process keeps its agents' journals open between runs, and closes them when it stops."""

from __future__ import annotations

import os
from pathlib import Path

from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests.fleet._fleet import FleetProcess, entries_by_key, fleet_body, minutes_back, routine, write_fleet

AGENTS = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


def _open_paths(pid: int) -> set[str]:
    """The paths of the files process *pid* holds open."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue  # closed while listed
    return found


def test_a_worker_keeps_a_journal_open_after_its_run_and_closes_it_when_it_stops(tmp_path: Path, redis_server: RedisServer) -> None:
    """The next run of the agent finds its journal open: no open, and above all no close, which checkpoints the index and syncs it."""
    schedule, fires = minutes_back(1)
    config_path = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, AGENTS))
    worker = FleetProcess(config_path, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app = fleet_app(load_config(config_path))
        for agent in ("motoko", "batou"):
            app.send_task(RUN_TASK, args=[agent, "tick", fires[0].isoformat()], queue="ghostrunner.east")
        # One pool process runs one task at a time: batou's run starts only once motoko's task is done with.
        assert worker.wait_for("run.finished", agent="motoko")["outcome"] == "appended"
        worker.wait_for("run.started", agent="batou")
        pool = [int(pid) for pid in Path(f"/proc/{worker.process.pid}/task/{worker.process.pid}/children").read_text().split()]
        held = set().union(*(_open_paths(pid) for pid in pool))
        assert worker.wait_for("run.finished", agent="batou")["outcome"] == "appended"
    finally:
        assert worker.stop() == 0
    index = tmp_path / "journal" / "motoko" / "index"
    assert str(index / "journal.sqlite3") in held
    # Closed as the pool process ended: its log checkpointed into the index, and gone.
    assert sorted(path.name for path in index.iterdir()) == ["journal.sqlite3"]
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{slot}": 1}
