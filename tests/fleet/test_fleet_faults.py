"""The fleet's promises under real faults: a worker or beat killed with SIGKILL, Redis restarted, a shard's two workers, a bad journal.

Every slot ends with exactly one entry, counted from the entry files; none
is run twice into the journal, none is lost without a record that says so.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.fleet.app import RUN_TASK, fleet_app, fleet_of
from runner.fleet.batch import FIRES_PER_BATCH
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests._support import ghostrunner, script, wait_for_path
from tests.fleet._fleet import FleetProcess, entries_by_key, fleet_body, minutes_back, rewind, routine, write_fleet

#: A backend that says it started (a file per slot), then answers only once the test creates ``release``.
HELD_BACKEND = """
    import json, pathlib, sys, time
    request = json.load(sys.stdin)
    here = pathlib.Path(sys.argv[1])
    (here / ("started-" + request["slot"].replace(":", "-"))).touch()
    while not (here / "release").exists():
        time.sleep(0.05)
    print(json.dumps({"voice": "A note for " + request["slot"], "theme": "held"}))
"""


def _held_agent(tmp_path: Path, name: str = "motoko") -> str:
    argv = [*script(tmp_path, "held.py", HELD_BACKEND), str(tmp_path)]
    return f"""
[agents.{name}]
persona = "motoko.toml"
routines = ["tick"]
backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "15s", attempts = 1 }}
"""


@pytest.mark.parametrize("killed", ["the whole worker", "the worker's main process"])
def test_a_worker_killed_mid_run_leaves_its_slot_one_entry(tmp_path: Path, redis_server: RedisServer, killed: str) -> None:
    schedule, fires = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _held_agent(tmp_path)))
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    beat = FleetProcess(config, "beat")
    first = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    second: FleetProcess | None = None
    try:
        beat.wait_for("scheduler.started", role="beat")
        first.wait_for("scheduler.started", role="worker")
        rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
        wait_for_path(tmp_path / f"started-{slot.replace(':', '-')}")  # the run is in its backend call
        if killed == "the whole worker":
            first.kill_all()
        else:
            first.process.send_signal(signal.SIGKILL)  # its pool process goes on with the run, unsupervised
            first.process.wait(30)
        second = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
        second.wait_for("scheduler.started", role="worker")
        (tmp_path / "release").touch()
        finished = second.wait_for("run.finished", timeout=120, slot=slot)  # delivered again once visibility_timeout (25 s) passed
    finally:
        for process in (second, first, beat):
            if process is not None:
                process.stop()
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{slot}": 1}
    expected = {"appended"} if killed == "the whole worker" else {"duplicate", "appended"}
    assert finished["outcome"] in expected


@pytest.mark.parametrize("killed", ["before the fires", "after it published the first"])
def test_a_standby_beat_takes_over_from_a_killed_one_and_each_fire_ends_one_entry(tmp_path: Path, redis_server: RedisServer, killed: str) -> None:
    schedule, fires = minutes_back(3)
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, agents))
    active = FleetProcess(config, "beat")
    active.wait_for("fleet.beat_active")
    standby = FleetProcess(config, "beat")
    worker = FleetProcess(config, "worker", "--shard", "east")
    try:
        standby.wait_for("fleet.beat_standby")
        worker.wait_for("scheduler.started", role="worker")
        if killed == "before the fires":
            active.kill_all()  # its lock stays until it expires: the standby waits that long
            rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))  # fires the dead beat never handled
        else:
            rewind(redis_server, "motoko", "tick", schedule, fires[0] - timedelta(minutes=1))
            active.wait_for("scheduler.run_queued", scheduled=fires[0].isoformat())
            active.kill_all()  # maybe before it published the other two fires, maybe after
        standby.wait_for("fleet.beat_active", timeout=60)
        runs = _runs_until_appended(worker, {fire.isoformat() for fire in fires})
    finally:
        for process in (worker, standby, active):
            process.stop()
    logged_by = {beat: [event["scheduled"] for event in beat.log.drain() if event.get("event") == "scheduler.run_queued"]
                 for beat in (active, standby)}
    published = logged_by[active] + logged_by[standby]
    assert len(published) == len(set(published)) and set(published) <= {fire.isoformat() for fire in fires}  # no beat logged a fire twice
    if killed == "before the fires":
        assert logged_by[active] == []
    # A batch's tasks and their notes are written by one script: killed at any moment, the active beat left no fire
    # queued and not noted for the standby to publish again, so no run found its slot's entry already there.
    appended = [run["scheduled"] for run in runs if run["outcome"] == "appended"]
    again = [run for run in runs if run["outcome"] != "appended"]
    assert sorted(appended) == [fire.isoformat() for fire in fires]
    assert again == []
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{fire:%Y-%m-%dT%H:%M}": 1 for fire in fires}


def test_a_beat_killed_between_the_batches_of_a_pass_leaves_each_fire_queued_once(tmp_path: Path, redis_server: RedisServer) -> None:
    """A pass of many batches, its beat killed once the first is in Redis: the next beat queues the rest, and no fire twice.

    No worker runs: the shard's queue itself is read, so that a fire queued twice is seen even where the
    run's client key would have kept the journal right.
    """
    agents, count = [f"agent{number:03d}" for number in range(300)], 8
    schedule, fires = minutes_back(count)
    body = "".join(f'[agents.{agent}]\npersona = "motoko.toml"\nroutines = ["tick"]\n' for agent in agents)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": agents}, body))
    queue = fleet_of(load_config(config)).queue_of("east")
    expected = {f"{agent}:tick:{fire:%Y-%m-%dT%H:%M}@{fire.isoformat()}" for agent in agents for fire in fires}
    assert len(expected) > 4 * FIRES_PER_BATCH  # a pass of several batches
    client = redis_server.client()
    first = FleetProcess(config, "beat")
    try:
        first.wait_for("scheduler.started", role="beat")
        rewind(redis_server, agents, "tick", schedule, fires[0] - timedelta(minutes=1))
        first.wait_for("scheduler.run_queued")  # logged once its batch is in Redis: the next one is being made
        first.kill_all()
    finally:
        first.stop()
    killed_with = client.llen(queue)
    assert 0 < killed_with < len(expected)  # killed in the middle of the pass, with a batch in Redis and others not
    second = FleetProcess(config, "beat")
    try:
        second.wait_for("fleet.beat_active")  # once the dead beat's lock has lapsed
        while client.llen(queue) < len(expected):
            second.wait_for("scheduler.run_queued")
    finally:
        second.stop()
    queued = [json.loads(message)["headers"]["id"] for message in client.lrange(queue, 0, -1)]
    assert len(queued) == len(expected) and set(queued) == expected  # each fire once: none lost, none queued twice
    fields = ("year", "month", "day", "hour", "minute")
    notes = {tuple(json.loads(client.hget(f"ghostrunner:beat:{agent}:tick", "meta") or "{}")["last_run_at"][field] for field in fields)
             for agent in agents}
    assert notes == {tuple(getattr(fires[-1].astimezone(UTC), field) for field in fields)}  # and each pair noted at its last fire


def _runs_until_appended(worker: FleetProcess, fires: set[str], timeout: float = 60) -> list[dict[str, Any]]:
    """The worker's ``run.finished`` events, up to the one that leaves every fire in *fires* appended."""
    runs: list[dict[str, Any]] = []
    while not fires <= {run["scheduled"] for run in runs if run["outcome"] == "appended"}:
        runs.append(worker.wait_for("run.finished", timeout=timeout))
    return runs


