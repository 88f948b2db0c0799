"""`ghostrunner status`: last success and failure per pair, overdue slots, exit codes, and tolerance of bad lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.monitor.status import EXIT_FAILED, EXIT_NO_EVENTS, EXIT_OK, EXIT_OVERDUE, EXIT_UNKNOWN, build_report, default_grace, read_log
from runner.settings.config import load_config
from tests._support import ghostrunner, write_config

BODY = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening"]
"""


def _finished(agent: str, routine: str, slot: str, scheduled: str, outcome: str, finished: str, error: str | None = None) -> str:
    return json.dumps({
        "event": "run.finished", "level": "error" if outcome == "failed" else "info", "timestamp": finished, "run_id": "r",
        "agent": agent, "routine": routine, "slot": slot, "client_key": f"{agent}:{routine}:{slot}", "scheduled": scheduled,
        "entry_id": None if outcome == "failed" else "e", "outcome": outcome, "duration_ms": 3.0, "error": error,
    })


def _healthy_log() -> list[str]:
    return [
        json.dumps({"event": "scheduler.started", "level": "info", "timestamp": "2026-09-05T00:00:01Z", "agents": ["motoko"]}),
        _finished("motoko", "evening", "2026-09-04", "2026-09-04T21:00:00+00:00", "appended", "2026-09-04T21:00:02Z"),
        _finished("motoko", "pulse-4h", "2026-09-05T12", "2026-09-05T12:00:00+00:00", "appended", "2026-09-05T12:00:02Z"),
        _finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "duplicate", "2026-09-05T16:00:02Z"),
    ]


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path, BODY)


def _report(config_path: Path, lines: list[str], now: str) -> object:
    return build_report(load_config(config_path), read_log(lines), datetime.fromisoformat(now))


def test_all_well_reports_last_success_per_pair(config_path: Path) -> None:
    """With every due slot succeeded the state is ok, the last success is the newest one, and the exit code is 0."""
    report = _report(config_path, _healthy_log(), "2026-09-05T17:00:00+00:00")
    states = {(p.routine, p.state, p.due_slot, p.last_success.slot if p.last_success else None) for p in report.pairs}
    assert states == {("evening", "ok", "2026-09-04", "2026-09-04"), ("pulse-4h", "ok", "2026-09-05T16", "2026-09-05T16")}
    assert report.exit_code == EXIT_OK


def test_a_due_slot_without_success_after_the_grace_is_overdue(config_path: Path) -> None:
    """The 20:00 pulse is not overdue at 20:10 (inside the grace) but is at 20:30, with exit code 3."""
    assert {p.routine: p.state for p in _report(config_path, _healthy_log(), "2026-09-05T20:10:00+00:00").pairs}["pulse-4h"] == "ok"
    late = _report(config_path, _healthy_log(), "2026-09-05T20:30:00+00:00")
    pulse = next(p for p in late.pairs if p.routine == "pulse-4h")
    assert (pulse.state, pulse.due_slot, late.exit_code) == ("overdue", "2026-09-05T20", EXIT_OVERDUE)


def test_latest_failure_is_failed_and_wins_over_overdue(config_path: Path) -> None:
    """A failed latest run makes the pair failed with its error; with another pair overdue the exit code is still 1."""
    lines = [*_healthy_log(), _finished("motoko", "pulse-4h", "2026-09-05T20", "2026-09-05T20:00:00+00:00", "failed",
                                        "2026-09-05T20:00:05Z", "openai backend: no reply within 120 s")]
    report = _report(config_path, lines, "2026-09-06T00:00:00+00:00")  # the evening of 09-05 is overdue by now
    states = {p.routine: p.state for p in report.pairs}
    assert states == {"pulse-4h": "failed", "evening": "overdue"}
    pulse = next(p for p in report.pairs if p.routine == "pulse-4h")
    assert pulse.last_failure is not None and pulse.last_failure.error == "openai backend: no reply within 120 s"
    assert pulse.last_success is not None and pulse.last_success.slot == "2026-09-05T16"
    assert report.exit_code == EXIT_FAILED


def test_a_later_success_clears_a_failure(config_path: Path) -> None:
    """A failure followed by a success of the same slot (a manual re-run) leaves the pair ok, still showing the failure."""
    lines = [*_healthy_log(),
             _finished("motoko", "pulse-4h", "2026-09-05T20", "2026-09-05T20:00:00+00:00", "failed", "2026-09-05T20:00:05Z", "boom"),
             _finished("motoko", "pulse-4h", "2026-09-05T20", "2026-09-05T20:00:00+00:00", "appended", "2026-09-05T20:07:00Z")]
    pulse = next(p for p in _report(config_path, lines, "2026-09-05T21:00:00+00:00").pairs if p.routine == "pulse-4h")
    assert pulse.state == "ok" and pulse.last_failure is not None and pulse.last_failure.error == "boom"


