"""A fleet run's command backend never outlives the run, however Celery ends the run's pool process.

The backend (tests/_backend_group.py) starts a child in its group and sleeps for good; the test ends
the run's process the way Celery does, then polls ``/proc`` until nothing of the backend is left.
(A task revoked with terminate: tests/fleet/test_fleet_operators.py.)
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._backend_group import assert_group_ends, lingering_program, started_pids
from tests._redis import RedisServer
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet


def _agent(argv: list[str]) -> str:
    return f"""
[agents.motoko]
persona = "motoko.toml"
routines = ["tick"]
backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "1h", attempts = 1 }}
"""


def test_a_run_stuck_past_celerys_hard_time_limit_leaves_no_backend(tmp_path: Path, redis_server: RedisServer) -> None:
    """The backend stops the run's pool process, so no deadline of the run can act: Celery's hard time limit kills that
    process (SIGTERM, then SIGKILL a tenth of a second later, to a stopped process), and the backend and its child end too."""
    schedule, fires = minutes_back(1)
    body = routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _agent(lingering_program(tmp_path, stop_the_run=True)))
    config = write_fleet(tmp_path, body.replace('"25s"', '"8s"'))
    config.write_text(config.read_text(encoding="utf-8").replace('run_timeout = "20s"', 'run_timeout = "4s"'), encoding="utf-8")
    app = fleet_app(load_config(config))
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app.send_task(RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id="stuck")
        pids = started_pids(tmp_path)
        finished = worker.wait_for("run.finished")
        assert_group_ends(pids)
    finally:
        assert worker.stop() == 0
    assert finished["outcome"] == "failed" and "hard time limit" in finished["error"], finished


def test_a_cold_shutdown_of_a_worker_leaves_no_backend(tmp_path: Path, redis_server: RedisServer) -> None:
    """SIGQUIT (Celery's cold shutdown) ends the worker without waiting for its runs: their backends end with them."""
    schedule, fires = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _agent(lingering_program(tmp_path))))
    app = fleet_app(load_config(config))
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app.send_task(RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id="cold")
        pids = started_pids(tmp_path)
        worker.process.send_signal(signal.SIGQUIT)
        worker.process.wait(120)
        assert_group_ends(pids)
    finally:
        worker.stop()
