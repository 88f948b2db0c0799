"""``ghostrunner status``: each configured agent and routine judged from what its logs say.

:func:`read_log` (from :mod:`runner.monitor.log_digest`) folds the log lines into a
:class:`LogDigest`; :func:`build_report` combines that with the configured
schedules. A pair is

* ``failed`` when its latest ``run.finished`` failed, or when ``serve``
  reported its agent's journal unusable (``scheduler.agent_unusable``) and
  neither a success of the pair nor a ``scheduler.started`` serving that
  agent followed;
* ``overdue`` when its latest due slot (the latest fire time at least
  ``grace`` before now) has no successful run, and the log reaches back to
  that time;
* ``missed`` when that due slot has no successful run but ``serve``
  recorded it as missed (``scheduler.missed``: it was down then, the slot was
  beyond ``catchup_max``, or its fire came later than ``misfire_grace``):
  nothing is broken now, but the slot has no entry;
* ``unknown`` when the log starts after that due time and shows no success
  for it (feed more log: ``journalctl --since``);
* ``paused`` when the pair (or its whole agent) is paused (``ghostrunner
  pause``): its runs are ``skipped`` on purpose, so it is neither overdue nor
  failed. The pause file in the runner's state directory says so; where it
  cannot be read (no state directory: logs shipped to another host; or one
  closed to this user),
  a pair whose latest run was ``skipped`` with the reason ``paused`` is;
* ``over_budget`` when the pair's latest run was ``skipped`` with the reason
  ``budget`` (a budget had no room for it, :mod:`runner.run.budgets`): its
  slots are going without entries on purpose, which is neither all well nor
  a failure;
* ``ok`` when a successful run *of the due slot itself* is in the log.
  Outcomes ``appended``, ``duplicate`` and ``skipped`` are successes; a
  success of any other slot (a later one, or a dry run of the future) never
  covers the due slot, and a dry run (``dry_run``) is no run of its slot at
  all, since it appends nothing (unless it found the slot's entry: ``duplicate``).

The due slot is found however far back it lies (a schedule's fires are at most 40 years apart:
``0 0 29 2 1`` fired on 2016-02-29 and next fires in 2044), so a rare schedule's missing slot is
never ``ok`` for want of a due slot.

Times are on the schedule's clock (:attr:`RunRecord.on_clock`): a simulated
run is judged at its scheduled time on the simulation's virtual clock, never
at the wall-clock time its line was written. A slot is due *grace* after it
fires (:func:`latest_due`), and a success that came after that was late
(:func:`is_late`): the one rule ``status`` and ``report`` judge by.

Every pair also shows what its runs used (tokens and cost): its last run, today and
the last 7 days in ``runner.timezone`` (:mod:`runner.monitor.spend`).

Every pair also shows how late its runs of the last 7 days started (50th and
90th percentile, the most), and whether it drifts: every one of them started
late beyond a threshold (:mod:`runner.monitor.lateness`). Drift is a flag,
not a state: it changes no exit code, and is never called overdue.

Every pair also lists the slots recorded missed that no success covered
since (newest first, at most :data:`MISSED_SHOWN`).

Exit codes (:attr:`StatusReport.exit_code`): 0 all well; 1 something failed
(wins when something is also overdue: a failed slot is usually overdue too,
and the failure carries the error); 3 something is overdue; 6 nothing failed
or is overdue, but some pair's due slot was missed; 7 nothing failed, is
overdue or missed, but some pair is over budget; 4 the input holds
no runner event at all (a wrong unit name or file); 5 nothing failed or is
overdue, but some pair is unknown (the log does not reach back to its due
slot), so all is not known to be well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from runner.cron.slots import cron_trigger, latest_fire_time, slot_for
from runner.monitor.lateness import Lateness, lateness_of
from runner.monitor.log_digest import MAX_DEPTH, MAX_LINE_CHARS, LogDigest, MissedRecord, PairRuns, RunRecord, read_log
from runner.monitor.spend import Spend, pair_spend
from runner.run.contract import REASON_BUDGET, REASON_PAUSED, SUCCESS_OUTCOMES
from runner.settings.config import RunnerConfig

__all__ = [
    "EXIT_FAILED",
    "EXIT_MISSED",
    "EXIT_NO_EVENTS",
    "EXIT_OK",
    "EXIT_OVERDUE",
    "EXIT_OVER_BUDGET",
    "EXIT_UNKNOWN",
    "MAX_DEPTH",
    "MAX_LINE_CHARS",
    "MISSED_SHOWN",
    "SUCCESS_OUTCOMES",
    "VERDICTS",
    "LogDigest",
    "PairStatus",
    "RunRecord",
    "StatusReport",
    "build_report",
    "default_grace",
    "is_late",
    "latest_due",
    "read_log",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_OVERDUE: Final = 3
EXIT_NO_EVENTS: Final = 4
EXIT_UNKNOWN: Final = 5
EXIT_MISSED: Final = 6
EXIT_OVER_BUDGET: Final = 7
_STATE_ORDER: Final = ("failed", "overdue", "missed", "over_budget", "unknown", "paused", "ok")
#: What each exit code means, in the words ``status`` and ``report`` print.
VERDICTS: Final = {
    EXIT_OK: "all well",
    EXIT_FAILED: "something failed",
    EXIT_OVERDUE: "something is overdue",
    EXIT_NO_EVENTS: "no runner events in the input",
    EXIT_MISSED: "a due slot was missed (recorded missed, not run)",
    EXIT_OVER_BUDGET: "over budget: slots are skipped, their backend not asked",
    EXIT_UNKNOWN: "unknown: what was read does not reach back to a due slot",
}
#: How many missed slots a pair lists (the newest).
MISSED_SHOWN: Final = 20


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
    problem: str | None = None  # the agent's journal is unusable (from scheduler.agent_unusable)
    missed: tuple[MissedRecord, ...] = ()  # slots recorded missed and not covered since, newest first
    spend: Mapping[str, Spend] = field(default_factory=dict)  # last_run, today, last_7_days (runner.monitor.spend)
    lateness: Lateness = field(default_factory=Lateness)  # of the last 7 days' runs, and drift (runner.monitor.lateness)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "agent": self.agent,
            "routine": self.routine,
            "schedule": self.schedule,
            "state": self.state,
            "due": self.due.isoformat() if self.due else None,
            "due_slot": self.due_slot,
            "last_success": self.last_success.to_dict() if self.last_success else None,
            "last_failure": self.last_failure.to_dict() if self.last_failure else None,
            "problem": self.problem,
            "missed": [missed.to_dict() for missed in self.missed],
            "spend": {window: spend.to_dict() for window, spend in self.spend.items()},
            "lateness": self.lateness.to_dict(),
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
        """0 ok, 1 failed (wins), 3 overdue, 6 missed, 7 over budget, 4 no runner events in the input, 5 some pair unknown."""
        states = {pair.state for pair in self.pairs}
        if "failed" in states:
            return EXIT_FAILED
        if "overdue" in states:
            return EXIT_OVERDUE
        if "missed" in states:
            return EXIT_MISSED
        if "over_budget" in states:
            return EXIT_OVER_BUDGET
        if not self.input["events"]:
            return EXIT_NO_EVENTS
        if "unknown" in states:
            return EXIT_UNKNOWN  # not known to be well is not "all well"
        return EXIT_OK

    @property
    def verdict(self) -> str:
        """The exit code in words (:data:`VERDICTS`)."""
        return VERDICTS[self.exit_code]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (what ``status --json`` prints)."""
        return {
            "now": self.now.isoformat(),
            "grace_seconds": self.grace.total_seconds(),
            "exit_code": self.exit_code,
            "pairs": [pair.to_dict() for pair in self.pairs],
            "input": self.input,
            "unconfigured": list(self.unconfigured),
        }


