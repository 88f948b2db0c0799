"""Defects found by the second hostile pass over the merged fixes of issue 9, one regression test each.

Each test drives the real mechanism (the real console script, real IANA zones) and asserts the README's promise.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from runner.cron.slots import cron_trigger, fire_times, slot_for
from tests._support import SIMPLE_AGENT, entries, ghostrunner, write_config


@pytest.mark.parametrize("option", ["--out", "--exec", "--installed-config"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_render_option_is_a_usage_error_not_the_working_directory_or_a_default(tmp_path: Path, option: str, value: str) -> None:
    """Like `--root ""`: Path("") is ".", so `systemd render --out ""` wrote the units into the working directory,
    and an empty --exec or --installed-config silently rendered the defaults."""
    path = write_config(tmp_path / "conf", SIMPLE_AGENT)
    work = tmp_path / "work"
    work.mkdir()
    args = ["--out", str(tmp_path / "units")] if option != "--out" else []
    result = ghostrunner("systemd", "render", "--config", str(path), *args, option, value, cwd=work)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"ghostrunner: error: Invalid value for {option}: expected a non-empty value, got {value!r}"]
    assert list(work.iterdir()) == []
    assert not (tmp_path / "units").exists()


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


@pytest.mark.parametrize("separator", ["T", " "])
def test_simulate_start_with_a_time_starts_at_that_time_whatever_the_separator(tmp_path: Path, separator: str) -> None:
    """ISO 8601 separates date and time by 'T' or a space; with a space the time was silently dropped and the simulation began at midnight."""
    path = write_config(tmp_path, """
    [routines.hourly]
    kind = "note"
    schedule = "0 * * * *"
    slot = "hour"
    question = "what happened?"
    prompt = "Write a note."
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["hourly"]
    """)
    result = ghostrunner("simulate", "--days", "1", "--start", f"2026-03-29{separator}05:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["start"] == "2026-03-29T05:00:00+00:00"
    keys = sorted(entry.client_key or "" for entry in entries(tmp_path / "journal"))
    assert keys[0] == "motoko:hourly:2026-03-29T05" and len(keys) == 24
