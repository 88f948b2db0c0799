"""The demo: a real `ghostrunner demo` process on the embedded defaults, in an empty directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from journal import Journal
from tests._support import REPO, state_journal
from tests.runner._no_nn import without_model, without_nn


def _demo(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GHOSTRUNNER_CONFIG", "GHOSTJOURNAL_ROOT")}
    return subprocess.run([sys.executable, "-m", "runner", "demo", "--days", "14"], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_demo_lives_two_weeks_then_reads_them_back(tmp_path: Path) -> None:
    """The demo writes motoko's weeks into the state directory (saying where), prints a digest and a framed context, and repeats idempotently."""
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"motoko's journal: {state_journal('motoko')}\n") and list(tmp_path.iterdir()) == []
    assert "(100 appended)" in first.stdout  # 14 days: 84 pulses, 14 evenings, 2 digests
    assert "digest of the last week" in first.stdout and "longest chain" in first.stdout
    assert first.stdout.count("<past_journal_entries") == 1 and "</past_journal_entries>" in first.stdout
    with Journal(state_journal("motoko"), create=False) as journal:
        entries = journal.list()
        assert len(entries) == 100 and {e.agent for e in entries} == {"motoko"}
    again = _demo(tmp_path)
    assert again.returncode == 0, again.stderr
    assert "(100 duplicate)" in again.stdout
    with Journal(state_journal("motoko"), create=False) as journal:
        assert len(journal.list()) == 100


def test_motoko_sim_is_the_demos_twin(tmp_path: Path) -> None:
    """examples/motoko_sim.py lives the demo's very days into the demo's journal: after the demo it appends nothing, and prints what the demo prints."""
    demo = subprocess.run([sys.executable, "-m", "runner", "demo"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    with Journal(state_journal("motoko"), create=False) as journal:
        before = sorted(entry.id for entry in journal.list())
    twin = subprocess.run([sys.executable, str(REPO / "examples" / "motoko_sim.py")], check=False, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert twin.returncode == 0, twin.stderr
    with Journal(state_journal("motoko"), create=False) as journal:
        assert sorted(entry.id for entry in journal.list()) == before
    runs = len(before)  # every run of the 28 days appended one entry, except digests of nothing (there are none)
    assert f"({runs} appended)" in demo.stdout and f"({runs} duplicate)" in twin.stdout
    def without_timing(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("simulated ")]
    assert without_timing(twin.stdout) == without_timing(demo.stdout) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("missing", "fix"), [(without_model, "'ghostjournal download-model'"), (without_nn, "pip install 'ghostjournal[nn]'")],
                         ids=["no-model", "no-nn-extra"])
def test_the_demo_without_hybrid_memory_says_so_in_one_short_line(tmp_path: Path, missing: Callable[..., subprocess.CompletedProcess[str]], fix: str) -> None:
    """Where the embedded defaults' hybrid memory cannot run, the demo runs on lexical memory and says so once, in one short line with the fix,
    on a terminal; where stderr is a log, that is one memory.fallback line of it (a plain line there would count as malformed)."""
    shown = missing("demo", "--days", "7", cwd=tmp_path / "shell", terminal=True)
    assert shown.returncode == 0, shown.stdout
    line, *rest = shown.stdout.splitlines()
    assert line.startswith("ghostrunner: demo: lexical memory for motoko (") and fix in line and len(line) <= 200, line
    assert any(other.startswith("motoko's journal: ") for other in rest) and re.search(r"^simulated (\d+) runs \(\1 appended\)", "\n".join(rest), re.MULTILINE)
    assert not any("lexical memory" in other or "memory.fallback" in other for other in rest)
    logged = missing("demo", "--days", "7", cwd=tmp_path / "logged")
    assert logged.returncode == 0, logged.stderr
    [event] = [json.loads(line) for line in logged.stderr.splitlines()]
    assert (event["event"], event["agent"], event["memory"]) == ("memory.fallback", "motoko", "lexical") and fix in event["reason"]
