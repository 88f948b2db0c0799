"""`ghostrunner simulate` under attack: worker processes that fail or die, and a --start that holds a time.

Each test runs the real console script. An agent whose journal is unusable, or a worker killed as the OOM
killer kills, is one clear line and exit 1, never a traceback, and the other agent's runs still stand;
a --start with a time of day begins the simulation at that time, however date and time are separated.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests._support import entries, ghostrunner, write_config


def _two_agents_config(tmp_path: Path) -> Path:
    """Two agents, each with a journal of its own (./journal-AGENT), for simulate's worker processes."""
    path = write_config(tmp_path, """
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["evening"]
    [agents.batou]
    persona = "motoko.toml"
    routines = ["evening"]
    """)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"./journal-{agent}"'), encoding="utf-8")
    return path


def test_simulate_in_worker_processes_fails_an_unusable_journals_runs_and_still_gives_the_summary(tmp_path: Path) -> None:
    """No traceback, and the other agent's runs stand. With --workers 2, a worker's journal error (not picklable) broke the pool."""
    path = _two_agents_config(tmp_path)
    (tmp_path / "journal-batou").write_text("a file where the journal should be", encoding="utf-8")
    result = ghostrunner("simulate", "--days", "1", "--start", "2026-01-01", "--workers", "2", "--config", str(path), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    summary = {agent["agent"]: agent for agent in json.loads(result.stdout)["agents"]}
    assert summary["motoko"]["outcomes"] == {"appended": 1}
    assert summary["batou"]["outcomes"] == {"failed": 1}
    [failure] = summary["batou"]["failures"]
    assert f"refused {str(tmp_path / 'journal-batou')!r}: not a directory" in failure
    assert (tmp_path / "journal-batou").read_text(encoding="utf-8") == "a file where the journal should be"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_journal_with_a_corrupt_manifest_fails_only_its_agents_runs(tmp_path: Path, workers: str) -> None:
    """One agent's journal whose manifest is not JSON: its runs fail naming the manifest; the other agent is simulated (the check of
    every journal before the first write stopped the whole simulation at the first one it could not open)."""
    path = _two_agents_config(tmp_path)
    (tmp_path / "journal-batou").mkdir()
    (tmp_path / "journal-batou" / "manifest.json").write_text("{not json", encoding="utf-8")
    result = ghostrunner("simulate", "--days", "1", "--start", "2026-01-01", "--workers", workers, "--json", "--config", str(path), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode == 1, result.stderr
    summary = {agent["agent"]: agent for agent in json.loads(result.stdout)["agents"]}
    assert summary["motoko"]["outcomes"] == {"appended": 1}
    assert summary["batou"]["outcomes"] == {"failed": 1}
    [failure] = summary["batou"]["failures"]
    assert repr(str(tmp_path / "journal-batou")) in failure and "manifest" in failure
    assert (tmp_path / "journal-batou" / "manifest.json").read_text(encoding="utf-8") == "{not json"


def test_simulate_reports_a_killed_worker_process_as_one_line(tmp_path: Path) -> None:
    """A simulate worker killed with SIGKILL (as the OOM killer does) is one error line and exit 1, not BrokenProcessPool's traceback."""
    path = _two_agents_config(tmp_path)
    started = subprocess.Popen([shutil.which("ghostrunner") or "ghostrunner", "simulate", "--days", "3650", "--start", "2000-01-01",
                                "--workers", "2", "--config", str(path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while len(workers) < 2 and started.poll() is None and time.monotonic() < deadline:
            workers = [int(pid) for pid in Path(f"/proc/{started.pid}/task/{started.pid}/children").read_text().split()]
        assert len(workers) == 2, "the simulation never started its two workers"
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = started.communicate(timeout=60)
    finally:
        # The simulation and any worker it left behind (one holding the pipes would keep communicate waiting for good).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.pid, signal.SIGKILL)
        if started.poll() is None:
            started.communicate(timeout=60)
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("ghostrunner: error: a simulation worker process died before it finished")
    assert started.returncode == 1


@pytest.mark.parametrize("separator", ["T", " "])
def test_simulate_start_with_a_time_starts_at_that_time_whatever_the_separator(tmp_path: Path, separator: str) -> None:
    """ISO 8601 separates date and time by 'T' or a space; with a space the time was silently dropped and the simulation began at midnight."""
    path = write_config(tmp_path, """
    [routines.hourly]
    kind = "note"
    schedule = "0 * * * *"
    slot = "hour"
    question = "what happened?"
    prompt = "Write a note."
    [agents.motoko]
    persona = "motoko.toml"
    routines = ["hourly"]
    """)
    result = ghostrunner("simulate", "--days", "1", "--start", f"2026-03-29{separator}05:00", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["start"] == "2026-03-29T05:00:00+00:00"
    keys = sorted(entry.client_key or "" for entry in entries(tmp_path / "journal"))
    assert keys[0] == "motoko:hourly:2026-03-29T05" and len(keys) == 24
