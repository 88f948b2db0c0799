"""A real `ghostrunner serve` stopped with SIGSTOP across slots (a host that slept) and continued with SIGCONT.

Every slot of the stop is accounted for: run, or recorded missed (reason ``late``) since its fire came past
misfire_grace; none is skipped silently, and none is replayed in a burst beyond catchup_max.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime, timedelta

import pytest

from tests._support import event_named, reap, start_serve, write_config

MINUTELY = """
[routines.minutely]
kind = "note"
schedule = "* * * * *"
slot = "minute"
question = "what now?"
prompt = "Write a note."

[agents.motoko]
persona = "motoko.toml"
routines = ["minutely"]
"""


def _minute(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(second=0, microsecond=0)


@pytest.mark.waits_on_the_clock
def test_serve_stopped_across_slots_records_each_missed_slot_and_replays_none(tmp_path) -> None:
    """Two or more minute slots pass while serve is stopped: after SIGCONT each is recorded missed (late), none is run late beyond
    misfire_grace, and serve goes on with the next slot; every slot from the first run to the last is run or recorded.

    The first run is the catch-up of the minute before serve started, at once: stopped before the next minute's fire rather
    than after it, serve wakes a minute earlier, and the test waits one minute less for the clock.
    """
    path = write_config(tmp_path, MINUTELY, runner='misfire_grace = "5s"\ncatchup_grace = "2m"\ncatchup_max = 1\n', wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    try:
        reader.wait(event_named("scheduler.started"))
        first = reader.wait(event_named("run.finished", routine="minutely"), timeout=150)
        process.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        # Asleep across two whole minute boundaries, and past misfire_grace after the last: waiting for the wall clock is the point.
        wake = (stopped_at // 60 + 2) * 60 + 15
        while time.time() < wake:
            time.sleep(min(5.0, max(wake - time.time(), 0.01)))
        process.send_signal(signal.SIGCONT)
        reader.wait(event_named("scheduler.missed", routine="minutely", reason="late"), timeout=90)
        last = reader.wait(
            lambda e: (
                e.get("event") == "run.finished"
                and e.get("scheduled", "") > first["scheduled"]
                and _minute(e["scheduled"]).timestamp() > wake
            ),
            timeout=150,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        events = reader.drain()
    finally:
        process.send_signal(signal.SIGCONT) if process.poll() is None else None
        reap(process)
    runs = {e["slot"] for e in events if e["event"] == "run.finished" and e["outcome"] in ("appended", "duplicate")}
    missed = {e["slot"]: e["reason"] for e in events if e["event"] == "scheduler.missed"}
    start, end = _minute(first["scheduled"]), _minute(last["scheduled"])
    slots = [(start + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M") for n in range(int((end - start).total_seconds() // 60) + 1)]

    def fired(slot: str) -> float:
        return datetime.fromisoformat(slot).replace(tzinfo=start.tzinfo).timestamp()

    asleep = [slot for slot in slots if stopped_at < fired(slot) <= wake - 15]  # the fires that came while serve was stopped
    assert len(asleep) >= 2, (stopped_at, wake, slots)
    assert all(slot in runs or slot in missed for slot in slots), (slots, runs, missed)  # none silently skipped
    assert all(missed.get(slot) == "late" and slot not in runs for slot in asleep), (asleep, runs, missed)  # none replayed late
