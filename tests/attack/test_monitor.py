"""Monitoring that never says "all well" wrongly, and a `serve` that keeps serving: attacks on status, run, serve and the digest."""

from __future__ import annotations

import io
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.cli.cli import _render_status
from runner.cron.slots import cron_trigger, latest_fire_time, slot_for
from runner.monitor.status import (
    EXIT_FAILED,
    EXIT_MISSED,
    EXIT_NO_EVENTS,
    EXIT_OK,
    EXIT_OVER_BUDGET,
    EXIT_OVERDUE,
    EXIT_UNKNOWN,
    MAX_DEPTH,
    MAX_LINE_CHARS,
    build_report,
    default_grace,
    read_log,
)
from runner.schedule.notify import Notifier, WatchdogPinger
from runner.settings.config import load_config
from tests._docs import page_text
from tests._support import (
    NIGHTLY,
    SIMPLE_AGENT,
    entries,
    event_named,
    ghostrunner,
    reap,
    start_serve,
    wait_for_path,
    with_key,
    write_config,
)

GHOSTRUNNER = shutil.which("ghostrunner") or "ghostrunner"

BODY = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening"]
"""


def _finished(agent: str, routine: str, slot: str, scheduled: str, outcome: str, finished: str, **extra: Any) -> str:
    return json.dumps({
        "event": "run.finished", "level": "error" if outcome == "failed" else "info", "timestamp": finished, "run_id": "r",
        "agent": agent, "routine": routine, "slot": slot, "client_key": f"{agent}:{routine}:{slot}", "scheduled": scheduled,
        "entry_id": None if outcome == "failed" else "e", "outcome": outcome, "duration_ms": 3.0, "error": None, **extra,
    })


def _started(timestamp: str, agents: list[str] | None = None) -> str:
    return json.dumps({"event": "scheduler.started", "level": "info", "timestamp": timestamp, "agents": agents or ["motoko"]})


def _status(config: Path, log: str | bytes, *args: str) -> subprocess.CompletedProcess[str]:
    """A real `ghostrunner status --json` reading *log* from stdin."""
    data = log if isinstance(log, bytes) else log.encode("utf-8")
    result = subprocess.run([GHOSTRUNNER, "status", "--config", str(config), "--json", *args], input=data, capture_output=True,
                            timeout=120, check=False)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8"))


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path, BODY)


# -- 1. only a success of the due slot itself covers it ---------------------------------------------------------


def test_a_dry_run_or_a_later_slot_never_covers_the_due_slot(config_path: Path, tmp_path: Path) -> None:
    """Real dry runs (of the due slot and of a future one) and a real success of a later slot leave the due slots overdue, exit 3."""
    config = load_config(config_path)
    # Judged a day and a grace after now, each due slot lies an hour or more after the runs below,
    # so the log reaches back to it whatever the wall clock says.
    judged = datetime.now(UTC) + timedelta(days=1, hours=1) + default_grace(config)
    due = {name: latest_fire_time(cron_trigger(config.routines[name].schedule, UTC), judged - default_grace(config))
           for name in ("pulse-4h", "evening")}
    future = judged + timedelta(days=2)
    runs = [
        ("pulse-4h", future, True),   # a dry run of a future slot
        ("pulse-4h", due["pulse-4h"], True),  # a dry run of the due slot itself
        ("evening", future, False),   # a real success, but of a later slot
    ]
    log = []
    for routine, at, dry in runs:
        assert at is not None
        result = ghostrunner("run", routine, "--agent", "motoko", "--at", at.isoformat(), *(["--dry-run"] if dry else []),
                             "--config", str(config_path), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        log.append(result.stderr)
    finished = [json.loads(line) for line in "".join(log).splitlines() if '"run.finished"' in line]
    assert [(e["outcome"], e["dry_run"]) for e in finished] == [("skipped", True), ("skipped", True), ("appended", False)]
    status = _status(config_path, "".join(log), "--now", judged.isoformat())
    report = json.loads(status.stdout)
    assert {p["routine"]: (p["state"], p["due_slot"]) for p in report["pairs"]} == {
        name: ("overdue", slot_for(moment, config.routines[name].slot, UTC)) for name, moment in due.items() if moment is not None}
    assert status.returncode == EXIT_OVERDUE and report["input"]["dry_runs"] == 2


def test_only_the_pairs_own_line_for_that_slot_covers_it(config_path: Path) -> None:
    """Another agent's, another routine's, or a self-contradicting line for the due slot covers nothing."""
    scheduled, done = "2026-09-05T16:00:00+00:00", "2026-09-05T16:00:02Z"
    lines = [
        _started("2026-09-05T00:00:00Z"),
        _finished("motoko", "evening", "2026-09-04", "2026-09-04T21:00:00+00:00", "appended", "2026-09-04T21:00:02Z"),
        _finished("batou", "pulse-4h", "2026-09-05T16", scheduled, "appended", done),  # another agent
        _finished("motoko", "evening", "2026-09-05T16", scheduled, "appended", done),  # another routine
        _finished("motoko", "pulse-4h", "2026-09-05T16", scheduled, "appended", done, client_key="batou:pulse-4h:2026-09-05T16"),
        _finished("motoko", "pulse-4h", "2026-09-05T20", "2026-09-05T20:00:00+00:00", "appended", done),  # a later slot
    ]
    digest = read_log(lines)
    assert digest.malformed == 1  # the line whose client_key names batou
    report = build_report(load_config(config_path), digest, datetime(2026, 9, 5, 17, tzinfo=UTC))
    assert {p.routine: p.state for p in report.pairs} == {"pulse-4h": "overdue", "evening": "ok"}
    assert report.exit_code == EXIT_OVERDUE
    rerun = _finished("motoko", "pulse-4h", "2026-09-05T16", scheduled, "duplicate", done)
    healed = build_report(load_config(config_path), read_log([*lines, rerun]), datetime(2026, 9, 5, 17, tzinfo=UTC))
    assert healed.exit_code == EXIT_OK


def test_a_dry_run_that_found_the_entry_covers_its_slot(config_path: Path, tmp_path: Path) -> None:
    """A real dry run of a slot whose entry exists reports duplicate, which is evidence enough: the slot is ok."""
    args = ("run", "pulse-4h", "--agent", "motoko", "--at", "2026-09-05T16:00Z", "--config", str(config_path))
    assert ghostrunner(*args, cwd=tmp_path).returncode == 0
    dry = ghostrunner(*args, "--dry-run", cwd=tmp_path)
    assert json.loads(dry.stdout)["outcome"] == "duplicate"
    evening = _finished("motoko", "evening", "2026-09-04", "2026-09-04T21:00:00+00:00", "appended", "2026-09-04T21:00:02Z")
    lines = [_started("2026-09-05T00:00:00Z"), evening, *dry.stderr.splitlines()]
    report = build_report(load_config(config_path), read_log(lines), datetime(2026, 9, 5, 17, tzinfo=UTC))
    assert report.exit_code == EXIT_OK and report.input["dry_runs"] == 0


def test_a_dry_run_after_a_failure_does_not_clear_it(config_path: Path) -> None:
    """A failed run followed by a dry run of the same slot is still failed (the dry run appended nothing)."""
    lines = [
        _started("2026-09-05T00:00:00Z"),
        _finished("motoko", "evening", "2026-09-04", "2026-09-04T21:00:00+00:00", "appended", "2026-09-04T21:00:02Z"),
        _finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "failed", "2026-09-05T16:00:02Z"),
        _finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "skipped", "2026-09-05T16:05:00Z", dry_run=True),
    ]
    report = build_report(load_config(config_path), read_log(lines), datetime(2026, 9, 5, 17, tzinfo=UTC))
    assert {p.routine: p.state for p in report.pairs}["pulse-4h"] == "failed" and report.exit_code == EXIT_FAILED


# -- 2. unknown is not "all well" ---------------------------------------------------------------------------------


def test_unknown_exits_5_never_0(config_path: Path, tmp_path: Path) -> None:
    """A real status over a log that starts after the evening's due slot says unknown and exits 5, not 0 "all well"."""
    log = _finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "appended", "2026-09-05T16:00:02Z") + "\n"
    path = tmp_path / "run.log"
    path.write_text(log, encoding="utf-8")
    result = ghostrunner("status", "--config", str(config_path), "--log", str(path), "--now", "2026-09-05T17:00Z", "--text")
    assert result.returncode == EXIT_UNKNOWN == 5, result.stdout + result.stderr
    assert "evening   UNKNOWN" in result.stdout and "all well" not in result.stdout
    assert result.stdout.rstrip().endswith("(exit 5)")


