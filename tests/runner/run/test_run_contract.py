"""The run's outside contract: identity, outcome values, the result line both ways, and the one run.finished writer."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from structlog.testing import capture_logs

from routines import Routine
from runner.errors import MalformedResultError
from runner.run.contract import OUTCOMES, SUCCESS_OUTCOMES, Outcome, RunEnding, RunIdentity, RunResult

BERLIN = ZoneInfo("Europe/Berlin")
EVENING = Routine(name="evening", kind="evening", schedule="0 21 * * *", slot="day", question="q", window=timedelta(days=1), prompt="p")


def _result(**changes: object) -> RunResult:
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21, tzinfo=BERLIN), BERLIN, "r-1")
    fields: dict[str, object] = {"outcome": Outcome.APPENDED, "entry_id": "e-1", "duration_ms": 12.5, **changes}
    return RunResult(identity, **fields)


def test_outcome_values_are_the_logged_strings() -> None:
    """The outcome values are exactly the strings logs and result lines carry; busy is neither a success nor a failure."""
    assert OUTCOMES == ("appended", "duplicate", "failed", "skipped", "busy")
    assert SUCCESS_OUTCOMES == ("appended", "duplicate", "skipped")
    assert [outcome for outcome in Outcome if outcome.is_failure] == [Outcome.FAILED]
    assert _result(outcome=Outcome.BUSY).is_ok and not _result(outcome=Outcome.FAILED).is_ok


def test_identity_takes_its_slot_in_the_runner_timezone() -> None:
    """A run scheduled at 23:30 UTC belongs to the next day's slot in Berlin, and its key says so."""
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 23, 30, tzinfo=UTC), BERLIN, "r-1")
    assert (identity.slot, identity.client_key, identity.scheduled) == ("2026-09-06", "motoko:evening:2026-09-06", "2026-09-06T01:30:00+02:00")
    assert "scheduled" not in identity.fields(scheduled=False)
    with pytest.raises(ValueError, match="must carry its timezone"):
        RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21), BERLIN)  # noqa: DTZ001 - the naive time this test passes


def test_result_line_round_trips() -> None:
    """A result, dry-run entry, fault, reason, attempts and permanence included, reads back equal from its line; unset optional fields are left out."""
    for result in (_result(), _result(outcome=Outcome.SKIPPED, entry_id=None, entry={"voice": "ü"}), _result(outcome=Outcome.FAILED, fault="ENOSPC", error="full"),
                   _result(outcome=Outcome.SKIPPED, entry_id=None, reason="paused"), _result(outcome=Outcome.BUSY, entry_id=None, reason="slot_locked"),
                   _result(outcome=Outcome.FAILED, entry_id=None, error="HTTP 401", attempts=1, permanent=True), _result(attempts=3)):
        line = result.to_json_line()
        assert "\n" not in line and RunResult.from_json_line(line) == result
    # Flat, the identity's fields first, in the order result lines have always had.
    assert list(json.loads(_result().to_json_line())) == ["run_id", "agent", "routine", "slot", "client_key", "scheduled", "outcome", "entry_id",
                                                          "duration_ms", "error", "attempts"]


def test_a_result_line_without_attempts_reads_as_none_made() -> None:
    """An older worker's line has no attempts field: it reads back with attempts 0, not as malformed."""
    data = _result().to_dict()
    del data["attempts"]
    assert RunResult.from_json_line(json.dumps(data)).attempts == 0


_GOOD = _result().to_dict()


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "not a run result line: not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    ('{"outcome": "appended"}', "no 'run_id' field"),
    (json.dumps({**_GOOD, "duration_ms": True}), "field 'duration_ms' is not a number"),
    (json.dumps({**_GOOD, "entry_id": 7}), "field 'entry_id' is not a string or null"),
    (json.dumps({**_GOOD, "outcome": "won"}), "field 'outcome' is 'won', not one of appended, duplicate, failed, skipped, busy"),
])
def test_malformed_result_lines_are_refused_with_the_reason(line: str, message: str) -> None:
    """A line that is not a result raises MalformedResultError naming what is wrong (a boolean is no number)."""
    with pytest.raises(MalformedResultError, match=message):
        RunResult.from_json_line(line)


