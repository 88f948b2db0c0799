"""A routine's gate under a fleet's worker: asked before the model, as under run and serve.

A real ``ghostrunner fleet worker`` on a real redis-server; the gate is a Python function beside the configuration;
the backend is a real chat-completions server on 127.0.0.1, so that "no backend call" is counted at the server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._chat_server import ChatServer
from tests._redis import RedisServer
from tests._support import openai_agent
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet

AGENTS = {"east": ["a1", "a2"]}
GATES = "def nothing_for_a1(slot):\n    return slot['agent'] != 'a1'\n"


def _finished(worker: FleetProcess) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in list(worker.log.raw) if line.startswith("{")]
    return [line for line in lines if line.get("event") == "run.finished"]


def test_a_fleet_workers_run_asks_the_gate_first_and_a_skip_reaches_no_server(tmp_path: Path, redis_server: RedisServer) -> None:
    """The gate says nothing to do for a1 (skipped, reason gate, no request) and run for a2 (appended): one request in all."""
    schedule, fires = minutes_back(1)
    with ChatServer() as server:
        one = openai_agent(server.url, routines=("tick",), timeout="15s", backend="attempts = 1\n")
        agents = "".join(one.replace("agents.motoko", f"agents.{agent}") for agent in AGENTS["east"])
        gated = routine("tick", schedule) + 'gate = {callable = "gates:nothing_for_a1"}\n'
        (tmp_path / "host").mkdir()
        (tmp_path / "host" / "gates.py").write_text(GATES, encoding="utf-8")
        path = write_fleet(tmp_path / "host", gated + fleet_body(redis_server.url, AGENTS, agents))
        worker = FleetProcess(path, "worker", "--shard", "east", "--concurrency", "1")
        try:
            worker.wait_for("scheduler.started", role="worker")
            app = fleet_app(load_config(path))
            for agent in AGENTS["east"]:
                app.send_task(RUN_TASK, args=[agent, "tick", fires[0].isoformat()], queue="ghostrunner.east")
                worker.wait_for("run.finished", agent=agent)
        finally:
            worker.stop()
    outcomes = {run["agent"]: (run["outcome"], run.get("reason")) for run in _finished(worker)}
    assert outcomes == {"a1": ("skipped", "gate"), "a2": ("appended", None)}
    assert len(server.requests) == 1