def test_bad_and_foreign_lines_are_counted_never_fatal(config_path: Path) -> None:
    """Garbage, truncated JSON, other services' JSON and a run.finished missing fields are counted; the rest still counts."""
    lines = [
        "not json at all", '{"event": "run.finished", "timest', json.dumps({"msg": "another service"}),
        json.dumps({"event": "http.request", "timestamp": "2026-09-05T00:00:00Z"}), json.dumps([1, 2]),
        json.dumps({"event": "run.finished", "timestamp": "2026-09-05T01:00:00Z", "agent": "motoko"}),
        json.dumps({"MESSAGE": "a plain journald message", "_SYSTEMD_UNIT": "x.service"}),
        json.dumps({"MESSAGE": _healthy_log()[1]}),  # journalctl -o json wraps our line in MESSAGE
        "", *_healthy_log()[2:],
    ]
    digest = read_log(lines)
    assert (digest.lines, digest.malformed, digest.foreign, digest.runs) == (10, 3, 4, 3)
    report = build_report(load_config(config_path), digest, datetime(2026, 9, 5, 17, tzinfo=UTC))
    assert report.exit_code == EXIT_OK and report.input["malformed"] == 3


def test_log_starting_after_the_due_slot_is_unknown_and_empty_input_exits_4(config_path: Path) -> None:
    """A pair whose due slot predates the whole log is unknown, not overdue, and exits 5; no runner event at all exits 4."""
    lines = [_finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "appended", "2026-09-05T16:00:02Z")]
    report = _report(config_path, lines, "2026-09-05T17:00:00+00:00")
    assert {p.routine: p.state for p in report.pairs} == {"evening": "unknown", "pulse-4h": "ok"}
    assert report.exit_code == EXIT_UNKNOWN
    assert _report(config_path, ["junk"], "2026-09-05T17:00:00+00:00").exit_code == EXIT_NO_EVENTS


def test_an_unknown_status_says_how_to_read_further_back(config_path: Path, tmp_path: Path) -> None:
    """The text of exit 5 from a log names the log's lines and how to read further back (the fleet's record has its own words)."""
    lines = [_finished("motoko", "pulse-4h", "2026-09-05T16", "2026-09-05T16:00:00+00:00", "appended", "2026-09-05T16:00:02Z")]
    told = ghostrunner("status", "--config", str(config_path), "--now", "2026-09-05T17:00:00+00:00", "--grace", "10m", "--text",
                       "--log", str(_write(tmp_path, "\n".join(lines) + "\n")))
    assert told.returncode == EXIT_UNKNOWN, told.stderr
    assert told.stdout.splitlines()[-2:] == [
        "input: 1 log line, 1 runner event (1 run), 0 malformed, 0 foreign; from 2026-09-05T16:00:02+00:00 to 2026-09-05T16:00:02+00:00",
        ("status: unknown: what was read does not reach back to a due slot (read further back: journalctl --since, or an older log file) "
         "(exit 5)")]


