"""Slots and fire times: from a routine's cron schedule to the times it is due.

A slot is computed from the *scheduled* time in the runner's timezone, never
from the clock at which a run happens to execute:

=========  ==================  =====================================
granularity  slot               example scheduled time
=========  ==================  =====================================
minute     ``2026-09-05T16:05``  16:05
hour       ``2026-09-05T16``     16:00
day        ``2026-09-05``        21:00
week       ``2026-W36``          Sunday 22:00 (ISO week)
month      ``2026-09``           the 1st, 08:00
=========  ==================  =====================================

Fire times are computed here, once, for every consumer (``serve`` through
:class:`CronSchedule`, which is an APScheduler trigger; ``simulate``; ``run``
snapping ``--at`` to its slot; ``status``; the catch-up on start).
APScheduler's own ``CronTrigger`` only parses the fields: chained from one
fire to the next, its ``get_next_fire_time`` skips the first fire after a
spring-forward change (Europe/Berlin ``0 0 * * *`` never fired on
2026-03-30), so it never decides a fire time.

The rule, cron's usual convention, for the wall-clock times a schedule names:

* a time that exists once fires at that moment;
* a time that occurs twice (the repeated hour when clocks go back) fires
  once, at its first occurrence; the repeat does not fire;
* a time that does not exist (skipped when clocks go forward) fires once,
  at the first moment after the gap (02:30 on Berlin's March change day
  fires at 03:00 CEST); several skipped times collapse into that one fire.
  When that moment is on the next day (a gap past midnight, as in
  America/Nuuk), the fire is at the last second before the gap instead, so
  that it keeps its own day's slot.

Fire times are compared and subtracted as instants (in UTC): two aware
datetimes that share a ``ZoneInfo`` compare by wall clock in Python, so
02:45 CEST would sort after 02:10 CET in the repeated hour.
"""

from __future__ import annotations

import bisect
import calendar
import functools
from collections.abc import Iterator
from datetime import MAXYEAR, MINYEAR, UTC, date, datetime, timedelta, tzinfo
from typing import Any, Final

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from runner.cron.crontab import day_of_week_names

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "LEAST_MISFIRE_GRACE",
    "CronSchedule",
    "client_key",
    "cron_trigger",
    "fire_times",
    "fires_since",
    "is_late",
    "latest_fire_time",
    "slot_for",
]

#: The times a run may be asked for (``run --at``, a fleet task's fire time). The schedules find no
#: fire time before 1970 (APScheduler works in POSIX time); the margin below year 9999 leaves room
#: for what a run computes from a time: a routine's window (at most 100 years) or a simulation of
#: up to 100 years. Outside, datetime arithmetic would end in OverflowError.
EARLIEST_TIME: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME: Final = datetime(9000, 1, 1, tzinfo=UTC)

#: How far back :func:`latest_fire_time` looks without a ``not_before``, and how far ahead the next fire is
#: searched. A valid schedule fires at least once in any 40 years: its rarest date, 29 February on one
#: weekday, can go 14,609 days without coming (a Tuesday on 2084-02-29, the next on 2124-02-29, since 2100
#: has no leap day); every other date recurs sooner. So its previous and its next fire are always found.
_REACH_DAYS: Final = 50 * 366
#: One whole 28-year cycle of the calendar without a skipped leap year: every combination
#: of month, day and weekday that can ever occur occurs in it.
_CYCLE: Final = (date(2001, 1, 1), date(2029, 1, 1))
_ONE_DAY: Final = timedelta(days=1)
#: Days of resolved fires kept per trigger (a few KB each for every-minute schedules).
_CACHED_DAYS: Final = 64


def _utc(moment: datetime) -> datetime:
    """*moment* as a UTC instant; a naive time is refused, since ``astimezone`` would read it in the host's zone."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"a fire-time bound must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC)


def _matches(field: Any, moment: date | datetime) -> bool:
    """Whether an APScheduler cron *field* allows *moment*'s value (its smallest allowed value from there is that value)."""
    return bool(field.get_next_value(moment) == field.get_value(moment))


