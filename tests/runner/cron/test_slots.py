"""Slots come from the scheduled time; cron fire times survive daylight-saving changes."""

from __future__ import annotations

import calendar
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from routines import BUILTIN_ROUTINES
from runner.cron.slots import client_key, cron_trigger, fire_times, latest_fire_time, slot_for

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("granularity", "slot"),
    [("hour", "2026-09-05T16"), ("day", "2026-09-05"), ("week", "2026-W36"), ("minute", "2026-09-05T16:00"), ("month", "2026-09")],
)
def test_slot_formats(granularity: str, slot: str) -> None:
    """Each granularity renders the scheduled local time in its documented format."""
    assert slot_for(datetime(2026, 9, 5, 16, 0, tzinfo=BERLIN), granularity, BERLIN) == slot


def test_slot_uses_the_runner_timezone_not_utc() -> None:
    """A 00:30 Berlin run belongs to that Berlin day even though it is the previous day in UTC."""
    scheduled = datetime(2026, 9, 4, 22, 30, tzinfo=UTC)
    assert slot_for(scheduled, "day", BERLIN) == "2026-09-05"
    assert client_key("motoko", "evening", "2026-09-05") == "motoko:evening:2026-09-05"


def test_latest_fire_time_snaps_a_late_run_to_its_scheduled_slot() -> None:
    """A run executing hours late still belongs to the slot of its scheduled time."""
    trigger = cron_trigger(BUILTIN_ROUTINES["pulse-4h"].schedule, BERLIN)
    late = datetime(2026, 9, 5, 19, 59, tzinfo=BERLIN)
    assert latest_fire_time(trigger, late) == datetime(2026, 9, 5, 16, 0, tzinfo=BERLIN)
    weekly = cron_trigger(BUILTIN_ROUTINES["digest"].schedule, BERLIN)
    assert latest_fire_time(weekly, datetime(2026, 9, 9, 12, tzinfo=BERLIN)) == datetime(2026, 9, 6, 22, 0, tzinfo=BERLIN)


def test_a_fire_years_back_is_the_latest_and_a_fire_decades_ahead_the_next() -> None:
    """``0 0 29 2 1``, 29 February on a Monday: at the end of 2026 its latest fire is 2016-02-29 and its next 2044-02-29."""
    trigger = cron_trigger("0 0 29 2 1", BERLIN)
    now = datetime(2026, 12, 8, tzinfo=UTC)
    assert latest_fire_time(trigger, now) == datetime(2016, 2, 29, tzinfo=BERLIN)
    assert next(trigger.after(now)) == datetime(2044, 2, 29, tzinfo=BERLIN)


@pytest.mark.parametrize("weekday", range(7))
def test_29_february_on_each_weekday_finds_its_previous_fire_across_2100(weekday: int) -> None:
    """29 February on one weekday recurs after up to 40 years (2100 has no leap day): from the eve of each, the one before is
    the latest fire, as the calendar counts them, in a zone with daylight saving."""
    zone = ZoneInfo("America/New_York")
    trigger = cron_trigger(f"30 9 29 2 {weekday}", zone)
    leap_days = [date(year, 2, 29) for year in range(2000, 2200) if calendar.isleap(year) and date(year, 2, 29).isoweekday() % 7 == weekday]
    assert max((later - earlier).days for earlier, later in pairwise(leap_days)) > 5 * 366
    for earlier, later in pairwise(leap_days):
        eve = datetime.combine(later, time(9, 29), zone)
        assert latest_fire_time(trigger, eve) == datetime.combine(earlier, time(9, 30), zone), later


def test_a_rare_fire_in_a_spring_forward_gap_is_found_years_back() -> None:
    """``30 2 31 3 0`` names 02:30 of 31 March on a Sunday, Berlin's spring-forward day in 2013 and 2019: from 2019's, before
    its gap, the latest fire is 2013's, at the gap's end (03:00 CEST), six years back."""
    trigger = cron_trigger("30 2 31 3 0", BERLIN)
    assert latest_fire_time(trigger, datetime(2019, 3, 31, 1, 59, tzinfo=BERLIN)) == datetime(2013, 3, 31, 3, 0, tzinfo=BERLIN)
    assert latest_fire_time(trigger, datetime(2019, 3, 31, 3, 0, tzinfo=BERLIN)) == datetime(2019, 3, 31, 3, 0, tzinfo=BERLIN)


