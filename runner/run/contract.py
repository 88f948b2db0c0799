"""What a run is to the world outside it: its identity, its outcome, its result line and its ``run.finished``.

``ghostrunner run`` prints one :class:`RunResult` as the last line of its
stdout, and ``serve`` reads that line back from its worker; ``status`` reads
``run.finished`` lines and judges their outcomes. All of them speak through
this module, so that the three agree by construction:

* :class:`RunIdentity` names one run: agent, routine, slot and client_key,
  computed here only, from the scheduled time;
* :class:`Outcome` is the closed set of what a run can end in;
* :meth:`RunResult.to_json_line` and :meth:`RunResult.from_json_line` are the
  result's JSON form, both ways;
* :meth:`RunIdentity.log_finished` is the only writer of ``run.finished``, called by
  :meth:`RunEnding.end`, which ends a run once, and by
  :meth:`RunIdentity.log_worker_died`, which ``serve`` and a fleet worker call
  for a run whose process died before it could end its own run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo
from enum import StrEnum
from typing import Any, Final

import structlog

from journal.errors import restored_error
from routines import Routine
from runner.cron.slots import client_key, slot_for
from runner.errors import MalformedResultError
from runner.processes import signals_deferred

__all__ = [
    "OUTCOMES",
    "REASON_BUDGET",
    "REASON_GATE",
    "REASON_PAUSED",
    "REASON_SLOT_LOCKED",
    "SUCCESS_OUTCOMES",
    "Outcome",
    "RunEnding",
    "RunIdentity",
    "RunInterrupted",
    "RunResult",
    "log_missed",
    "signal_exit_code",
]

log = structlog.get_logger()


class Outcome(StrEnum):
    """How a run ended; the value is what logs and result lines carry."""

    APPENDED = "appended"
    DUPLICATE = "duplicate"
    FAILED = "failed"
    SKIPPED = "skipped"
    BUSY = "busy"

    @property
    def is_success(self) -> bool:
        """Whether the run did its slot's work: the slot has its entry, or had nothing to append (or is paused).

        ``busy`` is neither a success nor a failure: another run of the slot held its
        lock, and that run's own ``run.finished`` says how the slot went.
        """
        return self not in (Outcome.FAILED, Outcome.BUSY)

    @property
    def is_failure(self) -> bool:
        """Whether the run failed (nothing appended; its error says why)."""
        return self is Outcome.FAILED


OUTCOMES: Final = tuple(Outcome)
SUCCESS_OUTCOMES: Final = tuple(outcome for outcome in Outcome if outcome.is_success)
#: Why a run was ``skipped`` without asking its backend, or ended ``busy``: the ``reason`` of its result and its ``run.finished``.
REASON_PAUSED: Final = "paused"
REASON_SLOT_LOCKED: Final = "slot_locked"
#: A run skipped because a budget had no room for it (:mod:`runner.run.budgets`).
REASON_BUDGET: Final = "budget"
#: A run skipped because its routine's gate said there is nothing to do.
REASON_GATE: Final = "gate"


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """What names one run: its id, agent, routine, slot and client_key, at its scheduled time (ISO 8601, seconds)."""

    run_id: str
    agent: str
    routine: str
    slot: str
    client_key: str
    scheduled: str

    @classmethod
    def of(cls, agent: str, routine: Routine, scheduled: datetime, tz: tzinfo, run_id: str | None = None) -> RunIdentity:
        """The identity of *agent*'s run of *routine* scheduled at *scheduled*, its slot in *tz* (a new run id when omitted).

        Raises:
            ValueError: a naive *scheduled*.
        """
        if scheduled.tzinfo is None or scheduled.utcoffset() is None:
            # astimezone() would read a naive time in the host's zone: another slot on another host.
            raise ValueError(f"the scheduled time of a run must carry its timezone, got {scheduled.isoformat()!r}")
        scheduled = scheduled.astimezone(tz)
        slot = slot_for(scheduled, routine.slot, tz)
        return cls(
            run_id or str(uuid.uuid4()),
            agent,
            routine.name,
            slot,
            client_key(agent, routine.name, slot),
            scheduled.isoformat(timespec="seconds"),
        )

    def fields(self, *, scheduled: bool = True) -> dict[str, str]:
        """The run's log fields: every identity field (``scheduled`` only when asked, as it is by default)."""
        data = asdict(self)
        if not scheduled:
            del data["scheduled"]
        return data

    def log_finished(
        self,
        outcome: Outcome,
        *,
        entry_id: str | None,
        duration_ms: float | None,
        error: str | None,
        dry_run: bool,
        reason: str | None = None,
        attempts: int | None = 0,
        tokens: dict[str, int] | None = None,
        cost: float | None = None,
    ) -> None:
        """Log the run's one ``run.finished`` line (at error level when it failed, warning when busy).

        ``duration_ms`` is None when no process measured the run (its worker
        died first). ``dry_run`` is logged so that ``status`` never counts a
        dry run, which appends nothing, as the success of its slot.
        ``reason`` says why a run was skipped without its backend (``paused``) or is busy (``slot_locked``); else None.
        ``attempts`` is how many times the run asked its backend (0: never,
        e.g. a duplicate or a digest; None: unknown, the worker died first).
        ``tokens`` (``{"in": N, "out": M}``) is what its backend calls used, all
        attempts added up; None when no call was made or a call did not say
        (:mod:`runner.backends.usage`). ``cost`` is their price where one is
        configured for the agent's model, else None.
        """
        level = log.error if outcome.is_failure else log.warning if outcome is Outcome.BUSY else log.info
        level(
            "run.finished",
            **self.fields(),
            entry_id=entry_id,
            outcome=outcome.value,
            duration_ms=duration_ms,
            error=error,
            dry_run=dry_run,
            reason=reason,
            attempts=attempts,
            tokens=tokens,
            cost=cost,
        )

    def log_missed(self, reason: str) -> None:
        """Log this run's slot as missed for *reason* (see :func:`log_missed`): it will not run."""
        log_missed(self.agent, self.routine, self.slot, self.scheduled, reason)

    def log_worker_died(self, error: str, *, returncode: int | None, trigger: str) -> None:
        """Log the end of a run whose process died before it ended the run itself: ``scheduler.worker_crashed``, then its ``run.finished``.

        *returncode* is the process's exit status (negative: the signal that killed it; None when it is not known), *trigger* what
        started the run (``cron``, ``catchup``, ``retry``), and *error* what happened, in words. The run failed, its duration and
        attempts unknown: no process measured them.
        """
        log.error("scheduler.worker_crashed", **self.fields(scheduled=False), returncode=returncode, trigger=trigger, error=error)
        self.log_finished(Outcome.FAILED, entry_id=None, duration_ms=None, error=error, dry_run=False, attempts=None)


