"""What the runner's logs say about its runs: :func:`read_log` and the :class:`LogDigest` it returns.

:func:`read_log` folds JSON log lines (as the runner writes them, as
``journalctl -o cat`` prints them, or ``journalctl -o json`` records whose
``MESSAGE`` holds them) into the last success, last failure and latest
``run.finished`` of each (agent, routine), and the slots its successes
cover, and the slots ``serve`` recorded as missed (``scheduler.missed``). Lines that are not JSON, a ``run.finished`` without its fields (or
whose ``client_key`` is not ``agent:routine:slot``), a line longer than
:data:`MAX_LINE_CHARS` or nested deeper than :data:`MAX_DEPTH` are counted as
malformed and skipped; JSON lines that are not runner events are counted as
foreign; neither stops the read, and no line can make it raise.

Every moment is read on the schedule's clock (:attr:`RunRecord.on_clock`): a
line of a simulation (``simulated: true``) was logged at the wall-clock time
the simulation ran, but stands for its ``scheduled`` time on the simulation's
virtual clock, so the log's reach (``first``, ``last``) and a run's lateness
are judged there; a simulated line without a scheduled time (``simulate.finished``)
has no place on that clock and counts as an event only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Final

from journal import json_nesting_depth
from runner.cron.slots import client_key
from runner.monitor.logs import EVENTS
from runner.run.contract import Outcome

__all__ = ["MAX_DEPTH", "MAX_LINE_CHARS", "LogDigest", "MissedRecord", "PairRuns", "RunRecord", "read_log"]

#: The longest log line parsed, in characters. journald splits lines at 48 KiB
#: (``LineMax=``), and the runner's longest lines (a ``run.error`` traceback)
#: stay far below; anything longer is skipped as malformed, read in pieces so
#: that a line without end never has to fit in memory.
MAX_LINE_CHARS: Final = 1 << 20
#: The deepest JSON nesting parsed. Runner events nest about six levels (a
#: traceback in ``run.error``); json.loads recurses once per level and dies
#: with RecursionError at about a thousand.
MAX_DEPTH: Final = 64
#: How many covered slots are kept per pair; the newest slots are kept, so a
#: long log can only lose old coverage, which never turns a state into ok.
_COVERED_KEPT: Final = 1024
#: How many runs that called their backend are kept per pair, the newest: a week of a routine that runs every few minutes.
_SPENT_KEPT: Final = 4096
_MALFORMED: Final = object()
_OVERSIZE: Final = object()
# Control characters, lone surrogates (which no UTF-8 output can encode), line
# and paragraph separators and bidirectional overrides: a log line is not
# allowed to break the table, the JSON output or the operator's terminal.
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# Any timezone conversion of a moment inside these days stays inside datetime's range.
_FIRST_DAY: Final = date(1, 1, 2)
_LAST_DAY: Final = date(9999, 12, 30)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One ``run.finished`` line."""

    finished: datetime
    outcome: Outcome
    slot: str | None
    scheduled: datetime | None
    run_id: str | None
    entry_id: str | None
    error: str | None
    duration_ms: float | None = None
    reason: str | None = None  # paused, slot_locked
    attempts: int | None = None  # backend attempts, where the line counts them
    dry_run: bool = False
    simulated: bool = False  # a run of a simulation: its clock is virtual, and it ran at its scheduled time
    tokens_in: int | None = None  # what its backend calls used, where its line says (runner.backends.usage)
    tokens_out: int | None = None
    cost: float | None = None  # their price, where one was configured for its model

    @property
    def lateness(self) -> float | None:
        """Seconds from its scheduled time to its start (its finish less its duration), on its schedule's clock; None if unknown."""
        if self.scheduled is None or self.duration_ms is None:
            return None
        return (self.on_clock - self.scheduled).total_seconds() - (0.0 if self.simulated else self.duration_ms / 1000)

    @property
    def asked_backend(self) -> bool:
        """Whether the run called its backend (so it spent something, known or not)."""
        return bool(self.attempts) or self.tokens_in is not None

    @property
    def on_clock(self) -> datetime:
        """When the run finished on its schedule's clock: its line's time, or for a simulated run its scheduled time."""
        return self.scheduled if self.simulated and self.scheduled is not None else self.finished

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "finished": self.finished.isoformat(),
            "outcome": self.outcome.value,
            "slot": self.slot,
            "scheduled": self.scheduled.isoformat() if self.scheduled else None,
            "run_id": self.run_id,
            "entry_id": self.entry_id,
            "error": self.error,
            "duration_ms": self.duration_ms,
            "reason": self.reason,
            "attempts": self.attempts,
            "dry_run": self.dry_run,
            "simulated": self.simulated,
            "tokens": None if self.tokens_in is None or self.tokens_out is None else {"in": self.tokens_in, "out": self.tokens_out},
            "cost": self.cost,
        }


