"""A fleet worker's pool process opens its agents' journals as it starts, keeps them open between runs, and closes them when it stops."""

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


def _held(worker: FleetProcess) -> set[str]:
    """The files the worker's pool processes hold open."""
    pool = [int(pid) for pid in Path(f"/proc/{worker.process.pid}/task/{worker.process.pid}/children").read_text().split()]
    return set().union(*(_open_paths(pid) for pid in pool))


def test_a_worker_opens_its_journals_ahead_keeps_them_open_between_runs_and_closes_them_when_it_stops(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A run finds its journal open: no open, and above all no close, which checkpoints the index and syncs it."""
    schedule, fires = minutes_back(2)
    config_path = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, AGENTS))
    index = str(tmp_path / "journal" / "motoko" / "index" / "journal.sqlite3")
    worker = FleetProcess(config_path, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app = fleet_app(load_config(config_path))
        for agent, fire in (("batou", fires[0]), ("motoko", fires[0]), ("batou", fires[1])):
            app.send_task(RUN_TASK, args=[agent, "tick", fire.isoformat()], queue="ghostrunner.east")
        # A pool process takes its first task once it has started, and one task at a time after that.
        worker.wait_for("run.started", agent="batou", slot=f"{fires[0]:%Y-%m-%dT%H:%M}")
        ahead = index in _held(worker)
        assert worker.wait_for("run.finished", agent="motoko")["outcome"] == "appended"
        worker.wait_for("run.started", agent="batou", slot=f"{fires[1]:%Y-%m-%dT%H:%M}")
        kept = index in _held(worker)
        assert worker.wait_for("run.finished", agent="batou", slot=f"{fires[1]:%Y-%m-%dT%H:%M}")["outcome"] == "appended"
    finally:
        assert worker.stop() == 0
    assert ahead, "motoko's journal was not open before its first run"
    assert kept, "motoko's journal was not kept open after its run"
    # Closed as the pool process ended: its log checkpointed into the index, and gone.
    assert sorted(path.name for path in (tmp_path / "journal" / "motoko" / "index").iterdir()) == ["journal.sqlite3"]
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{fires[0]:%Y-%m-%dT%H:%M}": 1}
