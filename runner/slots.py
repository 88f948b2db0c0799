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

Around a daylight-saving change APScheduler's cron trigger can fire twice at
the repeated wall-clock time (October) or at a time that does not exist
(March). Fire times are normalized to real wall-clock times, and
:func:`fire_times` drops a fire whose slot equals the previous one, so a DST
change neither skips nor doubles a slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, tzinfo
from typing import Final

from apscheduler.triggers.cron import CronTrigger

__all__ = ["client_key", "cron_trigger", "fire_times", "latest_fire_time", "slot_for"]

_LOOKBACKS: Final = (timedelta(hours=2), timedelta(days=2), timedelta(days=9), timedelta(days=33), timedelta(days=367), timedelta(days=5 * 366))


_DAY_NAMES: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _cron_day_number(token: str) -> int:
    lowered = token.lower()
    if lowered in _DAY_NAMES:
        return _DAY_NAMES.index(lowered)
    if not token.isdigit() or int(token) > 7:
        raise ValueError(f"day of week {token!r} is not 0-7 or a day name")
    return int(token)


def _day_of_week(field: str) -> str:
    """Translate crontab's day-of-week field (0 or 7 = Sunday) into day names.

    APScheduler 3.x reads numbers in this field as 0 = Monday, even in
    ``CronTrigger.from_crontab``; names mean the same to both, so every item
    is expanded and written out as names.
    """
    if field == "*":
        return "*"
    days: set[int] = set()
    for item in field.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ValueError(f"day-of-week step {step_text!r} is not a positive number")
        if base == "*":
            low, high = 0, 6
        elif "-" in base:
            first, _, last = base.partition("-")
            low, high = _cron_day_number(first), _cron_day_number(last)
            if high < low:
                raise ValueError(f"day-of-week range {base!r} runs backwards")
        else:
            low = _cron_day_number(base)
            high = 6 if step else low
        days.update(day % 7 for day in range(low, high + 1, step or 1))
    return ",".join(_DAY_NAMES[day] for day in sorted(days))


def cron_trigger(expression: str, tz: tzinfo) -> CronTrigger:
    """A CronTrigger for a five-field crontab *expression* in *tz*.

    Fields read as in crontab (day of week 0 or 7 is Sunday), with one
    difference: when both the day of month and the day of week are
    restricted, a time must match both (crontab fires when either matches).

    Raises:
        ValueError: the expression is not a valid five-field cron expression.
    """
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"a cron expression has 5 fields (minute hour day month day-of-week), got {len(fields)}")
    minute, hour, day, month, day_of_week = fields
    return CronTrigger(
        minute=minute, hour=hour, day=day, month=month, day_of_week=_day_of_week(day_of_week), timezone=tz
    )


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


def fire_times(trigger: CronTrigger, start: datetime, end: datetime, *, granularity: str | None = None) -> Iterator[datetime]:
    """Fire times of *trigger* in ``[start, end)``, as real wall-clock times in its timezone.

    With *granularity*, a fire whose slot equals the previous fire's slot
    (the repeated hour of a DST change) is left out.
    """
    tz = trigger.timezone
    moment = trigger.get_next_fire_time(None, start)
    last_slot: str | None = None
    while moment is not None and moment < end:
        real = moment.astimezone(tz)  # 02:30+01:00 on a spring-forward day is really 03:30+02:00
        slot = slot_for(real, granularity, tz) if granularity else None
        if slot is None or slot != last_slot:
            yield real
        last_slot = slot
        moment = trigger.get_next_fire_time(moment, moment)


def latest_fire_time(trigger: CronTrigger, at: datetime, *, not_before: datetime | None = None) -> datetime | None:
    """The most recent fire time of *trigger* at or before *at* (optionally not before *not_before*).

    Returns None when there is none in the window (or within five years).
    """
    end = at + timedelta(microseconds=1)
    windows = [at - not_before] if not_before is not None else list(_LOOKBACKS)
    for lookback in windows:
        latest = None
        for moment in fire_times(trigger, at - lookback, end):
            latest = moment
        if latest is not None:
            return latest
    return None