def default_grace(config: RunnerConfig) -> timedelta:
    """How long after a fire time its success may take: misfire grace, run timeout, and 5 minutes for timer delays."""
    return config.misfire_grace + config.run_timeout + timedelta(minutes=5)


def latest_due(now: datetime, grace: timedelta) -> datetime:
    """The latest fire time whose slot is due at *now*: a slot is due *grace* after it fires (in real time, not wall clock)."""
    return now.astimezone(UTC) - grace


def is_late(run: RunRecord, grace: timedelta, *, scheduled: datetime | None = None) -> bool:
    """Whether *run* finished after its slot was due (:func:`latest_due`), on its schedule's clock.

    So a run is late exactly when ``status``, judging at any moment between its slot's due
    time and the run, would have called the slot overdue. *scheduled* is the slot's fire
    time when the run's own line lacks it; without either, no run is late.
    """
    fired = run.scheduled or scheduled
    return fired is not None and fired < latest_due(run.on_clock, grace)


def _agent_problem(digest: LogDigest, agent: str, pair: PairRuns) -> str | None:
    """The error of the agent's latest ``scheduler.agent_unusable``, unless a success or a serve of the agent followed it."""
    if agent not in digest.unusable:
        return None
    moment, error = digest.unusable[agent]
    served = digest.served.get(agent)
    if (served is not None and served > moment) or (pair.last_success is not None and pair.last_success.finished > moment):
        return None
    return error