def log_missed(agent: str, routine: str, slot: str, scheduled: str, reason: str) -> None:
    """Log *agent*'s slot of *routine*, scheduled at *scheduled* (ISO 8601, seconds, the runner's zone), as ``scheduler.missed``.

    *reason* says why no run will cover it: downtime, catchup_max, late, or a fleet's refused, purged, expired or revoked
    task. ``status`` reports the slot as missed; the fleet's record and the log digest read these exact fields.
    """
    log.warning("scheduler.missed", agent=agent, routine=routine, slot=slot, scheduled=scheduled, reason=reason)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one run did.

    ``entry`` holds the would-be entry of a dry run (outcome ``skipped``).
    ``fault`` is the errno name (``ENOSPC``, ``EROFS``, ``EACCES``, ...) when
    the filesystem refused the journal's read or write, for the exit code.
    ``reason`` says why a run was ``skipped`` without its backend (``paused``)
    or ended ``busy`` (``slot_locked``).
    ``attempts`` counts the backend calls the run made. ``permanent`` marks a
    failure that another attempt cannot fix (the backend refused the request
    for good): the slot gets no later attempts, and ``run`` exits 78.

    The run's identity is held whole; its JSON form stays flat, the identity's
    fields first, as every result line has always been.
    """

    identity: RunIdentity
    outcome: Outcome
    entry_id: str | None
    duration_ms: float
    error: str | None = None
    entry: dict[str, Any] | None = None
    fault: str | None = None
    reason: str | None = None
    attempts: int = 0
    permanent: bool = False
    #: The tokens the run's backend calls used (``{"in": N, "out": M}``), None when unknown or none was made.
    tokens: dict[str, int] | None = None
    #: Their price, where the agent's model has one configured.
    cost: float | None = None

    @property
    def run_id(self) -> str:
        return self.identity.run_id

    @property
    def agent(self) -> str:
        return self.identity.agent

    @property
    def routine(self) -> str:
        return self.identity.routine

    @property
    def slot(self) -> str:
        return self.identity.slot

    @property
    def client_key(self) -> str:
        return self.identity.client_key

    @property
    def scheduled(self) -> str:
        return self.identity.scheduled

    @property
    def is_ok(self) -> bool:
        """Whether the run did not fail (a ``busy`` run did not fail either)."""
        return not self.outcome.is_failure

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        data = asdict(self)
        identity: dict[str, Any] = data.pop("identity")
        data = identity | data
        data["outcome"] = self.outcome.value
        if self.entry is None:
            del data["entry"]  # only a dry run has one
        if self.fault is None:
            del data["fault"]  # only a run the filesystem refused has one
        if self.reason is None:
            del data["reason"]  # only a paused or busy run has one
        if not self.permanent:
            del data["permanent"]  # only a run that failed for good has it
        for name in ("tokens", "cost"):
            if data[name] is None:
                del data[name]  # only a run whose backend said what it used has them
        return data

    def to_json_line(self) -> str:
        """The result as the one JSON line ``ghostrunner run`` prints last."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json_line(cls, line: str) -> RunResult:
        """The result a :meth:`to_json_line` line holds; fields it does not know (a newer worker's) are ignored.

        Raises:
            MalformedResultError: *line* is not a JSON object with every field of a result, each of its type.
        """
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise MalformedResultError(f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise MalformedResultError(f"a JSON {type(data).__name__}, not an object")
        for name, wanted, types in _FIELD_TYPES:
            if name not in data and name in _REQUIRED:
                raise MalformedResultError(f"no {name!r} field")
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, types):  # JSON true is no number
                raise MalformedResultError(f"field {name!r} is not {wanted}")
        try:
            outcome = Outcome(data["outcome"])
        except ValueError:
            raise MalformedResultError(f"field 'outcome' is {data['outcome']!r}, not one of {', '.join(OUTCOMES)}") from None
        identity = RunIdentity(
            run_id=data["run_id"],
            agent=data["agent"],
            routine=data["routine"],
            slot=data["slot"],
            client_key=data["client_key"],
            scheduled=data["scheduled"],
        )
        return cls(
            identity=identity,
            outcome=outcome,
            entry_id=data["entry_id"],
            duration_ms=float(data["duration_ms"]),
            error=data.get("error"),
            entry=data.get("entry"),
            fault=data.get("fault"),
            reason=data.get("reason"),
            attempts=data.get("attempts") or 0,
            permanent=data.get("permanent") is True,
            tokens=data.get("tokens"),
            cost=data.get("cost"),
        )


