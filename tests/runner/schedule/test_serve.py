"""`ghostrunner serve` as a real process: catch-up after downtime, clean SIGTERM, crashed workers, one scheduler."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from journal import Journal
from runner.run.simulate import simulate
from runner.schedule.scheduler import missed_slots
from runner.settings.config import load_config
from tests._support import (
    GATED,
    NIGHTLY,
    SIMPLE_AGENT,
    LineReader,
    catchup_planned_at,
    entries,
    event_named,
    ghostrunner,
    script,
    start_serve,
    wait_for_marker,
    with_key,
    write_config,
)


def _stop(process: subprocess.Popen[str], reader: LineReader) -> list[dict]:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    return reader.drain()


def _downtime_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, SIMPLE_AGENT, runner='catchup_grace = "8d"\n', wall_clock=True)


def test_missed_slots_after_downtime_are_one_per_pair(tmp_path: Path) -> None:
    """After ten days of downtime only the most recent slot of each routine within the grace window is due."""
    config = load_config(_downtime_config(tmp_path))
    now = datetime(2026, 9, 9, 13, 30, tzinfo=config.timezone)
    simulate(config, ["motoko"], now - timedelta(days=20), now - timedelta(days=10))
    missed = {m.routine: m.slot for m in missed_slots(config, now)}
    assert missed == {"pulse-4h": "2026-09-09T12", "evening": "2026-09-08", "digest": "2026-W36"}


def test_serve_catches_up_each_pair_exactly_once(tmp_path: Path, processes: list) -> None:
    """A serve started after downtime runs the latest missed slot of each (agent, routine) once; a restart runs none."""
    path = _downtime_config(tmp_path)
    config = load_config(path)
    now = datetime.now(config.timezone)
    simulate(config, ["motoko"], now - timedelta(days=20), now - timedelta(days=10))
    before = len(entries(tmp_path / "journal"))
    # What was due is judged against the journal as serve found it, at the moment serve planned at (a fire may
    # come between the clock read above and serve's start); serve's catch-up writes into the journal meanwhile.
    shutil.copytree(tmp_path / "journal", tmp_path / "as-found")
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    planned = catchup_planned_at(reader)
    as_found = replace(config, agents={"motoko": replace(config.agent("motoko"), journal_root=tmp_path / "as-found")})
    due = {m.routine: m for m in missed_slots(as_found, planned)}
    assert {"pulse-4h", "evening"} <= set(due)  # the digest too, when its window holds simulated entries
    reader.wait(event_named("scheduler.started"))
    outcomes = {}
    for _ in due:
        finished = reader.wait(event_named("run.finished"))
        outcomes[finished["client_key"]] = finished["outcome"]
    events = _stop(process, reader)
    catchups = Counter(e["routine"] for e in events if e["event"] == "scheduler.catchup")
    assert catchups == dict.fromkeys(due, 1)
    assert set(outcomes) == {f"motoko:{m.routine}:{m.slot}" for m in due.values()}
    appended = [key for key, outcome in outcomes.items() if outcome == "appended"]
    assert set(outcomes.values()) <= {"appended", "skipped"}  # skipped: a digest whose week was all downtime
    assert len(entries(tmp_path / "journal")) == before + len(appended)  # never a burst of every missed pulse
    for key in appended:
        assert len(with_key(tmp_path / "journal", key)) == 1

    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    reader.wait(event_named("scheduler.started"))
    events = _stop(process, reader)
    # Nothing is caught up again: an appended slot has its entry, and a skipped one (a digest whose week was all
    # downtime has nothing to digest) was decided by its run, so it is neither run again nor recorded missed.
    assert [e for e in events if e["event"] == "scheduler.catchup"] == []
    skipped = {key.split(":", 1)[1] for key, outcome in outcomes.items() if outcome == "skipped"}
    missed = {f"{e['routine']}:{e['slot']}" for e in events if e["event"] == "scheduler.missed"}
    assert not skipped & missed


def _gated_serve_config(tmp_path: Path, shutdown_timeout: str) -> Path:
    argv = script(tmp_path, "gated.py", GATED)
    body = NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "60s" }}
    """
    return write_config(tmp_path, body, runner=f'catchup_grace = "2d"\nshutdown_timeout = "{shutdown_timeout}"\n', wall_clock=True)


