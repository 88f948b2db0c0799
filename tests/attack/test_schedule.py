"""Schedule correctness under attack: no slot skipped or doubled, in every zone, at every transition.

The reference for fire times is written here, independently of ``runner.cron.slots``:
it walks every minute of a year in UTC, reads the wall clock through zoneinfo,
and applies the README's rule (a repeated wall-clock time fires at its first
occurrence; a skipped one fires at the first moment after the gap).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal.frame.timeinput import TIME_FORMS
from runner.cron.slots import cron_trigger, fire_times, latest_fire_time, slot_for
from runner.deploy.systemd.units import render_units
from runner.errors import ConfigError
from runner.schedule.scheduler import Scheduler, missed_slots
from runner.settings.config import load_config
from tests._support import NIGHTLY, entries, ghostrunner, write_config

YEAR = 2026
#: The zones the issue names, plus Havana, whose changes happen at midnight (a gap and an overlap across the date line).
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "Australia/Lord_Howe", "America/Havana")

#: Daily, monthly, every-N-minutes, hourly ranges, the 4-hourly pulse, weekly, and times inside gaps and overlaps.
EXPRESSIONS = (
    "0 0 * * *",        # daily at midnight: Berlin's 2026-03-30 went missing; Havana's midnight does not exist in March
    "0 0 1 * *",        # monthly: Berlin lost April
    "*/7 * * * *",      # every 7 minutes, a step that does not divide the hour
    "0 * * * *",        # hourly
    "30 1-3 * * *",     # an hourly range through the usual gap and overlap hours
    "0 */4 * * *",      # the built-in pulse
    "0 22 * * 0",       # weekly (Sunday, crontab's 0)
    "30 2 * * *",       # inside Berlin's/New York's/Sydney's gap and overlap
    "0 2 * * *",        # at the gap's start
    "45 0 * * *",       # inside Havana's midnight gap and overlap
    "15,45 1 * * 0",    # Sundays (most changes happen on one) in Lord Howe's 30-minute gap/overlap
    "0 9 1-7 * sun",    # a restricted day and weekday: both must match
)

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MINUTE = timedelta(minutes=1)


def _values(field: str, low: int, high: int, names: tuple[str, ...] = (), first_name: int = 0) -> frozenset[int]:
    """The values a standard cron field names (numbers, names, ranges, steps, lists)."""
    def number(token: str) -> int:
        return names.index(token) + first_name if token in names else int(token)

    found: set[int] = set()
    for item in field.lower().split(","):
        base, _, step = item.partition("/")
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            start, stop = (number(part) for part in base.split("-"))
        else:
            start = number(base)
            stop = high if step else start
        found.update(range(start, stop + 1, int(step or 1)))
    return frozenset(found)


@dataclass(frozen=True)
class _Cron:
    """A reference reading of a cron expression: which naive wall-clock minutes it names."""

    minutes_of_day: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday

    @classmethod
    def parse(cls, expression: str) -> _Cron:
        minute, hour, day, month, weekday = expression.split()
        minutes, hours = _values(minute, 0, 59), _values(hour, 0, 23)
        weekdays = frozenset(value % 7 for value in _values(weekday, 0, 7, _DAYS))
        return cls(frozenset(h * 60 + m for h in hours for m in minutes), _values(day, 1, 31), _values(month, 1, 12, _MONTHS, 1), weekdays)

    def names_day(self, day: date) -> bool:
        return day.day in self.days and day.month in self.months and day.isoweekday() % 7 in self.weekdays

    def names(self, wall: datetime) -> bool:
        return self.names_day(wall.date()) and wall.hour * 60 + wall.minute in self.minutes_of_day


@dataclass(frozen=True)
class _ZoneYear:
    """The reference result of one walk: per expression its fire instants (UTC seconds), and the zone's transitions."""

    fires: dict[str, list[int]]
    transitions: list[int]
    start: int
    end: int


