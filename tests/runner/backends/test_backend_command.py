"""The command backend with real subprocesses: a good program and every way of failing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from runner.backends import build_backend
from runner.run.engine import execute_run
from runner.settings.config import load_config
from tests._support import script, write_config

PROGRAMS = {
    "good": """
        import json, sys
        request = json.load(sys.stdin)
        ids = [json.loads(l)["id"] for l in request["context"].splitlines() if l.startswith('{"id"')]
        print(json.dumps({"voice": "From " + request["agent"] + " for " + request["slot"], "theme": "t",
                          "signals": {"continuity_refs": ids[:1]}}))
    """,
    "nonzero": """
        import sys
        sys.stdin.read()
        print("model file not found", file=sys.stderr)
        sys.exit(3)
    """,
    "bad-output": """
        import sys
        sys.stdin.read()
        print("I am not JSON")
    """,
    "not-an-object": """
        import sys
        sys.stdin.read()
        print('["voice", "theme"]')
    """,
    "timeout": """
        import sys, time
        sys.stdin.read()
        while True:  # for good: only the backend's timeout ends it
            time.sleep(3600)
    """,
}


#: The backend's timeout: the program that never ends is cut at 1 s; the others get room to start Python on a loaded machine.
TIMEOUTS = {"timeout": "1s"}


def _run(tmp_path: Path, program: str) -> tuple[Any, list[Any]]:
    argv = script(tmp_path, "agent.py", PROGRAMS[program])
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "{TIMEOUTS.get(program, "120s")}" }}
    """
    config = load_config(write_config(tmp_path, body))
    agent = config.agent("motoko")
    with Journal(agent.journal_root) as journal:
        earlier = journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "earlier", "ts": "2026-09-05T10:00:00Z"})
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime(2026, 9, 5, 21, tzinfo=config.timezone),
                             backend=build_backend(agent), tz=config.timezone)
        return result, [earlier.id, *journal.list(kind="evening")]


def test_good_program_writes_the_entry(tmp_path: Path) -> None:
    """The program reads the request on stdin and its JSON on stdout becomes the entry, citing the context."""
    result, (earlier, *appended) = _run(tmp_path, "good")
    assert result.outcome == "appended", result.error
    assert appended[0].voice == "From motoko for 2026-09-05"
    assert appended[0].continuity_refs == (earlier,)


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("nonzero", "exited with status 3: model file not found"),
        ("bad-output", "the reply is not valid JSON"),
        ("not-an-object", "the reply must be a JSON object"),
        ("timeout", "no reply within 1 s"),
    ],
)
def test_failing_program_fails_the_run_and_appends_nothing(tmp_path: Path, program: str, message: str) -> None:
    """A non-zero exit, output that is not an entry object, or running past the timeout fail the run cleanly."""
    result, (_, *appended) = _run(tmp_path, program)
    assert result.outcome == "failed"
    assert result.error.startswith("command backend (agent motoko):") and message in result.error
    assert appended == []