def build_report(
    config: RunnerConfig,
    digest: LogDigest,
    now: datetime,
    grace: timedelta | None = None,
    paused: frozenset[tuple[str, str]] | None = frozenset(),
) -> StatusReport:
    """Judge each configured (agent, routine) from *digest* at *now*.

    Args:
        config: the configuration whose schedules say what is due.
        digest: what :func:`read_log` found.
        now: the moment to judge at (aware).
        grace: how long after a fire time a success may take (default :func:`default_grace`).
        paused: the paused (agent, routine) pairs; None when the pause file could not be read,
            and then a pair whose latest run was skipped as paused counts as paused.
    """
    grace = default_grace(config) if grace is None else grace
    pairs = []
    for agent in sorted(config.agents):
        for name in config.agents[agent].routines:
            routine = config.routines[name]
            seen = digest.pairs.get((agent, name), PairRuns())
            due = latest_fire_time(cron_trigger(routine.schedule, config.timezone), latest_due(now, grace))
            due_slot = slot_for(due, routine.slot, config.timezone) if due is not None else None
            problem = _agent_problem(digest, agent, seen)
            if (agent, name) in (paused or ()) or (paused is None and seen.latest is not None and seen.latest.reason == REASON_PAUSED):
                state = "paused"
            elif problem is not None or (seen.latest is not None and not seen.latest.outcome.is_success):
                state = "failed"
            elif seen.latest is not None and seen.latest.reason == REASON_BUDGET:
                state = "over_budget"
            elif due is None or due_slot is None or due_slot in seen.covered:  # only a success of the due slot itself covers it
                state = "ok"
            elif due_slot in seen.missed:
                state = "missed"
            elif digest.first is not None and digest.first <= due:
                state = "overdue"
            else:
                state = "unknown"
            missed = tuple(
                sorted(
                    (record for slot, record in seen.missed.items() if slot not in seen.covered),
                    key=lambda record: record.slot,
                    reverse=True,
                )[:MISSED_SHOWN]
            )
            pairs.append(
                PairStatus(
                    agent,
                    name,
                    routine.schedule,
                    state,
                    due,
                    due_slot,
                    seen.last_success,
                    seen.last_failure,
                    problem,
                    missed,
                    pair_spend(seen.spent, now, config.timezone),
                    lateness_of(seen.started, now, config.drift_threshold),
                )
            )
    configured = {(agent.name, name) for agent in config.agents.values() for name in agent.routines}
    unconfigured = tuple(sorted(f"{agent}:{routine}" for agent, routine in digest.pairs if (agent, routine) not in configured))
    pairs.sort(key=lambda pair: (_STATE_ORDER.index(pair.state), pair.agent, pair.routine))
    return StatusReport(now=now, grace=grace, pairs=tuple(pairs), input=digest.counts(), unconfigured=unconfigured)