def test_redis_restarted_while_slots_are_due_loses_none_and_doubles_none(tmp_path: Path, durable_redis: RedisServer) -> None:
    schedule, fires = minutes_back(6)
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(durable_redis.url, {"east": ["motoko"]}, agents))
    beat = FleetProcess(config, "beat")
    worker = FleetProcess(config, "worker", "--shard", "east")
    try:
        beat.wait_for("scheduler.started", role="beat")
        worker.wait_for("scheduler.started", role="worker")
        rewind(durable_redis, "motoko", "tick", schedule, fires[2])  # three fires before this one are done (below), three are due
        durable_redis.stop()  # while the beat ticks and the worker waits for tasks
        beat.wait_for("fleet.broker_unreachable")
        durable_redis.start()
        runs = _runs_until_appended(worker, {fire.isoformat() for fire in fires[3:]}, timeout=120)
    finally:
        worker.stop()
        beat.stop()
    # A publish whose reply Redis took down with it is not noted, and so published again: that run writes nothing.
    again = [run for run in runs if run["outcome"] != "appended"]
    assert sorted(run["scheduled"] for run in runs if run["outcome"] == "appended") == [fire.isoformat() for fire in fires[3:]]
    assert len(again) <= 1 and all(run["outcome"] in {"duplicate", "busy"} for run in again)
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{fire:%Y-%m-%dT%H:%M}": 1 for fire in fires[3:]}
    now = (fires[-1] + timedelta(seconds=30)).isoformat()
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", now, "--grace", "10s")
    assert status.returncode == 0, status.stdout