def test_cron_day_of_week_follows_standard_cron() -> None:
    """0 and 7 mean Sunday and 1-5 Monday to Friday, as in crontab (APScheduler alone reads 0 as Monday)."""
    start, end = datetime(2026, 9, 7, tzinfo=BERLIN), datetime(2026, 9, 14, tzinfo=BERLIN)
    assert [d.strftime("%a") for d in fire_times(cron_trigger("0 22 * * 0", BERLIN), start, end)] == ["Sun"]
    assert [d.strftime("%a") for d in fire_times(cron_trigger("0 22 * * 7", BERLIN), start, end)] == ["Sun"]
    assert [d.strftime("%a") for d in fire_times(cron_trigger("0 9 * * 1-5", BERLIN), start, end)] == ["Mon", "Tue", "Wed", "Thu", "Fri"]


@pytest.mark.parametrize("switch", [datetime(2026, 3, 29, tzinfo=BERLIN), datetime(2026, 10, 25, tzinfo=BERLIN)], ids=["spring-forward", "fall-back"])
@pytest.mark.parametrize(
    ("schedule", "granularity"),
    [("0 */4 * * *", "hour"), ("0 21 * * *", "day"), ("0 22 * * 0", "week"), ("30 2 * * *", "day"), ("0 * * * *", "hour")],
    ids=["pulse-4h", "evening", "digest", "daily-02:30", "hourly"],
)
def test_dst_change_neither_skips_nor_doubles_a_slot(switch: datetime, schedule: str, granularity: str) -> None:
    """Across Berlin's March and October switches every expected slot occurs exactly once."""
    trigger = cron_trigger(schedule, BERLIN)
    start, end = switch - timedelta(days=8), switch + timedelta(days=8)
    times = list(fire_times(trigger, start, end, granularity=granularity))
    slots = [slot_for(moment, granularity, BERLIN) for moment in times]
    assert len(slots) == len(set(slots)), Counter(slots).most_common(3)
    assert times == sorted(times)
    if granularity == "day":
        days = {(start + timedelta(days=n)).strftime("%Y-%m-%d") for n in range(16)}
        assert set(slots) == days
    if schedule == "0 * * * *":
        # Every wall-clock hour that exists on the switch day occurs once: 23 in March, 24 in October.
        on_switch = [s for s in slots if s.startswith(switch.strftime("%Y-%m-%d"))]
        assert len(on_switch) == (23 if switch.month == 3 else 24)
    if schedule == "0 */4 * * *":
        assert len(slots) == 16 * 6


@pytest.mark.parametrize("expression", ["0 9 29 2 *", "15 6 last 2 *", "0 9 1-7 * 1", "30 23 31 * *", "0 0 13 * 5", "5 4 1 1,7 *"])
def test_a_schedule_of_few_days_a_year_finds_the_fires_apscheduler_finds(expression: str) -> None:
    """Months without a fire are passed over and each day's verdict is remembered by month, day, weekday and leap year:
    one trigger asked from many starting points (leap years and others) gives APScheduler's own fires, in UTC where no DST rule applies."""
    from apscheduler.triggers.cron import CronTrigger

    from runner.cron.crontab import day_of_week_names

    minute, hour, day, month, weekday = expression.split()
    reference = CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=day_of_week_names(weekday), timezone=UTC)
    trigger = cron_trigger(expression, UTC)
    for start in (datetime(2023, 11, 30, tzinfo=UTC) + timedelta(days=97 * step) for step in range(20)):
        expected, previous = [], None
        for _ in range(4):
            previous = reference.get_next_fire_time(previous, previous or start)
            expected.append(previous)
        assert [fire for _, fire in zip(range(4), trigger.after(start), strict=False)] == expected, start