_TEXT: Final = (str,)
_TEXT_OR_NULL: Final = (str, type(None))
#: (field, what it must be, the JSON types allowed), in the order of RunResult's fields.
_FIELD_TYPES: Final[tuple[tuple[str, str, tuple[type, ...]], ...]] = (
    *((name, "a string", _TEXT) for name in ("run_id", "agent", "routine", "slot", "client_key", "scheduled", "outcome")),
    ("entry_id", "a string or null", _TEXT_OR_NULL),
    ("duration_ms", "a number", (int, float)),
    ("error", "a string or null", _TEXT_OR_NULL),
    ("entry", "an object or null", (dict, type(None))),
    ("fault", "a string or null", _TEXT_OR_NULL),
    ("reason", "a string or null", _TEXT_OR_NULL),
    ("attempts", "an integer", (int, type(None))),
    ("tokens", "an object or null", (dict, type(None))),
    ("cost", "a number or null", (int, float, type(None))),
)
#: The fields every result line has; ``entry``, ``fault``, ``reason`` and ``permanent`` appear only when set; ``attempts`` is missing from an older worker's.
_REQUIRED: Final = frozenset(name for name, _, _ in _FIELD_TYPES) - {"entry", "fault", "reason", "attempts", "tokens", "cost"}


class RunInterrupted(SystemExit):
    """SIGTERM or Ctrl-C ended a run after it had started; the process exits with *code*.

    It is not a RunnerError: the process is going away. It carries the run's
    result (already logged as its one ``run.finished``) so that ``ghostrunner
    run`` can still print it for whoever started the worker.
    """

    def __init__(self, result: RunResult, code: int | str | None) -> None:
        super().__init__(code)
        self.result = result

    def __reduce__(self) -> tuple[object, ...]:
        return (restored_error, (type(self), self.args, dict(self.__dict__)))


