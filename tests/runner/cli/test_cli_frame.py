"""The ghostrunner command's frame: --version, group options after the command, one error style, text on a terminal, completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests._support import SIMPLE_AGENT, entries, ghostrunner, write_config
from tests._terminal import in_terminal

GHOSTRUNNER = [sys.executable, "-m", "runner"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "conf", SIMPLE_AGENT)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_comes_from_the_package_metadata(flag: str) -> None:
    """`ghostrunner --version` (or `-V`) prints the installed distribution's version (the reported gap)."""
    result = ghostrunner(flag)
    assert (result.returncode, result.stdout) == (0, f"ghostrunner {version('ghostjournal')}\n")


def test_config_after_the_command_equals_config_before_it(config: Path, tmp_path: Path) -> None:
    """`run ... --config C` and `--config C run ...` append to the same journal; the second is a duplicate of the first."""
    first = ghostrunner("--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", cwd=tmp_path)
    second = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config), cwd=tmp_path)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert [json.loads(r.stdout)["outcome"] for r in (first, second)] == ["appended", "duplicate"]
    assert len(entries(config.parent / "journal")) == 1


def test_different_configs_before_and_after_the_command_are_refused(config: Path, tmp_path: Path) -> None:
    """Two different --config values: exit 2, one line naming both, and no run."""
    other = write_config(tmp_path / "other", SIMPLE_AGENT)
    result = ghostrunner("--config", str(config), "run", "evening", "--agent", "motoko", "--config", str(other), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        (f"ghostrunner: error: --config is given before the command as {str(config)!r} and after it as {str(other)!r}; give it once. "
        "See 'ghostrunner run --help'.")
    ]
    assert entries(config.parent / "journal") == [] and entries(other.parent / "journal") == []


def test_log_level_after_the_command_is_the_log_level_before_it(config: Path, tmp_path: Path) -> None:
    """`--log-level error` after the command silences the info lines exactly as before it."""
    before = ghostrunner("--log-level", "error", "run", "evening", "--agent", "motoko", "--config", str(config), "--dry-run", cwd=tmp_path)
    after = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(config), "--dry-run", "--log-level", "error", cwd=tmp_path)
    default = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(config), "--dry-run", cwd=tmp_path)
    assert (before.returncode, after.returncode, default.returncode) == (0, 0, 0)
    assert before.stderr == after.stderr == "" and '"run.finished"' in default.stderr