def _resolve(wall: datetime, tz: tzinfo) -> datetime:
    """The instant a naive local *wall* time fires in *tz*, by the module's DST rule, as an aware time in *tz*."""
    first, second = wall.replace(tzinfo=tz, fold=0), wall.replace(tzinfo=tz, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first  # the common case: the time exists once
    real = [moment.astimezone(UTC) for moment in (first, second) if moment.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall]
    if real:
        return min(real).astimezone(tz)  # repeated: the first occurrence
    # Skipped: the gap's end is the one transition between the two readings' instants.
    low, high = sorted(int(moment.astimezone(UTC).timestamp()) for moment in (first, second))
    after = datetime.fromtimestamp(high, UTC).astimezone(tz).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, UTC).astimezone(tz).utcoffset() == after:
            high = middle
        else:
            low = middle
    end = datetime.fromtimestamp(high, UTC).astimezone(tz)
    if end.date() != wall.date():
        # A gap that runs past midnight (America/Nuuk: Saturday 23:00 -02 is Sunday 00:00 -01): its
        # end is on the next day, so the fire would take that day's slot, the named day would have
        # none and the next day two. It runs at the last second before the change, on its own day.
        before = datetime.fromtimestamp(high - 1, UTC).astimezone(tz)
        if before.date() == wall.date():
            return before
    return end