def signal_exit_code(exc: KeyboardInterrupt | SystemExit) -> int | str | None:
    """The exit code a process ended by *exc* goes with: SystemExit's own (143 from SIGTERM's handler), 130 for Ctrl-C."""
    return exc.code if isinstance(exc, SystemExit) else 130


class RunEnding:
    """The one end of one run: its ``run.finished`` logged and its result handed on, once, whichever end comes first.

    A run can end in many places: its work done, its slot busy, a pause, a
    journal that cannot be opened, a signal while it waits, opens or appends.
    Each calls :meth:`end`; the first call logs the line and hands the result to
    *on_result*, and every later call returns that same result and does
    nothing else. The line and the hand-off happen with signals deferred, so
    that a run never logs its outcome without reporting it, and a signal that
    lands between two ends cannot make a second line.
    """

    def __init__(self, identity: RunIdentity, *, dry_run: bool = False, on_result: Callable[[RunResult], object] | None = None) -> None:
        self.identity = identity
        self.dry_run = dry_run
        self._on_result = on_result
        self.result: RunResult | None = None

    def end(
        self,
        outcome: Outcome,
        *,
        entry_id: str | None = None,
        duration_ms: float = 0.0,
        error: str | None = None,
        entry: dict[str, Any] | None = None,
        fault: str | None = None,
        reason: str | None = None,
        attempts: int = 0,
        permanent: bool = False,
        tokens: dict[str, int] | None = None,
        cost: float | None = None,
    ) -> RunResult:
        """End the run with these fields, unless it has ended: then its result as it ended (see the class)."""
        with signals_deferred():
            if self.result is None:
                self.identity.log_finished(
                    outcome,
                    entry_id=entry_id,
                    duration_ms=duration_ms,
                    error=error,
                    dry_run=self.dry_run,
                    reason=reason,
                    attempts=attempts,
                    tokens=tokens,
                    cost=cost,
                )
                self.result = RunResult(
                    self.identity,
                    outcome=outcome,
                    entry_id=entry_id,
                    duration_ms=duration_ms,
                    error=error,
                    entry=entry,
                    fault=fault,
                    reason=reason,
                    attempts=attempts,
                    permanent=permanent,
                    tokens=tokens,
                    cost=cost,
                )
                if self._on_result is not None:
                    self._on_result(self.result)
            return self.result

    def interrupted(
        self, exc: KeyboardInterrupt | SystemExit, *, error: str | None, outcome: Outcome = Outcome.FAILED, **fields: Any
    ) -> RunInterrupted:
        """What to raise when SIGTERM or SIGINT (*exc*) ends the run: the run ended first, as *outcome* with *error*, if it had not."""
        return RunInterrupted(self.end(outcome, error=error, **fields), signal_exit_code(exc))