@dataclass(frozen=True, slots=True)
class MissedRecord:
    """One ``scheduler.missed`` line: a slot serve did not run, and why."""

    logged: datetime
    slot: str
    scheduled: datetime | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logged": self.logged.isoformat(),
            "slot": self.slot,
            "scheduled": self.scheduled.isoformat() if self.scheduled else None,
            "reason": self.reason,
        }


@dataclass(slots=True)
class PairRuns:
    """The runs of one (agent, routine) in the log: its latest, its last success and failure, the slots it covered and those missed."""

    last_success: RunRecord | None = None
    last_failure: RunRecord | None = None
    latest: RunRecord | None = None
    covered: dict[str, RunRecord] = field(default_factory=dict)  # slot -> a success of that very slot
    spent: list[RunRecord] = field(default_factory=list)  # the newest runs that called their backend (dry runs too), oldest first
    started: list[RunRecord] = field(default_factory=list)  # the newest runs that were not busy, for their lateness
    missed: dict[str, MissedRecord] = field(default_factory=dict)  # slot -> its latest scheduler.missed


@dataclass(slots=True)
class LogDigest:
    """What :func:`read_log` found: per-pair runs and counts of every kind of line."""

    pairs: dict[tuple[str, str], PairRuns] = field(default_factory=dict)
    lines: int = 0
    events: int = 0
    runs: int = 0
    malformed: int = 0
    foreign: int = 0
    dry_runs: int = 0
    busy: int = 0
    first: datetime | None = None
    last: datetime | None = None
    unusable: dict[str, tuple[datetime, str]] = field(default_factory=dict)  # agent -> latest scheduler.agent_unusable
    served: dict[str, datetime] = field(default_factory=dict)  # agent -> latest scheduler.started serving it

    def counts(self) -> dict[str, Any]:
        """The input counters as JSON-ready data."""
        return {
            "lines": self.lines,
            "events": self.events,
            "runs": self.runs,
            "malformed": self.malformed,
            "foreign": self.foreign,
            "dry_runs": self.dry_runs,
            "busy": self.busy,
            "first": self.first.isoformat() if self.first else None,
            "last": self.last.isoformat() if self.last else None,
        }


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        return None
    try:
        day = moment.astimezone(UTC).date()
    except OverflowError:  # 9999-12-31T23:00-05:00 is past datetime.max in UTC
        return None
    return moment if _FIRST_DAY <= day <= _LAST_DAY else None


def _text(value: object) -> str | None:
    """A string field made safe to print: unsafe characters escaped as ``\\uXXXX``."""
    if not isinstance(value, str):
        return None
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", value)