def test_readme_documents_every_status_exit_code() -> None:
    """The status exit-code table of docs/monitoring.md lists exactly the codes status can exit with (its own, usage 2 and configuration 78)."""
    section = page_text("docs/monitoring.md").split("`ghostrunner status` turns these lines into a check:", 1)[1].split("\n## ", 1)[0]
    table = section.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = {int(code) for cell in re.findall(r"^\| ([\d, ]+) \|", table, flags=re.MULTILINE) for code in cell.split(",")}
    assert documented == {EXIT_OK, EXIT_FAILED, EXIT_OVERDUE, EXIT_NO_EVENTS, EXIT_UNKNOWN, EXIT_MISSED, EXIT_OVER_BUDGET, 2, 78}


# -- 3. no log line can crash status --------------------------------------------------------------------------------


def _healthy(now: str = "2026-09-05T17:00:00Z") -> list[str]:
    return [
        _started("2026-09-05T00:00:00Z"),
        _finished("motoko", "evening", "2026-09-04", "2026-09-04T21:00:00+00:00", "appended", "2026-09-04T21:00:02Z"),
        _finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "appended", "2026-09-05T16:00:02Z"),
    ]


HOSTILE_LINES: list[bytes] = [
    b"[" * 100_000,
    b'{"a":' * 100_000,
    b'{"event": "run.finished", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    json.dumps({"MESSAGE": "[" * 100_000}).encode(),  # journalctl -o json around a deep line
    json.dumps({"MESSAGE": list(b"\xff\xfe" + b"[" * 3000)}).encode(),  # journald's byte-array MESSAGE
    b"x" * (MAX_LINE_CHARS + 10),
    b"\xff\xfe\xc3(" * 100,  # invalid UTF-8
    b'{"event": "run.finished"\x00, "timestamp": "2026-09-05T10:00:00Z"}',
    b"42", b"null", b'"run.finished"', b"1e999999", b"9" * 5000, b"[]",
    json.dumps({"event": ["run.finished"], "timestamp": "2026-09-05T10:00:00Z"}).encode(),
    json.dumps({"event": {"run": 1}, "timestamp": "2026-09-05T10:00:00Z"}).encode(),
    json.dumps({"event": "run.finished", "timestamp": 17, "agent": "motoko", "routine": "pulse-4h", "outcome": "appended"}).encode(),
    json.dumps({"event": "run.finished", "timestamp": "9999-12-31T23:30:00-05:00", "agent": "motoko", "routine": "pulse-4h",
                "outcome": "failed"}).encode(),
    json.dumps({"event": "run.finished", "timestamp": "0001-01-01T00:10:00+05:00", "agent": "motoko", "routine": "pulse-4h",
                "outcome": "failed"}).encode(),
    json.dumps({"event": "run.finished", "timestamp": "2026-09-05T10:00:00Z", "agent": ["motoko"], "routine": {}, "outcome": 1}).encode(),
    json.dumps({"event": "run.finished", "timestamp": "2026-09-05T10:00:00Z", "agent": "motoko", "routine": "pulse-4h", "outcome": "failed",
                "slot": 7, "client_key": {"k": 1}}).encode(),
]
#: Scheduler events whose fields have the wrong types: events, but they say nothing about any pair.
MISTYPED_EVENTS: list[bytes] = [
    json.dumps({"event": "scheduler.started", "timestamp": "2026-09-05T10:00:00Z", "agents": "motoko"}).encode(),
    json.dumps({"event": "scheduler.agent_unusable", "timestamp": "2026-09-05T10:00:00Z", "agent": 5, "error": [1]}).encode(),
]


