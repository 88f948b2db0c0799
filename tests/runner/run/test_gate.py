"""A routine's gate, a real program run before the model: exit 0 runs the slot, 100 skips it (reason gate), anything else fails it.

The backend is a real chat-completions server on 127.0.0.1, so that "no backend call" is counted at the server.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._chat_server import ChatServer
from tests._support import entries, ghostrunner, openai_agent, write_config

GATE = """#!/usr/bin/env python3
import json, os, sys
seen = {"stdin": json.load(sys.stdin), "env": {k: v for k, v in os.environ.items() if k.startswith("GHOSTRUNNER_") or k == "GATE_TEST_KEY"}}
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate-seen.json"), "w").write(json.dumps(seen))
sys.exit(int(os.environ.get("GATE_EXIT", "0")))
"""


def _gate(tmp_path: Path, text: str = GATE, *, executable: bool = True) -> None:
    path = tmp_path / "gate.py"
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _config(tmp_path: Path, url: str, gate: str = '["./gate.py"]') -> Path:
    body = openai_agent(url, backend='attempts = 1\napi_key_env = "GATE_TEST_KEY"\n') + f"\n[routines.evening]\ngate = {gate}\n"
    return write_config(tmp_path, body)


def _run(path: Path, code: int) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {**os.environ, "GATE_EXIT": str(code), "GATE_TEST_KEY": "sk-never-shown-to-gates"}
    done = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=path.parent, env=env)
    [finished] = [event for event in map(json.loads, done.stderr.splitlines()) if event["event"] == "run.finished"]
    return done, finished


def test_a_gate_saying_nothing_to_do_skips_the_slot_without_the_backend(tmp_path: Path) -> None:
    """Exit 100: skipped, reason gate, exit 0, no request at the server, nothing appended; the gate got the slot's identity, no API key."""
    _gate(tmp_path)
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url), 100)
    assert (done.returncode, finished["outcome"], finished["reason"], finished["attempts"]) == (0, "skipped", "gate", 0), done.stderr
    assert server.requests == [] and entries(tmp_path / "journal") == []
    seen = json.loads((tmp_path / "gate-seen.json").read_text(encoding="utf-8"))
    identity = {
        "agent": "motoko",
        "routine": "evening",
        "slot": "2026-09-05",
        "scheduled": "2026-09-05T21:00:00+00:00",
        "client_key": "motoko:evening:2026-09-05",
    }
    assert seen["stdin"] == identity
    assert {key: seen["env"][f"GHOSTRUNNER_{key.upper()}"] for key in identity} == identity
    assert "GATE_TEST_KEY" not in seen["env"]


def test_a_gate_saying_run_lets_the_run_ask_its_backend(tmp_path: Path) -> None:
    """Exit 0: the run goes on as without a gate, and appends."""
    _gate(tmp_path)
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url), 0)
    assert (done.returncode, finished["outcome"], len(server.requests)) == (0, "appended", 1), done.stderr


@pytest.mark.parametrize(("code", "exit_code", "permanent"), [(2, 78, True), (75, 1, False)], ids=["failed", "try-later"])
def test_a_failing_gate_fails_the_run_like_a_backend_error(tmp_path: Path, code: int, exit_code: int, permanent: bool) -> None:
    """Any other status fails the run naming the gate and its status; 75 is transient, the rest permanent (exit 78); no backend call."""
    _gate(tmp_path, GATE.replace("sys.exit(", "print('the feed is down', file=sys.stderr); sys.exit("))
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url), code)
    assert (done.returncode, finished["outcome"], server.requests) == (exit_code, "failed", []), done.stderr
    assert "the gate of routine 'evening'" in finished["error"] and f"exited with status {code}" in finished["error"]
    assert "the feed is down" in finished["error"] and json.loads(done.stdout).get("permanent", False) is permanent


def test_a_gate_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    """A gate that hangs is cut off at its timeout, its child killed too; the run fails, transient."""
    _gate(tmp_path, "#!/bin/sh\nsleep 300 &\necho $! > child.pid\nwait\n")
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url, '{command = ["./gate.py"], timeout = "1s"}'), 0)
    assert (done.returncode, finished["outcome"], server.requests) == (1, "failed", []), done.stderr
    assert "did not exit within 1 s" in finished["error"]
    child = int((tmp_path / "child.pid").read_text(encoding="utf-8"))
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


@pytest.mark.parametrize(
    ("setup", "gate", "expected"),
    [
        ("none", '["./gate.py"]', "a gate program that exists"),
        ("plain", '["./gate.py"]', "is not executable: chmod +x it"),
        ("none", '["no-such-gate-program"]', "a gate program found on PATH"),
        ("none", '"./gate.py"', "a non-empty list of strings"),
        ("exec", '{command = ["./gate.py"], timeout = "2h"}', "a duration from 1s to 1h"),
    ],
    ids=["missing", "not-executable", "not-on-path", "not-a-list", "timeout"],
)
def test_a_bad_gate_is_refused_at_load_in_one_line(tmp_path: Path, setup: str, gate: str, expected: str) -> None:
    """A gate that does not exist, is not executable or not found, or a bad table: one line naming the key, exit 78."""
    if setup != "none":
        _gate(tmp_path, executable=setup == "exec")
    path = _config(tmp_path, "http://127.0.0.1:9/v1", gate)
    done = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (78, "")
    assert done.stderr.strip().count("\n") == 0 and "routines.evening.gate" in done.stderr and expected in done.stderr
    assert "Traceback" not in done.stderr