def test_status_reads_real_run_logs_from_stdin(config_path: Path, tmp_path: Path) -> None:
    """Logs of real `ghostrunner run` processes piped to `ghostrunner status --json` are ok now and overdue a day later."""
    log, scheduled = [], []
    for routine in ("evening", "pulse-4h"):
        result = ghostrunner("run", routine, "--agent", "motoko", "--config", str(config_path), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        log.append(result.stderr)
        scheduled.append(datetime.fromisoformat(json.loads(result.stdout.splitlines()[-1])["scheduled"]))
    text = "".join(log) + "a stray line\n"
    # Within the grace after a fire time the due slot is still the one before it, which
    # these runs did not run: judge once every slot they ran is due, and not before now.
    grace = timedelta(minutes=10)
    now = max(datetime.now(UTC), max(scheduled) + grace + timedelta(minutes=1))
    status = subprocess.run([shutil.which("ghostrunner") or "ghostrunner", "status", "--config", str(config_path), "--json",
                             "--grace", "10m", "--now", now.isoformat()],
                            input=text, check=False, capture_output=True, text=True, timeout=60)
    assert status.returncode == EXIT_OK, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert {p["routine"]: (p["state"], p["last_success"]["outcome"]) for p in report["pairs"]} == {
        "evening": ("ok", "appended"), "pulse-4h": ("ok", "appended")}
    assert report["input"]["malformed"] == 1 and report["input"]["runs"] == 2 and report["exit_code"] == 0
    # A day and a grace after the slots run, the next ones are due, and they lie after the log's start.
    tomorrow = (max(scheduled) + timedelta(days=1, minutes=1) + default_grace(load_config(config_path))).isoformat()
    overdue = ghostrunner("status", "--config", str(config_path), "--now", tomorrow, "--log", str(_write(tmp_path, text)), "--text")
    assert overdue.returncode == EXIT_OVERDUE
    assert "evening   OVERDUE" in overdue.stdout and "pulse-4h  OVERDUE" in overdue.stdout
    assert "status: something is overdue (exit 3)" in overdue.stdout


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ghostrunner.log"
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_options_are_one_line_usage_errors(config_path: Path, tmp_path: Path) -> None:
    """A bad --grace or --now names the value and exits 2 without a traceback."""
    log = _write(tmp_path, "\n".join(_healthy_log()))
    bad_grace = ghostrunner("status", "--config", str(config_path), "--log", str(log), "--grace", "soon")
    assert bad_grace.returncode == 2 and "--grace" in bad_grace.stderr and "'soon'" in bad_grace.stderr
    assert "Traceback" not in bad_grace.stderr
    bad_now = ghostrunner("status", "--config", str(config_path), "--log", str(log), "--now", "yesterday")
    assert bad_now.returncode == 2 and "got 'yesterday'" in bad_now.stderr


def test_grace_option_moves_the_due_slot(config_path: Path, tmp_path: Path) -> None:
    """With --grace 0s the 20:00 pulse is overdue at 20:05; with the default grace it is not yet due."""
    log = str(_write(tmp_path, "\n".join(_healthy_log())))
    strict = ghostrunner("status", "--config", str(config_path), "--log", log, "--now", "2026-09-05T20:05", "--grace", "0s", "--json")
    relaxed = ghostrunner("status", "--config", str(config_path), "--log", log, "--now", "2026-09-05T20:05", "--json")
    assert (strict.returncode, relaxed.returncode) == (EXIT_OVERDUE, EXIT_OK)
    assert json.loads(strict.stdout)["grace_seconds"] == 0 and json.loads(relaxed.stdout)["grace_seconds"] == timedelta(minutes=20).total_seconds()


LEAP_MONDAY = """
[routines.leap]
kind = "note"
schedule = "0 0 29 2 1"
slot = "day"
question = "What stayed with you?"
prompt = "Write one line."

[agents.motoko]
persona = "motoko.toml"
routines = ["leap"]
"""


def test_a_due_slot_a_decade_back_is_never_ok_until_its_own_run_succeeds(tmp_path: Path) -> None:
    """``0 0 29 2 1`` (29 February on a Monday) last fired 2016-02-29 and next fires in 2044: at the end of 2026 that slot is due.
    Without its success status is unknown on a log of this week and overdue on one reaching back; `run` snaps to it, and its run is ok."""
    config = str(write_config(tmp_path, LEAP_MONDAY, runner='timezone = "Europe/Berlin"\n'))
    now = "2026-12-08T12:00:00+00:00"

    def status(text: str) -> tuple[int, dict]:
        told = ghostrunner("status", "--config", config, "--now", now, "--json", "--log", str(_write(tmp_path, text)))
        return told.returncode, json.loads(told.stdout)

    def started(timestamp: str) -> str:
        return json.dumps({"event": "scheduler.started", "level": "info", "timestamp": timestamp, "agents": ["motoko"]}) + "\n"

    for first, code, state in (("2026-12-01T00:00:00Z", EXIT_UNKNOWN, "unknown"), ("2016-01-01T00:00:00Z", EXIT_OVERDUE, "overdue")):
        returncode, report = status(started(first))
        assert (returncode, [(p["state"], p["due_slot"], p["due"]) for p in report["pairs"]]) == (
            code, [(state, "2016-02-29", "2016-02-29T00:00:00+01:00")])
    run = ghostrunner("run", "leap", "--agent", "motoko", "--config", config, "--at", now, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["slot"] == "2016-02-29"
    returncode, report = status(started("2016-01-01T00:00:00Z") + run.stderr)
    assert (returncode, report["pairs"][0]["state"], report["pairs"][0]["last_success"]["slot"]) == (EXIT_OK, "ok", "2016-02-29")
