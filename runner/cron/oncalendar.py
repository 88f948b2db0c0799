"""Cron schedules as systemd ``OnCalendar=`` expressions, with the runner's meaning.

A five-field cron expression (minute hour day month day-of-week) becomes
one ``OnCalendar=`` value ``[DOW] *-MONTH-DAY HOUR:MINUTE:00 TIMEZONE``.
Each field is expanded to the set of values it matches and written back in
systemd's syntax (``*``, ``a..b`` and comma lists; never ``start/step``,
which systemd 252 gets wrong), so the timer fires exactly when
``ghostrunner serve`` would:

* day-of-week follows crontab (0 or 7 = Sunday), as ``runner.cron.slots`` reads it;
* a restricted day *and* day-of-week must both match, as in the runner's
  APScheduler trigger (and in OnCalendar=), not either one as in Vixie cron;
* the trailing timezone is the configured one, so schedules keep their local
  wall-clock time across daylight-saving changes. One difference remains: a
  time that does not exist on a spring-forward day (02:30 in Europe/Berlin)
  is skipped by systemd, while ``serve`` runs it after the gap;
  :func:`skipped_local_times` finds such times so the render can warn.

What the runner's trigger accepts beyond numbers, names, ranges and steps
(APScheduler's ``last`` day, for instance) is refused with
:class:`ScheduleNotExpressibleError` rather than approximated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from typing import Final
from zoneinfo import ZoneInfo

from runner.cron.crontab import DAY_NAMES, MONTH_NAMES, day_of_week_names
from runner.errors import RunnerError, quoted

__all__ = ["CronFields", "ScheduleNotExpressibleError", "expand_schedule", "skipped_local_times", "to_on_calendar"]

#: systemd orders weekdays from Monday, so "Sun..Tue" would run backwards; ranges are built in this order.
_SYSTEMD_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ITEM: Final = re.compile(r"(?P<first>\*|[a-z0-9]+)(?:-(?P<last>[a-z0-9]+))?(?:/(?P<step>\d+))?")


class ScheduleNotExpressibleError(RunnerError, ValueError):
    """A routine's cron schedule has no exact ``OnCalendar=`` equivalent.

    Attributes:
        routine: the routine's name.
        schedule: its cron expression.
        reason: which part cannot be expressed.
    """

    exit_code = 78  # EX_CONFIG: the configuration cannot be deployed as timers

    def __init__(self, routine: str, schedule: str, reason: str, target: str = "a systemd OnCalendar= expression") -> None:
        self.routine = routine
        self.schedule = schedule
        self.reason = reason
        super().__init__(
            f"routine {routine!r}: schedule {quoted(schedule)} cannot be written as {target} ({reason}); "
            "use plain numbers, names, ranges, steps and lists, or deploy with `ghostrunner serve`"
        )


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    names_start: int = 0

    def number(self, token: str) -> int:
        if token.isdigit():
            value = int(token)
        elif token in self.names:
            value = self.names.index(token) + self.names_start
        else:
            raise ValueError(f"{self.name} value {token!r} is not a number or a name")
        if not self.low <= value <= self.high:
            raise ValueError(f"{self.name} value {value} is outside {self.low}-{self.high}")
        return value

    def expand(self, text: str) -> list[int]:
        values: set[int] = set()
        for item in text.lower().split(","):
            match = _ITEM.fullmatch(item)
            if match is None:
                raise ValueError(f"{self.name} item {item!r} is not a number, name, range or step")
            first, last, step_text = match.group("first", "last", "step")
            step = int(step_text) if step_text else 1
            if step < 1:
                raise ValueError(f"{self.name} step {step_text!r} is not positive")
            if first == "*":
                if last is not None:
                    raise ValueError(f"{self.name} item {item!r} is not a number, name, range or step")
                low, high = self.low, self.high
            else:
                low = self.number(first)
                # "a/s" runs from a to the field's end, as in the runner's trigger.
                high = self.number(last) if last is not None else (self.high if step_text else low)
            if high < low:
                raise ValueError(f"{self.name} range {item!r} runs backwards")
            values.update(range(low, high + 1, step))
        return sorted(values)


_MINUTE: Final = _Field("minute", 0, 59)
_HOUR: Final = _Field("hour", 0, 23)
_DAY: Final = _Field("day", 1, 31)
_MONTH: Final = _Field("month", 1, 12, MONTH_NAMES, 1)
_WEEKDAY: Final = _Field("day-of-week", 0, 6, DAY_NAMES, 0)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and runs[-1][1] == value - 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _render(values: list[int], field: _Field, label: list[str] | None = None) -> str:
    """Values as systemd syntax: ``*``, or a list with ``a..b`` runs.

    Never ``start/step``: systemd 252 loses fires of a repetition whose step
    does not divide the field's range (``*:00/7`` skips the next day's 00:00,
    ``00/5:00`` the next month's first midnight), so steps are spelled out.
    """
    if values == list(range(field.low, field.high + 1)):
        return "*"

    def show(value: int) -> str:
        return label[value] if label is not None else f"{value:02d}"

    parts = []
    for first, last in _runs(values):
        if last - first >= 2:
            parts.append(f"{show(first)}..{show(last)}")
        else:
            parts.extend(show(value) for value in range(first, last + 1))
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class CronFields:
    """The values each field of a cron schedule matches, with the runner's meaning."""

    minutes: list[int]
    hours: list[int]
    days: list[int]
    months: list[int]
    weekdays: list[int]  # 0 = Sunday


