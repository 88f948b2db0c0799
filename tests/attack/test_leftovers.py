"""Defects found outside their own class: usage errors, broken log streams, hostile read arguments,
persona labels, long quoted values, helper environments, serve's kill, cleartext keys.

Real processes and pipes where the promise is about them (a reader that quits, a helper that
ignores SIGTERM under a real ``serve``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import cli
from tests.runner.conftest import SIMPLE_AGENT, _clean_logging, entries, write_config

__all__ = ["_clean_logging"]


# --- 1. every usage error of ghostrunner is one line, exit 2, naming the option and its range ---------------------------

@pytest.mark.parametrize(("args", "named"), [
    (["status", "--log", "{log}", "--now", "0001-01-01T00:00+05:00"], "--now"),
    (["status", "--log", "{log}", "--now", "9999-12-31T23:59-05:00"], "--now"),
    (["status", "--log", "{log}", "--grace", "99999999d"], "--grace"),
    (["status", "--log", "{log}", "--grace", "1e400"], "--grace"),
    (["systemd", "render", "--out", "{out}", "--randomized-delay", "99999999d"], "--randomized-delay"),
    (["systemd", "render", "--out", "{out}", "--randomized-delay", "soon"], "--randomized-delay"),
    (["run", "evening", "--agent", "motoko", "--at", "0001-01-01T00:00+05:00"], "--at"),
    (["simulate", "--days", "99999999999"], "--days"),
    (["simulate", "--days", "1", "--start", "9999-12-31"], "--start"),
    (["demo", "--start", "0001-01-01"], "--start"),
    (["--bogus"], "--bogus"),
    (["systemd", "render", "--bogus"], "--bogus"),
    (["run"], "ROUTINE"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], named: str) -> None:
    config = write_config(tmp_path, SIMPLE_AGENT)
    (tmp_path / "empty.log").write_text("", encoding="utf-8")
    argv = ["--config", str(config), *(arg.replace("{out}", str(tmp_path / "units")).replace("{log}", str(tmp_path / "empty.log")) for arg in args)]
    result = CliRunner().invoke(cli, argv, input="")
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ghostrunner: error: "), result.stderr
    assert named in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""
    assert not (tmp_path / "units").exists()


def test_range_is_named(tmp_path: Path) -> None:
    config = write_config(tmp_path, SIMPLE_AGENT)
    log = tmp_path / "empty.log"
    log.write_text("", encoding="utf-8")
    now = CliRunner().invoke(cli, ["--config", str(config), "status", "--log", str(log), "--now", "0001-01-01T00:00+05:00"])
    assert "1970-01-01 to 8999-12-31" in now.stderr
    grace = CliRunner().invoke(cli, ["--config", str(config), "status", "--log", str(log), "--grace", "99999999d"])
    assert "at most 100 years" in grace.stderr


def test_bare_command_still_shows_its_help() -> None:
    result = CliRunner().invoke(cli, [], prog_name="ghostrunner")
    assert "Usage: ghostrunner" in result.output and "Commands:" in result.output


# --- 2. a log stream that fails never kills a run ----------------------------------------------------------------------

def _ghostrunner() -> str:
    return shutil.which("ghostrunner") or "ghostrunner"


def test_run_with_stderr_reader_gone_still_finishes(tmp_path: Path) -> None:
    """stderr is a pipe whose reader has quit before the run logs anything: the run appends and prints its result."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to write_end is EPIPE from the start
    try:
        done = subprocess.run([_ghostrunner(), "--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=write_end, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stdout
    assert '"outcome": "appended"' in done.stdout
    assert [entry.client_key for entry in entries(tmp_path / "journal")] == ["motoko:evening:2026-09-05"]


def test_simulate_piped_into_head_finishes_every_run(tmp_path: Path) -> None:
    """``ghostrunner simulate 2>&1 | head -1`` with info logs: the reader quits after a line; every slot still gets its entry."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    argv = [_ghostrunner(), "--config", str(config), "--log-level", "info", "simulate", "--days", "3", "--start", "2026-09-01"]
    process = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()  # head -1 quits
    assert process.wait(60) in (0, 1) and b"run.started" in first
    # Nothing was lost: simulating the same days again finds every slot done.
    again = subprocess.run([*argv[:3], "simulate", "--days", "3", "--start", "2026-09-01"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert '"outcomes": {"duplicate"' in again.stdout and "appended" not in again.stdout
    assert "Traceback" not in again.stderr


def test_run_piped_into_head_c1_appends(tmp_path: Path) -> None:
    """``ghostrunner run ... 2>&1 | head -c1``: the reader quits after the first byte of the first log line; the run still appends."""
    config = write_config(tmp_path, SIMPLE_AGENT)
    read_end, write_end = os.pipe()
    process = subprocess.Popen([_ghostrunner(), "--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00"],
                               cwd=tmp_path, stdout=write_end, stderr=write_end)
    os.close(write_end)
    try:
        assert os.read(read_end, 1)  # head -c1
    finally:
        os.close(read_end)
    # 0, or 1 if the printed result itself met the closed pipe (click ends that quietly); never a crash by signal.
    assert process.wait(60) in (0, 1)
    assert [entry.client_key for entry in entries(tmp_path / "journal")] == ["motoko:evening:2026-09-05"]
