"""One backend call per slot at a time: real `ghostrunner run` processes racing on one slot against a real HTTP server."""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ConfigError
from runner.settings.config import load_config
from tests._chat_server import ChatServer, Reply
from tests._support import SIMPLE_AGENT, ghostrunner, with_key, write_config

KEY = "motoko:evening:2026-09-05"
REPLY = {"voice": "The harbour lights came on one by one.", "theme": "harbour at dusk", "tags": ["harbour"]}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    """A chat-completions server on 127.0.0.1 that holds each request until the test releases it."""
    with ChatServer(default=Reply(json.dumps(REPLY)), gated=True) as instance:
        yield instance


class _Run:
    """A real `ghostrunner run` of motoko's evening slot; its stderr log events are read on a thread into a shared queue."""

    def __init__(self, config: Path, events: queue.Queue[dict[str, Any]], processes: list[subprocess.Popen[str]]) -> None:
        argv = [shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config)]
        self.process = subprocess.Popen(argv, cwd=config.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        processes.append(self.process)  # reaped should the test fail half-way
        self.log: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(events,), daemon=True)
        self._thread.start()

    def _pump(self, events: queue.Queue[dict[str, Any]]) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            events.put(json.loads(line))

    def result(self) -> tuple[int, dict[str, Any]]:
        assert self.process.stdout is not None
        with self.process.stdout:
            out = self.process.stdout.read()
        code = self.process.wait(60)
        self._thread.join(30)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code, json.loads(out)


def _config(tmp_path: Path, url: str, wait: str) -> Path:
    body = f"""
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["evening"]
    backend = {{ type = "openai", base_url = "{url}", model = "m", timeout = "60s" }}
    """
    return write_config(tmp_path, body, runner=f'slot_lock_wait = "{wait}"\n')


def _wait_for(events: queue.Queue[dict[str, Any]], name: str, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while len(found) < count:
        event = events.get(timeout=60)
        if event["event"] == name:
            found.append(event)
    return found


def test_six_racing_runs_make_one_backend_call_and_the_losers_report_duplicate(tmp_path: Path, server: ChatServer, processes: list) -> None:
    """Six runs of one slot at once: one asks the server and appends; the five that waited at the slot lock find its entry, asking nothing."""
    config = _config(tmp_path, server.url, "60s")
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    runs = [_Run(config, events, processes) for _ in range(6)]
    try:
        assert server.arrived.wait(60)  # one run is inside its backend call, holding the slot lock
        waiting = _wait_for(events, "run.waiting", 5)  # and every other one is waiting for that lock
    finally:
        server.release.set()
    results = [run.result() for run in runs]
    assert sorted(result["outcome"] for _, result in results) == ["appended"] + ["duplicate"] * 5
    assert [code for code, _ in results] == [0] * 6
    assert len(server.requests) == 1
    [entry] = with_key(tmp_path / "journal", KEY)
    assert {result["entry_id"] for _, result in results} == {entry.id}
    assert {event["client_key"] for event in waiting} == {KEY} and all(event["wait_s"] == 60 for event in waiting)
    assert all(Path(event["lock"]).name == "motoko+evening.lock" for event in waiting)


def test_a_run_that_waits_past_the_bound_is_busy_and_status_counts_it_as_no_failure(tmp_path: Path, server: ChatServer, processes: list) -> None:
    """While one run holds the slot, two more wait 1 s, report busy (exit 75, no backend call), and status stays all well."""
    config = _config(tmp_path, server.url, "1s")
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    winner = _Run(config, events, processes)
    try:
        assert server.arrived.wait(60)
        losers = [_Run(config, events, processes) for _ in range(2)]
        busy = [run.result() for run in losers]  # they end while the winner is still held at the server
    finally:
        server.release.set()
    code, appended = winner.result()
    assert (code, appended["outcome"]) == (0, "appended")
    for code, result in busy:
        assert (code, result["outcome"], result["reason"], result["entry_id"], result["error"]) == (75, "busy", "slot_locked", None, None)
        assert result["duration_ms"] >= 1000  # the documented bound was waited for
    assert len(server.requests) == 1
    assert len(with_key(tmp_path / "journal", KEY)) == 1
    log = tmp_path / "runs.log"
    log.write_text("".join(line for run in (*losers, winner) for line in run.log), encoding="utf-8")
    finished = [json.loads(line) for line in log.read_text().splitlines() if '"run.finished"' in line]
    assert sorted((event["outcome"], event["level"]) for event in finished) == [("appended", "info"), ("busy", "warning"), ("busy", "warning")]
    status = ghostrunner("status", "--config", str(config), "--log", str(log), "--now", "2026-09-06T20:00", "--json", cwd=tmp_path)
    report = json.loads(status.stdout)
    assert status.returncode == 0, status.stdout
    assert [(pair["state"], pair["last_failure"]) for pair in report["pairs"]] == [("ok", None)]
    assert report["input"]["busy"] == 2


def test_a_state_directory_that_cannot_be_created_fails_the_run_naming_it(tmp_path: Path) -> None:
    """A file where the state directory should be fails a run that needs the slot lock, with one line naming it, and asks no backend."""
    counter = tmp_path / "calls"
    helper = tmp_path / "helper.py"
    helper.write_text(f"import json, sys\nsys.stdin.read()\nopen({str(counter)!r}, 'a').write('x')\nprint(json.dumps({REPLY!r}))\n")
    body = f"""
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["evening"]
    backend = {{ type = "command", command = ["{shutil.which("python3") or "python3"}", "{helper}"] }}
    """
    config = write_config(tmp_path, body, runner='lock_file = "serve.lock"\n')
    (tmp_path / "serve.state").write_text("not a directory\n")
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config), cwd=tmp_path)
    printed = json.loads(result.stdout)
    assert (result.returncode, printed["outcome"]) == (1, "failed")
    assert "serve.state" in printed["error"] and "Traceback" not in result.stderr
    assert not counter.exists() and with_key(tmp_path / "journal", KEY) == []


