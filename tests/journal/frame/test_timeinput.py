"""The one time parser of both commands: dates, wall-clock times in a real zone (gaps and folds), aware times, relative times."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from journal.cli.cli import cli
from journal.frame.timeinput import TIME_FORMS, local_zone, parse_time_input

#: Zones with the kinds of change there are: one-hour DST both ways (Berlin, New York), a half-hour DST
#: (Lord Howe), DST starting at midnight (Santiago), negative DST (Dublin), a skipped whole day (Apia, 2011), none (Tokyo).
ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Europe/Dublin", "Pacific/Apia", "Asia/Tokyo"]
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=300, deadline=None)

# Wall-clock times without a zone are what the parser reads; the zone comes separately.
wall_clocks = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2040, 12, 31)).map(  # noqa: DTZ001
    lambda moment: moment.replace(microsecond=0))


@functools.cache
def _transitions(name: str) -> tuple[datetime, ...]:
    """The UTC instants in 1990-2040 at which *name*'s offset changes, found by stepping a day and bisecting to the second."""
    zone = ZoneInfo(name)
    found = []
    day = datetime(1990, 1, 1, tzinfo=UTC)
    while day.year <= 2040:
        after = day + timedelta(days=1)
        if day.astimezone(zone).utcoffset() != after.astimezone(zone).utcoffset():
            low, high = day, after
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                low, high = (low, middle) if middle.astimezone(zone).utcoffset() != low.astimezone(zone).utcoffset() else (middle, high)
            found.append(high.replace(microsecond=0))
        day = after
    return tuple(found)


@st.composite
def near_a_change(draw: st.DrawFn) -> tuple[datetime, str]:
    """A wall-clock time within two hours of one of a zone's changes, where the gaps and the folds are."""
    name = draw(st.sampled_from([zone for zone in ZONES if zone != "Asia/Tokyo"]))
    change = draw(st.sampled_from(_transitions(name)))
    wall = (change - timedelta(seconds=1)).astimezone(ZoneInfo(name)).replace(tzinfo=None) + timedelta(seconds=1)
    return wall + timedelta(minutes=draw(st.integers(-120, 120))), name


def _readings(naive: datetime, zone: ZoneInfo) -> list[datetime]:
    """Every UTC instant whose wall clock in *zone* reads *naive*, found by trying every quarter-hour offset (no fold logic)."""
    found = []
    for quarter in range(-16 * 4, 16 * 4 + 1):
        instant = naive.replace(tzinfo=UTC) - timedelta(minutes=15 * quarter)
        if instant.astimezone(zone).replace(tzinfo=None) == naive:
            found.append(instant)
    return sorted(found)


@PROPERTY
@given(case=st.tuples(wall_clocks, st.sampled_from(ZONES)) | near_a_change())
def test_a_wall_clock_time_is_its_first_reading_or_an_error_when_skipped(case: tuple[datetime, str]) -> None:
    """A time without an offset is the earliest instant that reads so in the zone; a time no instant reads is an error naming it."""
    naive, name = case
    zone = ZoneInfo(name)
    readings = _readings(naive, zone)
    text = naive.isoformat()
    if not readings:
        with pytest.raises(ValueError, match=rf"^'{text}' does not exist in {name}: the clocks skip it \(UTC offset "):
            parse_time_input(text, zone=zone, now=NOW)
        return
    parsed = parse_time_input(text, zone=zone, now=NOW)
    # Compared in UTC: PEP 495 makes a time in a fold unequal to every time of another zone.
    assert parsed.astimezone(UTC) == readings[0] and parsed.replace(tzinfo=None) == naive and parsed.tzinfo is zone


@PROPERTY
@given(day=st.dates(min_value=date(1990, 1, 1), max_value=date(2040, 12, 31)), name=st.sampled_from(ZONES))
# Days whose midnight is skipped: Santiago's clocks jump from 00:00 to 01:00, Apia's skip the whole of 30 December 2011.
@example(day=date(2026, 9, 6), name="America/Santiago")
@example(day=date(2011, 12, 30), name="Pacific/Apia")
def test_a_date_is_the_first_moment_of_that_day(day: date, name: str) -> None:
    """A date is its midnight's first reading; where midnight is skipped, the instant the clocks jump past it, never an error."""
    zone = ZoneInfo(name)
    midnight = datetime.combine(day, time())
    parsed = parse_time_input(day.isoformat(), zone=zone, now=NOW)
    readings = _readings(midnight, zone)
    if readings:
        assert parsed.astimezone(UTC) == readings[0]
    else:
        assert parsed.astimezone(zone).replace(tzinfo=None) > midnight
        # The second before, taken in UTC: subtracting from an aware time in its own zone moves its wall clock, not the instant.
        assert (parsed.astimezone(UTC) - timedelta(seconds=1)).astimezone(zone).replace(tzinfo=None) < midnight