def _too_deep(text: str) -> bool:
    """Whether the JSON in *text* nests deeper than MAX_DEPTH (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    return json_nesting_depth(text) > MAX_DEPTH


def _parse(text: str) -> Any:
    """*text* as JSON, or _MALFORMED when it is not JSON or breaks the size or depth bound."""
    if len(text) > MAX_LINE_CHARS or _too_deep(text):
        return _MALFORMED
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: only if the depth check ever misjudged invalid JSON
        return _MALFORMED


def _message_text(message: object) -> str | None:
    """A journald MESSAGE as text: a string, or the byte array journald writes for non-UTF-8 or binary messages."""
    if isinstance(message, str):
        return message
    if isinstance(message, list) and len(message) <= MAX_LINE_CHARS and all(type(b) is int and 0 <= b < 256 for b in message):
        return bytes(message).decode("utf-8", errors="replace")
    return None


def _decode(line: str) -> dict[str, Any] | str | None:
    """A log line as its event dict; "malformed" when it is not JSON; None when it is JSON but no runner event."""
    data = _parse(line)
    if data is _MALFORMED:
        return "malformed"
    if isinstance(data, dict) and "event" not in data and "MESSAGE" in data:
        # A `journalctl -o json` record (one level only); another service's text message is foreign.
        message = _message_text(data["MESSAGE"])
        data = _parse(message) if message is not None else None
        if data is _MALFORMED:
            return None
    if isinstance(data, dict) and isinstance(data.get("event"), str) and data["event"] in EVENTS:
        return data
    return None


def _is_dry_run(event: dict[str, Any]) -> bool:
    """Whether a run.finished is a dry run: flagged, or (lines of runners that predate the flag) skipped with no error."""
    flag = event.get("dry_run")
    if isinstance(flag, bool):
        return flag
    return event.get("outcome") == Outcome.SKIPPED and event.get("error") is None


def _outcome(value: object) -> Outcome | None:
    try:
        return Outcome(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _number(value: object) -> float | None:
    """A finite non-negative JSON number (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e15:
        return None
    return float(value)


def _tokens(value: object) -> tuple[int | None, int | None]:
    """The (in, out) of a line's ``tokens`` object; (None, None) when it has none or a malformed one."""
    if not isinstance(value, dict):
        return None, None
    counts = [_number(value.get(name)) for name in ("in", "out")]
    if any(count is None or not count.is_integer() for count in counts):
        return None, None
    return int(counts[0] or 0), int(counts[1] or 0)


def _record(event: dict[str, Any], finished: datetime) -> tuple[tuple[str, str], RunRecord] | None:
    agent, routine, outcome = _text(event.get("agent")), _text(event.get("routine")), _outcome(event.get("outcome"))
    if agent is None or routine is None or outcome is None:
        return None
    slot, key = _text(event.get("slot")), event.get("client_key")
    if key is not None and (not isinstance(key, str) or slot is None or _text(key) != client_key(agent, routine, slot)):
        return None  # a line that contradicts itself cannot vouch for any slot
    tokens_in, tokens_out = _tokens(event.get("tokens"))
    return (agent, routine), RunRecord(
        finished=finished,
        outcome=outcome,
        slot=slot,
        scheduled=_timestamp(event.get("scheduled")),
        run_id=_text(event.get("run_id")),
        entry_id=_text(event.get("entry_id")),
        error=_text(event.get("error")),
        duration_ms=_number(event.get("duration_ms")),
        reason=_text(event.get("reason")),
        attempts=int(attempts) if (attempts := _number(event.get("attempts"))) is not None and attempts.is_integer() else None,
        dry_run=_is_dry_run(event),
        simulated=event.get("simulated") is True,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost=_number(event.get("cost")),
    )


def _bounded_lines(lines: Iterable[str]) -> Iterator[Any]:
    """The lines of *lines*; from a stream, each read in bounded pieces, a line past MAX_LINE_CHARS as _OVERSIZE."""
    readline = getattr(lines, "readline", None)
    if readline is None:
        yield from lines
        return
    while True:
        line = readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) <= MAX_LINE_CHARS or line.endswith("\n"):
            yield line
            continue
        while line and not line.endswith("\n"):  # drop the rest of the oversized line, piece by piece
            line = readline(1 << 16)
        yield _OVERSIZE


def _keep(kept: list[RunRecord], record: RunRecord) -> None:
    """Add *record* to *kept*, a pair's newest runs of one sort, dropping the oldest beyond what status needs."""
    kept.append(record)
    if len(kept) > _SPENT_KEPT * 2:
        kept.sort(key=lambda run: run.on_clock)
        del kept[:-_SPENT_KEPT]  # the newest are what status sums and ranks (today, the last 7 days)


