"""A pass's due fires of one schedule, worked out once for all the pairs that share them.

In a burst every agent's pair of a routine has the same schedule and the
same last handled fire, and so the same due fires, the same late ones, the
same slots and the same next fire. :class:`PassFires` works these out once
a pass for each (schedule, last handled fire, slot granularity) by
:mod:`runner.cron.slots`'s rule and hands each pair that shares them the
same :class:`Due`: what is left to the beat for a pair is its own task and
log lines. A pass judges every fire against one moment, the one at which
it read its due entries, so the pairs of one pass agree on which fires are
due and which are late.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from runner.cron.slots import CronSchedule, fires_since, is_late, slot_for
from runner.schedule.catchup import MISSED_LINES_PER_PAIR

__all__ = ["Due", "Fire", "PassFires"]


@dataclass(frozen=True, slots=True)
class Fire:
    """One due fire, with the texts its task and its lines carry."""

    moment: datetime
    #: Its time in the schedule's zone (the task's argument, the lines' ``scheduled``).
    scheduled: str
    #: Its time in UTC (the end of the task's id).
    utc: str
    slot: str
    #: More than misfire_grace past its time: recorded as missed, not run.
    late: bool


@dataclass(frozen=True, slots=True)
class Due:
    """What a pair of one schedule and last handled fire has due in a pass."""

    #: The fires to publish or record as missed, oldest first (after a summary's cut and the tick's bound); empty: none due.
    fires: tuple[Fire, ...]
    #: More late fires than MISSED_LINES_PER_PAIR: (how many the summary stands for, the first's time, the last's time).
    summary: tuple[int, str, str] | None
    #: The schedule's next fire after the last of *fires* (none due: after the last handled one); None: it never fires again.
    following: datetime | None


class PassFires:
    """The due fires of each schedule and last handled fire, as of one pass's moment *now* (see the module)."""

    def __init__(self, now: datetime, misfire_grace: timedelta, tz: tzinfo, fires_per_tick: int) -> None:
        """*tz*: the runner's zone, in which slots are named; *fires_per_tick*: the most fires of one pair a pass handles."""
        self.now = now
        self._grace = misfire_grace
        self._tz = tz
        self._most = fires_per_tick
        self._known: dict[tuple[CronSchedule, datetime, str, str], Due] = {}

    def of(self, trigger: CronSchedule, last_run_at: datetime, granularity: str, slot: str) -> Due:
        """The fires of *trigger* after *last_run_at* up to the pass's moment, one per slot of *granularity*, their slots named at *slot*."""
        key = (trigger, last_run_at, granularity, slot)
        due = self._known.get(key)
        if due is None:
            due = self._known[key] = self._worked_out(trigger, last_run_at, granularity, slot)
        return due

    def _worked_out(self, trigger: CronSchedule, last_run_at: datetime, granularity: str, slot: str) -> Due:
        moments = fires_since(trigger, last_run_at, self.now, granularity=granularity)
        if not moments:
            return Due((), None, trigger.get_next_fire_time(last_run_at, last_run_at))
        overdue = [moment for moment in moments if is_late(moment, self.now, self._grace)]  # the oldest ones: a prefix
        summary = None
        if len(overdue) > MISSED_LINES_PER_PAIR:  # as serve does: a summary, and the newest its own line
            summary = (len(overdue) - 1, overdue[0].isoformat(), overdue[-2].isoformat())
            moments = moments[len(overdue) - 1 :]
        moments = moments[: self._most]
        fires = tuple(
            Fire(
                moment,
                moment.isoformat(),
                moment.astimezone(UTC).isoformat(),
                slot_for(moment.astimezone(self._tz), slot, self._tz),
                is_late(moment, self.now, self._grace),
            )
            for moment in moments
        )
        last = moments[-1].astimezone(UTC)
        return Due(fires, summary, trigger.get_next_fire_time(last, last))