@cache
def _walk(zone: str) -> _ZoneYear:
    """Walk every minute of YEAR in *zone*, once for every expression."""
    tz = ZoneInfo(zone)
    crons = {expression: _Cron.parse(expression) for expression in EXPRESSIONS}
    start = int(datetime(YEAR, 1, 1, tzinfo=tz).timestamp())
    end = int(datetime(YEAR + 1, 1, 1, tzinfo=tz).timestamp())
    fires: dict[str, list[int]] = {expression: [] for expression in EXPRESSIONS}
    transitions = []
    previous = datetime.fromtimestamp(start - 60, tz).replace(tzinfo=None)
    latest_seen = previous
    day_cache: dict[date, list[tuple[str, _Cron]]] = {}
    for second in range(start, end, 60):
        wall = datetime.fromtimestamp(second, tz).replace(tzinfo=None)
        named: set[str] = set()
        if wall > latest_seen:  # a repeated wall-clock minute (wall <= latest_seen) is not its first occurrence
            day = wall.date()
            todays = day_cache.get(day)
            if todays is None:
                todays = day_cache[day] = [(expression, cron) for expression, cron in crons.items() if cron.names_day(day)]
            minute_of_day = wall.hour * 60 + wall.minute
            named.update(expression for expression, cron in todays if minute_of_day in cron.minutes_of_day)
        if wall - previous != _MINUTE:
            transitions.append(second)
            skipped = previous + _MINUTE
            while skipped < wall:  # clocks went forward: the skipped minutes fire now, at the gap's end
                named.update(expression for expression, cron in crons.items() if cron.names(skipped))
                skipped += _MINUTE
        for expression in named:
            fires[expression].append(second)
        previous = wall
        latest_seen = max(latest_seen, wall)
    return _ZoneYear(fires, transitions, start, end)


def _seconds(moments: Iterator[datetime]) -> list[int]:
    return [int(moment.timestamp()) for moment in moments]


@pytest.mark.parametrize("zone", ZONES)
def test_fire_times_equal_a_minute_by_minute_reference_over_a_year(zone: str) -> None:
    """In each zone, every expression's fire times over the whole year are exactly the reference's, each in the zone and never doubled."""
    tz = ZoneInfo(zone)
    reference = _walk(zone)
    if zone != "Asia/Kolkata":
        assert len(reference.transitions) == 2, "the year should hold one change each way"
    start, end = datetime.fromtimestamp(reference.start, tz), datetime.fromtimestamp(reference.end, tz)
    for expression in EXPRESSIONS:
        trigger = cron_trigger(expression, tz)
        computed = list(fire_times(trigger, start, end))
        assert _seconds(iter(computed)) == reference.fires[expression], (zone, expression)
        assert all(moment.tzinfo is tz for moment in computed)


@pytest.mark.parametrize("zone", ZONES)
def test_serve_chained_next_fire_and_run_snap_agree_with_the_reference_around_each_change(zone: str) -> None:
    """Chained get_next_fire_time (what APScheduler calls between fires) and latest_fire_time (run's snap) match the reference.

    Around every change, at each minute in the six hours around it and in both
    readings of the repeated hour, the snapped time is the reference's latest
    fire at or before that moment, never after it.
    """
    tz = ZoneInfo(zone)
    reference = _walk(zone)
    middle = (reference.start + reference.end) // 2  # Kolkata has no change: a window in mid-year
    windows = [(moment - 3 * 3600, moment + 3 * 3600) for moment in reference.transitions] or [(middle, middle + 6 * 3600)]
    for expression in EXPRESSIONS:
        trigger = cron_trigger(expression, tz)
        fires = reference.fires[expression]
        # serve's path: APScheduler asks for the next fire after the previous one, from the start of the year.
        chained_until = reference.end if expression != "*/7 * * * *" else reference.start + 40 * 86400
        chained, moment = [], trigger.get_next_fire_time(None, datetime.fromtimestamp(reference.start, tz))
        while moment is not None and moment.timestamp() < chained_until:
            chained.append(int(moment.timestamp()))
            moment = trigger.get_next_fire_time(moment, moment)
        assert chained == [second for second in fires if second < chained_until], (zone, expression)
        for low, high in windows:
            for second in range(low, high + 1, 60):
                for at in (datetime.fromtimestamp(second, tz), datetime.fromtimestamp(second + 59, tz).astimezone(UTC)):
                    position = bisect.bisect_right(fires, at.timestamp())
                    latest = latest_fire_time(trigger, at)
                    assert latest is not None and latest.timestamp() <= at.timestamp(), (zone, expression, at.isoformat())
                    assert int(latest.timestamp()) == fires[position - 1], (zone, expression, at.isoformat())
                    upcoming = trigger.get_next_fire_time(None, at)
                    assert upcoming is not None
                    assert int(upcoming.timestamp()) == fires[bisect.bisect_left(fires, at.timestamp())], (zone, expression, at.isoformat())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zone=st.sampled_from(ZONES), expression=st.sampled_from(EXPRESSIONS),
       offset=st.integers(min_value=40 * 86400, max_value=360 * 86400), fold=st.sampled_from([0, 1]))
