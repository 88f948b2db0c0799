"""The budgets' ledger is on the disk before the backend is asked: a power cut cannot give a day's budget back.

A real ``ghostrunner run`` is traced with strace (every process it starts, each file descriptor named by its path); the
backend is a real chat-completions server on 127.0.0.1. What a power cut keeps is what was synced: so the ledger's log
must be synced after the run's reservation and before the connection to the server, and after a slot is recorded as
skipped for budget, before the run ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from runner.run.budgets import Budgets
from runner.run.engine import run_at
from runner.settings.config import load_config
from tests._chat_server import ChatServer
from tests._support import entries, openai_agent, write_config

USAGE = {"prompt_tokens": 500, "completion_tokens": 100}
#: Given to the runs made in this process: by default a run's time counts from its process's start, as a worker's
#: does, and a test worker may have lived longer than ``run_timeout`` by the time it gets here.
_RUN_TIMEOUT = 120.0
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


def _disk_error(fd: int) -> None:
    """An fdatasync on a disk that reports an I/O error (as a failing or full disk makes it)."""
    raise OSError(errno.EIO, os.strerror(errno.EIO))


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


def test_a_run_whose_reservation_cannot_be_synced_fails_before_its_backend_and_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger's sync runs beside the run's preparation; when it fails (EIO), the run fails before the server is called.

    The reservation it could not sync is settled as unused (no backend call), the slot gets no entry, and the failure is
    transient: once the disk syncs again, the slot's next run goes through.
    """
    with ChatServer(usage=USAGE) as server:
        body = openai_agent(server.url, routines=("pulse-4h",), timeout="100s", backend="attempts = 1\n")
        config = load_config(write_config(tmp_path, body + "\n[budgets]\ntokens_per_day = 5000\n"))
        at = datetime(2026, 9, 5, 8, 0, tzinfo=UTC)

        with monkeypatch.context() as patch:
            patch.setattr(os, "fdatasync", _disk_error)
            result = run_at(config, "motoko", "pulse-4h", at=at, run_timeout=_RUN_TIMEOUT)
        assert (result.outcome, result.attempts, result.permanent) == ("failed", 0, False), result
        assert result.error is not None
        assert "the budgets' ledger cannot be synced to the disk (Input/output error)" in result.error
        assert server.requests == []
        assert entries(tmp_path / "journal") == []
        assert Budgets(config).used() == (0.0, 0.0)
        again = run_at(config, "motoko", "pulse-4h", at=at, run_timeout=_RUN_TIMEOUT)
    assert (again.outcome, len(server.requests)) == ("appended", 1)
    assert Budgets(config).used() == (600.0, 0.0)


def test_a_slot_skipped_for_budget_whose_skip_cannot_be_synced_fails_and_is_skipped_by_its_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused run syncs its skip before it ends: a sync that fails fails the run (never a silent skip); the skip holds after."""
    with ChatServer(usage=USAGE) as server:
        body = openai_agent(server.url, routines=("pulse-4h",), timeout="100s", backend="attempts = 1\n")
        config = load_config(write_config(tmp_path, body + "\n[budgets]\ntokens_per_day = 500\n"))
        assert run_at(config, "motoko", "pulse-4h", at=datetime(2026, 9, 5, 8, 0, tzinfo=UTC), run_timeout=_RUN_TIMEOUT).outcome == "appended"
        at = datetime(2026, 9, 5, 12, 0, tzinfo=UTC)
        with monkeypatch.context() as patch:
            patch.setattr(os, "fdatasync", _disk_error)
            refused = run_at(config, "motoko", "pulse-4h", at=at, run_timeout=_RUN_TIMEOUT)
        assert (refused.outcome, refused.attempts) == ("failed", 0), refused
        assert refused.error is not None and "cannot be synced to the disk" in refused.error
        again = run_at(config, "motoko", "pulse-4h", at=at, run_timeout=_RUN_TIMEOUT)
    assert (again.outcome, again.reason, len(server.requests)) == ("skipped", "budget", 1)