def test_slot_lock_wait_defaults_to_five_seconds_and_must_be_shorter_than_run_timeout(tmp_path: Path) -> None:
    """runner.slot_lock_wait is 5 s unless set; a wait not shorter than run_timeout is refused naming the key."""
    assert load_config(write_config(tmp_path, SIMPLE_AGENT)).slot_lock_wait == timedelta(seconds=5)
    assert load_config(write_config(tmp_path, SIMPLE_AGENT, runner='slot_lock_wait = "0s"\n')).slot_lock_wait == timedelta(0)
    path = write_config(tmp_path, SIMPLE_AGENT, runner='slot_lock_wait = "5m"\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path}: runner.slot_lock_wait: expected a duration shorter than runner.run_timeout, got '5m'")):
        load_config(path)


def test_sigterm_while_waiting_for_the_slot_lock_ends_the_run_once(tmp_path: Path, server: ChatServer, processes: list) -> None:
    """A run stopped by SIGTERM while it waits for the slot lock logs one failed run.finished, prints it, and asks nothing."""
    config = _config(tmp_path, server.url, "60s")
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    winner = _Run(config, events, processes)
    try:
        assert server.arrived.wait(60)
        waiter = _Run(config, events, processes)
        _wait_for(events, "run.waiting", 1)  # the new run is waiting at the lock
        waiter.process.send_signal(signal.SIGTERM)
        code, result = waiter.result()
    finally:
        server.release.set()
    assert (code, result["outcome"]) == (128 + signal.SIGTERM, "failed")
    assert "interrupted by a signal while waiting for the slot lock" in result["error"]
    assert [json.loads(line)["event"] for line in waiter.log] == ["run.waiting", "run.finished"]
    assert winner.result()[1]["outcome"] == "appended" and len(server.requests) == 1