def test_log_finished_writes_the_documented_fields_at_the_outcome_level() -> None:
    """run.finished carries identity, entry_id, outcome (as its string), duration_ms, error, dry_run, reason and attempts; a failure logs at error, busy at warning."""
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21, tzinfo=BERLIN), BERLIN, "r-1")
    with capture_logs() as logs:
        identity.log_finished(Outcome.APPENDED, entry_id="e-1", duration_ms=3.0, error=None, dry_run=False, attempts=2)
        identity.log_finished(Outcome.FAILED, entry_id=None, duration_ms=None, error="boom", dry_run=False)
        identity.log_finished(Outcome.BUSY, entry_id=None, duration_ms=5000.0, error=None, dry_run=False, reason="slot_locked")
        identity.log_finished(Outcome.SKIPPED, entry_id=None, duration_ms=0.0, error=None, dry_run=False, reason="paused")
    assert [(log["log_level"], log["outcome"]) for log in logs] == [("info", "appended"), ("error", "failed"), ("warning", "busy"), ("info", "skipped")]
    assert [log["reason"] for log in logs] == [None, None, "slot_locked", "paused"]
    assert type(logs[0]["outcome"]) is str
    assert set(logs[0]) == {"event", "log_level", "run_id", "agent", "routine", "slot", "client_key", "scheduled", "entry_id", "outcome",
                            "duration_ms", "error", "dry_run", "reason", "attempts", "tokens", "cost"}
    assert logs[0]["attempts"] == 2


def test_a_run_ends_once_whichever_end_comes_first() -> None:
    """The first end logs the one run.finished and hands the result on; a later end, or a signal after it, repeats nothing."""
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21, tzinfo=BERLIN), BERLIN, "r-1")
    handed: list[RunResult] = []
    ending = RunEnding(identity, on_result=handed.append)
    with capture_logs() as logs:
        first = ending.end(Outcome.BUSY, duration_ms=12.5, reason="slot_locked")
        second = ending.end(Outcome.APPENDED, entry_id="e-1")
        interrupted = ending.interrupted(SystemExit(143), error="interrupted by a signal")
    assert [log["event"] for log in logs] == ["run.finished"] and logs[0]["outcome"] == "busy"
    assert handed == [first] and second is first and interrupted.result is first and interrupted.code == 143


def test_a_signal_before_any_end_ends_the_run_failed_with_its_error_and_code() -> None:
    """Ctrl-C before the run ended: one failed run.finished with the error given, and exit code 130."""
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21, tzinfo=BERLIN), BERLIN, "r-1")
    ending = RunEnding(identity, dry_run=True)
    with capture_logs() as logs:
        interrupted = ending.interrupted(KeyboardInterrupt(), error="interrupted while waiting")
    assert [(log["outcome"], log["error"], log["dry_run"]) for log in logs] == [("failed", "interrupted while waiting", True)]
    assert interrupted.code == 130 and interrupted.result.outcome is Outcome.FAILED and ending.result is interrupted.result


def test_a_run_whose_process_died_logs_the_crash_then_one_failed_run_finished() -> None:
    """What serve and a fleet worker log for a worker that died: scheduler.worker_crashed, then run.finished failed, nothing measured."""
    identity = RunIdentity.of("motoko", EVENING, datetime(2026, 9, 5, 21, tzinfo=BERLIN), BERLIN, "r-1")
    error = "the worker was killed by signal SIGKILL before reporting a result"
    with capture_logs() as logs:
        identity.log_worker_died(error, returncode=-9, trigger="catchup")
    assert logs == [
        {"event": "scheduler.worker_crashed", "log_level": "error", **identity.fields(scheduled=False), "returncode": -9, "trigger": "catchup",
         "error": error},
        {"event": "run.finished", "log_level": "error", **identity.fields(), "entry_id": None, "outcome": "failed", "duration_ms": None,
         "error": error, "dry_run": False, "reason": None, "attempts": None, "tokens": None, "cost": None},
    ]


def test_only_the_contract_writes_the_end_of_a_run() -> None:
    """No module of the runner but runner/run/contract.py calls log_finished or logs run.finished, scheduler.worker_crashed or
    scheduler.missed itself: the lines status and the fleet's record read have one writer each, so one shape."""
    runner_dir = Path(__file__).resolve().parents[3] / "runner"
    found = []
    for path in sorted(runner_dir.rglob("*.py")):
        if path == runner_dir / "run" / "contract.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            first = node.args[0] if node.args else None
            logged = isinstance(first, ast.Constant) and first.value in ("run.finished", "scheduler.worker_crashed", "scheduler.missed")
            if node.func.attr == "log_finished" or logged:
                found.append(f"{path.relative_to(runner_dir.parent)}:{node.lineno}")
    assert found == [], "a run's end or a missed slot written outside RunEnding, RunIdentity.log_worker_died and log_missed"