@pytest.mark.parametrize(("args", "line"), [
    (["run", "evening"], "ghostrunner: error: Missing option '--agent'. See 'ghostrunner run --help'."),
    (["statuss"], "ghostrunner: error: No such command 'statuss'. Did you mean 'status'? See 'ghostrunner --help'."),
    (["run", "evening", "--agent", "motoko", "--at", "2026-03-29T02:30"],
     ("ghostrunner: error: Invalid value for --at: '2026-03-29T02:30' does not exist in Europe/Berlin: the clocks skip it "
     "(UTC offset +01:00 before, +02:00 after); give the offset you mean, e.g. 2026-03-29T02:30:00+01:00")),
], ids=["missing-option", "unknown-command", "skipped-local-time"])
def test_usage_errors_are_one_line_in_the_shared_style(tmp_path: Path, args: list[str], line: str) -> None:
    """Click's usage errors and a time the clocks skip: exit 2, one line `ghostrunner: error: ...`, nothing run."""
    config = write_config(tmp_path / "conf", SIMPLE_AGENT, runner='timezone = "Europe/Berlin"\n')
    result = ghostrunner("--config", str(config), *args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.splitlines() == [line], result.stderr
    assert entries(config.parent / "journal") == []


def test_a_date_and_a_relative_time_are_accepted_by_at(config: Path, tmp_path: Path) -> None:
    """`--at 2026-09-05` is that day's midnight in runner.timezone; `--at -1d` is a day ago."""
    day = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-06", "--config", str(config), "--dry-run", cwd=tmp_path)
    assert day.returncode == 0, day.stderr
    assert json.loads(day.stdout)["slot"] == "2026-09-05"  # the latest evening at or before 2026-09-06T00:00 UTC
    relative = ghostrunner("run", "pulse-4h", "--agent", "motoko", "--at", "-1d", "--config", str(config), "--dry-run", cwd=tmp_path)
    assert relative.returncode == 0, relative.stderr


# --- text on a terminal, JSON when piped ---------------------------------------------------------------------------------


def _run_log(config: Path, tmp_path: Path) -> Path:
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    log = tmp_path / "run.log"
    log.write_text(result.stderr, encoding="utf-8")
    return log


def test_status_is_a_table_on_a_terminal_and_json_in_a_pipe(config: Path, tmp_path: Path) -> None:
    """status on a terminal prints its table; piped it prints the --json document; the exit code is the same."""
    log = _run_log(config, tmp_path)
    args = ["status", "--config", str(config), "--log", str(log), "--now", "2026-09-05T22:00Z", "--grace", "10m"]
    table = in_terminal([*GHOSTRUNNER, *args])
    piped = subprocess.run([*GHOSTRUNNER, *args], capture_output=True, text=True, check=False)
    forced = subprocess.run([*GHOSTRUNNER, *args, "--json"], capture_output=True, text=True, check=False)
    assert table.returncode == piped.returncode == forced.returncode
    assert table.stdout.splitlines()[0].split() == ["AGENT", "ROUTINE", "STATE", "DUE", "SLOT", "LAST", "SUCCESS", "LAST", "FAILURE", "LAST", "RUN", "TODAY", "7", "DAYS", "LATENESS"]
    assert "motoko  evening" in table.stdout and "status: " in table.stdout
    assert piped.stdout == forced.stdout
    assert {pair["routine"]: pair["state"] for pair in json.loads(piped.stdout)["pairs"]}["evening"] == "ok"


def test_run_on_a_terminal_shows_its_outcome_in_lines(config: Path, tmp_path: Path) -> None:
    """run on a terminal prints labelled lines; its JSON line stays what a pipe (and serve) reads."""
    result = in_terminal([*GHOSTRUNNER, "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "outcome:   appended" in result.stdout and "slot:      2026-09-05" in result.stdout and "{" not in result.stdout
    again = subprocess.run([*GHOSTRUNNER, "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:30", "--config", str(config)],
                           capture_output=True, text=True, check=False, cwd=tmp_path)
    assert json.loads(again.stdout)["outcome"] == "duplicate"


def test_run_in_a_shell_prints_its_result_alone_and_a_paused_runs_reason(config: Path, tmp_path: Path) -> None:
    """stdout and stderr both a terminal: the result's lines and nothing before them (its log lines repeated it), unless --log-level
    asks for them; a paused run says why it was skipped."""
    argv = [*GHOSTRUNNER, "run", "evening", "--agent", "motoko", "--config", str(config), "--at"]
    quiet = in_terminal([*argv, "2026-09-05T21:30"], cwd=tmp_path, stderr_too=True)
    assert quiet.returncode == 0 and quiet.stdout.startswith("outcome:   appended\n"), quiet.stdout
    logged = in_terminal([*argv, "2026-09-05T21:30", "--log-level", "info"], cwd=tmp_path, stderr_too=True)
    assert "run.started" in logged.stdout and "outcome:   duplicate" in logged.stdout
    assert subprocess.run([*GHOSTRUNNER, "pause", "motoko", "--config", str(config)], capture_output=True, check=False, cwd=tmp_path).returncode == 0
    paused = in_terminal([*argv, "2026-09-06T21:30"], cwd=tmp_path, stderr_too=True)
    assert paused.returncode == 0 and paused.stdout.startswith("outcome:   skipped\nreason:    paused\n"), paused.stdout


def test_simulate_on_a_terminal_is_a_summary_table(config: Path, tmp_path: Path) -> None:
    """simulate on a terminal: a line, then one row per agent with its outcome counts."""
    result = in_terminal([*GHOSTRUNNER, "simulate", "--days", "2", "--start", "2026-09-01", "--config", str(config)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("simulated 2026-09-01T00:00:00+00:00 to 2026-09-03T00:00:00+00:00: ")
    assert lines[2].split()[:2] == ["AGENT", "RUNS"] and lines[3].startswith("motoko")


# --- shell completion --------------------------------------------------------------------------------------------------


def test_completion_script_is_emitted() -> None:
    """`_GHOSTRUNNER_COMPLETE=bash_source ghostrunner` prints a bash completion script."""
    result = subprocess.run(GHOSTRUNNER, capture_output=True, text=True, check=False, env={**os.environ, "_GHOSTRUNNER_COMPLETE": "bash_source"})
    assert result.returncode == 0 and "complete -o nosort -F _ghostrunner_completion ghostrunner" in result.stdout, result.stderr