def test_two_workers_of_one_shard_run_a_slot_published_twice_into_one_entry(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    config_path = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _held_agent(tmp_path)))
    config = load_config(config_path)
    slot = f"{fires[0]:%Y-%m-%dT%H:%M}"
    workers = [FleetProcess(config_path, "worker", "--shard", "east", "--concurrency", "1") for _ in range(2)]
    try:
        for worker in workers:
            worker.wait_for("scheduler.started", role="worker")
        app = fleet_app(config)
        # A beat that published the fire, died before it noted so, and its successor publishing it again; this test reads
        # each run's result back, so it asks for them to be stored (the fleet stores none of its own: nothing reads them).
        sent = [app.send_task(RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id=f"copy-{copy}",
                              ignore_result=False)
                for copy in range(2)]
        wait_for_path(tmp_path / f"started-{slot.replace(':', '-')}")
        (tmp_path / "release").touch()
        outcomes = sorted(result.get(timeout=90)["outcome"] for result in sent)  # each run's result, from the result store
    finally:
        for worker in workers:
            worker.stop()
    assert entries_by_key(tmp_path / "journal" / "motoko") == {f"motoko:tick:{slot}": 1}
    assert outcomes.count("appended") == 1 and set(outcomes) <= {"appended", "duplicate", "busy"}


def test_an_agent_whose_journal_is_unusable_fails_with_the_reason_and_the_others_go_on(tmp_path: Path, redis_server: RedisServer) -> None:
    schedule, fires = minutes_back(1)
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko", "batou"]}, agents))
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "batou").write_text("not a journal\n", encoding="utf-8")
    beat = FleetProcess(config, "beat")
    worker = FleetProcess(config, "worker", "--shard", "east")
    try:
        unusable = worker.wait_for("scheduler.agent_unusable", agent="batou")
        beat.wait_for("scheduler.started", role="beat")
        for agent in ("motoko", "batou"):
            rewind(redis_server, agent, "tick", schedule, fires[0] - timedelta(minutes=1))
        runs = {event["agent"]: event for event in (worker.wait_for("run.finished") for _ in range(2))}
    finally:
        worker.stop()
        beat.stop()
    assert runs["motoko"]["outcome"] == "appended"
    assert runs["batou"]["outcome"] == "failed" and "journal" in runs["batou"]["error"]
    assert str(tmp_path / "journal" / "batou") in unusable["journal_root"]
    now = (fires[-1] + timedelta(seconds=30)).isoformat()
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", now, "--grace", "10s")
    states = {pair["agent"]: pair["state"] for pair in json.loads(status.stdout)["pairs"]}
    assert states == {"motoko": "ok", "batou": "failed"} and status.returncode == 1
