"""``ghostrunner status``: what the logs say about each configured agent and routine.

:func:`read_log` folds JSON log lines (as the runner writes them, as
``journalctl -o cat`` prints them, or ``journalctl -o json`` records whose
``MESSAGE`` holds them) into the last success, last failure and latest
``run.finished`` of each (agent, routine). Lines that are not JSON, or a
``run.finished`` without its fields, are counted as malformed; JSON lines
that are not runner events are counted as foreign; neither stops the read.

:func:`build_report` combines that with the configured schedules. A pair is

* ``failed`` when its latest ``run.finished`` failed;
* ``overdue`` when its latest due slot (the latest fire time at least
  ``grace`` before now) has no successful run, and the log reaches back to
  that time;
* ``unknown`` when the log starts after that due time and shows no success
  for it (feed more log: ``journalctl --since``);
* ``ok`` otherwise. Outcomes ``appended``, ``duplicate`` and ``skipped`` are successes.

Exit codes (:attr:`StatusReport.exit_code`): 0 all well; 1 something failed
(wins when something is also overdue: a failed slot is usually overdue too,
and the failure carries the error); 3 something is overdue; 4 the input holds
no runner event at all (a wrong unit name or file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from runner.config import RunnerConfig
from runner.engine import OUTCOMES
from runner.logs import EVENTS
from runner.slots import cron_trigger, latest_fire_time, slot_for

__all__ = [
    "EXIT_FAILED",
    "EXIT_NO_EVENTS",
    "EXIT_OK",
    "EXIT_OVERDUE",
    "SUCCESS_OUTCOMES",
    "LogDigest",
    "PairStatus",
    "RunRecord",
    "StatusReport",
    "build_report",
    "default_grace",
    "read_log",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_OVERDUE: Final = 3
EXIT_NO_EVENTS: Final = 4
SUCCESS_OUTCOMES: Final = ("appended", "duplicate", "skipped")
_STATE_ORDER: Final = ("failed", "overdue", "unknown", "ok")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One ``run.finished`` line."""

    finished: datetime
    outcome: str
    slot: str | None
    scheduled: datetime | None
    run_id: str | None
    entry_id: str | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "finished": self.finished.isoformat(), "outcome": self.outcome, "slot": self.slot,
            "scheduled": self.scheduled.isoformat() if self.scheduled else None, "run_id": self.run_id,
            "entry_id": self.entry_id, "error": self.error,
        }


@dataclass(slots=True)
class _Pair:
    last_success: RunRecord | None = None
    last_failure: RunRecord | None = None
    latest: RunRecord | None = None
    successes: list[RunRecord] = field(default_factory=list)


@dataclass(slots=True)
class LogDigest:
    """What :func:`read_log` found: per-pair runs and counts of every kind of line."""

    pairs: dict[tuple[str, str], _Pair] = field(default_factory=dict)
    lines: int = 0
    events: int = 0
    runs: int = 0
    malformed: int = 0
    foreign: int = 0
    first: datetime | None = None
    last: datetime | None = None

    def counts(self) -> dict[str, Any]:
        """The input counters as JSON-ready data."""
        return {
            "lines": self.lines, "events": self.events, "runs": self.runs, "malformed": self.malformed, "foreign": self.foreign,
            "first": self.first.isoformat() if self.first else None, "last": self.last.isoformat() if self.last else None,
        }


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _decode(line: str) -> dict[str, Any] | None | str:
    """A log line as its event dict; "malformed" when it is not JSON; None when it is JSON but no runner event."""
    try:
        data = json.loads(line)
    except ValueError:
        return "malformed"
    if isinstance(data, dict) and "event" not in data and isinstance(data.get("MESSAGE"), str):
        inner = _decode(data["MESSAGE"])  # a `journalctl -o json` record; another service's text message is foreign
        return None if inner == "malformed" else inner
    if isinstance(data, dict) and data.get("event") in EVENTS:
        return data
    return None


def _record(event: dict[str, Any], finished: datetime) -> tuple[tuple[str, str], RunRecord] | None:
    agent, routine, outcome = event.get("agent"), event.get("routine"), event.get("outcome")
    if not isinstance(agent, str) or not isinstance(routine, str) or outcome not in OUTCOMES:
        return None
    slot, error = event.get("slot"), event.get("error")
    return (agent, routine), RunRecord(
        finished=finished, outcome=str(outcome), slot=slot if isinstance(slot, str) else None, scheduled=_timestamp(event.get("scheduled")),
        run_id=event.get("run_id") if isinstance(event.get("run_id"), str) else None,
        entry_id=event.get("entry_id") if isinstance(event.get("entry_id"), str) else None,
        error=error if isinstance(error, str) else None,
    )


