"""Catch-up and misses: what serve runs and records on start, late fires, their options, and what status makes of them."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from runner.errors import ConfigError
from runner.monitor.status import EXIT_MISSED, build_report, read_log
from runner.run.simulate import simulate
from runner.schedule.catchup import plan_catchup, spread
from runner.schedule.scheduler import Scheduler
from runner.settings.config import load_config
from tests._support import (
    NIGHTLY,
    SIMPLE_AGENT,
    TEST_ZONE,
    LineReader,
    catchup_planned_at,
    event_named,
    ghostrunner,
    start_serve,
    write_config,
)

NOW = datetime(2026, 9, 9, 13, 30, tzinfo=UTC)
TWO_AGENTS = SIMPLE_AGENT + """
[agents.batou]
persona = "motoko.toml"
routines = ["pulse-4h"]
"""


def _stop(process: subprocess.Popen[str], reader: LineReader) -> list[dict]:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    return reader.drain()


def _slots(missed: list, routine: str, reason: str | None = None) -> list[str]:
    return [m.slot for m in missed if m.routine == routine and (reason is None or m.reason == reason)]


def test_a_downtime_is_caught_up_catchup_max_deep_and_the_rest_recorded(tmp_path: Path) -> None:
    """After ten days down, each pair runs its catchup_max latest slots within the grace; every older slot since its last entry is missed."""
    config = load_config(write_config(tmp_path, TWO_AGENTS, runner='catchup_grace = "1d"\ncatchup_max = 2\n'))
    simulate(config, ["motoko"], datetime(2026, 8, 20, tzinfo=UTC), datetime(2026, 8, 30, tzinfo=UTC))
    plan = plan_catchup(config, NOW)
    runs = {(run.agent, run.routine): [] for run in plan.runs}
    for run in plan.runs:
        runs[(run.agent, run.routine)].append(run.slot)
    # Within the day before 13:30: pulses 16, 20, 00, 04, 08, 12 and the evening of the 8th; the digest's Sunday is older.
    assert runs == {("motoko", "pulse-4h"): ["2026-09-09T08", "2026-09-09T12"], ("motoko", "evening"): ["2026-09-08"],
                    ("batou", "pulse-4h"): ["2026-09-09T08", "2026-09-09T12"]}
    assert _slots(plan.missed, "pulse-4h", "catchup_max") == ["2026-09-08T16", "2026-09-08T20", "2026-09-09T00", "2026-09-09T04"]
    downtime = _slots(plan.missed, "pulse-4h", "downtime")
    assert (downtime[0], downtime[-1], len(downtime)) == ("2026-08-30T00", "2026-09-08T12", 9 * 6 + 4)
    assert _slots(plan.missed, "evening", "downtime") == [f"2026-{day}" for day in
                                                          ("08-30", "08-31", "09-01", "09-02", "09-03", "09-04", "09-05", "09-06", "09-07")]
    assert _slots(plan.missed, "digest") == ["2026-W35", "2026-W36"]
    assert {m.agent for m in plan.missed} == {"motoko"}  # batou never wrote: it missed nothing


def test_catchup_max_zero_records_every_slot_and_runs_none(tmp_path: Path) -> None:
    """With catchup_max = 0 nothing is caught up; the slots within the grace are recorded as missed (catchup_max)."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT, runner='catchup_grace = "14h"\ncatchup_max = 0\n'))
    simulate(config, ["motoko"], datetime(2026, 9, 8, tzinfo=UTC), datetime(2026, 9, 9, tzinfo=UTC))
    plan = plan_catchup(config, NOW)
    assert plan.runs == []
    assert _slots(plan.missed, "pulse-4h") == ["2026-09-09T00", "2026-09-09T04", "2026-09-09T08", "2026-09-09T12"]
    assert {m.reason for m in plan.missed} == {"catchup_max"}


def test_spread_starts_the_oldest_first_evenly_over_the_interval(tmp_path: Path) -> None:
    """Four catch-up runs over ten minutes start at 0, 2.5, 5 and 7.5 minutes, in the order of their slots."""
    config = load_config(write_config(tmp_path, TWO_AGENTS, runner='catchup_grace = "1d"\ncatchup_max = 2\n'))
    simulate(config, ["motoko"], datetime(2026, 9, 7, tzinfo=UTC), datetime(2026, 9, 8, 18, tzinfo=UTC))
    runs = plan_catchup(config, NOW).runs
    planned = spread(runs, NOW, timedelta(minutes=10))
    assert [at - NOW for at, _ in planned] == [timedelta(minutes=10) * i / len(runs) for i in range(len(runs))]
    scheduled = [run.scheduled for _, run in planned]
    assert scheduled == sorted(scheduled) and len(runs) == 5