@pytest.mark.parametrize("source", ["file", "stdin", "journal-json"])
def test_hostile_lines_never_crash_a_real_status(config_path: Path, tmp_path: Path, source: str) -> None:
    """Deep, huge, non-UTF-8, NUL, scalar and mistyped lines are counted as bad lines; the healthy lines still judge: exit 0."""
    good = [line.encode() for line in _healthy()]
    if source == "journal-json":  # each line as `journalctl -o json` prints it
        good = [json.dumps({"MESSAGE": line.decode(), "_SYSTEMD_UNIT": "ghostrunner.service"}).encode() for line in good]
    data = b"\n".join([good[0], *HOSTILE_LINES, *MISTYPED_EVENTS, *good[1:]]) + b"\n"
    args = ["--now", "2026-09-05T17:00Z"]
    if source == "file":
        path = tmp_path / "hostile.log"
        path.write_bytes(data)
        result = ghostrunner("status", "--config", str(config_path), "--json", "--log", str(path), *args)
    else:
        result = _status(config_path, data, *args)
    assert "Traceback" not in result.stderr and result.stderr == "", result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert result.returncode == EXIT_OK, report
    counts = report["input"]
    assert counts["runs"] == 2 and counts["lines"] == len(HOSTILE_LINES) + len(MISTYPED_EVENTS) + 3
    assert counts["events"] == len(MISTYPED_EVENTS) + 3
    assert counts["malformed"] + counts["foreign"] == len(HOSTILE_LINES) and counts["malformed"] >= 9


