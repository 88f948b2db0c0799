"""The concurrency cap of serve: real worker processes, never more than max_concurrent_runs at once, every slot run once."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.cron.slots import cron_trigger, latest_fire_time
from runner.errors import ConfigError
from runner.run.contract import RunIdentity
from runner.schedule.run_queue import QueuedRun, RunQueue
from runner.settings.config import cpu_count, load_config
from tests._support import (
    SIMPLE_AGENT,
    TEST_ZONE,
    catchup_planned_at,
    event_named,
    ghostrunner,
    script,
    start_serve,
    with_key,
    write_config,
)

#: A command backend that records, under a lock, how many worker processes its serve has at its start and end, then waits
#: at a gate (the file "release") and replies. Its worker is its parent; serve is the worker's parent.
RECORDING = """
import fcntl, json, os, sys, time
request = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
worker = os.getppid()
with open("/proc/%d/stat" % worker) as stat:
    serve = int(stat.read().rsplit(")", 1)[1].split()[1])

def workers():
    found = set()
    for task in os.listdir("/proc/%d/task" % serve):
        with open("/proc/%d/task/%s/children" % (serve, task)) as children:
            found.update(children.read().split())
    return len(found)

def record(what):
    with open(os.path.join(here, "runs.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(os.path.join(here, "runs.log"), "a") as log:
            log.write(json.dumps({"what": what, "key": request["client_key"], "workers": workers()}) + "\\n")

record("start")
open(os.path.join(here, "arrived-%d" % os.getpid()), "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(here, "release")) and time.monotonic() < deadline:
    time.sleep(0.02)
record("end")
print(json.dumps({"voice": "written for " + request["client_key"], "theme": "t"}))
"""

AGENTS = [f"agent{n}" for n in range(6)]


def _capped_config(tmp_path: Path) -> Path:
    argv = script(tmp_path, "recording.py", RECORDING)
    # Two yearly routines: each agent's latest slot of both is due (within the catch-up window) when serve starts.
    body = """
    [routines.newyear]
    kind = "note"
    schedule = "0 0 1 1 *"
    slot = "day"
    question = "what happened?"
    prompt = "Write a note."

    [routines.newyear-noon]
    kind = "note"
    schedule = "0 12 1 1 *"
    slot = "day"
    question = "what happened?"
    prompt = "Write a note."
    """
    for agent in AGENTS:
        body += f"""
    [agents.{agent}]
    routines = ["newyear", "newyear-noon"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "60s" }}
    """
    return write_config(tmp_path, body, runner='catchup_grace = "400d"\nmax_concurrent_runs = 2\nrun_timeout = "2m"\n', wall_clock=True)


def _latest(schedule: str, at: datetime) -> datetime:
    latest = latest_fire_time(cron_trigger(schedule, TEST_ZONE), at)
    assert latest is not None
    return latest


def _wait_for_arrivals(directory: Path, count: int, timeout: float = 60) -> None:
    """Wait until *count* helpers have written their arrival marker."""
    deadline = time.monotonic() + timeout
    while len([p for p in directory.iterdir() if p.name.startswith("arrived-")]) < count:
        assert time.monotonic() < deadline, f"fewer than {count} helpers arrived within {timeout} s"
        time.sleep(0.02)


def _serve_workers(pid: int) -> int:
    found: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update((task / "children").read_text().split())
    return len(found)


def test_twelve_due_pairs_with_a_cap_of_two_never_run_more_than_two_workers(tmp_path: Path, processes: list) -> None:
    """12 pairs due at once under max_concurrent_runs = 2: 2 workers go, 10 wait (logged), and each slot runs exactly once."""
    path = _capped_config(tmp_path)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    planned = catchup_planned_at(reader)  # the slots due are those of serve's start, not of the clock when the test checks them
    queued = [reader.wait(event_named("scheduler.run_queued")) for _ in range(10)]
    _wait_for_arrivals(tmp_path, 2)
    # Two helpers wait at the gate: serve has exactly their two workers, the other ten runs wait.
    assert _serve_workers(process.pid) == 2
    assert {e["reason"] for e in queued} == {"max_concurrent_runs runs are going"}
    assert [e["waiting"] for e in queued] == list(range(1, 11)) and {e["running"] for e in queued} == {2}
    (tmp_path / "release").touch()
    finished = [reader.wait(event_named("run.finished"), timeout=120) for _ in range(12)]
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    events = reader.drain()

    records = [json.loads(line) for line in (tmp_path / "runs.log").read_text().splitlines()]
    assert max(record["workers"] for record in records) == 2  # measured by every helper, at its start and at its end
    assert Counter(record["what"] for record in records) == {"start": 12, "end": 12}
    config = load_config(path)
    keys = {RunIdentity.of(agent, config.routines[routine], _latest(config.routines[routine].schedule, planned), TEST_ZONE).client_key
            for agent in AGENTS for routine in ("newyear", "newyear-noon")}
    assert Counter(record["key"] for record in records if record["what"] == "start") == dict.fromkeys(keys, 1)
    assert sorted(e["client_key"] for e in finished) == sorted(keys) and {e["outcome"] for e in finished} == {"appended"}
    assert {e["client_key"] for e in queued} < keys
    for key in keys:
        assert len(with_key(tmp_path / "journal", key)) == 1
    assert [e["waiting"] for e in events if e["event"] == "scheduler.stopping"] == [0]


def _queued(agent: str, routine: str, slot_hour: int) -> QueuedRun:
    from routines import BUILTIN_ROUTINES

    scheduled = datetime(2026, 9, 9, slot_hour, tzinfo=UTC)
    return QueuedRun(RunIdentity.of(agent, BUILTIN_ROUTINES[routine], scheduled, UTC), scheduled, "cron")


def test_the_queue_starts_in_order_one_run_per_pair_and_never_a_slot_twice() -> None:
    """Under a limit of 2, runs start first in first out; a pair's second run waits for its first; a slot is refused twice."""
    started: list[str] = []
    gates: dict[str, threading.Event] = {}
    changed = threading.Condition()
    going = [0, 0]  # now, most

    def run(queued: QueuedRun) -> None:
        with changed:
            started.append(queued.identity.client_key)
            going[0] += 1
            going[1] = max(going)
            gate = gates.setdefault(queued.identity.client_key, threading.Event())
            changed.notify_all()
        gate.wait(30)
        with changed:
            going[0] -= 1

    queue = RunQueue(2, run, started=False)
    runs = [_queued("a", "pulse-4h", 0), _queued("a", "pulse-4h", 4), _queued("b", "pulse-4h", 0), _queued("c", "pulse-4h", 0)]
    assert all(queue.submit(queued) for queued in runs)
    assert not queue.submit(_queued("b", "pulse-4h", 0))  # the same slot again
    queue.open()
    keys = [queued.identity.client_key for queued in runs]

    def release(key: str) -> None:
        with changed:
            gates.setdefault(key, threading.Event()).set()

    def wait_started(count: int) -> None:
        with changed:
            assert changed.wait_for(lambda: len(started) >= count, 30), started

    wait_started(2)
    assert started == [keys[0], keys[2]]  # a's second run keeps its place behind a's first; b may start
    release(keys[0])
    wait_started(3)
    assert started[2] == keys[1]  # a's second run was first in line once its pair was free
    for key in keys:
        release(key)
    assert queue.wait_idle(30)
    assert started == [keys[0], keys[2], keys[1], keys[3]] and going[1] == 2


@pytest.mark.parametrize("value", ["0", "1025", "'two'", "true", "1.5"])
def test_max_concurrent_runs_is_validated(tmp_path: Path, value: str) -> None:
    """A max_concurrent_runs that is not an integer from 1 to 1024 is refused, naming the key and the value."""
    path = write_config(tmp_path, SIMPLE_AGENT, runner=f"max_concurrent_runs = {value}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: runner.max_concurrent_runs: expected an integer from 1 to 1024, got ")):
        load_config(path)
    result = ghostrunner("serve", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 78 and "runner.max_concurrent_runs" in result.stderr and result.stderr.count("\n") == 1


def test_max_concurrent_runs_defaults_to_the_cpu_count(tmp_path: Path) -> None:
    """Without the option, serve runs as many workers at once as this process has CPUs to run on."""
    assert load_config(write_config(tmp_path, SIMPLE_AGENT)).max_concurrent_runs == cpu_count() >= 1
