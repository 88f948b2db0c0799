"""What ``serve`` does on start about the slots it was not there for: a bounded catch-up, and a record of the rest.

The journal decides, never a state file of the scheduler. For each configured
(agent, routine), with *T* the scheduled time of the pair's latest entry
before now:

* the fires after *T* within ``catchup_grace`` of now have no entry yet; the
  latest ``catchup_max`` of them (default 1) are run (catch-up), each checked
  against the journal by its client_key; the older ones are recorded as
  missed, reason ``catchup_max``;
* the fires after *T* and older than ``catchup_grace`` are recorded as
  missed, reason ``downtime`` (the newest :data:`MAX_REPORTED` of them per
  pair; a longer outage is cut there);
* a pair that never wrote an entry (a new agent or routine) has missed
  nothing; only its catch-up within ``catchup_grace`` applies;
* a slot a run skipped on purpose (its gate said nothing to do, its pair
  was paused, a budget had no room, a digest found nothing:
  :mod:`runner.run.skips`) was not missed: its run decided it. It is neither
  run again nor recorded, and takes no place under ``catchup_max`` or
  ``catchup_budget``.

A long downtime therefore costs at most ``catchup_max`` runs per pair (and,
with ``budgets.catchup_budget``, at most that many of all pairs together: the
newest run, the rest are recorded missed, reason ``catchup_budget``; the run
of a pair paused now takes no place, as it ends skipped as it starts), never
a burst of every missed slot, and each slot that is not run leaves a
``scheduler.missed`` line that ``status`` reports. The catch-up runs of all
pairs start spread evenly over ``catchup_spread`` (:func:`spread`), oldest
first, so that many agents do not call their backends in the same second.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Final

from journal import Journal
from routines import Routine
from runner.cron.slots import cron_trigger, slot_for
from runner.errors import StateFileError
from runner.run.contract import RunIdentity
from runner.run.pauses import paused_or_unknown
from runner.run.skips import skipped_slots
from runner.settings.config import AgentConfig, RunnerConfig

__all__ = [
    "BEYOND_CATCHUP_BUDGET",
    "BEYOND_CATCHUP_MAX",
    "DOWNTIME",
    "LATE",
    "MAX_REPORTED",
    "MISSED_LINES_PER_PAIR",
    "CatchupPlan",
    "MissedSlot",
    "UnusableAgent",
    "plan_catchup",
    "spread",
]

#: How many slots missed during downtime are recorded per pair, the newest first.
MAX_REPORTED: Final = 1000
#: How many of an agent's newest entries of the routine's kind are read to find the pair's latest entry.
_LATEST_SCAN: Final = 256
_FIRST_SCAN: Final = 8
#: Reasons of a ``scheduler.missed`` line.
DOWNTIME: Final = "downtime"
BEYOND_CATCHUP_MAX: Final = "catchup_max"
#: Within catchup_max of its pair, but beyond ``budgets.catchup_budget`` of all pairs together.
BEYOND_CATCHUP_BUDGET: Final = "catchup_budget"
LATE: Final = "late"
#: The most slots of one pair recorded missed at once with a ``scheduler.missed`` line each; past it, one
#: ``scheduler.missed_summary`` line covers all but the newest, so a long downtime is a few lines a pair, not one a slot.
MISSED_LINES_PER_PAIR: Final = 10


@dataclass(frozen=True, slots=True)
class MissedSlot:
    """A slot of a pair that has no entry: run by catch-up (``reason`` None) or recorded as missed (``reason`` says why)."""

    agent: str
    routine: str
    scheduled: datetime
    slot: str
    reason: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class UnusableAgent:
    """An agent whose journal could not be opened or read while planning catch-up."""

    agent: str
    journal_root: str
    error: str


@dataclass(slots=True)
class CatchupPlan:
    """The slots to run on start (oldest first), those recorded as missed (oldest first), and the agents that could not be planned."""

    runs: list[MissedSlot] = field(default_factory=list)
    missed: list[MissedSlot] = field(default_factory=list)
    unusable: list[UnusableAgent] = field(default_factory=list)


def _journal_error(agent: AgentConfig, exc: Exception) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return f"cannot use the journal at {str(agent.journal_root)!r}: {reason}; its runs fail until it is fixed (the other agents are served)"


def _latest_entry(journal: Journal, agent: str, routine: Routine, now: datetime) -> datetime | None:
    """The scheduled time (the entry's ts) of the pair's latest entry before *now*, or None.

    Looked for among the agent's newest entries of the routine's kind: a pair
    hidden behind hundreds of newer entries of another routine of the same
    kind counts as never written, which only means its older misses go unrecorded.
    """
    prefix = f"{agent}:{routine.name}:"
    for limit in (_FIRST_SCAN, _LATEST_SCAN):  # usually the newest entry of the kind is the pair's own: read few first
        found = journal.list(routine.kind, agent=agent, until=now.astimezone(UTC), limit=limit)
        for entry in found:
            if entry.client_key is not None and entry.client_key.startswith(prefix):
                return datetime.fromisoformat(entry.ts)
        if len(found) < limit:
            break
    return None


def _unwritten_fires(routine: Routine, config: RunnerConfig, now: datetime, after: datetime | None, limit: int) -> list[datetime]:
    """Fires of *routine* at or before *now* and after *after*, one per slot (a slot's first fire), newest first.

    *after* None reaches back only to ``catchup_grace``; at most *limit* fires
    older than that are listed.
    """
    tz = config.timezone
    trigger = cron_trigger(routine.schedule, tz)
    grace_start = now.astimezone(UTC) - config.catchup_grace
    floor = grace_start if after is None else after.astimezone(UTC)
    latest_slot = None if after is None else slot_for(after, routine.slot, tz)
    fires: list[datetime] = []
    older = 0
    # Back to the floor, however far: a rare schedule's fire since the latest entry may be decades old.
    for fire in trigger.before(now, days=max(0, (now.astimezone(UTC) - floor).days) + 1):
        instant = fire.astimezone(UTC)
        if instant < floor or (after is not None and instant <= floor):
            break
        slot = slot_for(fire, routine.slot, tz)
        if slot == latest_slot:
            break  # the slot of the latest entry: written
        if fires and slot_for(fires[-1], routine.slot, tz) == slot:
            fires[-1] = fire  # the same slot fired twice (a DST gap): its first fire names it
            continue
        if instant < grace_start:
            older += 1
            if older > limit:
                break
        fires.append(fire)
    return fires


def _plan_pair(journal: Journal, config: RunnerConfig, agent: str, routine: Routine, now: datetime, plan: CatchupPlan) -> None:
    latest = _latest_entry(journal, agent, routine, now)
    grace_start = now.astimezone(UTC) - config.catchup_grace
    runs: list[MissedSlot] = []
    unwritten = [
        (fire, RunIdentity.of(agent, routine, fire, config.timezone))
        for fire in _unwritten_fires(routine, config, now, latest, MAX_REPORTED)
    ]
    skipped = _skipped(config, [run.client_key for _, run in unwritten])
    for fire, run in unwritten:
        if run.client_key in skipped:
            continue  # its run skipped it (a gate, a pause, a budget): decided, not missed, and never run again by catch-up
        if fire.astimezone(UTC) >= grace_start:
            if len(runs) < config.catchup_max:
                if journal.find_by_client_key(run.client_key, agent=agent) is None:
                    runs.append(MissedSlot(agent, routine.name, fire, run.slot))
                continue
            if latest is None:
                continue  # a pair that never wrote missed nothing
            plan.missed.append(MissedSlot(agent, routine.name, fire, run.slot, BEYOND_CATCHUP_MAX))
        elif latest is not None:
            plan.missed.append(MissedSlot(agent, routine.name, fire, run.slot, DOWNTIME))
    plan.runs += reversed(runs)


def _skipped(config: RunnerConfig, client_keys: list[str]) -> set[str]:
    """Those of *client_keys* whose slots a run skipped on purpose, for whatever reason (:func:`runner.run.skips.skipped_slots`)."""
    try:
        return skipped_slots(config, client_keys)
    except StateFileError:
        return set()  # an unusable state file fails each run that needs it, with its own line; catch-up plans as without one


def plan_catchup(
    config: RunnerConfig, now: datetime, *, pairs: Collection[tuple[str, str]] | None = None, strict: bool = False
) -> CatchupPlan:
    """Plan the start of ``serve`` at *now*: which missed slots run, which are recorded as missed.

    Args:
        config: the configuration.
        now: the moment serve starts (aware).
        pairs: plan only these (agent, routine) pairs (a reload plans the pairs it adds); default every configured one.
        strict: raise an agent's journal error instead of listing the agent in ``unusable``.
    """
    plan = CatchupPlan()
    for agent in config.agents.values():
        names = [name for name in agent.routines if pairs is None or (agent.name, name) in pairs]
        if not names:
            continue
        before = (len(plan.runs), len(plan.missed))
        try:
            with Journal(agent.journal_root) as journal:
                for name in names:
                    _plan_pair(journal, config, agent.name, config.routines[name], now, plan)
        # Any failure of one agent's journal (a file in its place, a foreign
        # manifest, a corrupt entry, a permission) is that agent's alone.
        except Exception as exc:
            if strict:
                raise
            del plan.runs[before[0] :], plan.missed[before[1] :]
            plan.unusable.append(UnusableAgent(agent.name, str(agent.journal_root), _journal_error(agent, exc)))
    ceiling = config.budgets.catchup_budget
    # A paused pair's catch-up run ends skipped as it starts, asking nothing: it takes no place a missed slot could have.
    paused = (paused_or_unknown(config) or frozenset()) if ceiling is not None else frozenset()
    costly = [run for run in plan.runs if (run.agent, run.routine) not in paused]
    if ceiling is not None and len(costly) > ceiling:
        # All pairs together: the newest missing slots run, the older ones are recorded missed.
        newest_first = sorted(costly, key=lambda run: run.scheduled.astimezone(UTC), reverse=True)
        kept = set(map(id, newest_first[:ceiling])) | {id(run) for run in plan.runs if (run.agent, run.routine) in paused}
        plan.missed += [replace(run, reason=BEYOND_CATCHUP_BUDGET) for run in plan.runs if id(run) not in kept]
        plan.runs = [run for run in plan.runs if id(run) in kept]
    plan.missed.sort(key=lambda missed: missed.scheduled.astimezone(UTC))
    return plan


def spread(runs: list[MissedSlot], now: datetime, interval: timedelta) -> list[tuple[datetime, MissedSlot]]:
    """When each catch-up run starts: oldest slot first, the *n* runs evenly over *interval* (the first at *now*)."""
    ordered = sorted(runs, key=lambda run: run.scheduled.astimezone(UTC))
    step = interval / len(ordered) if ordered else interval
    return [(now + step * position, run) for position, run in enumerate(ordered)]