@PROPERTY
@given(moment=st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31),  # noqa: DTZ001 - hypothesis's bounds are naive
                           timezones=st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-23 * 60 - 59, 23 * 60 + 59))),
       name=st.sampled_from(ZONES), separator=st.sampled_from(["T", " "]))
def test_an_aware_time_is_taken_as_written_in_any_zone(moment: datetime, name: str, separator: str) -> None:
    """An ISO 8601 time with an offset is that instant with that offset, whatever zone dates are read in."""
    parsed = parse_time_input(moment.isoformat(sep=separator), zone=ZoneInfo(name), now=NOW)
    assert parsed == moment and parsed.utcoffset() == moment.utcoffset()


@PROPERTY
@given(amounts=st.lists(st.integers(0, 5000), min_size=5, max_size=5), present=st.sampled_from([0, 1, 2, 3, 4]))
def test_a_relative_time_is_that_long_before_now(amounts: list[int], present: int) -> None:
    """`-1w2d3h4m5s` and each of its parts alone are exactly that much elapsed time before now."""
    units = ["w", "d", "h", "m", "s"]
    chosen = [(amount, unit) for index, (amount, unit) in enumerate(zip(amounts, units, strict=True)) if index >= present]
    text = "-" + "".join(f"{amount}{unit}" for amount, unit in chosen)
    expected = timedelta(**{name: amount for (amount, _), name in zip(chosen, ["weeks", "days", "hours", "minutes", "seconds"][present:], strict=True)})
    assert parse_time_input(text, zone=ZoneInfo("Europe/Berlin"), now=NOW).astimezone(UTC) == NOW - expected


@PROPERTY
@given(now=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(ZoneInfo("Europe/Berlin"))),  # noqa: DTZ001
       days=st.integers(0, 400), hours=st.integers(0, 48))
def test_a_relative_time_is_elapsed_time_across_daylight_saving_changes(now: datetime, days: int, hours: int) -> None:
    """`-7d` from a Berlin now is 168 hours before it in UTC, also when a change lies between (not the same wall-clock time)."""
    parsed = parse_time_input(f"-{days}d{hours}h", zone=ZoneInfo("Europe/Berlin"), now=now)
    assert parsed.astimezone(UTC) == now.astimezone(UTC) - timedelta(days=days, hours=hours)
    assert parsed.tzinfo is ZoneInfo("Europe/Berlin")


@PROPERTY
@given(text=st.text(max_size=40) | st.from_regex(r"-?[0-9:T+Zdhmsw .-]{1,25}", fullmatch=True))
def test_any_text_is_a_time_or_a_value_error(text: str) -> None:
    """Whatever is typed gives an aware time in years 1-9999 (UTC) or a ValueError saying what is accepted; nothing else escapes."""
    try:
        parsed = parse_time_input(text, zone=ZoneInfo("America/Santiago"), now=NOW)
    except ValueError as exc:
        message = str(exc)
        assert message.startswith((f"expected {TIME_FORMS}", "expected a time within years 1-9999")) or " does not exist in " in message
        assert "\n" not in message
        return
    assert parsed.tzinfo is not None and 1 <= parsed.astimezone(UTC).year <= 9999


def test_the_changes_found_include_gaps_folds_and_a_skipped_day() -> None:
    """The property above meets every kind of change: Berlin's gap and fold, and Apia's skipped day."""
    assert datetime(2026, 3, 29, 1, 0, tzinfo=UTC) in _transitions("Europe/Berlin")
    assert datetime(2026, 10, 25, 1, 0, tzinfo=UTC) in _transitions("Europe/Berlin")
    assert any(change.year == 2011 and change.month == 12 for change in _transitions("Pacific/Apia"))
    assert _transitions("Asia/Tokyo") == ()


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-29T01:59", "2026-03-29T01:59:00+01:00"),
    ("2026-03-29T03:00", "2026-03-29T03:00:00+02:00"),
    ("2026-10-25T02:30", "2026-10-25T02:30:00+02:00"),  # repeated: its first occurrence, still summer time
    ("2026-10-25T02:30+01:00", "2026-10-25T02:30:00+01:00"),  # the second occurrence, asked for by its offset
    ("2026-10-25", "2026-10-25T00:00:00+02:00"),
    ("now", "2026-06-01T14:00:00+02:00"),
    ("-30m", "2026-06-01T13:30:00+02:00"),
    ("  -7d ", "2026-05-25T14:00:00+02:00"),
])
def test_berlin_examples(text: str, expected: str) -> None:
    """The README's examples, read in Europe/Berlin."""
    assert parse_time_input(text, zone=ZoneInfo("Europe/Berlin"), now=NOW).isoformat() == expected