#: Writes the file named by argv[1], then a 300 MB line of "[" with its newline at the very end.
ENDLESS = """
import sys
import threading
with open(sys.argv[1], "rb") as head:
    sys.stdout.buffer.write(head.read())
chunk = b"[" * (1 << 20)
try:
    for _ in range(300):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.write(b"\\n")
except BrokenPipeError:
    pass  # the reader gave up (the old status died of MemoryError)
"""


def test_an_endless_line_is_never_held_in_memory(config_path: Path, tmp_path: Path) -> None:
    """A 300 MB line on stdin, under a 256 MB address-space limit, is skipped in pieces; the status still exits 0."""
    limit = 256 << 20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    head = tmp_path / "head.log"
    head.write_text("\n".join(_healthy()) + "\n", encoding="utf-8")
    producer = subprocess.Popen([sys.executable, "-c", ENDLESS, str(head)], stdout=subprocess.PIPE)
    try:
        process = subprocess.Popen([GHOSTRUNNER, "status", "--config", str(config_path), "--json", "--now", "2026-09-05T17:00Z"],
                                   stdin=producer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=cap)  # noqa: PLW1509
        assert producer.stdout is not None
        producer.stdout.close()  # the reader holds its own copy of the pipe
        out, err = process.communicate(timeout=120)
    finally:
        producer.wait(60)
    assert process.returncode == EXIT_OK, err.decode()[-2000:]
    assert json.loads(out)["input"]["malformed"] == 1


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_json = st.recursive(_scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
                     max_leaves=20)
_field_values = _json | st.sampled_from(["motoko", "pulse-4h", "evening", "appended", "failed", "skipped", "2026-09-05T16",
                                         "2026-09-05T16:00:00Z", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
                                         "\ud800", "\x1b[2J", "\u2028", "\x00"])
_events = st.fixed_dictionaries(
    {"event": st.sampled_from(["run.finished", "run.started", "scheduler.started", "scheduler.agent_unusable"]) | _json},
    optional=dict.fromkeys(("timestamp", "agent", "routine", "slot", "client_key", "scheduled", "outcome", "error",
                            "entry_id", "run_id", "dry_run", "agents"), _field_values),
)


def _hostile_line() -> st.SearchStrategy[str]:
    deep = st.integers(min_value=MAX_DEPTH - 2, max_value=5000).flatmap(
        lambda n: st.sampled_from(["[" * n + "]" * n, '{"a":' * n + "1" + "}" * n, "[" * n]))
    structured = _events.map(json.dumps) | _json.map(lambda v: json.dumps(v, allow_nan=True))
    wrapped = structured.map(lambda line: json.dumps({"MESSAGE": line}))
    return st.text() | deep | structured | wrapped | st.binary().map(lambda b: b.decode("utf-8", errors="surrogateescape"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_hostile_line(), max_size=8))
def test_hostile_lines_never_crash_read_log_or_the_report(config_path: Path, lines: list[str]) -> None:
    """Any mix of hostile lines, as a list or as a stream, is read, judged and rendered as a table and as UTF-8 JSON without an exception."""
    config = load_config(config_path)
    for source in ([*lines, *_healthy()], io.StringIO("\n".join([*lines, *_healthy()]))):
        digest = read_log(source)
        assert digest.lines >= 3
        report = build_report(config, digest, datetime(2026, 9, 5, 17, tzinfo=UTC))
        json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
        for from_fleet in (False, True):
            table = _render_status(report, config.timezone, from_fleet=from_fleet)
            table.encode("utf-8")
            assert "\x1b" not in table and "\u2028" not in table


# -- 4. a SIGTERM'd run never says "no entry" for an entry it appended or found --------------------------------

