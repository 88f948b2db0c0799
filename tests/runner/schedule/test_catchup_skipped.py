"""Catch-up and the slots a run skipped on purpose: a gate's "nothing to do", a pause, a digest with nothing in its window.

Such a slot has no entry, but it was not missed: its run decided it. ``serve`` on start neither runs it again
(no gate, no backend asked) nor records it as missed, and it takes no place under ``catchup_max`` or
``catchup_budget`` from a slot that really was missed. The skips are made by real ``ghostrunner run``
processes; the catch-up by a real ``serve`` or by the planner it calls.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runner.schedule.catchup import plan_catchup
from runner.settings.config import load_config
from tests._support import NIGHTLY, TEST_ZONE, event_named, ghostrunner, reap, script, start_serve, write_config

#: A command backend that notes each call's agent and slot in a file beside it.
COUNTING = """
import json, os, sys
request = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls"), "a") as calls:
    calls.write(request["agent"] + " " + request["slot"] + "\\n")
print(json.dumps({"voice": "a night like any other", "theme": "night"}))
"""

#: A gate that notes each slot it is asked about, and says "nothing to do" (exit 100) when GATE_EXIT says so.
GATE = """#!/usr/bin/env python3
import os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate-asked"), "a") as asked:
    asked.write(os.environ["GHOSTRUNNER_AGENT"] + " " + os.environ["GHOSTRUNNER_SLOT"] + "\\n")
