"""The rendered timers under a live systemd: they elapse when the runner fires, run, catch up, and log."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.deploy._deploy import CONFIG, GHOSTRUNNER, configure, entries, status_of_the_journal
from tests.deploy._live import LiveSystem, wait_until

pytestmark = pytest.mark.live_systemd

ZONE = ZoneInfo("Asia/Tokyo")
ROUTINES = ("pulse-4h", "evening", "digest", "tick")
#: The example deployment (systemd/ghostrunner.toml) plus a routine every minute, so that a timer fires during the test.
TIMERS_CONFIG = """
[runner]
journal_root = "/var/lib/ghostrunner/{agent}"
lock_file = "/var/lib/ghostrunner/serve.lock"
timezone = "Asia/Tokyo"
catchup_grace = "6h"
run_timeout = "5m"
shutdown_timeout = "2m"

[routines.tick]
kind = "note"
schedule = "* * * * *"
slot = "minute"
question = "what is this minute about?"
prompt = "Write one line."

[agents.motoko]
persona = "agents/motoko.toml"
routines = ["pulse-4h", "evening", "digest", "tick"]
backend = "simulated"
"""


@pytest.fixture(scope="module")
def timers(system: LiveSystem) -> Iterator[None]:
    """The timers deployment (step 3b of docs/deploying.md), without RandomizedDelaySec so that elapses are exact."""
    configure(system, TIMERS_CONFIG, randomized_delay="0s")
    system.systemctl("enable", "--now", "ghostrunner-timers.target")
    try:
        yield
    finally:
        system.systemctl("disable", "--now", "ghostrunner-timers.target", *(_timer(r) for r in ROUTINES), check=False)


def _timer(routine: str) -> str:
    return f"ghostrunner-run-{routine}@motoko.timer"


def _list_timers(system: LiveSystem) -> dict[str, dict[str, Any]]:
    """`systemctl list-timers 'ghostrunner-*'` as docs/deploying.md lists them: unit -> next and last elapse (µs since the epoch)."""
    listed = json.loads(system.systemctl("list-timers", "--all", "--output=json", "ghostrunner-*").stdout)
    return {timer["unit"]: timer for timer in listed}


def _runner_due(system: LiveSystem, microseconds: int) -> dict[str, dict[str, Any]]:
    """The runner's own latest fire time at or before a moment, per routine (`ghostrunner status --now T --grace 0s`)."""
    moment = datetime.fromtimestamp(microseconds / 1e6, UTC).isoformat()
    result = system.run(GHOSTRUNNER, "status", "--config", CONFIG, "--json", "--log", "/dev/null", "--now", moment, "--grace", "0s",
                        check=False)
    return {pair["routine"]: pair for pair in json.loads(result.stdout)["pairs"] if pair["agent"] == "motoko"}


def _microseconds(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1_000_000)


def _tick_entries(system: LiveSystem) -> list[dict[str, Any]]:
    return [entry for entry in entries(system, "motoko") if str(entry["client_key"]).startswith("motoko:tick:")]


def test_every_timer_elapses_next_exactly_when_the_runner_fires_next(system: LiveSystem, timers: None) -> None:
    listed = _list_timers(system)
    listed_at = time.time_ns() // 1000
    assert {_timer(r) for r in ROUTINES} <= listed.keys(), listed
    for routine in ROUTINES:
        elapse = listed[_timer(routine)]["next"]
        assert elapse > 0, f"{_timer(routine)} has no next elapse"
        # The runner fires at that moment, and not between the listing and it.
        assert _microseconds(_runner_due(system, elapse)[routine]["due"]) == elapse, routine
        assert _microseconds(_runner_due(system, elapse - 1_000_000)[routine]["due"]) <= listed_at, routine


def test_a_persistent_timer_runs_a_missed_slot_at_once_on_start(system: LiveSystem, timers: None) -> None:
    timer, service = _timer("evening"), "ghostrunner-run-evening@motoko.service"
    system.systemctl("stop", timer)
    assert system.show(service, "ExecMainStartTimestampMonotonic")["ExecMainStartTimestampMonotonic"] == "0", "ran before the test"
    due = _runner_due(system, time.time_ns() // 1000)["evening"]
    # The timer last elapsed an hour before the latest evening: that evening was missed (the host was down).
    stamp = system.path(f"/var/lib/systemd/timers/stamp-{timer}")
    stamp.touch()
    missed = _microseconds(due["due"]) / 1e6 - 3600
    os.utime(stamp, (missed, missed))
    system.systemctl("start", timer)
    key = f"motoko:evening:{due['due_slot']}"
    [entry] = wait_until(f"the catch-up run's entry {key}", lambda: [e for e in entries(system, "motoko") if e["client_key"] == key], 30, 0.5)
    assert entry["ts"] == due["due"] and entry["meta"]["source_routine"] == "evening"
    assert _list_timers(system)[timer]["next"] > time.time_ns() // 1000, "the run came from the catch-up, not from a calendar elapse"


def test_an_every_minute_routine_fires_under_its_timer_and_appends_its_slot(system: LiveSystem, timers: None) -> None:
    found = wait_until("an entry of the every-minute timer's run", lambda: _tick_entries(system), 75, 1)
    starts = [int(record["__REALTIME_TIMESTAMP"]) for record in system.journal("UNIT=ghostrunner-run-tick@motoko.service")
              if str(record.get("MESSAGE", "")).startswith("Starting ")]
    assert starts, "systemd logged no start of the run unit"
    first = datetime.fromtimestamp(starts[0] / 1e6, ZONE)
    minute = first.replace(second=0, microsecond=0)
    assert (first - minute).total_seconds() < 5, f"started {first}, not at its minute (AccuracySec=1s)"
    slot = minute.strftime("%Y-%m-%dT%H:%M")
    [entry] = [e for e in found if e["client_key"] == f"motoko:tick:{slot}"]
    assert datetime.fromisoformat(str(entry["ts"])) == minute
    assert entry["kind"] == "note" and entry["meta"]["slot"] == slot and entry["meta"]["source_routine"] == "tick"
    assert len({e["client_key"] for e in found}) == len(found), "a slot has two entries"


def test_status_reads_the_runs_the_timers_made(system: LiveSystem, timers: None) -> None:
    found = wait_until("an entry of the every-minute timer's run", lambda: _tick_entries(system), 75, 1)
    for output in ("cat", "json"):
        report = status_of_the_journal(system, output)
        assert report["input"]["runs"] >= len(found), (output, report["input"])
        tick = next(pair for pair in report["pairs"] if pair["routine"] == "tick")
        assert tick["last_success"] is not None and tick["last_success"]["outcome"] == "appended", (output, tick)
        assert f"motoko:tick:{tick['last_success']['slot']}" in {e["client_key"] for e in _tick_entries(system)}