class CronSchedule(BaseTrigger):  # type: ignore[misc]  # APScheduler 3.x ships no type hints
    """A five-field cron schedule in a timezone: its fire times by the module's DST rule.

    It is also the APScheduler trigger ``serve`` schedules with, so the
    scheduler fires exactly at the times every other consumer computes.

    Attributes:
        expression: the cron expression as configured.
        timezone: the zone its wall-clock times are read in.
    """

    __slots__ = ("_cache", "_days", "_due", "_months", "_times", "_weekdays", "expression", "timezone")

    def __init__(self, expression: str, tz: tzinfo) -> None:
        if not expression.isascii():
            # Python's int() reads Arabic-Indic or full-width digits as numbers, and so did the
            # fields; no crontab, systemd timer or reader of the config would.
            raise ValueError(f"a cron expression is written in ASCII, got {expression!r}")
        fields = expression.split()
        if len(fields) != 5:
            raise ValueError(f"a cron expression has 5 fields (minute hour day month day-of-week), got {len(fields)}")
        minute, hour, day, month, day_of_week = fields
        # APScheduler parses (and validates) the fields; which times they allow is decided here.
        parsed = CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=day_of_week_names(day_of_week), timezone=tz)
        by_name = {field.name: field for field in parsed.fields}
        self.expression = expression
        self.timezone = tz
        self._months = frozenset(m for m in range(1, 13) if _matches(by_name["month"], date(2001, m, 1)))
        self._days, self._weekdays = by_name["day"], by_name["day_of_week"]
        hours = [h for h in range(24) if _matches(by_name["hour"], datetime(2001, 1, 1, h, tzinfo=UTC))]
        minutes = [m for m in range(60) if _matches(by_name["minute"], datetime(2001, 1, 1, 0, m, tzinfo=UTC))]
        self._times = tuple((h, m) for h in hours for m in minutes)
        self._cache: dict[date, tuple[tuple[datetime, ...], tuple[datetime, ...]]] = {}
        self._due: dict[tuple[int, int, int, bool], bool] = {}
        if not self._times or not any(self.is_due_on(_CYCLE[0] + timedelta(days=n)) for n in range((_CYCLE[1] - _CYCLE[0]).days)):
            raise ValueError("no date matches its day, month and day-of-week fields together, so it never fires")

    def __str__(self) -> str:
        return f"cron[{self.expression!r}, {self.timezone}]"

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r}, {self.timezone!r})"

    def is_due_on(self, day: date) -> bool:
        """Whether the schedule names wall-clock times on local date *day*."""
        # The fields decide by the month, the day, its weekday and the month's length ("L", "last fri", "2nd mon"):
        # remembered by those, a few thousand at most, since a scan for a yearly fire asks of every day of a year.
        key = (day.month, day.day, day.weekday(), day.month == 2 and calendar.isleap(day.year))
        due = self._due.get(key)
        if due is None:
            due = self._due[key] = day.month in self._months and _matches(self._days, day) and _matches(self._weekdays, day)
        return due

    def _day(self, day: date) -> tuple[tuple[datetime, ...], tuple[datetime, ...]]:
        """The fires of the wall-clock times named on local date *day*: (UTC instants, the same in the zone), ascending, each once.

        Cached per trigger (the trigger itself is cached by :func:`cron_trigger`), so that
        APScheduler's fire-to-fire calls and repeated snaps do not resolve a day twice.
        """
        cached = self._cache.get(day)
        if cached is None:
            instants: list[datetime] = []
            fires: list[datetime] = []
            if self.is_due_on(day):
                for hour, minute in self._times:
                    fire = _resolve(datetime(day.year, day.month, day.day, hour, minute), self.timezone)  # noqa: DTZ001 - a wall-clock time, which _resolve places in the zone
                    instant = fire.astimezone(UTC)
                    if not instants or instant != instants[-1]:  # skipped times collapse into the gap's end
                        instants.append(instant)
                        fires.append(fire)
            if len(self._cache) >= _CACHED_DAYS:
                self._cache.clear()
            cached = self._cache[day] = (tuple(instants), tuple(fires))
        return cached

    def after(self, moment: datetime, *, days: int = _REACH_DAYS) -> Iterator[datetime]:
        """Fire times at or after *moment* (aware), ascending, each instant once, for up to *days* days."""
        since = _utc(moment)
        # A day's skipped times may fire on the next day (a gap over midnight): start a day early.
        day = since.astimezone(self.timezone).date() - _ONE_DAY
        last: datetime | None = None
        remaining = days + 1
        while remaining > 0:
            if day.month not in self._months and day.year < MAXYEAR:  # no fire in this month: on to the next one's first day
                following = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                remaining -= (following - day).days
                day = following
                continue
            if self.is_due_on(day):  # a day that names no time has no fires: not resolved
                instants, fires = self._day(day)
                for position in range(bisect.bisect_left(instants, since), len(instants)):
                    if instants[position] != last:
                        last = instants[position]
                        yield fires[position]
            remaining -= 1
            day += _ONE_DAY

    def before(self, moment: datetime, *, days: int = _REACH_DAYS) -> Iterator[datetime]:
        """Fire times at or before *moment* (aware), descending, each instant once, for up to *days* days back."""
        until = _utc(moment)
        day = until.astimezone(self.timezone).date() + _ONE_DAY
        last: datetime | None = None
        remaining = days + 2
        while remaining > 0:
            if day.month not in self._months and day.year > MINYEAR:  # no fire in this month: on to the previous one's last day
                previous = day.replace(day=1) - _ONE_DAY
                remaining -= (day - previous).days
                day = previous
                continue
            if self.is_due_on(day):  # a day that names no time has no fires: not resolved
                instants, fires = self._day(day)
                for position in range(bisect.bisect_right(instants, until) - 1, -1, -1):
                    if instants[position] != last:
                        last = instants[position]
                        yield fires[position]
            remaining -= 1
            day -= _ONE_DAY

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        """APScheduler's trigger protocol: the first fire after *previous_fire_time*, or at or after *now* for a new job.

        As in APScheduler's own triggers, never the previous fire again, and a
        previous fire after *now* (the clock went back) does not hide the
        fires between *now* and it.
        """
        since = _utc(now)
        if previous_fire_time is not None:
            previous = _utc(previous_fire_time)
            since = min(since, previous + timedelta(microseconds=1))
            if since == previous:
                since += timedelta(microseconds=1)
        return next(self.after(since), None)


@functools.lru_cache(maxsize=256)
def cron_trigger(expression: str, tz: tzinfo) -> CronSchedule:
    """The :class:`CronSchedule` of a five-field crontab *expression* in *tz* (cached: it is immutable).

    Fields read as in crontab (day of week 0 or 7 is Sunday), with one
    difference: when both the day of month and the day of week are
    restricted, a time must match both (crontab fires when either matches).

    Raises:
        ValueError: the expression is not a valid five-field cron expression, or it never fires.
    """
    return CronSchedule(expression, tz)