def test_sigterm_during_a_run_lets_it_finish_and_exits_zero(tmp_path: Path, processes: list) -> None:
    """SIGTERM while a run is in its backend call waits for it: the entry is complete and serve exits 0."""
    path = _gated_serve_config(tmp_path, "60s")
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    started = reader.wait(event_named("run.started"))
    wait_for_marker(tmp_path, "arrived-")
    process.send_signal(signal.SIGTERM)
    stopping = reader.wait(event_named("scheduler.stopping"))
    assert stopping["in_flight"] == 1 and stopping["signal"] == "SIGTERM"
    (tmp_path / "release").touch()
    assert process.wait(60) == 0
    events = reader.drain()
    finished = [e for e in events if e["event"] == "run.finished"]
    assert [e["outcome"] for e in finished] == ["appended"]
    [entry] = with_key(tmp_path / "journal", started["client_key"])
    with Journal(tmp_path / "journal") as journal:
        assert journal.get(entry.id).voice.startswith("written by")


def test_sigterm_past_the_shutdown_timeout_kills_the_run_and_writes_nothing(tmp_path: Path, processes: list) -> None:
    """A run still going at the shutdown timeout is killed, logged as failed, leaves no entry, and serve exits 0."""
    path = _gated_serve_config(tmp_path, "1s")
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    started = reader.wait(event_named("run.started"))
    wait_for_marker(tmp_path, "arrived-")
    try:
        events = _stop(process, reader)
    finally:
        (tmp_path / "release").touch()
    assert [e["outcome"] for e in events if e["event"] == "run.finished"] == ["failed"]
    assert [e["killed"] for e in events if e["event"] == "scheduler.stopped"] == [1]
    assert with_key(tmp_path / "journal", started["client_key"]) == []


def test_crashed_worker_is_reported_and_the_scheduler_goes_on(tmp_path: Path, processes: list) -> None:
    """A worker killed by SIGKILL is logged as crashed with a failed run.finished, and the other runs still complete."""
    killer = script(tmp_path, "killer.py", "import os, signal, sys\nsys.stdin.read()\nos.kill(os.getppid(), signal.SIGKILL)\n")
    body = NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps(killer)} }}

    [agents.batou]
    persona = "motoko.toml"
    routines = ["nightly"]
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "2d"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    crashed = reader.wait(event_named("scheduler.worker_crashed"))
    assert crashed["agent"] == "motoko" and "SIGKILL" in crashed["error"]
    reader.wait(event_named("run.finished", agent="batou", outcome="appended"))
    assert process.poll() is None
    events = _stop(process, reader)
    finished = [e for e in events if e["event"] == "run.finished"]
    assert sorted((e["agent"], e["outcome"]) for e in finished) == [("batou", "appended"), ("motoko", "failed")]


def test_a_second_scheduler_is_refused(tmp_path: Path, processes: list) -> None:
    """While one serve holds the deployment lock another exits 75 with one line on stderr."""
    path = write_config(tmp_path, SIMPLE_AGENT, runner='catchup_grace = "0s"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    reader.wait(event_named("scheduler.started"))
    second = ghostrunner("serve", "--config", str(path), cwd=tmp_path)
    assert second.returncode == 75
    assert second.stderr.startswith("ghostrunner: error: another ghostrunner scheduler holds")
    _stop(process, reader)


#: serve, started so that a process-directed signal can only land on a thread other than the main one. In the
#: wild a signal lands there when that thread is starting a worker process at the moment it comes; here the main
#: thread, and every thread it goes on to start, blocks the signals, and only an idle thread started first can take them.
_SIGNALS_ON_ANOTHER_THREAD = """
import signal, sys, threading
from runner.cli.cli import main
threading.Thread(target=threading.Event().wait, name="catcher", daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
sys.argv = ["ghostrunner", "serve", "--config", sys.argv[1]]
main()
"""


def test_signals_taken_by_another_thread_still_reload_and_stop_serve(tmp_path: Path, processes: list) -> None:
    """A SIGHUP or SIGTERM the kernel hands to another of serve's threads wakes the sleeping scheduler all the same.

    Python runs the handler on the main thread only once that thread runs again; serve's loop sleeps until its
    next job, so without a wake-up a reload or a stop would wait for that job, hours later.
    """
    path = write_config(tmp_path, SIMPLE_AGENT, runner='catchup_grace = "0s"\n', wall_clock=True)
    process = subprocess.Popen([sys.executable, "-c", _SIGNALS_ON_ANOTHER_THREAD, str(path)], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.append(process)
    reader = LineReader(process)
    reader.wait(event_named("scheduler.started"))
    for _ in range(3):
        process.send_signal(signal.SIGHUP)
        reader.wait(event_named("scheduler.reloaded"), timeout=20)
    events = _stop(process, reader)
    assert [event["signal"] for event in events if event["event"] == "scheduler.stopping"] == ["SIGTERM"]