#: A real `ghostrunner run` (the console script's own main) with one journal step wrapped to pause at PAUSE_AT until
#: the file "go" appears in MARKERS. A wakeup fd sees each signal the moment the process receives it, whatever its
#: Python handler does, and the pause writes "signalled" then, so the test knows the signal landed inside the step.
HOOKED_RUN = """
import os, select, signal, sys, time
import journal.api, journal.files.store
import runner.run.contract
from runner.cli.cli import main

point, here = os.environ["PAUSE_AT"], os.environ["MARKERS"]
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)

def pause(name):
    if os.path.exists(os.path.join(here, "paused-" + name)):
        return  # once per run
    open(os.path.join(here, "paused-" + name), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(here, "go")) and time.monotonic() < deadline:
        if select.select([wake_r], [], [], 0.01)[0]:
            os.read(wake_r, 64)
            open(os.path.join(here, "signalled"), "w").close()

store, api = journal.files.store.EntryStore, journal.api.Journal
write_temp, publish, find = store.write_temp, store.publish, api.find_by_client_key

def hooked_write_temp(self, entry, **kwargs):
    pending = write_temp(self, entry, **kwargs)
    if point == "write_temp":
        pause(point)  # the temp file is written, no name yet
    return pending

def hooked_publish(self, pending, **kwargs):
    commit = kwargs.pop("meanwhile", None)
    def linked():
        if point == "link":
            pause(point)  # the entry file has its name, the index is not committed
        if commit is not None:
            commit()
    publish(self, pending, meanwhile=linked, **kwargs)
    if point == "published":
        pause(point)  # file and index are done; the append has not returned yet

def hooked_find(self, key, **kwargs):
    found = find(self, key, **kwargs)
    if point == "found" and found is not None:
        pause(point)  # the slot's entry was found; the run has not recorded it yet
    return found

init, close = api.__init__, api.close

def hooked_init(self, *args, **kwargs):
    if point == "open":
        pause(point)  # the run has started; its journal is not open yet
    init(self, *args, **kwargs)

def hooked_close(self):
    close(self)
    if point == "close":
        pause(point)  # the run has finished and logged; its result is not printed yet

class PausingLog:  # the run contract's logger, pausing right after the run.finished line is written

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        method = getattr(self.inner, name)
        def call(event, *args, **kwargs):
            written = method(event, *args, **kwargs)
            if point == "logged" and event == "run.finished":
                pause(point)  # the outcome is logged; the result is not printed yet
            return written
        return call

store.write_temp, store.publish, api.find_by_client_key = hooked_write_temp, hooked_publish, hooked_find
api.__init__, api.close = hooked_init, hooked_close
runner.run.contract.log = PausingLog(runner.run.contract.log)
sys.argv[0] = "ghostrunner"
main()
"""


def _wait_until_signalled(process: subprocess.Popen[str], marker: Path, timeout: float = 30) -> None:
    """Wait until the hooked run has seen its signal (*marker*) or has ended, failing after *timeout*."""
    deadline = time.monotonic() + timeout
    while not marker.exists() and process.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"the run neither saw its signal nor ended within {timeout} s")
        try:
            process.wait(0.02)
        except subprocess.TimeoutExpired:
            continue


