"""A fleet's budgets hold across hosts: the ledger is in the fleet's Redis, and its check-and-reserve is one script.

Two "hosts" are two directories, each with its own configuration file, journals and state directory (so a ledger kept
on the host would be two ledgers), and each a real ``ghostrunner fleet worker`` of its own shard, on one real
redis-server; the backend is a real chat-completions server on 127.0.0.1 that reports usage.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

from runner.fleet.app import RUN_TASK, fleet_app
from runner.fleet.ledger import LEDGER_PREFIX, FleetBudgets
from runner.run.contract import RunIdentity
from runner.settings.config import load_config
from tests._chat_server import ChatServer
from tests._redis import RedisServer
from tests._support import ghostrunner, openai_agent
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet

USAGE = {"prompt_tokens": 500, "completion_tokens": 100}  # 600 tokens a run
AGENTS = {"east": ["a1", "a2"], "west": ["a3", "a4"]}


def _agents(url: str) -> str:
    one = openai_agent(url, routines=("tick",), timeout="15s", backend="attempts = 1\n")
    return "".join(one.replace("agents.motoko", f"agents.{agent}") for agents in AGENTS.values() for agent in agents)


def _hosts(tmp_path: Path, broker: str, url: str, schedule: str, budgets: str) -> dict[str, Path]:
    """One configuration per host (east's, west's), alike but for where they are: each keeps its journals and state apart."""
    body = routine("tick", schedule) + fleet_body(broker, AGENTS, _agents(url)) + "\n[budgets]\n" + budgets
    return {shard: write_fleet(tmp_path / f"host-{shard}", body) for shard in AGENTS}


def _finished(worker: FleetProcess) -> list[dict[str, Any]]:
    """The run.finished lines the worker has logged so far."""
    lines = [json.loads(line) for line in list(worker.log.raw) if line.startswith("{")]
    return [line for line in lines if line.get("event") == "run.finished"]


def test_four_runs_on_two_hosts_racing_for_room_for_one_reach_the_server_once(tmp_path: Path, redis_server: RedisServer) -> None:
    """Room for one run in the day, four runs at once on two hosts' workers: one is asked of the server, three are skipped.

    The server holds the request it gets until the other runs have ended, so every check happens while the admitted run
    is still going: only its reservation in the shared ledger keeps the others out. A ledger per host lets one run
    through on each host.
    """
    schedule, fires = minutes_back(1)
    with ChatServer(usage=USAGE, gated=True) as server:
        hosts = _hosts(tmp_path, redis_server.url, server.url, schedule, "tokens_per_day = 500\nmax_tokens_per_run = 600\n")
        workers = {shard: FleetProcess(path, "worker", "--shard", shard, "--concurrency", "2") for shard, path in hosts.items()}
        try:
            for worker in workers.values():
                worker.wait_for("scheduler.started", role="worker")
            app = fleet_app(load_config(hosts["east"]))
            for shard, agents in AGENTS.items():
                for agent in agents:
                    app.send_task(RUN_TASK, args=[agent, "tick", fires[0].isoformat()], queue=f"ghostrunner.{shard}")
            deadline = time.monotonic() + 120
            # Polling until each run has either ended or reached the server; what is asserted is counted, not timed.
            while sum(len(_finished(worker)) for worker in workers.values()) + len(server.requests) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            asked_while_held = len(server.requests)
            server.release.set()
            for worker in workers.values():
                while len(_finished(worker)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            server.release.set()
            for worker in workers.values():
                worker.stop()
    runs = [run for worker in workers.values() for run in _finished(worker)]
    assert len(runs) == 4, runs
    assert sorted((run["outcome"], run.get("reason")) for run in runs) == [("appended", None)] + [("skipped", "budget")] * 3
    assert asked_while_held == len(server.requests) == 1
    # The ledger in Redis holds the one run, at what it used; neither host's state directory has a ledger.
    assert FleetBudgets(load_config(hosts["west"])).used() == (600.0, 0.0)
    assert not list(tmp_path.glob("host-*/**/ledger.sqlite3"))


def test_a_manual_run_on_another_host_spends_from_the_fleets_budget_and_a_skipped_slot_stays_skipped(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """What one host's worker used is what another host's ghostrunner run sees; a slot skipped there is skipped here."""
    schedule, fires = minutes_back(2)
    with ChatServer(usage=USAGE) as server:
        hosts = _hosts(tmp_path, redis_server.url, server.url, schedule, "tokens_per_day = 1000\n")
        worker = FleetProcess(hosts["east"], "worker", "--shard", "east", "--concurrency", "1")
        try:
            worker.wait_for("scheduler.started", role="worker")
            app = fleet_app(load_config(hosts["east"]))
            for agent in AGENTS["east"]:
                app.send_task(RUN_TASK, args=[agent, "tick", fires[0].isoformat()], queue="ghostrunner.east")
                worker.wait_for("run.finished", agent=agent)
        finally:
            worker.stop()
        assert len(server.requests) == 2  # 1200 tokens: the day's 1000 are used, across the fleet
        at = fires[1].isoformat()
        done = ghostrunner("run", "tick", "--agent", "a3", "--at", at, "--config", str(hosts["west"]), cwd=hosts["west"].parent)
        assert (done.returncode, json.loads(done.stdout)["reason"]) == (0, "budget"), done.stdout + done.stderr
        assert len(server.requests) == 2
    config = load_config(hosts["east"])
    skipped = RunIdentity.of("a3", config.routines["tick"], fires[1], config.timezone)
    assert redis_server.client().hget(LEDGER_PREFIX + "skipped", skipped.client_key) == "budgets.tokens_per_day"
    # The slot stays skipped, on any host, however the limit is raised: catch-up never buys a day back.
    path = hosts["east"]
    path.write_text(path.read_text(encoding="utf-8").replace("tokens_per_day = 1000", "tokens_per_day = 100000"), encoding="utf-8")
    raised = load_config(path)
    assert raised.budgets.total.tokens_per_day == 100000
    verdict = FleetBudgets(raised).admit(skipped, fires[1])
    assert (getattr(verdict, "budget", None), getattr(verdict, "known", None)) == ("budgets.tokens_per_day", False)


def test_a_fleet_ledger_that_redis_cannot_serve_fails_the_run_clearly_and_asks_no_backend(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Redis gone: the run cannot know whether it has room, so it fails (transient, one line naming the broker) unasked."""
    schedule, fires = minutes_back(1)
    with ChatServer(usage=USAGE) as server:
        hosts = _hosts(tmp_path, redis_server.url, server.url, schedule, "tokens_per_day = 1000\n")
        redis_server.stop()
        at = (fires[0] + timedelta(seconds=1)).astimezone(UTC).isoformat()
        done = ghostrunner("run", "tick", "--agent", "a1", "--at", at, "--config", str(hosts["east"]), cwd=hosts["east"].parent)
        result = json.loads(done.stdout)
        assert (done.returncode, result["outcome"], result.get("permanent", False)) == (1, "failed", False), done.stdout
        assert f"the budgets' ledger in the fleet's Redis at {redis_server.url} (fleet.broker) cannot be used" in result["error"]
        assert server.requests == []


