"""A routine's gate as a Python callable: True runs the slot, False skips it (reason gate), anything else fails it.

The function is in a module beside the configuration, run by real ghostrunner processes; the backend is a real
chat-completions server on 127.0.0.1, so that "no backend call" is counted at the server.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._chat_server import ChatServer
from tests._support import entries, ghostrunner, openai_agent, write_config

GATES = """
import json, os, time
from pathlib import Path

HERE = Path(__file__).parent


def anything_new(slot):
    seen = {"slot": slot, "keys": sorted(k for k in os.environ if k == "GATE_TEST_KEY")}
    (HERE / "gate-seen.json").write_text(json.dumps(seen))
    return {"run": True, "skip": False}[os.environ["GATE_ANSWER"]] if os.environ["GATE_ANSWER"] in ("run", "skip") else answer()


def answer():
    what = os.environ["GATE_ANSWER"]
    if what == "raise":
        raise ValueError("the feed is down")
    if what == "offline":
        raise ConnectionError("the feed cannot be reached")
    if what == "hang":
        time.sleep(300)
    return "yes"


class Feeds:
    @staticmethod
    def always(slot):
        return True
"""


def _config(tmp_path: Path, url: str, gate: str = '{callable = "gates:anything_new"}') -> Path:
    (tmp_path / "gates.py").write_text(GATES, encoding="utf-8")
    body = openai_agent(url, backend='attempts = 1\napi_key_env = "GATE_TEST_KEY"\n') + f"\n[routines.evening]\ngate = {gate}\n"
    return write_config(tmp_path, body)


def _run(path: Path, answer: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {**os.environ, "GATE_ANSWER": answer, "GATE_TEST_KEY": "sk-never-shown-to-gates"}
    # Run from another directory: the module is found beside the configuration, not in the working directory.
    done = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=cwd, env=env)
    [finished] = [event for event in map(json.loads, done.stderr.splitlines()) if event["event"] == "run.finished"]
    return done, finished


def test_a_callable_gate_returning_false_skips_the_slot_and_true_runs_it(tmp_path: Path) -> None:
    """False: skipped, reason gate, no request, nothing appended, the function got the slot's identity and no API key; True: appended."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ChatServer() as server:
        path = _config(tmp_path, server.url)
        done, finished = _run(path, "skip", elsewhere)
        assert (done.returncode, finished["outcome"], finished["reason"], finished["attempts"]) == (0, "skipped", "gate", 0), done.stderr
        assert server.requests == [] and entries(tmp_path / "journal") == []
        seen = json.loads((tmp_path / "gate-seen.json").read_text(encoding="utf-8"))
        assert seen["slot"] == {
            "agent": "motoko",
            "routine": "evening",
            "slot": "2026-09-05",
            "scheduled": "2026-09-05T21:00:00+00:00",
            "client_key": "motoko:evening:2026-09-05",
        }
        assert seen["keys"] == []
        done, finished = _run(path, "run", elsewhere)
        assert (done.returncode, finished["outcome"], len(server.requests)) == (0, "appended", 1), done.stderr


def test_a_dotted_callable_is_found_too(tmp_path: Path) -> None:
    """module:Class.method names a function inside a class."""
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url, '{callable = "gates:Feeds.always"}'), "run", tmp_path)
    assert (done.returncode, finished["outcome"], len(server.requests)) == (0, "appended", 1), done.stderr


@pytest.mark.parametrize(
    ("answer", "exit_code", "permanent", "said"),
    [
        ("raise", 78, True, "ValueError: the feed is down"),
        ("offline", 1, False, "ConnectionError: the feed cannot be reached"),
        ("other", 78, True, "it returned 'yes', not True (run the slot) or False (nothing to do)"),
    ],
    ids=["raises", "connection-error", "not-a-bool"],
)
def test_a_failing_callable_gate_fails_the_run_like_a_backend_error(
    tmp_path: Path, answer: str, exit_code: int, permanent: bool, said: str
) -> None:
    """An exception or an answer that is not a bool fails the run naming the callable, no backend call; a connection error may pass."""
    with ChatServer() as server:
        done, finished = _run(_config(tmp_path, server.url), answer, tmp_path)
    assert (done.returncode, finished["outcome"], server.requests) == (exit_code, "failed", []), done.stderr
    assert "the gate of routine 'evening' (callable 'gates:anything_new')" in finished["error"] and said in finished["error"]
    assert json.loads(done.stdout).get("permanent", False) is permanent


def test_a_callable_gate_past_its_timeout_is_killed(tmp_path: Path) -> None:
    """A function that hangs is cut off at the gate's timeout with its process; the run fails, transient."""
    with ChatServer() as server:
        path = _config(tmp_path, server.url, '{callable = "gates:anything_new", timeout = "1s"}')
        done, finished = _run(path, "hang", tmp_path)
    assert (done.returncode, finished["outcome"], server.requests) == (1, "failed", []), done.stderr
    assert "did not exit within 1 s" in finished["error"]


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ('{callable = "no_such_gates_module:check"}', "'no_such_gates_module' was not found"),
        ('{callable = "gates"}', "a Python callable as 'module:function'"),
        ('{callable = "gates:"}', "a Python callable as 'module:function'"),
        ("{callable = 7}", "a Python callable as 'module:function'"),
        ('{callable = "gates:anything_new", command = ["true"]}', "a command or a callable, not both"),
    ],
    ids=["missing-module", "no-function", "empty-function", "not-a-string", "both"],
)
def test_a_bad_callable_gate_is_refused_at_load_in_one_line(tmp_path: Path, gate: str, expected: str) -> None:
    """A callable whose module is not found, or a malformed one: one line naming the key, exit 78, no traceback."""
    path = _config(tmp_path, "http://127.0.0.1:9/v1", gate)
    done = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (78, "")
    assert done.stderr.strip().count("\n") == 0 and "routines.evening.gate" in done.stderr and expected in done.stderr
    assert "Traceback" not in done.stderr
