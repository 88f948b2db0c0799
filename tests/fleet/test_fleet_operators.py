"""A Celery operator's habits work on the fleet: ``celery -A runner.fleet.celery_app``, task events, revoke, a worker's stop.

One real worker of one shard, whose single pool process is held by a run
while a second task waits in Redis: Celery's own command line revokes the
second, an event receiver watches both, and the worker's log says what
became of each, in JSON lines, through to its stop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.fleet.app import RUN_TASK, fleet_app
from runner.fleet.record import RunsRecord
from runner.settings.config import load_config
from tests._backend_group import assert_group_ends, lingering_program, started_pids
from tests._redis import RedisServer
from tests._support import ghostrunner, script, wait_for_path
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet

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


AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


def _held_agent(tmp_path: Path, argv: list[str] | None = None) -> str:
    argv = argv or [*script(tmp_path, "held.py", HELD_BACKEND), str(tmp_path)]
    return f"""
[agents.motoko]
persona = "motoko.toml"
routines = ["tick"]
backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "15s", attempts = 1 }}
"""


class EventWatcher:
    """Celery's event receiver on a thread, as ``celery events`` and Flower run it: every event, in order."""

    def __init__(self, app: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._seen = threading.Condition()
        self._connection = app.connection_for_read()
        self._receiver = app.events.Receiver(self._connection, handlers={"*": self._note})
        self._thread = threading.Thread(target=self._receiver.capture, kwargs={"limit": None, "timeout": None, "wakeup": False}, daemon=True)
        self._thread.start()

    def _note(self, event: dict[str, Any]) -> None:
        with self._seen:
            self.events.append(event)
            self._seen.notify_all()

    def wait(self, kind: str, uuid: str | None = None, timeout: float = 60) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((event for event in self.events if event["type"] == kind and uuid in (None, event.get("uuid"))), None)

        with self._seen:
            assert self._seen.wait_for(found, timeout), f"no {kind} event within {timeout} s: {[event['type'] for event in self.events]}"
            event = found()
            assert event is not None
            return event

    def close(self) -> None:
        self._receiver.should_stop = True
        self._thread.join(30)
        self._connection.release()


def test_celerys_tools_watch_and_revoke_and_a_revoked_task_is_its_slots_missed_line(tmp_path: Path, redis_server: RedisServer) -> None:
    """Events for Flower, a revoke from Celery's command line recorded as scheduler.missed, no result stored, the stop logged."""
    schedule, fires = minutes_back(2)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _held_agent(tmp_path)))
    app = fleet_app(load_config(config))
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    watcher: EventWatcher | None = None
    try:
        worker.wait_for("scheduler.started", role="worker")
        watcher = EventWatcher(app)
        watcher.wait("worker-heartbeat")  # the receiver listens: what the worker sends from now on reaches it
        for task_id, fire in (("first", fires[0]), ("second", fires[1])):
            app.send_task(RUN_TASK, args=["motoko", "tick", fire.isoformat()], queue="ghostrunner.east", task_id=task_id)
        wait_for_path(tmp_path / f"started-{fires[0]:%Y-%m-%dT%H-%M}")  # its one pool process holds the first; the second waits in Redis
        revoke = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "runner.fleet.celery_app", "control", "revoke", "second"],
            env={**os.environ, "GHOSTRUNNER_CONFIG": str(config)}, capture_output=True, text=True, timeout=120, check=False,
        )
        assert revoke.returncode == 0, revoke.stderr
        worker.log.wait(lambda event: str(event.get("event", "")).startswith("Tasks flagged as revoked"))
        (tmp_path / "release").touch()
        finished = worker.wait_for("run.finished")
        missed = worker.wait_for("scheduler.missed")
        for kind, uuid in (("task-received", "first"), ("task-started", "first"), ("task-succeeded", "first"), ("task-revoked", "second")):
            watcher.wait(kind, uuid)
    finally:
        if watcher is not None:
            watcher.close()
        code = worker.stop()
    assert code == 0
    assert (finished["scheduled"], finished["outcome"]) == (fires[0].isoformat(), "appended")
    assert (missed["agent"], missed["routine"], missed["slot"], missed["reason"]) == ("motoko", "tick", f"{fires[1]:%Y-%m-%dT%H:%M}", "revoked")
    assert missed["scheduled"] == fires[1].isoformat()
    # Nothing reads a run's result: none is stored. (The revoke's own mark is Celery's control command's, expiring after keep_runs.)
    assert redis_server.client().keys("celery-task-meta-*") == ["celery-task-meta-second"]
    assert [line for line in worker.log.raw if line.strip() and not line.startswith("{")] == []  # Celery's own lines too are JSON
    lines = [json.loads(line) for line in worker.log.raw if line.strip()]
    ending = [(line["event"], line.get("signal"), line.get("in_flight"), line.get("killed")) for line in lines if line["event"].startswith("scheduler.stop")]
    assert ending == [("scheduler.stopping", "SIGTERM", 0, None), ("scheduler.stopped", None, None, 0)]


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_run_revoked_with_terminate_has_one_run_finished_failed(tmp_path: Path, redis_server: RedisServer, signal_name: str) -> None:
    """On SIGTERM the run logs its own end; on SIGKILL it cannot and the worker logs it: one run.finished, failed, either way.
    Neither leaves the backend (nor the child it started) running."""
    schedule, fires = minutes_back(1)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, _held_agent(tmp_path, lingering_program(tmp_path))))
    app = fleet_app(load_config(config))
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        app.send_task(RUN_TASK, args=["motoko", "tick", fires[0].isoformat()], queue="ghostrunner.east", task_id="held")
        wait_for_path(tmp_path / f"started-{fires[0]:%Y-%m-%dT%H-%M}")
        pids = started_pids(tmp_path)
        app.control.revoke("held", terminate=True, signal=signal_name)
        finished = worker.wait_for("run.finished")
        assert_group_ends(pids)
    finally:
        assert worker.stop() == 0
    lines = [json.loads(line) for line in worker.log.raw if line.strip()]
    assert [line["outcome"] for line in lines if line["event"] == "run.finished"] == ["failed"]
    assert finished["scheduled"] == fires[0].isoformat()
    assert [line["event"] for line in lines if line["event"] == "scheduler.worker_crashed"] == (["scheduler.worker_crashed"] if signal_name == "SIGKILL" else [])