def test_serve_spreads_its_catchup_and_records_the_misses(tmp_path: Path, processes: list) -> None:
    """A real serve logs each miss, plans its catch-up runs catchup_spread apart, runs the first at once, and status says missed."""
    path = write_config(tmp_path, NIGHTLY + """
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["nightly"]

    [agents.batou]
    persona = "motoko.toml"
    routines = ["nightly"]
    """, runner='catchup_grace = "2d"\ncatchup_spread = "2h"\n', wall_clock=True)
    written = datetime.now(TEST_ZONE).date()
    last_written = {"motoko": written - timedelta(days=5), "batou": written - timedelta(days=6)}  # both wrote six days ago; motoko also five
    for agent, last in last_written.items():
        for day in sorted({written - timedelta(days=6), last}):
            at = datetime(day.year, day.month, day.day, tzinfo=TEST_ZONE).isoformat()
            done = ghostrunner("run", "nightly", "--agent", agent, "--at", at, "--config", str(path), cwd=tmp_path)
            assert done.returncode == 0, done.stderr
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    # Serve's today, not the one above: a midnight may have passed before serve planned its start.
    today = catchup_planned_at(reader).astimezone(TEST_ZONE).replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday = (today - timedelta(days=1)).date()
    reader.wait(event_named("scheduler.started"))
    first = reader.wait(event_named("run.finished"))
    events = _stop(process, reader)
    catchups = [e for e in events if e["event"] == "scheduler.catchup"]
    # Each pair's latest slot within two days is caught up; yesterday's (beyond catchup_max's one) and older ones are missed.
    assert [(c["agent"], c["slot"]) for c in catchups] == [("motoko", today.date().isoformat()), ("batou", today.date().isoformat())]
    starts = [datetime.fromisoformat(c["starts"]) for c in catchups]
    assert starts[1] - starts[0] == timedelta(hours=1)  # two runs over two hours, the first at once
    assert first["agent"] == "motoko"
    assert [e["agent"] for e in events if e["event"] == "run.finished"] == ["motoko"]  # batou's turn had not come at the stop

    def downtime(agent: str) -> list[str]:
        """The days after the agent's last entry and before yesterday, newest first."""
        span = (yesterday - last_written[agent]).days
        return [(yesterday - timedelta(days=n)).isoformat() for n in range(1, span)]

    missed = sorted((e["agent"], e["slot"], e["reason"]) for e in events if e["event"] == "scheduler.missed")
    assert missed == sorted([(agent, day, "downtime") for agent in last_written for day in downtime(agent)]
                            + [(agent, yesterday.isoformat(), "catchup_max") for agent in last_written])
    assert len(downtime("motoko")) >= 3 and len(downtime("batou")) >= 4
    log = tmp_path / "serve.log"
    log.write_text("".join(reader.raw))

    def status(now: datetime) -> tuple[int, dict[str, dict]]:
        result = ghostrunner("status", "--json", "--log", str(log), "--grace", "1m", "--now", now.isoformat(), "--config", str(path), cwd=tmp_path)
        return result.returncode, {pair["agent"]: pair for pair in json.loads(result.stdout)["pairs"]}

    code, pairs = status(today - timedelta(hours=1))  # judged before midnight, yesterday's slot is due: recorded missed
    assert code == 6 and {agent: pair["state"] for agent, pair in pairs.items()} == {"motoko": "missed", "batou": "missed"}
    assert [m["slot"] for m in pairs["batou"]["missed"]] == [yesterday.isoformat(), *downtime("batou")]
    assert [m["reason"] for m in pairs["batou"]["missed"]][:2] == ["catchup_max", "downtime"]
    # Today's slot: run for motoko; batou's catch-up never ran, and its slot is no miss: not known to be well (the log starts after it).
    code, pairs = status(today + timedelta(hours=23))
    assert code == 5 and (pairs["motoko"]["state"], pairs["batou"]["state"]) == ("ok", "unknown")