def slot_for(scheduled: datetime, granularity: str, tz: tzinfo) -> str:
    """The slot of a run scheduled at *scheduled*, at *granularity*, in *tz*.

    Raises:
        ValueError: naive *scheduled* or unknown *granularity*.
    """
    if scheduled.tzinfo is None:
        raise ValueError(f"scheduled time must be timezone-aware, got {scheduled!r}")
    local = scheduled.astimezone(tz)
    if granularity == "minute":
        return local.strftime("%Y-%m-%dT%H:%M")
    if granularity == "hour":
        return local.strftime("%Y-%m-%dT%H")
    if granularity == "day":
        return local.strftime("%Y-%m-%d")
    if granularity == "week":
        year, week, _ = local.isocalendar()
        return f"{year}-W{week:02d}"
    if granularity == "month":
        return local.strftime("%Y-%m")
    raise ValueError(f"unknown slot granularity {granularity!r}; expected minute, hour, day, week or month")


def client_key(agent: str, routine: str, slot: str) -> str:
    """The idempotency key of one (agent, routine, slot): ``agent:routine:slot``."""
    return f"{agent}:{routine}:{slot}"


def fire_times(trigger: CronSchedule, start: datetime, end: datetime, *, granularity: str | None = None) -> Iterator[datetime]:
    """Fire times of *trigger* in ``[start, end)``, ascending, as aware times in its timezone.

    With *granularity*, a fire whose slot equals the previous fire's slot is
    left out (``30 * * * *`` on a spring-forward day: 02:30 fires at 03:00,
    and 03:30 is in the same hour slot).
    """
    tz = trigger.timezone
    stop = _utc(end)
    last_slot: str | None = None
    days = max(0, (stop - _utc(start)).days) + 2
    for moment in trigger.after(start, days=days):
        if moment.astimezone(UTC) >= stop:
            return
        slot = slot_for(moment, granularity, tz) if granularity else None
        if slot is None or slot != last_slot:
            yield moment
        last_slot = slot


def latest_fire_time(trigger: CronSchedule, at: datetime, *, not_before: datetime | None = None) -> datetime | None:
    """The most recent fire time of *trigger* at or before the instant *at* (optionally not before *not_before*).

    The result is never after *at*, also in the repeated hour of a fall-back
    change. Returns None when there is none in the window. Without *not_before* the window reaches back
    further than a valid schedule ever goes without a fire, so its latest fire is always found,
    however long ago (``0 0 29 2 1`` at the end of 2026: 2016-02-29).

    Raises:
        ValueError: a naive *at* or *not_before*.
    """
    floor = None if not_before is None else _utc(not_before)
    days = _REACH_DAYS if floor is None else max(0, (_utc(at) - floor).days) + 1
    for moment in trigger.before(at, days=days):
        if floor is not None and moment.astimezone(UTC) < floor:
            return None
        return moment
    return None


# Which fires of a pair are due since the last one handled, and which came too late to run: one rule for
# serve (Scheduler.fire) and the fleet's beat, so that both run the same slots over a DST change.
#: A fire is late when it comes more than this after its time, whatever misfire_grace says (a scheduler wakes up ms late).
LEAST_MISFIRE_GRACE: Final = timedelta(seconds=1)


def fires_since(trigger: CronSchedule, last: datetime, now: datetime, *, granularity: str) -> list[datetime]:
    """The fires of *trigger* after *last* and at or before *now*, ascending, one per slot of *granularity*."""
    return list(fire_times(trigger, last + timedelta(microseconds=1), now + timedelta(microseconds=1), granularity=granularity))


def is_late(moment: datetime, now: datetime, misfire_grace: timedelta) -> bool:
    """Whether a fire at *moment*, handled at *now*, is past *misfire_grace* (at least :data:`LEAST_MISFIRE_GRACE`)."""
    return now.astimezone(UTC) - moment.astimezone(UTC) > max(misfire_grace, LEAST_MISFIRE_GRACE)
