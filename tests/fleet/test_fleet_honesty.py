"""The fleet says what happened: a run Celery's hard time limit killed, a beat whose lock lapsed, a long outage, the runs record's author.

Each of these once went unsaid or was said wrongly: a killed run logged no
``run.finished`` (``serve`` logs one for the same case), and so on; each
test here drives the real processes on a real redis-server.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from journal import Journal
from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet

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