def test_a_long_downtime_is_one_summary_line_a_pair_and_its_newest_missed_slot(tmp_path: Path, processes: list) -> None:
    """A real serve started a month after its agent's last entry (as after a simulated past): one scheduler.missed_summary line
    for the pair, counting every missed slot but the newest, which keeps its own scheduler.missed line; status still says missed."""
    path = write_config(tmp_path, NIGHTLY + """
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["nightly"]
    """, runner='catchup_grace = "1d"\n', wall_clock=True)
    last = datetime.now(TEST_ZONE).date() - timedelta(days=30)
    at = datetime(last.year, last.month, last.day, tzinfo=TEST_ZONE).isoformat()
    assert ghostrunner("run", "nightly", "--agent", "motoko", "--at", at, "--config", str(path), cwd=tmp_path).returncode == 0
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    today = catchup_planned_at(reader).astimezone(TEST_ZONE).replace(hour=0, minute=0, second=0, microsecond=0)
    reader.wait(event_named("scheduler.started"))
    events = _stop(process, reader)
    yesterday = (today - timedelta(days=1)).date()
    [summary] = [e for e in events if e["event"] == "scheduler.missed_summary"]
    missed = [e for e in events if e["event"] == "scheduler.missed"]
    assert [e["slot"] for e in missed] == [yesterday.isoformat()]  # the newest missed slot (today's is caught up)
    older = (yesterday - last).days - 1  # the days after the last entry and before yesterday
    assert (summary["agent"], summary["routine"], summary["count"], summary["reason"]) == ("motoko", "nightly", older, "downtime")
    assert datetime.fromisoformat(summary["first"]).date() == last + timedelta(days=1)
    assert datetime.fromisoformat(summary["last"]).date() == yesterday - timedelta(days=1)
    log = tmp_path / "serve.log"
    log.write_text("".join(reader.raw))
    judged = ghostrunner("status", "--json", "--log", str(log), "--grace", "1m", "--now", (today - timedelta(hours=1)).isoformat(),
                         "--config", str(path), cwd=tmp_path)
    assert judged.returncode == EXIT_MISSED, judged.stdout


def test_status_reports_a_missed_due_slot_as_missed_with_exit_6(tmp_path: Path) -> None:
    """A due slot recorded as missed is `missed` (exit 6), not overdue; a later success of that slot makes it ok."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    started = '{"event": "scheduler.started", "timestamp": "2026-09-08T00:00:00Z", "agents": ["motoko"]}'
    lines = [started] + [
        json.dumps({"event": "scheduler.missed", "timestamp": "2026-09-09T13:00:00Z", "agent": "motoko", "routine": routine,
                    "slot": slot, "scheduled": scheduled, "reason": "downtime"})
        for routine, slot, scheduled in (("pulse-4h", "2026-09-09T12", "2026-09-09T12:00:00+00:00"),
                                         ("pulse-4h", "2026-09-09T08", "2026-09-09T08:00:00+00:00"),
                                         ("evening", "2026-09-08", "2026-09-08T21:00:00+00:00"),
                                         ("digest", "2026-W36", "2026-09-06T22:00:00+00:00"))
    ]
    report = build_report(config, read_log(io.StringIO("\n".join(lines))), NOW, timedelta(minutes=20))
    pairs = {pair.routine: pair for pair in report.pairs}
    assert {name: pair.state for name, pair in pairs.items()} == {"pulse-4h": "missed", "evening": "missed", "digest": "missed"}
    assert [m.slot for m in pairs["pulse-4h"].missed] == ["2026-09-09T12", "2026-09-09T08"]
    assert report.exit_code == EXIT_MISSED == 6
    finished = json.dumps({"event": "run.finished", "timestamp": "2026-09-09T13:10:00Z", "agent": "motoko", "routine": "evening",
                           "slot": "2026-09-08", "client_key": "motoko:evening:2026-09-08", "outcome": "appended"})
    failed = json.dumps({"event": "run.finished", "timestamp": "2026-09-09T13:11:00Z", "agent": "motoko", "routine": "digest",
                         "slot": "2026-W36", "client_key": "motoko:digest:2026-W36", "outcome": "failed", "error": "down"})
    report = build_report(config, read_log(io.StringIO("\n".join([*lines, finished, failed]))), NOW, timedelta(minutes=20))
    pairs = {pair.routine: pair for pair in report.pairs}
    assert (pairs["evening"].state, pairs["evening"].missed, pairs["digest"].state) == ("ok", (), "failed")
    assert report.exit_code == 1  # failed wins over missed


def test_a_fire_later_than_misfire_grace_is_recorded_not_run(tmp_path: Path) -> None:
    """Fires that come past misfire_grace (a suspended host) are each logged as missed (late) and none is run; one in time is accepted."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT, runner='misfire_grace = "10m"\n'))
    clock = [datetime(2026, 9, 9, 0, 0, 5, tzinfo=UTC)]
    scheduler = Scheduler(config, now=lambda: clock[0])
    scheduler._last_fire[("motoko", "pulse-4h")] = datetime(2026, 9, 8, 16, tzinfo=UTC)  # the fire before the suspend
    with capture_logs() as logs:
        scheduler.fire("motoko", "pulse-4h")  # woken 5 s after 00:00: the 20:00 fire was missed, 00:00 is in time
        clock[0] = datetime(2026, 9, 9, 12, 30, tzinfo=UTC)
        scheduler.fire("motoko", "pulse-4h")  # suspended again: 04, 08 and 12 are all late
    missed = [(e["slot"], e["reason"]) for e in logs if e["event"] == "scheduler.missed"]
    assert missed == [("2026-09-08T20", "late"), ("2026-09-09T04", "late"), ("2026-09-09T08", "late"), ("2026-09-09T12", "late")]
    assert scheduler._queue.counts() == (0, 1)  # 00:00 accepted; it waits, since only serve opens the queue


