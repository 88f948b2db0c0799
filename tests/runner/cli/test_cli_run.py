"""`ghostrunner run` as a real process: idempotent repeats and a worker killed mid-run (racing runs: test_slot_lock.py)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests._support import GATED, SIMPLE_AGENT, entries, ghostrunner, script, wait_for_marker, with_key, write_config


def _gated_config(tmp_path: Path) -> Path:
    argv = script(tmp_path, "gated.py", GATED)
    body = f"""
    [agents.motoko]
    routines = ["evening"]
    backend = {{ type = "command", command = {json.dumps(argv)}, timeout = "60s" }}
    """
    return write_config(tmp_path, body)


def _gated_run(tmp_path: Path) -> list[str]:
    """The argv of a real `ghostrunner run` of motoko's evening slot whose backend waits at the gate."""
    path = _gated_config(tmp_path)
    return [shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path)]


def test_run_twice_gives_appended_then_duplicate(tmp_path: Path) -> None:
    """Two `ghostrunner run` invocations for one slot print appended then duplicate and leave one entry."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    args = ("run", "evening", "--agent", "motoko", "--at", "2026-09-05T23:10", "--config", str(path))
    first, second = ghostrunner(*args, cwd=tmp_path), ghostrunner(*args, cwd=tmp_path)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert (one["outcome"], two["outcome"]) == ("appended", "duplicate")
    assert one["slot"] == "2026-09-05" and one["scheduled"] == "2026-09-05T21:00:00+00:00"
    assert one["entry_id"] == two["entry_id"]
    assert len(with_key(tmp_path / "journal", "motoko:evening:2026-09-05")) == 1
    logged = [json.loads(line) for line in first.stderr.splitlines()]
    assert [event["event"] for event in logged] == ["run.started", "run.finished"]


def test_dry_run_prints_the_entry_and_appends_nothing(tmp_path: Path) -> None:
    """`--dry-run` prints the would-be entry with outcome skipped and creates no entry."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    result = ghostrunner("run", "pulse-4h", "--agent", "motoko", "--at", "2026-09-05T17:00", "--dry-run", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["outcome"] == "skipped" and printed["entry"]["client_key"] == "motoko:pulse-4h:2026-09-05T16"
    assert entries(tmp_path / "journal") == []


def test_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    """Unknown agents, routines and bad times exit non-zero with one line on stderr."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    for args, code in [
        (("run", "evening", "--agent", "batou"), 2),
        (("run", "lunch", "--agent", "motoko"), 2),
        (("run", "evening", "--agent", "motoko", "--at", "yesterday"), 2),
    ]:
        result = ghostrunner(*args, "--config", str(path), cwd=tmp_path)
        assert result.returncode == code, (args, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""
    result = ghostrunner("run", "evening", "--agent", "batou", "--config", str(path), cwd=tmp_path)
    assert result.stderr == "ghostrunner: error: no agent 'batou' in the configuration; configured: motoko\n"


def test_a_journal_the_runner_cannot_use_is_named_with_its_own_reason(tmp_path: Path) -> None:
    """A foreign manifest fails the run with the journal's words; only a filesystem refusal gets the hint about the directory."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    (tmp_path / "journal").mkdir()
    manifest = tmp_path / "journal" / "manifest.json"
    manifest.write_text('{"format": "something-else"}\n')
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
    error = json.loads(result.stdout)["error"]
    assert result.returncode == 1 and f"manifest {str(manifest)!r}: not a ghostjournal manifest" in error
    assert "writable" not in error and manifest.read_text() == '{"format": "something-else"}\n'
    manifest.unlink()
    (tmp_path / "journal").rmdir()
    (tmp_path / "journal").write_text("a file where the journal directory should be\n")
    result = ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T21:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 1 and "check that the directory exists and is writable" in json.loads(result.stdout)["error"]


@pytest.mark.parametrize(("status", "code"), [(75, 1), (2, 78)], ids=["transient-exits-1", "permanent-exits-78"])
def test_failed_run_exits_one_or_78_and_prints_the_outcome(tmp_path: Path, status: int, code: int) -> None:
    """A backend failure prints outcome failed as JSON; it exits 1, or 78 when the failure is permanent (a helper's exit other than 75)."""
    argv = script(tmp_path, "broken.py", f"import sys\nsys.stdin.read()\nsys.exit({status})\n")
    path = write_config(tmp_path, f'[agents.motoko]\nroutines = ["evening"]\nbackend = {{ type = "command", command = {json.dumps(argv)}, attempts = 1 }}\n')
    result = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert result.returncode == code
    printed = json.loads(result.stdout)
    assert printed["outcome"] == "failed" and printed["attempts"] == 1 and printed.get("permanent", False) is (code == 78)


def test_worker_killed_mid_run_then_rerun_leaves_exactly_one_entry(tmp_path: Path) -> None:
    """SIGKILL to a run in the middle of its backend call, then a re-run of the slot, leaves exactly one entry."""
    argv = _gated_run(tmp_path)
    victim = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_marker(tmp_path, "arrived-")  # the run is inside its backend call
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=30)
        assert victim.returncode == -signal.SIGKILL
        assert with_key(tmp_path / "journal", "motoko:evening:2026-09-05") == []
    finally:
        (tmp_path / "release").touch()  # lets the orphaned backend program finish
    rerun = ghostrunner(*argv[1:], cwd=tmp_path)
    assert json.loads(rerun.stdout)["outcome"] == "appended", rerun.stderr
    again = ghostrunner(*argv[1:], cwd=tmp_path)
    assert json.loads(again.stdout)["outcome"] == "duplicate"
    assert len(with_key(tmp_path / "journal", "motoko:evening:2026-09-05")) == 1


def test_sigterm_mid_run_still_logs_one_run_finished(tmp_path: Path) -> None:
    """A `ghostrunner run` stopped by SIGTERM in its backend call logs exactly one failed run.finished and appends nothing."""
    argv = _gated_run(tmp_path)
    victim = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_marker(tmp_path, "arrived-")
        victim.send_signal(signal.SIGTERM)
        _, stderr = victim.communicate(timeout=30)
    finally:
        (tmp_path / "release").touch()
    assert victim.returncode == 128 + signal.SIGTERM
    finished = [json.loads(line) for line in stderr.splitlines() if '"run.finished"' in line]
    assert len(finished) == 1, stderr
    assert finished[0]["outcome"] == "failed" and "interrupted by a signal" in finished[0]["error"]
    assert with_key(tmp_path / "journal", "motoko:evening:2026-09-05") == []
