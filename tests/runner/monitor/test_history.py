"""`ghostrunner history` over the log lines of real runs: each slot's attempts, outcome, duration and error, newest first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.monitor.history import build_history
from tests._support import ghostrunner, script, write_config

#: A command backend whose first call fails and every later one answers.
FLAKY = """
import json, os, sys
sys.stdin.read()
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls")
first = not os.path.exists(calls)
open(calls, "a").write("x")
if first:
    print("the model is loading", file=sys.stderr)
    sys.exit(3)
print(json.dumps({"voice": "rain on the harbour again", "theme": "rain"}))
"""


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A config, and the log file of real runs: an evening slot failed, appended, then duplicate; a pulse; a dry run."""
    directory = tmp_path_factory.mktemp("history")
    argv = script(directory, "flaky.py", FLAKY)
    config = write_config(directory, f"""
    [agents.motoko]
    routines = ["evening", "pulse-4h"]
    backend = {{ type = "command", command = {json.dumps(argv)} }}
    """)
    runs = [
        ("evening", "2026-09-05T21:30", ()), ("evening", "2026-09-05T21:40", ()), ("evening", "2026-09-05T22:00", ()),
        ("pulse-4h", "2026-09-06T09:00", ()), ("pulse-4h", "2026-09-06T13:00", ("--dry-run",)),
    ]
    lines = []
    for routine, at, extra in runs:
        result = ghostrunner("run", routine, "--agent", "motoko", "--at", at, *extra, "--config", str(config), cwd=directory)
        lines += result.stderr.splitlines(keepends=True)
    log = directory / "runs.log"
    # The pulse's lines as `journalctl -o json` records, as status reads them too.
    log.write_text("".join(json.dumps({"MESSAGE": line.strip()}) + "\n" if '"pulse-4h"' in line else line for line in lines))
    finished = [json.loads(line) for line in lines if '"run.finished"' in line]
    assert [event["outcome"] for event in finished] == ["failed", "appended", "duplicate", "appended", "skipped"]
    return config, log, finished


def _history(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("ghostrunner") or "ghostrunner", "history", "--config", str(config), *args], input=stdin,
                          capture_output=True, text=True, check=False, timeout=60)


def test_each_slot_shows_its_attempts_outcome_duration_and_error_newest_first(logged: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    """Piped, history prints one JSON array of slots, newest first; a slot appended after a failure keeps the failure's error."""
    config, log, finished = logged
    result = _history(config, "--log", str(log))
    assert result.returncode == 0, result.stderr
    slots = json.loads(result.stdout)
    assert [(s["routine"], s["slot"], s["outcome"], s["attempts"]) for s in slots] == [
        ("pulse-4h", "2026-09-06T08", "appended", 1), ("evening", "2026-09-05", "appended", 3)]  # the dry run is left out
    evening = slots[1]
    assert [run["outcome"] for run in evening["runs"]] == ["duplicate", "appended", "failed"]
    assert evening["duration_ms"] == finished[1]["duration_ms"] and evening["entry_id"] == finished[1]["entry_id"]
    assert evening["error"] == finished[0]["error"] and "exited with status 3" in evening["error"]
    assert evening["last_finished"] == evening["runs"][0]["finished"] and evening["scheduled"] == "2026-09-05T21:00:00+00:00"
    as_array = _history(config, "--log", str(log), "--json")
    assert as_array.stdout == result.stdout  # piped or asked for, the same JSON, as every command prints it
    assert _history(config, "--json", stdin=log.read_text()).stdout == as_array.stdout  # standard input, as from journalctl
    table = _history(config, "--log", str(log), "--text")
    assert table.stdout.split("\n", 1)[0].split()[:3] == ["LAST", "RUN", "AGENT"] and " 0 foreign; from " in table.stdout.splitlines()[-1]


def test_filters_narrow_by_agent_routine_and_time(logged: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    """--routine keeps one routine, --agent of an agent without runs gives nothing (exit 0), --since drops the earlier runs."""
    config, log, finished = logged
    only = json.loads(_history(config, "--log", str(log), "--routine", "evening", "--json").stdout)
    assert [s["routine"] for s in only] == ["evening"]
    none = _history(config, "--log", str(log), "--agent", "batou")
    assert (none.returncode, json.loads(none.stdout)) == (0, [])
    since = json.loads(_history(config, "--log", str(log), "--routine", "evening", "--since", finished[1]["timestamp"], "--json").stdout)
    assert [(s["attempts"], s["outcome"], s["error"]) for s in since] == [(2, "appended", None)]
    bad = _history(config, "--log", str(log), "--since", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("ghostrunner: error: ") and bad.stderr.count("\n") == 1


def test_on_a_terminal_history_is_a_table(logged: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    """With stdout a terminal, history prints a table: a header, one row per slot with its outcome, attempts and error."""
    config, log, _ = logged
    leader, follower = os.openpty()
    process = subprocess.Popen([shutil.which("ghostrunner") or "ghostrunner", "history", "--config", str(config), "--log", str(log)],
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side has closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(60) == 0
    assert process.stderr is not None
    process.stderr.close()
    lines = b"".join(chunks).decode().replace("\r\n", "\n").splitlines()
    assert lines[0].split() == ["LAST", "RUN", "AGENT", "ROUTINE", "SLOT", "OUTCOME", "ATTEMPTS", "DURATION", "SPENT", "ERROR"]
    assert lines[1].split()[2:7] == ["motoko", "pulse-4h", "2026-09-06T08", "appended", "1"]
    assert lines[2].split()[2:7] == ["motoko", "evening", "2026-09-05", "appended", "3"] and "command backend (agent motoko)" in lines[2]
    assert lines[-1].startswith("2 slots; input: ")


def test_busy_and_hostile_lines_do_not_break_history() -> None:
    """A slot whose runs were all busy is busy; malformed lines are counted and skipped, as status does."""
    base = {"event": "run.finished", "agent": "a", "routine": "r", "slot": "s", "client_key": "a:r:s", "scheduled": "2026-09-05T21:00:00+00:00",
            "entry_id": None, "duration_ms": 5000.0, "error": None, "dry_run": False, "reason": "slot_locked", "outcome": "busy"}
    lines = [json.dumps({**base, "timestamp": f"2026-09-05T21:0{n}:00Z", "run_id": str(n)}) for n in range(2)]
    lines += ["not json", json.dumps({**base, "timestamp": "2026-09-05T21:05:00Z", "client_key": "b:r:s"}), "[" * 100_000]
    found = build_history(lines)
    [slot] = found.slots
    assert (slot.deciding.outcome, len(slot.runs), [run.run_id for run in slot.runs]) == ("busy", 2, ["1", "0"])
    assert found.digest.malformed == 3