def test_fleet_purge_empties_a_shards_queue_and_records_each_slot_missed(tmp_path: Path, redis_server: RedisServer) -> None:
    """Where celery purge leaves a silent gap, ghostrunner fleet purge records each slot it drops: scheduler.missed, reason purged."""
    schedule, fires = minutes_back(3)
    config = write_fleet(tmp_path, routine("tick", schedule) + fleet_body(redis_server.url, {"east": ["motoko"]}, AGENT))
    app = fleet_app(load_config(config))
    for fire in fires:  # published by the beat; no worker of the shard took them
        app.send_task(RUN_TASK, args=["motoko", "tick", fire.isoformat()], queue="ghostrunner.east")
    app.send_task("someone.elses", args=[1], queue="ghostrunner.east")
    purged = ghostrunner("--config", str(config), "fleet", "purge", "--shard", "east")
    assert purged.returncode == 0, purged.stderr
    assert "purged 3 slot(s) from shard 'east'" in purged.stdout and "1 other message(s)" in purged.stdout
    assert redis_server.client().llen("ghostrunner.east") == 0
    record = [json.loads(line) for line in RunsRecord(redis_server.url, None, timedelta(days=1)).lines()]
    missed = [(line["slot"], line["reason"]) for line in record if line["event"] == "scheduler.missed"]
    assert missed == [(f"{fire:%Y-%m-%dT%H:%M}", "purged") for fire in fires]
    now = (fires[-1] + timedelta(seconds=30)).isoformat()
    status = ghostrunner("--config", str(config), "status", "--fleet", "--json", "--now", now, "--grace", "10s")
    assert [pair["state"] for pair in json.loads(status.stdout)["pairs"]] == ["missed"], status.stdout
    unknown = ghostrunner("--config", str(config), "fleet", "purge", "--shard", "north")
    assert unknown.returncode == 2 and "north" in unknown.stderr and unknown.stderr.count("\n") == 1