def test_a_dry_run_spends_from_the_fleets_budget_and_a_refused_one_leaves_its_slot_free(tmp_path: Path, redis_server: RedisServer) -> None:
    """A dry run on one host asks the model and is counted in Redis; the next, with no room left, asks nothing and skips no slot."""
    schedule, fires = minutes_back(1)
    with ChatServer(usage=USAGE) as server:
        hosts = _hosts(tmp_path, redis_server.url, server.url, schedule, "tokens_per_day = 500\n")
        at = (fires[0] + timedelta(seconds=1)).astimezone(UTC).isoformat()
        results = []
        for host, agent in (("east", "a1"), ("west", "a3")):
            path = hosts[host]
            done = ghostrunner("run", "tick", "--agent", agent, "--at", at, "--config", str(path), "--dry-run", cwd=path.parent)
            assert done.returncode == 0, done.stdout + done.stderr
            results.append(json.loads(done.stdout))
        assert [(result["outcome"], result.get("reason")) for result in results] == [("skipped", None), ("skipped", "budget")]
        assert len(server.requests) == 1
    config = load_config(hosts["west"])
    assert FleetBudgets(config).used() == (600.0, 0.0)
    refused = RunIdentity.of("a3", config.routines["tick"], fires[0], config.timezone)
    assert redis_server.client().hget(LEDGER_PREFIX + "skipped", refused.client_key) is None
