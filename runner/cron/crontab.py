"""Crontab's vocabulary, shared by the runner's trigger (:mod:`runner.cron.slots`) and the systemd render (:mod:`runner.cron.oncalendar`).

Day-of-week numbers follow crontab: 0 and 7 are Sunday, 1 is Monday. The
names are crontab's three-letter English abbreviations, in lower case.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DAY_NAMES", "MONTH_NAMES", "day_of_week_names"]

#: Indexed by crontab's day-of-week number (0 = Sunday).
DAY_NAMES: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: Indexed by month number minus one.
MONTH_NAMES: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _day_number(token: str) -> int:
    lowered = token.lower()
    if lowered in DAY_NAMES:
        return DAY_NAMES.index(lowered)
    if not token.isdigit() or int(token) > 7:
        raise ValueError(f"day of week {token!r} is not 0-7 or a day name")
    return int(token)


def day_of_week_names(field: str) -> str:
    """Crontab's day-of-week *field* (0 or 7 = Sunday) with every day it matches written as a name.

    APScheduler 3.x reads numbers in this field as 0 = Monday, even in
    ``CronTrigger.from_crontab``; names mean the same to both, so every item
    is expanded and written out as names.

    Raises:
        ValueError: an item is not a day number 0-7, a day name, a range of them or a positive step.
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
            low, high = _day_number(first), _day_number(last)
            if high < low:
                raise ValueError(f"day-of-week range {base!r} runs backwards")
        else:
            low = _day_number(base)
            high = 6 if step else low
        days.update(day % 7 for day in range(low, high + 1, step or 1))
    return ",".join(DAY_NAMES[day] for day in sorted(days))