def test_snapped_time_is_never_after_the_moment_and_nothing_fires_between(zone: str, expression: str, offset: int, fold: int) -> None:
    """For any moment of the year, in either reading of an ambiguous wall time, the snap is at or before it and the next fire after it."""
    tz = ZoneInfo(zone)
    wall = (datetime(YEAR, 1, 1, tzinfo=tz) + timedelta(seconds=offset)).replace(fold=fold)
    trigger = cron_trigger(expression, tz)
    latest = latest_fire_time(trigger, wall)
    assert latest is not None and latest.astimezone(UTC) <= wall.astimezone(UTC)
    following = trigger.get_next_fire_time(latest, latest)
    assert following is not None and following.astimezone(UTC) > wall.astimezone(UTC)


# -- the commands, with real processes --------------------------------------------------------------------------------

_ROUTINES = NIGHTLY + """
[routines.monthly]
kind = "note"
schedule = "0 0 1 * *"
slot = "month"
question = "what happened this month?"
prompt = "Write a note."

[routines.late]
kind = "note"
schedule = "30 23 * * *"
slot = "day"
question = "what happened?"
prompt = "Write a note."

[routines.minutes]
kind = "note"
schedule = "*/20 * * * *"
slot = "minute"
question = "what now?"
prompt = "Write a note."

[routines.small-hours]
kind = "note"
schedule = "55 * * * *"
slot = "hour"
question = "what now?"
prompt = "Write a note."

[routines.half-past-midnight]
kind = "note"
schedule = "30 0 * * *"
slot = "day"
question = "what now?"
prompt = "Write a note."
"""

_ROUTINE_NAMES = ("nightly", "monthly", "late", "minutes", "small-hours", "half-past-midnight")


def _config(tmp_path: Path, routines: tuple[str, ...], zone: str = "Europe/Berlin", runner: str = "") -> Path:
    listed = ", ".join(f'"{name}"' for name in routines)
    return write_config(tmp_path, _ROUTINES + f'\n[agents.motoko]\npersona = "motoko.toml"\nroutines = [{listed}]\n',
                        runner=f'timezone = "{zone}"\n' + runner)


def _keys(tmp_path: Path) -> set[str]:
    return {entry.client_key for entry in entries(tmp_path / "journal") if entry.client_key}


