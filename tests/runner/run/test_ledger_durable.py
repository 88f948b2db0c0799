"""The budgets' ledger is on the disk before the backend is asked: a power cut cannot give a day's budget back.

A real ``ghostrunner run`` is traced with strace (every process it starts, each file descriptor named by its path); the
backend is a real chat-completions server on 127.0.0.1. What a power cut keeps is what was synced: so the ledger's log
must be synced after the run's reservation and before the connection to the server, and after a slot is recorded as
skipped for budget, before the run ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from runner.run.budgets import Budgets
from runner.settings.config import load_config
from tests._chat_server import ChatServer
from tests._support import openai_agent, write_config

USAGE = {"prompt_tokens": 500, "completion_tokens": 100}
_LEDGER_SYNC = re.compile(r"\b(?:fsync|fdatasync)\(\d+<[^>]*/ledger\.sqlite3-wal>\) = 0")


def _traced_run(path: Path, at: str, trace: Path) -> list[str]:
    """The syscalls (syncs and connects) of a real ghostrunner run of the pulse at *at*, in order."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI"):
            pytest.fail("strace is not installed (Debian package strace; .ci/run installs it)")
        pytest.skip("strace is not installed (apt-get install strace)")
    program = shutil.which("ghostrunner") or "ghostrunner"
    command = [strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,connect", "-o", str(trace), program]
    command += ["run", "pulse-4h", "--agent", "motoko", "--at", at, "--config", str(path)]
    done = subprocess.run(command, check=False, cwd=path.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return trace.read_text(encoding="utf-8").splitlines()


def _first(lines: list[str], pattern: re.Pattern[str]) -> int:
    return next((number for number, line in enumerate(lines) if pattern.search(line)), len(lines))


def test_the_ledger_is_synced_before_the_backend_is_asked_and_when_a_slot_is_skipped(tmp_path: Path) -> None:
    """The admitted run syncs the ledger's log before it connects to the server; the run over budget syncs its skipped slot."""
    with ChatServer(usage=USAGE) as server:
        body = openai_agent(server.url, routines=("pulse-4h",), timeout="100s", backend="attempts = 1\n")
        path = write_config(tmp_path, body + "\n[budgets]\ntokens_per_day = 500\n")
        to_server = re.compile(rf"connect\(.*htons\({urlsplit(server.url).port}\)")
        _traced_run(path, "2026-09-04T08:00", tmp_path / "first.trace")  # the ledger exists, as on every run but the first
        # Another process has the ledger open, as serve's other workers and the timers do: its log is in use, so a commit is
        # only written to it (a sole user's close copies the log into the file, synced, which would hide a missing sync).
        with contextlib.closing(sqlite3.connect(Budgets(load_config(path)).path)) as other:
            other.execute("SELECT count(*) FROM runs").fetchone()
            admitted = _traced_run(path, "2026-09-05T08:00", tmp_path / "admitted.trace")
            assert len(server.requests) == 2
            connect = _first(admitted, to_server)
            assert connect < len(admitted), "the run never connected to the server"
            assert _first(admitted, _LEDGER_SYNC) < connect, "\n".join(admitted)
            # 600 of the day's 500 tokens are used: the next slot is skipped for budget, and that is synced.
            skipped = _traced_run(path, "2026-09-05T12:00", tmp_path / "skipped.trace")
    assert len(server.requests) == 2
    assert _first(skipped, to_server) == len(skipped)
    assert _first(skipped, _LEDGER_SYNC) < len(skipped), "\n".join(skipped)
