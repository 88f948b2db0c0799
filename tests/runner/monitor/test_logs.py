"""The README's event table agrees with runner.monitor.logs.EVENTS and with the JSON lines real runs and a real serve emit."""

from __future__ import annotations

import io
import json
import re
import signal
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from runner.backends import build_backend
from runner.errors import BackendError, BackendReplyError
from runner.monitor.logs import EVENTS, configure_logging
from runner.run._memory import open_journal
from runner.run.contract import RunIdentity
from runner.run.engine import execute_run, run_slot
from runner.run.simulate import simulate_agent
from runner.run.slot_lock import SlotLock
from runner.schedule.run_queue import QueuedRun, RunQueue
from runner.schedule.scheduler import Scheduler
from runner.settings.config import load_config
from tests._docs import page_text
from tests._support import NIGHTLY, SIMPLE_AGENT, event_named, ghostrunner, reap, script, start_serve, write_config
from tests.runner._events import ALWAYS, SIMULATED, documented_events


def _documented_fields() -> set[str]:
    section = page_text("docs/monitoring.md")
    names: set[str] = set()
    for cell in re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \| ", section, flags=re.MULTILINE):
        names |= set(re.findall(r"`([a-z_]+)`", cell))
    return names


class _Broken:
    """A backend whose reply raises, once as a backend error and once as a bug."""

    name = "broken"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def reflect(self, request: Any) -> Any:
        raise self.error


class _Flaky:
    """A backend whose first reply is unusable and whose second is good: the run retries once."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def reflect(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise BackendReplyError("flaky", "the reply is not valid JSON")
        return {"voice": "better now", "theme": "t"}


def _json_lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


@pytest.fixture
def emitted_in_process(tmp_path: Path) -> list[dict[str, Any]]:
    """JSON lines rendered by the real logging setup for appended, duplicate, failed, bug, skipped, simulated and busy runs, and a skipped fire."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT, runner='catchup_grace = "0s"\n'))
    agent = config.agent("motoko")
    buffer = io.StringIO()
    configure_logging(stream=buffer, json=True)
    scheduled = datetime(2026, 9, 5, 21, tzinfo=UTC)
    with Journal(agent.journal_root) as journal:
        common = {"agent": agent, "tz": config.timezone}
        digest = execute_run(journal, routine=config.routines["digest"], scheduled=scheduled, backend=None, **common)
        backend = build_backend(agent)
        appended = execute_run(journal, routine=config.routines["evening"], scheduled=scheduled, backend=backend, **common)
        duplicate = execute_run(journal, routine=config.routines["evening"], scheduled=scheduled, backend=backend, **common)
        failed = execute_run(journal, routine=config.routines["pulse-4h"], scheduled=scheduled, backend=_Broken(BackendError("broken", "down")), **common)
        bug = execute_run(journal, routine=config.routines["pulse-4h"], scheduled=scheduled, backend=_Broken(KeyError("oops")), **common)
        retried = execute_run(journal, routine=config.routines["pulse-4h"], scheduled=scheduled, backend=_Flaky(), **common)
    assert [r.outcome for r in (digest, appended, duplicate, failed, bug, retried)] == ["skipped", "appended", "duplicate", "failed", "failed", "appended"]
    simulate_agent(config, "motoko", datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 9, 2, tzinfo=UTC))
    # A queue of one run at once, whose run waits at a gate: a second slot is queued, the first slot again refused.
    gate = threading.Event()
    queue = RunQueue(1, lambda run: gate.wait(30))
    first, second = (QueuedRun(RunIdentity.of("motoko", config.routines["evening"], moment, UTC), moment, "cron")
                     for moment in (scheduled, scheduled + timedelta(days=1)))
    assert queue.submit(first) and queue.submit(second) and not queue.submit(first)
    gate.set()
    assert queue.wait_idle(30)
    late = scheduled + config.misfire_grace + timedelta(minutes=1)
    scheduler = Scheduler(config, now=lambda: late)
    scheduler._last_fire[("motoko", "evening")] = scheduled - timedelta(seconds=1)  # what serve set when it started
    scheduler.fire("motoko", "evening")  # the 21:00 fire, come past misfire_grace: recorded as missed, not run
    scheduler._last_fire[("motoko", "pulse-4h")] = scheduled - timedelta(days=3)  # a host asleep for days: a summary and one line
    scheduler.fire("motoko", "pulse-4h")
    # Another run holds the slot lock of a slot without its entry: this one waits (run.waiting), then is busy.
    holder = SlotLock(tmp_path / "state", "motoko", "pulse-4h", wait=0)
    assert holder.acquire()
    try:
        busy = run_slot(agent, config.routines["pulse-4h"], scheduled, backend=backend, tz=config.timezone,
                        slot_lock=SlotLock(tmp_path / "state", "motoko", "pulse-4h", wait=0))
    finally:
        holder.release()
    assert (busy.outcome, busy.reason) == ("busy", "slot_locked")
    # Hybrid memory opening a journal of entries without vectors: the model load and the embedding pass of
    # the first ranking, reported at once (a threshold of 0 s stands for a slow model or a long backlog).
    with open_journal(replace(agent, memory="hybrid"), after=0) as hybrid:
        hybrid.search("evening", k=1)
    return _json_lines(buffer)