@pytest.mark.parametrize(("text", "message"), [
    ("2026-03-29T02:30", ("'2026-03-29T02:30' does not exist in Europe/Berlin: the clocks skip it (UTC offset +01:00 before, +02:00 after); "
                         "give the offset you mean, e.g. 2026-03-29T02:30:00+01:00")),
    ("", f"expected {TIME_FORMS}, got ''"),
    ("+7d", f"expected {TIME_FORMS}, got '+7d'"),
    ("-", f"expected {TIME_FORMS}, got '-'"),
    ("2026-02-30", f"expected {TIME_FORMS}, got '2026-02-30'"),
    ("x" * 100, f"expected {TIME_FORMS}, got '{'x' * 60}'\u2026"),
    ("-9999999w", "expected a time within years 1-9999 in UTC, got '-9999999w'"),
    ("9999-12-31T23:00-05:00", "expected a time within years 1-9999 in UTC, got '9999-12-31T23:00-05:00'"),
])
def test_errors_say_what_is_accepted(text: str, message: str) -> None:
    """A refused value is quoted (cut to 60 characters) with the forms accepted, or with why that time cannot be."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+").replace(".", r"\.") + "$"):
        parse_time_input(text, zone=ZoneInfo("Europe/Berlin"), now=NOW)


def test_a_narrower_range_is_named() -> None:
    """A caller's own bounds (the runner's 1970..8999) are what the message names."""
    with pytest.raises(ValueError, match=r"^expected a time from 1970-01-01 to 8999-12-31 \(UTC\), got '1969-12-31'$"):
        parse_time_input("1969-12-31", zone=UTC, now=NOW, earliest=datetime(1970, 1, 1, tzinfo=UTC), latest=datetime(9000, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(("tz", "expected"), [("Asia/Tokyo", "Asia/Tokyo"), (":Europe/Berlin", "Europe/Berlin"), ("", "UTC")])
def test_the_local_zone_follows_tz(monkeypatch: pytest.MonkeyPatch, tz: str, expected: str) -> None:
    """$TZ names the local zone (a leading colon allowed; empty is UTC, as for the C library)."""
    monkeypatch.setenv("TZ", tz)
    assert str(local_zone()) == expected


def test_a_posix_tz_rule_is_read_at_its_offset() -> None:
    """A TZ that is a POSIX rule, not a zone name, is the C library's offset for it."""
    code = "from journal.frame.timeinput import local_zone; from datetime import datetime; print(datetime(2026, 1, 1, tzinfo=local_zone()).utcoffset())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "TZ": "JST-9"})
    assert result.stdout.strip() == "9:00:00"


def test_ghostjournal_reads_dates_and_local_times_in_the_local_zone(tmp_path: Path) -> None:
    """`--since 2026-09-02` with TZ=Asia/Tokyo is 2026-09-01T15:00Z; a local time and -Nd work the same way (the reported refusal)."""
    root = tmp_path / "j"
    runner = CliRunner()
    assert runner.invoke(cli, ["--root", str(root), "init"]).exit_code == 0
    for ts in ("2026-09-01T14:59:59Z", "2026-09-01T15:00:00Z"):
        payload = {"kind": "note", "agent": "motoko", "theme": "t", "voice": "v", "ts": ts}
        assert runner.invoke(cli, ["--root", str(root), "append"], input=json.dumps(payload)).exit_code == 0

    def since(value: str) -> list[str]:
        result = runner.invoke(cli, ["--root", str(root), "list", "--since", value], env={"TZ": "Asia/Tokyo"})
        assert result.exit_code == 0, result.output
        return [entry["ts"] for entry in json.loads(result.stdout)]

    assert since("2026-09-02") == ["2026-09-01T15:00:00Z"]
    assert since("2026-09-01T23:59:59") == ["2026-09-01T15:00:00Z", "2026-09-01T14:59:59Z"]
    assert since("2026-09-01T14:59:59Z") == ["2026-09-01T15:00:00Z", "2026-09-01T14:59:59Z"]
    assert since("-1d") == []