sys.exit(int(os.environ.get("GATE_EXIT", "0")))
"""

AGENTS = ("motoko", "batou", "togusa")


def _config(tmp_path: Path, runner: str, *, wall_clock: bool, routines: dict[str, str] | None = None) -> Path:
    """Each agent of *routines* (default: each of AGENTS runs nightly) with the counting backend; nightly asks the gate."""
    gate = tmp_path / "gate.py"
    gate.write_text(GATE, encoding="utf-8")
    gate.chmod(gate.stat().st_mode | stat.S_IXUSR)
    argv = script(tmp_path, "counting.py", COUNTING)
    body = NIGHTLY + 'gate = ["./gate.py"]\n' + "".join(f"""
    [agents.{name}]
    routines = ["{routine}"]
    backend = {{ type = "command", command = {json.dumps(argv)} }}
    """ for name, routine in (routines or dict.fromkeys(AGENTS, "nightly")).items())
    return write_config(tmp_path, body, runner='lock_file = "serve.lock"\n' + runner, wall_clock=wall_clock)


def _run(path: Path, agent: str, at: datetime, *, gate_exit: int = 0, routine: str = "nightly", dry_run: bool = False) -> dict:
    env = {**os.environ, "GATE_EXIT": str(gate_exit)}
    argv = ["run", routine, "--agent", agent, "--at", at.isoformat(), "--config", str(path), "--json", *(["--dry-run"] if dry_run else [])]
    done = ghostrunner(*argv, cwd=path.parent, env=env)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout), "stderr": done.stderr}


def _cli(path: Path, *args: str) -> None:
    done = ghostrunner(*args, "--config", str(path), cwd=path.parent)
    assert done.returncode == 0, done.stderr


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _skip_the_days(path: Path, days: list[datetime]) -> None:
    """motoko's gate says nothing to do on *days*; togusa is paused for them; batou's runs never happen (serve was down).

    Each wrote the day before the first of them.
    """
    before = days[0] - timedelta(days=1)
    for agent in AGENTS:
        assert _run(path, agent, before)["outcome"] == "appended"
    for day in days:
        assert (_run(path, "motoko", day, gate_exit=100)["reason"]) == "gate"
    _cli(path, "pause", "togusa")
    for day in days:
        assert _run(path, "togusa", day)["reason"] == "paused"
    _cli(path, "resume", "togusa")


def test_serve_neither_reruns_nor_reports_the_slots_a_gate_or_a_pause_skipped(tmp_path: Path, processes: list) -> None:
    """A real serve, after four days of which motoko's gate skipped each and togusa's pause skipped each while batou ran none:
    the one place of catchup_budget goes to batou's today, batou's other days are recorded missed, and motoko's and
    togusa's days are neither run (no gate asked, no backend) nor recorded."""
    path = _config(tmp_path, 'catchup_grace = "2d"\n[budgets]\ncatchup_budget = 1\n', wall_clock=True)
    today = datetime.now(TEST_ZONE).replace(hour=0, minute=0, second=0, microsecond=0)
    days = [today - timedelta(days=n) for n in (3, 2, 1, 0)]
    _skip_the_days(path, days)
    asked, calls = _lines(tmp_path / "gate-asked"), _lines(tmp_path / "calls")
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    try:
        planned = datetime.fromisoformat(reader.wait(event_named("scheduler.started"))["timestamp"]).astimezone(TEST_ZONE)
        assert planned.date() == today.date()  # the zone puts the test hours away from midnight
        caught_up = reader.wait(event_named("run.finished", agent="batou"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        events = reader.drain()
    finally:
        reap(process)
    slots = [day.date().isoformat() for day in days]
    assert [(e["agent"], e["slot"]) for e in events if e["event"] == "scheduler.catchup"] == [("batou", slots[-1])]
    assert (caught_up["slot"], caught_up["outcome"]) == (slots[-1], "appended")
    missed = sorted((e["agent"], e["slot"], e["reason"]) for e in events if e["event"] == "scheduler.missed")
    assert missed == [("batou", slots[0], "downtime"), ("batou", slots[1], "downtime"), ("batou", slots[2], "catchup_max")]
    assert [e["agent"] for e in events if e["event"] == "run.finished"] == ["batou"]
    assert _lines(tmp_path / "gate-asked")[len(asked) :] == [f"batou {slots[-1]}"]
    assert _lines(tmp_path / "calls")[len(calls) :] == [f"batou {slots[-1]}"]


def test_a_digest_that_found_nothing_is_decided_and_a_dry_run_decides_nothing(tmp_path: Path) -> None:
    """Planned at 01:00 on 7 September: togusa's digest of the Sunday before found nothing to take and batou's gate skipped its
    nightly of the 7th, so catch-up leaves both; motoko's nightly of the 7th had only a dry run, which decides no slot, so it runs."""
    path = _config(tmp_path, "", wall_clock=False, routines={"motoko": "nightly", "batou": "nightly", "togusa": "digest"})
    day = datetime(2026, 9, 7, tzinfo=UTC)
    for agent in ("motoko", "batou"):
        assert _run(path, agent, day - timedelta(days=1))["outcome"] == "appended"
    assert _run(path, "batou", day, gate_exit=100)["reason"] == "gate"
    assert (_run(path, "motoko", day, gate_exit=100, dry_run=True)["reason"]) == "gate"
    digest = _run(path, "togusa", day - timedelta(hours=2), routine="digest")
    assert (digest["slot"], digest["outcome"], digest.get("reason")) == ("2026-W36", "skipped", None)
    plan = plan_catchup(load_config(path), day + timedelta(hours=1))
    assert [(run.agent, run.routine, run.slot) for run in plan.runs] == [("motoko", "nightly", "2026-09-07")]
    assert plan.missed == []


def test_a_skip_that_cannot_be_noted_leaves_the_run_skipped_and_says_so(tmp_path: Path) -> None:
    """With a directory where the record of skips goes, a gate's skip is still a skip (exit 0) and one warning names the file."""
    path = _config(tmp_path, "", wall_clock=False)
    (tmp_path / "serve.state" / "skips.sqlite3").mkdir(parents=True)
    done = _run(path, "motoko", datetime(2026, 9, 7, tzinfo=UTC), gate_exit=100)
    assert (done["outcome"], done["reason"]) == ("skipped", "gate")
    [warning] = [event for event in map(json.loads, done["stderr"].splitlines()) if event["event"] == "run.skip_unrecorded"]
    assert (warning["client_key"], warning["path"], warning["level"]) == ("motoko:nightly:2026-09-07", str(tmp_path / "serve.state" / "skips.sqlite3"), "warning")


def test_a_paused_pairs_catchup_takes_no_place_under_catchup_budget(tmp_path: Path) -> None:
    """With room for one catch-up run, motoko paused and both pairs missing the 7th: batou's slot runs, and motoko's, whose run
    will end skipped (paused) as it starts, asking nothing, takes no place from it; nothing is recorded missed."""
    path = _config(tmp_path, 'catchup_grace = "2d"\n[budgets]\ncatchup_budget = 1\n', wall_clock=False, routines=dict.fromkeys(("motoko", "batou"), "nightly"))
    day = datetime(2026, 9, 7, tzinfo=UTC)
    for agent in ("motoko", "batou"):
        assert _run(path, agent, day - timedelta(days=1))["outcome"] == "appended"
    _cli(path, "pause", "motoko")
    plan = plan_catchup(load_config(path), day + timedelta(hours=1))
    assert sorted((run.agent, run.slot) for run in plan.runs) == [("batou", "2026-09-07"), ("motoko", "2026-09-07")]
    assert plan.missed == []