def expand_schedule(routine: str, schedule: str, target: str = "a systemd OnCalendar= expression") -> CronFields:
    """Each field of *schedule* as the sorted values it matches (day of week: 0 is Sunday).

    Raises:
        ScheduleNotExpressibleError: a part is not a number, name, range, step or list (its message names *target*).
    """
    fields = schedule.split()
    if len(fields) != 5:
        raise ScheduleNotExpressibleError(routine, schedule, f"a cron expression has 5 fields, got {len(fields)}", target)
    minute, hour, day, month, weekday = fields
    try:
        return CronFields(
            _MINUTE.expand(minute), _HOUR.expand(hour), _DAY.expand(day), _MONTH.expand(month), _WEEKDAY.expand(day_of_week_names(weekday))
        )
    except ValueError as exc:
        raise ScheduleNotExpressibleError(routine, schedule, str(exc), target) from None


def to_on_calendar(routine: str, schedule: str, timezone: ZoneInfo) -> str:
    """The ``OnCalendar=`` value that fires when *schedule* does in *timezone*.

    Args:
        routine: the routine's name (only for the error message).
        schedule: a five-field cron expression, as the configuration holds it.
        timezone: the runner's configured timezone.

    Raises:
        ScheduleNotExpressibleError: the schedule uses syntax OnCalendar= cannot express exactly.
    """
    fields = expand_schedule(routine, schedule)
    monday_first = sorted((day + 6) % 7 for day in fields.weekdays)
    prefix = "" if len(monday_first) == 7 else _render(monday_first, _WEEKDAY, list(_SYSTEMD_DAYS)) + " "
    date = f"*-{_render(fields.months, _MONTH)}-{_render(fields.days, _DAY)}"
    time = f"{_render(fields.hours, _HOUR)}:{_render(fields.minutes, _MINUTE)}:00"
    return f"{prefix}{date} {time} {timezone.key}"


def skipped_local_times(routine: str, schedule: str, timezone: ZoneInfo, start: date, days: int = 731) -> list[datetime]:
    """Scheduled wall-clock times in ``[start, start + days)`` that do not exist in *timezone* (a DST gap).

    At such a time ``ghostrunner serve`` still runs the slot once (right after
    the gap, or just before it when the gap ends on the next day; see
    :mod:`runner.cron.slots`), while a systemd timer skips that day's fire, so the
    render command warns about them.

    Raises:
        ScheduleNotExpressibleError: as :func:`to_on_calendar`.
    """
    fields = expand_schedule(routine, schedule)
    skipped = []
    for offset in range(days):
        day = start + timedelta(days=offset)
        before = datetime.combine(day, dt_time(0), timezone).utcoffset()
        after = datetime.combine(day + timedelta(days=1), dt_time(0), timezone).utcoffset()
        if (
            before == after
            or day.day not in fields.days
            or day.month not in fields.months
            or (day.weekday() + 1) % 7 not in fields.weekdays
        ):
            continue
        for hour in fields.hours:
            for minute in fields.minutes:
                local = datetime.combine(day, dt_time(hour, minute), timezone)
                if local.astimezone(UTC).astimezone(timezone).replace(tzinfo=None) != local.replace(tzinfo=None):
                    skipped.append(local)
    return skipped
