"""A command backend's processes never outlive the run that started them, whichever way the run ends.

Each test runs the real ``ghostrunner run`` (or ``serve``) with a backend that starts a child in its
group and then sleeps for good (tests/_backend_group.py), ends the run one way, and polls ``/proc``
until nothing of the backend's group or session is left.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests._backend_group import assert_group_ends, lingering_program, started_pids
from tests._support import NIGHTLY, event_named, reap, start_serve, write_config

AT = "2026-09-05T21:00"


def _config(tmp_path: Path, *, routine: str = "evening", runner: str = "", wall_clock: bool = False, escape: bool = False) -> Path:
    body = f"""
    [agents.motoko]
    routines = ["{routine}"]
    backend = {{ type = "command", command = {json.dumps(lingering_program(tmp_path, escape=escape))}, timeout = "1h", attempts = 1 }}
    """
    return write_config(tmp_path, NIGHTLY + body, runner=runner, wall_clock=wall_clock)


@pytest.mark.parametrize(("ended_by", "escape"), [(signal.SIGKILL, False), (signal.SIGKILL, True), (signal.SIGTERM, False)],
                         ids=["SIGKILL", "SIGKILL, child in a session of its own", "SIGTERM"])
def test_a_run_ended_by_a_signal_ends_its_backend_and_the_backends_child(tmp_path: Path, ended_by: signal.Signals, escape: bool) -> None:
    """kill -9 leaves the run no cleanup of its own: its backend and the backend's child end all the same, also a child that left
    the backend's session and environment (it still holds the backend's stdout); SIGTERM unwinds (exit 143)."""
    config = _config(tmp_path, escape=escape)
    argv = [shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--at", AT, "--config", str(config)]
    run = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = started_pids(tmp_path)
        run.send_signal(ended_by)
        _, stderr = run.communicate(timeout=120)
    finally:
        reap(run)
    assert_group_ends(pids)
    finished = [json.loads(line) for line in stderr.splitlines() if '"run.finished"' in line]
    if ended_by == signal.SIGKILL:
        assert run.returncode == -signal.SIGKILL and finished == [], stderr
    else:
        assert run.returncode == 128 + signal.SIGTERM and [line["outcome"] for line in finished] == ["failed"], stderr


def test_a_run_past_run_timeout_ends_its_backends_child(tmp_path: Path) -> None:
    """The backend's deadline (what run_timeout leaves) kills the backend and what it started in its group."""
    config = _config(tmp_path, runner='run_timeout = "10s"\n')
    argv = [shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--at", AT, "--config", str(config)]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    pids = started_pids(tmp_path, timeout=0)
    assert_group_ends(pids, within=10)
    assert done.returncode == 1 and json.loads(done.stdout)["outcome"] == "failed", done.stderr


def test_serve_stopped_with_runs_in_flight_ends_their_backends(tmp_path: Path) -> None:
    """SIGTERM to serve with a run in flight: after shutdown_timeout serve stops the worker, and the backend and its child end with it."""
    config = _config(tmp_path, routine="nightly", runner='catchup_grace = "2d"\nshutdown_timeout = "1s"\n', wall_clock=True)
    process, reader = start_serve(config, tmp_path)
    try:
        reader.wait(event_named("run.started"), timeout=180)
        pids = started_pids(tmp_path)
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0
    finally:
        reap(process)
    assert_group_ends(pids, within=10)