def test_simulate_runs_the_first_slots_after_spring_forward(tmp_path: Path) -> None:
    """`simulate` over Berlin's March change runs the 2026-03-30 nightly slot and April's monthly slot."""
    path = _config(tmp_path, ("nightly", "monthly"))
    result = ghostrunner("simulate", "--start", "2026-03-25", "--days", "10", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    nights = {f"motoko:nightly:2026-03-{day:02d}" for day in range(25, 32)} | {f"motoko:nightly:2026-04-0{day}" for day in range(1, 4)}
    assert _keys(tmp_path) == nights | {"motoko:monthly:2026-04"}
    assert json.loads(result.stdout)["runs"] == 11


def test_simulate_counts_local_days_when_start_has_an_offset(tmp_path: Path) -> None:
    """`--start` with an explicit offset still counts local days: the 25-hour fall-back day keeps its 23:30 slot."""
    path = _config(tmp_path, ("late",))
    result = ghostrunner("simulate", "--start", "2026-10-25T00:00+02:00", "--days", "1", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["end"] == "2026-10-26T00:00:00+01:00"
    assert _keys(tmp_path) == {"motoko:late:2026-10-25"}


#: Zones whose spring-forward gap runs past local midnight (Greenland: Saturday 23:00 -02 becomes Sunday 00:00 -01).
MIDNIGHT_GAP_ZONES = ["America/Nuuk", "America/Scoresbysund"]


@pytest.mark.parametrize("zone", MIDNIGHT_GAP_ZONES)
def test_a_skipped_time_of_a_gap_past_midnight_keeps_its_own_days_slot(zone: str) -> None:
    """No slot skipped or doubled: in a gap that runs past midnight, the skipped time's fire was at the gap's end,
    on the next day, so that day got two fires and the named day none, for every day and week schedule."""
    tz = ZoneInfo(zone)
    start, end = datetime(2026, 3, 20, tzinfo=tz), datetime(2026, 4, 5, tzinfo=tz)
    days = {(start.date() + timedelta(days=n)).isoformat() for n in range((end.date() - start.date()).days)}
    for hour in range(24):
        for minute in (0, 30, 59):
            trigger = cron_trigger(f"{minute} {hour} * * *", tz)
            slots = [slot_for(moment, "day", tz) for moment in fire_times(trigger, start, end)]
            assert sorted(slots) == sorted(days), (zone, hour, minute)  # each day once: none skipped, none doubled
            for moment in fire_times(trigger, start, end):
                # A fire is on the local day whose slot it takes.
                assert moment.astimezone(tz).date().isoformat() == slot_for(moment, "day", tz)


def test_simulate_across_a_gap_past_midnight_writes_every_days_slot(tmp_path: Path) -> None:
    """The same through the real command: four days of a 23:30 note in America/Nuuk across its March change."""
    path = write_config(tmp_path, """
    [routines.late]
    kind = "note"
    schedule = "30 23 * * *"
    slot = "day"
    question = "what happened?"
    prompt = "Write a note."
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["late"]
    """, runner='timezone = "America/Nuuk"\n')
    result = ghostrunner("simulate", "--days", "4", "--start", "2026-03-27", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcomes"] == {"appended": 4}
    keys = sorted(entry.client_key or "" for entry in entries(tmp_path / "journal"))
    assert keys == [f"motoko:late:2026-03-{day}" for day in (27, 28, 29, 30)]


def test_run_after_spring_forward_appends_its_own_slot_not_a_duplicate(tmp_path: Path) -> None:
    """`run --at` on 2026-03-30 (Berlin) belongs to that day's slot, so it appends instead of reporting the 29th's duplicate."""
    path = _config(tmp_path, ("nightly",))
    first = ghostrunner("run", "nightly", "--agent", "motoko", "--at", "2026-03-29T12:00", "--config", str(path), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = ghostrunner("run", "nightly", "--agent", "motoko", "--at", "2026-03-30T12:00", "--config", str(path), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    outcome = json.loads(second.stdout)
    assert (outcome["outcome"], outcome["slot"], outcome["scheduled"]) == ("appended", "2026-03-30", "2026-03-30T00:00:00+02:00")
    assert _keys(tmp_path) == {"motoko:nightly:2026-03-29", "motoko:nightly:2026-03-30"}


@pytest.mark.parametrize(("at", "expected"), [
    ("2026-10-25T02:10+01:00", "2026-10-25T02:40:00+02:00"),  # the repeat of 02:00-02:59 does not fire (cron's rule)
    ("2026-10-25T02:50+01:00", "2026-10-25T02:40:00+02:00"),
    ("2026-10-25T01:10Z", "2026-10-25T02:40:00+02:00"),       # 02:10 CET, written in UTC
    ("2026-10-25T02:10+02:00", "2026-10-25T02:00:00+02:00"),  # the first reading
    ("2026-10-25T02:10", "2026-10-25T02:00:00+02:00"),        # no offset: the first occurrence
    ("2026-10-25T03:00+01:00", "2026-10-25T03:00:00+01:00"),
])
def test_run_in_the_repeated_hour_never_snaps_after_at(tmp_path: Path, at: str, expected: str) -> None:
    """In Berlin's repeated hour, `run --at` (either reading) snaps to the latest fire at or before it, never to a later one."""
    path = _config(tmp_path, ("minutes",))
    result = ghostrunner("run", "minutes", "--agent", "motoko", "--at", at, "--dry-run", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    scheduled = datetime.fromisoformat(json.loads(result.stdout)["scheduled"])
    assert scheduled.isoformat() == expected
    assert scheduled <= datetime.fromisoformat(at).replace(tzinfo=datetime.fromisoformat(at).tzinfo or ZoneInfo("Europe/Berlin"))


def _finished(when: str, slot: str, scheduled: str, routine: str = "nightly") -> str:
    return json.dumps({"event": "run.finished", "level": "info", "timestamp": when, "agent": "motoko", "routine": routine, "slot": slot,
                       "client_key": f"motoko:{routine}:{slot}", "scheduled": scheduled, "outcome": "appended", "run_id": "r", "entry_id": "e"})


def test_status_sees_the_missing_first_slot_after_spring_forward(tmp_path: Path) -> None:
    """With only 2026-03-29's success logged, status at 2026-03-30 06:00 Berlin says overdue (exit 3), not all well."""
    path = _config(tmp_path, ("nightly",))
    log = tmp_path / "log.jsonl"
    log.write_text(_finished("2026-03-28T23:00:01Z", "2026-03-29", "2026-03-29T00:00:00+01:00") + "\n")
    result = ghostrunner("status", "--json", "--log", str(log), "--now", "2026-03-30T06:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    [pair] = json.loads(result.stdout)["pairs"]
    assert (pair["state"], pair["due_slot"]) == ("overdue", "2026-03-30")


@pytest.mark.parametrize(("now", "due_slot"), [
    ("2026-10-25T03:10", "2026-10-25T02"),  # 03:10 CET: 20 real minutes before is 02:50 CET, so 02:55 CEST (00:55Z) is due
    ("2026-03-29T03:10", "2026-03-29T00"),  # 03:10 CEST: 20 real minutes before is 01:50 CET; 01:55 CET is not due yet
], ids=["fall-back", "spring-forward"])
def test_status_grace_is_real_time_across_a_change(tmp_path: Path, now: str, due_slot: str) -> None:
    """The grace before a slot is due is real elapsed time, not wall-clock time, when a change lies inside it.

    `--now` without an offset is read in the configured zone, as the default (the clock) is.
    """
    path = _config(tmp_path, ("small-hours",))
    log = tmp_path / "log.jsonl"
    log.write_text(_finished("2026-03-28T00:00:00Z", "2026-03-28T00", "2026-03-28T00:55:00+01:00", routine="small-hours") + "\n")
    result = ghostrunner("status", "--json", "--log", str(log), "--now", now, "--grace", "20m", "--config", str(path), cwd=tmp_path)
    [pair] = json.loads(result.stdout)["pairs"]
    assert pair["due_slot"] == due_slot, pair


def test_catchup_finds_the_first_slot_after_spring_forward(tmp_path: Path) -> None:
    """On start at 2026-03-30 03:00 Berlin with a 2-day catch-up window and the 29th done, the 30th is the missed slot."""
    path = _config(tmp_path, ("nightly",), runner='catchup_grace = "2d"\n')
    done = ghostrunner("run", "nightly", "--agent", "motoko", "--at", "2026-03-29T12:00", "--config", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = load_config(path)
    [missed] = missed_slots(config, datetime(2026, 3, 30, 3, 0, tzinfo=config.timezone))
    assert (missed.slot, missed.scheduled.isoformat()) == ("2026-03-30", "2026-03-30T00:00:00+02:00")


def test_catchup_window_is_real_time_across_a_change(tmp_path: Path) -> None:
    """A 3-hour catch-up window ending at 04:00 CEST on the change day reaches back to 00:00 CET, so the 00:30 slot is caught up."""
    path = _config(tmp_path, ("half-past-midnight",), runner='catchup_grace = "3h"\n')
    config = load_config(path)
    [missed] = missed_slots(config, datetime(2026, 3, 29, 4, 0, tzinfo=config.timezone))
    assert (missed.slot, missed.scheduled.isoformat()) == ("2026-03-29", "2026-03-29T00:30:00+01:00")


def test_serve_hands_apscheduler_a_trigger_that_fires_after_spring_forward(tmp_path: Path) -> None:
    """The triggers `serve` registers, chained fire to fire as APScheduler does, fire on 2026-03-30 and 2026-04-01 (Berlin)."""
    path = _config(tmp_path, ("nightly", "monthly"))
    config = load_config(path)

    class _Ready(Exception):  # noqa: N818 - ends the scheduler's loop once it is ready; not an error
        pass

    def stop_when_ready(state: str) -> None:
        if state == "READY=1":  # the jobs are registered: leave serve before its loop starts
            raise _Ready

    scheduler = Scheduler(config, notify=stop_when_ready, now=lambda: datetime(2026, 3, 1, tzinfo=config.timezone))
    with pytest.raises(_Ready):
        scheduler.serve()
    jobs = {job.id: job.trigger for job in scheduler._scheduler.get_jobs()}  # the registered triggers themselves
    tz = config.timezone

    def chain(job: str, since: datetime, count: int) -> list[str]:
        moments, moment = [], jobs[job].get_next_fire_time(None, since)
        for _ in range(count):
            moments.append(moment.isoformat())
            moment = jobs[job].get_next_fire_time(moment, moment)
        return moments

    assert chain("motoko:nightly", datetime(2026, 3, 28, 12, tzinfo=tz), 4) == [
        "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", "2026-03-31T00:00:00+02:00", "2026-04-01T00:00:00+02:00"]
    assert chain("motoko:monthly", datetime(2026, 2, 15, tzinfo=tz), 3) == [
        "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", "2026-05-01T00:00:00+02:00"]


# -- configuration and options ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("schedule", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 9 31 2 mon"])
def test_a_schedule_that_never_fires_is_a_configuration_error(tmp_path: Path, schedule: str) -> None:
    """A schedule naming no real date is refused when the configuration loads, naming the routine's key and the expression."""
    body = f'[routines.never]\nkind = "note"\nschedule = "{schedule}"\nslot = "day"\nquestion = "q?"\nprompt = "p"\n'
    path = write_config(tmp_path, body + '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["never"]\n')
    with pytest.raises(ConfigError, match=rf"routines\.never\.schedule: .*never fires.*got '{re.escape(schedule)}'"):
        load_config(path)
    result = ghostrunner("run", "never", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 78 and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_rare_schedule_still_loads_and_fires() -> None:
    """29 February on a Monday is rare, not impossible: it loads and fires on 2044-02-29."""
    tz = ZoneInfo("UTC")
    trigger = cron_trigger("0 0 29 2 1", tz)
    assert trigger.get_next_fire_time(None, datetime(2026, 1, 1, tzinfo=tz)) == datetime(2044, 2, 29, tzinfo=tz)


@pytest.mark.parametrize("option", ["--at", "--now", "--start"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_time_option_is_a_usage_error_not_now(tmp_path: Path, option: str, value: str) -> None:
    """`--at ""` (and `--now`, `--start`) is one usage-error line naming the option (exit 2), and nothing runs."""
    path = _config(tmp_path, ("nightly",))
    command = {"--at": ("run", "nightly", "--agent", "motoko"), "--now": ("status", "--log", os.devnull), "--start": ("simulate", "--days", "1")}
    result = ghostrunner(*command[option], option, value, "--config", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == f"ghostrunner: error: Invalid value for {option}: expected {TIME_FORMS}, got {value!r}\n"
    assert result.stdout == "" and _keys(tmp_path) == set()


# -- systemd timers -----------------------------------------------------------------------------------------------------

ANALYZE = shutil.which("systemd-analyze")
TIMER_SCHEDULES = ("*/7 * * * *", "0 */5 * * *", "0 */4 * * *", "*/13 */5 */3 * *", "0 22 * * 0", "0 9 1-7 * sun", "0 0 1 * *", "30 2 * * *")
TIMER_ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "Australia/Lord_Howe")


def _systemd_elapses(expression: str, base: datetime, count: int, zone: str = "UTC") -> list[int]:
    """The next *count* elapses of *expression* after *base* by `systemd-analyze calendar`, as UTC seconds, with TZ=*zone*."""
    assert ANALYZE is not None, "systemd-analyze is required (apt-get install systemd)"
    result = subprocess.run([ANALYZE, "calendar", f"--iterations={count}", f"--base-time=@{int(base.timestamp())}", expression],
                            check=False, capture_output=True, text=True, timeout=120, env={**os.environ, "TZ": f":{zone}", "SYSTEMD_COLORS": "0"})
    assert result.returncode == 0, result.stderr
    pattern = r"(?:Next elapse|Iter\. #\d+): \w{3} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC" if zone == "UTC" else r"\(in UTC\): \w{3} (\S+ \S+) UTC"
    found = re.findall(pattern, result.stdout)
    assert len(found) == count, result.stdout[-500:]
    return [int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) for text in found]


@pytest.mark.parametrize("zone", TIMER_ZONES)
def test_rendered_on_calendar_fires_when_serve_does_for_a_whole_year(tmp_path: Path, zone: str) -> None:
    """Every rendered timer's OnCalendar=, run through systemd-analyze calendar for a year, elapses exactly at serve's fire times.

    The one documented difference is a time a spring-forward change skips:
    serve fires it at the gap's end, a timer not at all (render warns).
    systemd evaluates ``SPEC ZONE`` as ``SPEC`` under ``TZ=:ZONE``, in a child
    process it forks per elapse, so a year with the zone suffix would take
    minutes: the year is checked as ``SPEC`` under ``TZ=:ZONE``, and the
    rendered text itself, suffix included, for 40 elapses from just before each change.
    """
    names = {f"t{number}": schedule for number, schedule in enumerate(TIMER_SCHEDULES)}
    body = "".join(f'[routines.{name}]\nkind = "note"\nschedule = "{schedule}"\nslot = "minute"\nquestion = "q?"\nprompt = "p"\n\n'
                   for name, schedule in names.items())
    body += '[agents.motoko]\npersona = "motoko.toml"\nroutines = [' + ", ".join(f'"{name}"' for name in names) + "]\n"
    config = load_config(write_config(tmp_path, body, runner=f'timezone = "{zone}"\n'))
    files = render_units(config, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/ghostrunner/ghostrunner.toml").files
    tz = config.timezone
    start, end = datetime(YEAR, 1, 1, tzinfo=tz), datetime(YEAR + 1, 1, 1, tzinfo=tz)
    changes = _walk(zone).transitions if zone in ZONES else []

    def compare(name: str) -> None:
        schedule = names[name]
        [line] = [line for line in files[f"ghostrunner-run-{name}@.timer"].splitlines() if line.startswith("OnCalendar=")]
        expression = line.removeprefix("OnCalendar=")
        spec, _, suffix = expression.rpartition(" ")
        assert suffix == zone and "/" not in spec, expression  # no start/step: systemd 252 loses fires of repetitions
        cron = _Cron.parse(schedule)
        serve = list(fire_times(cron_trigger(schedule, tz), start, end))
        expected = [int(moment.timestamp()) for moment in serve if cron.names(moment.replace(tzinfo=None))]
        year = [second for second in _systemd_elapses(spec, start - timedelta(seconds=1), len(serve) + 1, zone) if second < end.timestamp()]
        assert year == expected, (zone, schedule, expression, sorted(set(expected) ^ set(year))[:5])
        for change in changes:  # the rendered text as systemd reads it, zone suffix included
            base = change - 3 * 3600  # from three hours before: every-7-minute fires reach past it, daily ones weeks past
            position = bisect.bisect_right(expected, base)
            count = min(40, len(expected) - position)
            assert _systemd_elapses(expression, datetime.fromtimestamp(base, UTC), count) == expected[position:position + count], (zone, expression)

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(compare, names))


def test_spring_forward_slots_are_one_per_slot_with_the_gap_rule() -> None:
    """Berlin 2026-03-29: 02:30 daily fires once at 03:00 CEST, and `30 * * * *` leaves hour 03 one slot, not two."""
    tz = ZoneInfo("Europe/Berlin")
    day = list(fire_times(cron_trigger("30 2 * * *", tz), datetime(2026, 3, 29, tzinfo=tz), datetime(2026, 3, 30, tzinfo=tz), granularity="day"))
    assert [moment.isoformat() for moment in day] == ["2026-03-29T03:00:00+02:00"]
    hourly = fire_times(cron_trigger("30 * * * *", tz), datetime(2026, 3, 29, 1, tzinfo=tz), datetime(2026, 3, 29, 5, tzinfo=tz), granularity="hour")
    slots = [slot_for(moment, "hour", tz) for moment in hourly]
    assert slots == ["2026-03-29T01", "2026-03-29T03", "2026-03-29T04"]


def test_timer_delay_cap_uses_real_time_between_fires(tmp_path: Path) -> None:
    """`0 1,3 * * *` in Berlin is one real hour apart on the spring-forward day, so the randomized delay is capped at 15 minutes."""
    body = '[routines.twice]\nkind = "note"\nschedule = "0 1,3 * * *"\nslot = "hour"\nquestion = "q?"\nprompt = "p"\n'
    config = load_config(write_config(tmp_path, body + '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["twice"]\n',
                                      runner='timezone = "Europe/Berlin"\n'))
    files = render_units(config, exec_argv=["/usr/local/bin/ghostrunner"], config_path="/etc/ghostrunner/ghostrunner.toml",
                         randomized_delay=timedelta(hours=1), today=date(2026, 3, 25)).files
    assert "\nRandomizedDelaySec=900s\n" in files["ghostrunner-run-twice@.timer"]


def test_naive_bounds_are_refused_not_read_in_the_host_zone() -> None:
    """A naive time given to the fire-time functions is a ValueError, never silently read in the host's timezone."""
    trigger = cron_trigger("0 0 * * *", ZoneInfo("Europe/Berlin"))
    naive = datetime(2026, 3, 30, 12)  # noqa: DTZ001 - the naive time this test passes
    with pytest.raises(ValueError, match=r"must be timezone-aware, got datetime\.datetime\(2026, 3, 30, 12, 0\)"):
        latest_fire_time(trigger, naive)
    with pytest.raises(ValueError, match="must be timezone-aware"):
        list(fire_times(trigger, naive, naive + timedelta(days=1)))
    with pytest.raises(ValueError, match="must be timezone-aware"):
        trigger.get_next_fire_time(None, naive)


def test_a_run_refuses_a_naive_scheduled_time(tmp_path: Path) -> None:
    """A naive scheduled time would be read in the host's zone by astimezone(): another slot, another client_key."""
    from datetime import datetime as _datetime
    from zoneinfo import ZoneInfo as _ZoneInfo

    from journal import Journal
    from runner.run.engine import execute_run
    from runner.settings.config import load_config

    config = load_config(None)
    agent = config.agents["motoko"]
    with Journal(tmp_path / "j") as journal, pytest.raises(ValueError, match="must carry its timezone"):
        execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=_datetime(2026, 9, 5, 21), backend=None,  # noqa: DTZ001 - the naive time this test passes
                    tz=_ZoneInfo("Europe/Berlin"))
    assert not list((tmp_path / "j" / "entries").rglob("*.json"))


@pytest.mark.parametrize("expression", ["٠ ٢١ * * *", "0 ２１ * * *", "0\u200921 * * *"])
def test_a_schedule_not_written_in_ascii_is_a_configuration_error(tmp_path: Path, expression: str) -> None:
    """int() reads Arabic-Indic and full-width digits (and split() a thin space), so such a schedule loaded, ran under serve, and
    only render refused it; crontab and systemd would not read it at all."""
    from runner.errors import ConfigError
    from runner.settings.config import load_config

    path = tmp_path / "ghostrunner.toml"
    path.write_text(f'[routines.evening]\nschedule = "{expression}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"routines\.evening\.schedule"):
        load_config(path)