def _hooked_run(tmp_path: Path, point: str, args: list[str]) -> tuple[int, str, str]:
    """Run HOOKED_RUN with *args*, SIGTERM it once it pauses at *point*, and return its exit code, stdout and stderr."""
    markers = tmp_path / "markers"
    markers.mkdir()
    hook = tmp_path / "hooked_run.py"
    hook.write_text(HOOKED_RUN, encoding="utf-8")
    victim = subprocess.Popen([sys.executable, str(hook), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PAUSE_AT": point, "MARKERS": str(markers)})
    try:
        wait_for_path(markers / f"paused-{point}")
        victim.send_signal(signal.SIGTERM)
        _wait_until_signalled(victim, markers / "signalled")
    finally:
        (markers / "go").touch()
    out, err = victim.communicate(timeout=60)
    return victim.returncode, out, err


@pytest.mark.parametrize("point", ["open", "logged", "close"])
def test_sigterm_while_the_journal_opens_or_closes_still_ends_the_run_once(tmp_path: Path, point: str) -> None:
    """SIGTERM while the journal opens (no entry), right after run.finished, or while it closes: one run.finished, its result printed."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    args = ["run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(config)]
    code, out, err = _hooked_run(tmp_path, point, args)
    assert code == 128 + signal.SIGTERM and "Traceback" not in err, err
    [finished] = [json.loads(line) for line in err.splitlines() if '"run.finished"' in line]
    stored = with_key(tmp_path / "journal", "motoko:evening:2026-09-05")
    if point == "open":
        assert stored == [] and finished["outcome"] == "failed" and "interrupted by a signal" in finished["error"]
    else:
        assert [entry.id for entry in stored] == [finished["entry_id"]] and finished["outcome"] == "appended"
    printed = json.loads(out)  # what serve reads from its worker
    fields = ("run_id", "outcome", "entry_id", "error")
    assert [printed[k] for k in fields] == [finished[k] for k in fields]


@pytest.mark.parametrize("point", ["write_temp", "link", "published", "found"])
def test_sigterm_around_the_append_logs_what_the_journal_holds(tmp_path: Path, point: str) -> None:
    """SIGTERM at each step of the append (or of the duplicate check) ends the run with the outcome the journal agrees with."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    args = ["run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(config)]
    key = "motoko:evening:2026-09-05"
    if point == "found":  # the slot already has its entry; the second run finds it
        assert ghostrunner(*args, cwd=tmp_path).returncode == 0
    code, out, err = _hooked_run(tmp_path, point, args)
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    [finished] = [json.loads(line) for line in err.splitlines() if '"run.finished"' in line]
    [stored] = with_key(tmp_path / "journal", key)  # the step had begun: the append (or the found entry) stands
    expected = "duplicate" if point == "found" else "appended"
    assert (finished["outcome"], finished["entry_id"], finished["error"]) == (expected, stored.id, None), finished
    assert json.loads(out)["outcome"] == expected


def test_serve_logs_one_run_finished_for_a_worker_killed_by_a_real_time_signal(tmp_path: Path) -> None:
    """Every run ends with exactly one run.finished: a worker killed by SIGRTMIN+6 made the job raise ValueError instead."""
    killer = tmp_path / "killer.py"
    killer.write_text("import os, sys\nsys.stdin.read()\nos.kill(os.getppid(), 40)\n", encoding="utf-8")  # 40 is SIGRTMIN+6 on Linux
    path = write_config(tmp_path, NIGHTLY + f"""
    [agents.motoko]
    routines = ["nightly"]
    backend = {{ type = "command", command = {json.dumps([sys.executable, str(killer)])} }}
    """, runner='catchup_grace = "2d"\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    try:
        finished = reader.wait(event_named("run.finished", agent="motoko"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        events = reader.drain()
    finally:
        reap(process)
    assert finished["outcome"] == "failed" and finished["error"] == "the worker was killed by signal SIGRTMIN+6 before reporting a result"
    assert not [event for event in events if "raised an exception" in str(event.get("event"))]


# -- 5. one unusable journal does not stop serve for the other agents ------------------------------------------


def _unusable_journals_config(tmp_path: Path) -> Path:
    body = NIGHTLY + """
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["nightly"]

    [agents.filed]
    persona = "motoko.toml"
    routines = ["nightly"]
    journal_root = "./filed"

    [agents.foreign]
    persona = "motoko.toml"
    routines = ["nightly"]
    journal_root = "./foreign"

    [agents.beneath]
    persona = "motoko.toml"
    routines = ["nightly"]
    journal_root = "./filed/journal"
    """
    path = write_config(tmp_path, body, runner='catchup_grace = "2d"\n', wall_clock=True)
    (tmp_path / "filed").write_text("a file where a journal directory should be\n", encoding="utf-8")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "manifest.json").write_text(json.dumps({"format": "another-app", "version": 3}), encoding="utf-8")
    return path


def test_serve_reports_unusable_journals_and_serves_the_rest(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    """A real serve with three unusable journals logs each once, catches up the good agent, stays up, exits 0; status says failed."""
    path = _unusable_journals_config(tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in ("filed", "foreign/manifest.json")}
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    reader.wait(event_named("scheduler.started"))
    problems = {reader.wait(event_named("scheduler.agent_unusable"))["agent"] for _ in range(3)}
    assert problems == {"filed", "foreign", "beneath"}
    finished = reader.wait(event_named("run.finished", agent="motoko"))
    assert finished["outcome"] == "appended" and process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    events = reader.drain()
    unusable = [e for e in events if e["event"] == "scheduler.agent_unusable"]
    assert len(unusable) == 3 and all(e["level"] == "error" for e in unusable)
    by_agent = {e["agent"]: e for e in unusable}
    assert by_agent["filed"]["journal_root"] == str(tmp_path / "filed")
    assert by_agent["filed"]["error"].startswith(f"cannot use the journal at {str(tmp_path / 'filed')!r}: ")
    assert "another-app" in by_agent["foreign"]["error"] or "manifest" in by_agent["foreign"]["error"]
    assert {name: (tmp_path / name).read_bytes() for name in before} == before  # nothing of theirs was touched
    assert len(with_key(tmp_path / "journal", finished["client_key"])) == 1

    judged = datetime.fromisoformat(finished["scheduled"]) + timedelta(minutes=1)  # the caught-up slot is the due one
    status = _status(path, "".join(reader.raw), "--now", judged.isoformat(), "--grace", "0s")
    report = json.loads(status.stdout)
    states = {p["agent"]: (p["state"], p["problem"]) for p in report["pairs"]}
    assert states["motoko"] == ("ok", None)
    assert {agent: state for agent, (state, _) in states.items() if agent != "motoko"} == dict.fromkeys(problems, "failed")
    assert states["filed"][1] == by_agent["filed"]["error"]
    assert status.returncode == EXIT_FAILED


def test_an_unusable_agent_clears_after_a_success_or_a_serve_of_it(config_path: Path) -> None:
    """A later success of the pair, or a later scheduler.started serving the agent, ends the agent's reported problem."""
    problem = json.dumps({"event": "scheduler.agent_unusable", "level": "error", "timestamp": "2026-09-05T00:00:02Z", "agent": "motoko",
                          "journal_root": "/x", "error": "cannot use the journal at '/x': Not a directory"})
    lines = [_started("2026-09-05T00:00:01Z"), problem, *_healthy()[1:]]
    judged = datetime(2026, 9, 5, 17, tzinfo=UTC)
    report = build_report(load_config(config_path), read_log(lines), judged)
    assert {p.routine: (p.state, p.problem) for p in report.pairs} == {
        "evening": ("failed", "cannot use the journal at '/x': Not a directory"), "pulse-4h": ("ok", None)}  # pulse-4h succeeded since
    assert report.exit_code == EXIT_FAILED
    assert build_report(load_config(config_path), read_log([*lines, _started("2026-09-05T16:30:00Z")]), judged).exit_code == EXIT_OK
    other = build_report(load_config(config_path), read_log([*lines, _started("2026-09-05T16:30:00Z", ["batou"])]), judged)
    assert other.exit_code == EXIT_FAILED  # a serve of other agents says nothing about motoko


# -- 6. the deployment lock never truncates or follows into another file --------------------------------------


def _lock_config(tmp_path: Path, lock: Path) -> Path:
    return write_config(tmp_path, NIGHTLY + '\n[agents.motoko]\npersona = "motoko.toml"\nroutines = ["nightly"]\n',
                        runner=f'catchup_grace = "0s"\nlock_file = {json.dumps(str(lock))}\n', wall_clock=True)


@pytest.mark.parametrize("kind", ["symlink-to-persona", "dangling-symlink", "file-with-content", "hard-link", "fifo", "directory"])
def test_serve_refuses_a_lock_file_that_is_not_its_own(tmp_path: Path, kind: str) -> None:
    """A lock_file that is a symlink, a persona's content, a hard link, a FIFO or a directory: exit 78, one line, nothing changed."""
    lock = tmp_path / "serve.lock"
    persona = tmp_path / "motoko.toml"
    path = _lock_config(tmp_path, lock)  # copies the persona beside the config
    original = persona.read_bytes()
    if kind == "symlink-to-persona":
        lock.symlink_to(persona)
    elif kind == "dangling-symlink":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "file-with-content":
        lock.write_bytes(original)
    elif kind == "hard-link":
        os.link(persona, lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    result = ghostrunner("serve", "--config", str(path), cwd=tmp_path, timeout=30)
    assert result.returncode == 78, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"ghostrunner: error: {path}: runner.lock_file: expected a path of the scheduler's own")
    assert repr(str(lock)) in result.stderr
    assert persona.read_bytes() == original
    if kind == "file-with-content":
        assert lock.read_bytes() == original
    assert not (tmp_path / "nowhere").exists()
    assert lock.is_symlink() == (kind in ("symlink-to-persona", "dangling-symlink"))


def test_serve_takes_over_its_own_stale_lock(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    """A lock file holding a dead scheduler's pid (or nothing) is the lock's own: serve starts and writes its pid there."""
    lock = tmp_path / "serve.lock"
    lock.write_text("4194303\n", encoding="utf-8")
    path = _lock_config(tmp_path, lock)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    reader.wait(event_named("scheduler.started"))
    assert lock.read_text(encoding="utf-8") == f"{process.pid}\n"
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0


def test_serve_refuses_a_lock_file_below_a_file(tmp_path: Path) -> None:
    """A lock_file whose directory is a file is a configuration error (exit 78, one line), not a traceback."""
    blocker = tmp_path / "state"
    blocker.write_text("not a directory\n", encoding="utf-8")
    path = _lock_config(tmp_path, blocker / "serve.lock")
    result = ghostrunner("serve", "--config", str(path), cwd=tmp_path, timeout=30)
    assert result.returncode == 78 and "Traceback" not in result.stderr, result.stderr
    assert "runner.lock_file" in result.stderr and "cannot be created" in result.stderr
    assert blocker.read_text(encoding="utf-8") == "not a directory\n"


# -- 7. a digest summarises the week's non-digest entries only --------------------------------------------------


def test_no_digest_counts_the_digest_before_it(tmp_path: Path) -> None:
    """Three weeks of a real `ghostrunner simulate`: each digest counts exactly the non-digest entries of its week."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    result = ghostrunner("simulate", "--agent", "motoko", "--days", "21", "--start", "2026-08-03", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    every = entries(tmp_path / "journal")
    digests = sorted((e for e in every if e.kind == "digest"), key=lambda e: e.ts)
    assert len(digests) == 3
    for digest in digests:
        end = datetime.fromisoformat(digest.ts)
        week = [e for e in every if e.kind != "digest" and end - timedelta(days=7) <= datetime.fromisoformat(e.ts) < end]
        summary = digest.meta["digest"]
        assert "digest" not in summary["kinds"], summary["kinds"]
        assert summary["count"] == len(week) and digest.voice.startswith(f"Digest of {digest.meta['slot']}: {len(week)} entries")
        assert not set((digest.signals or {}).get("continuity_refs", [])) & {d.id for d in digests}


def test_a_week_holding_only_the_last_digest_is_skipped(tmp_path: Path) -> None:
    """A digest whose window holds nothing but the previous digest is skipped, not a digest of one digest."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    first = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-02T21:00Z", "--config", str(path), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    args = ("run", "digest", "--agent", "motoko", "--config", str(path))
    one = json.loads(ghostrunner(*args, "--at", "2026-09-06T22:00Z", cwd=tmp_path).stdout)
    two = json.loads(ghostrunner(*args, "--at", "2026-09-13T22:00Z", cwd=tmp_path).stdout)
    assert (one["outcome"], two["outcome"], two["error"]) == ("appended", "skipped", None)


def test_a_stop_requested_before_the_scheduler_starts_ends_it_at_once() -> None:
    """A SIGTERM between serve installing its handlers and the loop starting must stop serve, not crash the stop thread."""
    from runner.schedule.scheduler import _StoppableScheduler

    scheduler = _StoppableScheduler(timezone="UTC")
    scheduler.request_stop()  # before start(): BlockingScheduler has no wake-up event yet
    finished = threading.Event()
    runner = threading.Thread(target=lambda: (scheduler.start(), finished.set()), daemon=True)
    runner.start()
    assert finished.wait(60), "the loop ignored a stop requested before it started"
    assert not scheduler.running


@pytest.mark.parametrize(("usec", "seconds"), [("\u00b2", None), ("\u0663", None), ("9" * 30, 86400.0), ("60000000", 60.0)])
def test_a_hostile_watchdog_usec_never_crashes_serve_or_its_watchdog(usec: str, seconds: float | None) -> None:
    """WATCHDOG_USEC='²' passed str.isdigit() and then failed int(): serve died with a traceback; a huge value
    killed the watchdog thread with OverflowError. Both are now read as no (or a day's) watchdog."""
    notifier = Notifier.from_environ({"WATCHDOG_USEC": usec})
    assert notifier.watchdog_seconds == seconds
    if seconds is not None:
        sent: list[str] = []
        pinger = WatchdogPinger(sent.append, seconds / 2)
        pinger.start()
        assert pinger._thread.is_alive()  # a wait of half a day is one the platform accepts
        pinger.stop()
        assert sent == ["WATCHDOG=1"]