def read_log(lines: Iterable[str]) -> LogDigest:
    """Fold JSON log lines into per-(agent, routine) runs; never raises on bad input."""
    digest = LogDigest()
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        digest.lines += 1
        event = _decode(line)
        if event == "malformed":
            digest.malformed += 1
            continue
        if not isinstance(event, dict):
            digest.foreign += 1
            continue
        moment = _timestamp(event.get("timestamp"))
        if moment is None:
            digest.malformed += 1
            continue
        parsed = _record(event, moment) if event["event"] == "run.finished" else None
        if event["event"] == "run.finished" and parsed is None:
            digest.malformed += 1
            continue
        digest.events += 1
        digest.first = moment if digest.first is None else min(digest.first, moment)
        digest.last = moment if digest.last is None else max(digest.last, moment)
        if parsed is None:
            continue
        key, record = parsed
        digest.runs += 1
        pair = digest.pairs.setdefault(key, _Pair())
        if pair.latest is None or record.finished >= pair.latest.finished:
            pair.latest = record
        if record.outcome in SUCCESS_OUTCOMES:
            if pair.last_success is None or record.finished >= pair.last_success.finished:
                pair.last_success = record
            pair.successes.append(record)
            del pair.successes[:-64]  # enough to find the due slot's success; bounded for long logs
        elif pair.last_failure is None or record.finished >= pair.last_failure.finished:
            pair.last_failure = record
    return digest


@dataclass(frozen=True, slots=True)
class PairStatus:
    """The state of one configured (agent, routine)."""

    agent: str
    routine: str
    schedule: str
    state: str
    due: datetime | None
    due_slot: str | None
    last_success: RunRecord | None
    last_failure: RunRecord | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "agent": self.agent, "routine": self.routine, "schedule": self.schedule, "state": self.state,
            "due": self.due.isoformat() if self.due else None, "due_slot": self.due_slot,
            "last_success": self.last_success.to_dict() if self.last_success else None,
            "last_failure": self.last_failure.to_dict() if self.last_failure else None,
        }


@dataclass(frozen=True, slots=True)
class StatusReport:
    """Every configured pair's state, the input counters, and the exit code a monitor acts on."""

    now: datetime
    grace: timedelta
    pairs: tuple[PairStatus, ...]
    input: dict[str, Any]
    unconfigured: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        """0 ok, 1 failed (wins), 3 overdue, 4 no runner events in the input."""
        states = {pair.state for pair in self.pairs}
        if "failed" in states:
            return EXIT_FAILED
        if "overdue" in states:
            return EXIT_OVERDUE
        if not self.input["events"]:
            return EXIT_NO_EVENTS
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (what ``status --json`` prints)."""
        return {
            "now": self.now.isoformat(), "grace_seconds": self.grace.total_seconds(), "exit_code": self.exit_code,
            "pairs": [pair.to_dict() for pair in self.pairs], "input": self.input, "unconfigured": list(self.unconfigured),
        }


def default_grace(config: RunnerConfig) -> timedelta:
    """How long after a fire time its success may take: misfire grace, run timeout, and 5 minutes for timer delays."""
    return config.misfire_grace + config.run_timeout + timedelta(minutes=5)


def _has_success_for(pair: _Pair, due: datetime, due_slot: str) -> bool:
    return any(
        record.slot == due_slot or (record.scheduled is not None and record.scheduled >= due)
        for record in pair.successes
    )


def build_report(config: RunnerConfig, digest: LogDigest, now: datetime, grace: timedelta | None = None) -> StatusReport:
    """Judge each configured (agent, routine) from *digest* at *now*.

    Args:
        config: the configuration whose schedules say what is due.
        digest: what :func:`read_log` found.
        now: the moment to judge at (aware).
        grace: how long after a fire time a success may take (default :func:`default_grace`).
    """
    grace = default_grace(config) if grace is None else grace
    pairs = []
    for agent in sorted(config.agents):
        for name in config.agents[agent].routines:
            routine = config.routines[name]
            seen = digest.pairs.get((agent, name), _Pair())
            due = latest_fire_time(cron_trigger(routine.schedule, config.timezone), now.astimezone(UTC) - grace)  # real time, not wall clock
            due_slot = slot_for(due, routine.slot, config.timezone) if due is not None else None
            if seen.latest is not None and seen.latest.outcome not in SUCCESS_OUTCOMES:
                state = "failed"
            elif due is None or due_slot is None or _has_success_for(seen, due, due_slot):
                state = "ok"
            elif digest.first is not None and digest.first <= due:
                state = "overdue"
            else:
                state = "unknown"
            pairs.append(PairStatus(agent, name, routine.schedule, state, due, due_slot, seen.last_success, seen.last_failure))
    configured = {(agent.name, name) for agent in config.agents.values() for name in agent.routines}
    unconfigured = tuple(sorted(f"{agent}:{routine}" for agent, routine in digest.pairs if (agent, routine) not in configured))
    pairs.sort(key=lambda pair: (_STATE_ORDER.index(pair.state), pair.agent, pair.routine))
    return StatusReport(now=now, grace=grace, pairs=tuple(pairs), input=digest.counts(), unconfigured=unconfigured)
