"""runner.processes.Reaper: the watcher that kills what a program left once the process that started it died, and only then."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from journal import Journal
from runner.backends import build_backend
from runner.processes import Reaper
from runner.run.engine import execute_run
from runner.settings.config import load_config
from tests._backend_group import assert_group_ends, live_group
from tests._support import script, write_config

#: Starts a reaper and a marked program in a session of its own, prints the program's pid, and dies by SIGKILL.
_DIES_UNTOLD = """
    import os, shutil, signal, subprocess, sys
    from runner.processes import Reaper
    marker = sys.argv[1]
    reaper = Reaper(marker.encode())
    name, value = marker.split("=", 1)
    program = subprocess.Popen([shutil.which("sleep"), "infinity"], start_new_session=True, env={name: value}, stdout=subprocess.DEVNULL)
    print(program.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # before telling the reaper its pid: only the marker says what it left
"""


def _marker() -> str:
    return f"GHOSTRUNNER_TEST_RUN={uuid.uuid4().hex}"


def test_a_released_reaper_exits_and_kills_nothing() -> None:
    """The call cleaned up itself: the watcher goes without touching a process in the program's session or carrying its marker."""
    marker = _marker()
    name, value = marker.split("=", 1)
    program = subprocess.Popen([shutil.which("sleep") or "sleep", "infinity"], start_new_session=True, env={name: value})
    try:
        reaper = Reaper(marker.encode())
        reaper.watch(program.pid, set())
        reaper.release(cleaned_up=True)
        deadline = time.monotonic() + 60
        while live_group([reaper.pid]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert live_group([reaper.pid]) == [], "the released watcher did not exit"
        assert program.poll() is None, "the released watcher killed the program"
    finally:
        program.kill()
        program.wait(10)


def test_a_process_killed_before_it_told_its_reaper_the_pid_leaves_no_marked_program(tmp_path: Path) -> None:
    """SIGKILLed right after it started the program: the watcher finds the program by its marker alone and kills it."""
    code = tmp_path / "dies.py"
    code.write_text(textwrap.dedent(_DIES_UNTOLD), encoding="utf-8")
    done = subprocess.run([sys.executable, str(code), _marker()], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert_group_ends([int(done.stdout)])


def test_a_reaper_released_before_the_cleanup_ran_kills_the_program() -> None:
    """A signal unwound the call before its own cleanup ran: released so, the watcher ends the program's session on its way out."""
    program = subprocess.Popen([shutil.which("sleep") or "sleep", "infinity"], start_new_session=True)
    try:
        reaper = Reaper(_marker().encode())
        reaper.watch(program.pid, set())
        reaper.release(cleaned_up=False)
        assert_group_ends([program.pid])
    finally:
        program.kill()
        program.wait(10)



def test_a_program_whose_watcher_cannot_start_fails_the_run_naming_the_watcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No interpreter to start the watcher with: the call fails before the program starts, as a program that cannot start does,
    and the run's error says what could not start rather than blaming the program."""
    argv = script(tmp_path, "never.py", f"open({str(tmp_path / 'ran')!r}, 'w').close()")
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "60s", attempts = 1 }}
    """
    config = load_config(write_config(tmp_path, body))
    agent = config.agent("motoko")
    missing = str(tmp_path / "no-python")
    with Journal(agent.journal_root) as journal:
        monkeypatch.setattr(sys, "executable", missing)
        result = execute_run(journal, agent=agent, routine=config.routines["evening"], scheduled=datetime(2026, 9, 5, 21, tzinfo=config.timezone),
                             backend=build_backend(agent), tz=config.timezone)
    assert result.outcome == "failed" and f"cannot start the watcher of its processes ({missing!r})" in (result.error or ""), result.error
    assert "No such file" in (result.error or "") and not (tmp_path / "ran").exists()