@pytest.fixture
def emitted_by_serve(tmp_path: Path) -> list[dict[str, Any]]:
    """JSON lines on the stdout of a real serve: start, a catch-up run, a crashed worker, an unusable journal, reloads, SIGTERM."""
    killer = script(tmp_path, "killer.py", "import os, signal, sys\nsys.stdin.read()\nos.kill(os.getppid(), signal.SIGKILL)\n")
    body = NIGHTLY + f"""
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["nightly"]

    [agents.crash]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps(killer)} }}

    [agents.unusable]
    persona = "motoko.toml"
    routines = ["nightly"]
    journal_root = "./not-a-directory"
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "2d"\n', wall_clock=True)
    (tmp_path / "not-a-directory").write_text("a file where a journal should be\n")
    process, reader = start_serve(path, tmp_path)
    try:
        reader.wait(event_named("run.finished", agent="motoko"))
        reader.wait(event_named("run.finished", agent="crash"))
        process.send_signal(signal.SIGHUP)
        reader.wait(event_named("scheduler.reloaded"))
        path.write_text(path.read_text() + "\n[runner.oops]\n")
        process.send_signal(signal.SIGHUP)
        reader.wait(event_named("scheduler.reload_failed"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        return [{k: v for k, v in event.items() if k != "_seen"} for event in reader.drain()]  # _seen: LineReader's mark
    finally:
        reap(process)


def test_readme_table_lists_exactly_the_declared_events() -> None:
    """Every event in runner.monitor.logs.EVENTS has a README row, and the README documents no other event."""
    assert set(documented_events()) == set(EVENTS)


def test_every_field_in_the_event_table_is_explained() -> None:
    """Each field named in the event table also has a row in the README's field table."""
    used = set().union(*documented_events().values())
    assert used <= _documented_fields()


def test_emitted_events_match_the_readme(emitted_in_process: list[dict[str, Any]], emitted_by_serve: list[dict[str, Any]]) -> None:
    """Each event real code emits is documented with exactly the fields it carries, plus event, level and UTC timestamp."""
    documented = documented_events()
    emitted = [*emitted_in_process, *emitted_by_serve]
    # Dotted lowercase names are the runner's; stdlib messages (APScheduler, journal) are free text.
    runner_events = [event for event in emitted if re.fullmatch(r"[a-z_]+\.[a-z_.]+", event["event"])]
    seen = {event["event"] for event in runner_events}
    # run.error, run.retry, scheduler.run_skipped and memory.* (but memory.fallback) come from the in-process part,
    # scheduler.retry_scheduled from serve (its crashed worker gets a rerun); the rest of EVENTS from both.
    # memory.fallback needs the nn extra missing: tests/runner/run/test_memory.py checks its fields in such a process;
    # simulate.backend_calls a command backend: tests/runner/run/test_simulation_safety.py checks its fields;
    # run.over_budget a budget with no room: tests/runner/run/test_budgets.py checks its fields;
    # run.skip_unrecorded a state directory that cannot take a note: tests/runner/schedule/test_catchup_skipped.py checks it.
    assert seen == set(EVENTS) - {"memory.fallback", "simulate.backend_calls", "run.over_budget", "run.skip_unrecorded"}
    simulated = {event["event"] for event in emitted_in_process if SIMULATED in event}
    assert {"run.started", "run.finished", "simulate.finished"} <= simulated  # simulate_agent's lines
    assert not any(SIMULATED in event for event in emitted_in_process if str(event.get("scheduled")).startswith("2026-09-05"))  # execute_run's own
    assert not any(SIMULATED in event for event in emitted_by_serve)
    for event in runner_events:
        assert event["event"] in documented, event
        assert set(event) - {SIMULATED} == documented[event["event"]] | ALWAYS, event
        assert event.get(SIMULATED, True) is True, event
        assert event["timestamp"].endswith("Z") and datetime.fromisoformat(event["timestamp"]).utcoffset().total_seconds() == 0


def test_exactly_one_run_finished_per_run(emitted_in_process: list[dict[str, Any]], emitted_by_serve: list[dict[str, Any]]) -> None:
    """Every run_id that started, every crashed worker and every busy run (which ends before it starts) has exactly one run.finished line."""
    for events in (emitted_in_process, emitted_by_serve):
        finished = [e["run_id"] for e in events if e["event"] == "run.finished"]
        assert len(finished) == len(set(finished))
        started = {e["run_id"] for e in events if e["event"] == "run.started"}
        crashed = {e["run_id"] for e in events if e["event"] == "scheduler.worker_crashed"}
        busy = {e["run_id"] for e in events if e["event"] == "run.finished" and e["outcome"] == "busy"}
        assert set(finished) == started | crashed | busy and not started & busy
    assert any(e["event"] == "scheduler.worker_crashed" for e in emitted_by_serve)


def test_a_journal_that_cannot_be_opened_still_ends_the_run_with_one_line(tmp_path: Path) -> None:
    """`ghostrunner run` on an unusable journal root exits 1 with a failed result and exactly one run.finished naming the path."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    (tmp_path / "journal").write_text("a file where the journal directory should be\n")
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["outcome"] == "failed"
    [finished] = [json.loads(line) for line in result.stderr.splitlines()]
    assert (finished["event"], finished["outcome"], finished["client_key"]) == ("run.finished", "failed", "motoko:evening:2026-09-05")
    assert finished["error"].startswith(f"cannot open the journal at {str(tmp_path / 'journal')!r}: ")
    assert set(finished) == documented_events()["run.finished"] | ALWAYS