def _note_missed(digest: LogDigest, event: dict[str, Any], moment: datetime) -> None:
    agent, routine, slot = _text(event.get("agent")), _text(event.get("routine")), _text(event.get("slot"))
    if agent is None or routine is None or slot is None:
        return
    missed = digest.pairs.setdefault((agent, routine), PairRuns()).missed
    missed[slot] = MissedRecord(moment, slot, _timestamp(event.get("scheduled")), _text(event.get("reason")))
    if len(missed) > _COVERED_KEPT:
        del missed[min(missed)]  # the oldest slot: slot names of one routine sort by time


def _note_scheduler_event(digest: LogDigest, event: dict[str, Any], moment: datetime) -> None:
    if event["event"] == "scheduler.missed":
        _note_missed(digest, event, moment)
    elif event["event"] == "scheduler.agent_unusable":
        agent, error = _text(event.get("agent")), _text(event.get("error"))
        if agent is not None and (agent not in digest.unusable or moment >= digest.unusable[agent][0]):
            digest.unusable[agent] = (moment, error or "the agent's journal is unusable")
    elif event["event"] == "scheduler.started" and isinstance(event.get("agents"), list):
        for agent in filter(None, map(_text, event["agents"])):
            if agent not in digest.served or moment >= digest.served[agent]:
                digest.served[agent] = moment


def read_log(lines: Iterable[str], on_run: Callable[[tuple[str, str], RunRecord], object] | None = None) -> LogDigest:
    """Fold JSON log lines into per-(agent, routine) runs; never raises on bad input.

    *lines* may be a text stream (read line by line in bounded pieces) or any
    iterable of strings. *on_run* is called with the (agent, routine) and the
    record of every well-formed ``run.finished``, dry runs and ``busy`` runs
    included (``history`` lists them), in the order of the input.

    A ``busy`` run is neither a success nor a failure of its slot (another
    run held the slot's lock, and its own line tells): it is counted, not folded.
    """
    digest = LogDigest()
    for raw in _bounded_lines(lines):
        if raw is _OVERSIZE:
            digest.lines += 1
            digest.malformed += 1
            continue
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
        reach = _timestamp(event.get("scheduled")) if event.get("simulated") is True else moment
        if reach is not None:
            digest.first = reach if digest.first is None else min(digest.first, reach)
            digest.last = reach if digest.last is None else max(digest.last, reach)
        if parsed is None:
            _note_scheduler_event(digest, event, moment)
            continue
        key, record = parsed
        digest.runs += 1
        if on_run is not None:
            on_run(key, record)
        if record.outcome is Outcome.BUSY:
            digest.busy += 1
            continue
        if record.dry_run and record.outcome is not Outcome.DUPLICATE:
            # A dry run appends nothing: neither a success nor a failure of any slot. Its
            # "duplicate" is still evidence: it found the slot's entry in the journal.
            digest.dry_runs += 1
            if record.asked_backend:  # but what it asked of the backend was paid for, as any run's
                _keep(digest.pairs.setdefault(key, PairRuns()).spent, record)
            continue
        pair = digest.pairs.setdefault(key, PairRuns())
        for kept, wanted in ((pair.spent, record.asked_backend), (pair.started, record.lateness is not None)):
            if wanted:
                _keep(kept, record)
        if pair.latest is None or record.finished >= pair.latest.finished:
            pair.latest = record
        if record.outcome.is_success:
            if pair.last_success is None or record.finished >= pair.last_success.finished:
                pair.last_success = record
            if record.slot is not None:
                pair.covered[record.slot] = record
                if len(pair.covered) > _COVERED_KEPT:
                    del pair.covered[min(pair.covered)]  # slot names of one routine sort by time
        elif pair.last_failure is None or record.finished >= pair.last_failure.finished:
            pair.last_failure = record
    return digest