@pytest.mark.parametrize(("runner", "key", "expected"), [
    ("catchup_max = -1\n", "runner.catchup_max", "an integer from 0 to 1000"),
    ("catchup_max = 'one'\n", "runner.catchup_max", "an integer from 0 to 1000"),
    ("catchup_max = 1001\n", "runner.catchup_max", "an integer from 0 to 1000"),
    ("catchup_spread = 'soon'\n", "runner.catchup_spread", "a duration such as"),
    ("catchup_spread = -5\n", "runner.catchup_spread", "a duration such as"),
], ids=["negative", "text", "too-many", "spread-text", "spread-negative"])
def test_catchup_options_are_validated(tmp_path: Path, runner: str, key: str, expected: str) -> None:
    """A bad catchup_max or catchup_spread is refused at load, naming the key, the expectation and the value."""
    path = write_config(tmp_path, SIMPLE_AGENT, runner=runner)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}: expected {expected}")):
        load_config(path)
    result = ghostrunner("serve", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 78 and result.stderr.count("\n") == 1 and key in result.stderr


def test_catchup_defaults(tmp_path: Path) -> None:
    """Without the options, one slot per pair is caught up, spread over five minutes."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT, runner='catchup_spread = "5m"\n'))
    assert (config.catchup_max, config.catchup_spread) == (1, timedelta(minutes=5))


def test_a_downtime_decades_long_records_every_missed_fire_of_a_rare_schedule(tmp_path: Path) -> None:
    """Serve starting at the end of 2026 after entries of 29 February 1988 and 1972: 2016-02-29 of ``0 0 29 2 1`` (a Monday, with
    none between) is missed, and so is every 29 February since 1972 of ``0 9 29 2 *``, however far back they are."""
    body = "".join(f'[routines.{name}]\nkind = "note"\nschedule = "{schedule}"\nslot = "day"\nquestion = "q?"\nprompt = "p"\n\n'
                   for name, schedule in (("leap", "0 0 29 2 1"), ("yearly", "0 9 29 2 *")))
    body += '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["leap"]\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["yearly"]\n'
    config = load_config(write_config(tmp_path, body, runner='timezone = "Europe/Berlin"\n'))
    simulate(config, ["motoko"], datetime(1988, 2, 28, tzinfo=UTC), datetime(1988, 3, 1, tzinfo=UTC))
    simulate(config, ["batou"], datetime(1972, 2, 28, tzinfo=UTC), datetime(1972, 3, 1, tzinfo=UTC))
    plan = plan_catchup(config, datetime(2026, 12, 8, tzinfo=UTC))
    assert plan.runs == []
    assert _slots(plan.missed, "leap", "downtime") == ["2016-02-29"]
    assert _slots(plan.missed, "yearly", "downtime") == [f"{year}-02-29" for year in range(1976, 2025, 4)]
