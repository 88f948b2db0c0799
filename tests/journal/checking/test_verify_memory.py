"""verify holds one entry at a time: the peak memory of a real ``ghostjournal verify`` does not grow with the journal."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from journal import Journal
from tests._support import place_entries

#: Starts a command and prints its exit code and peak RSS (KiB) as wait4 reports them. The command is forked from this small
#: process, not from the test's: Linux counts the RSS of the process a command was exec'd from into the command's peak.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
_WORDS = ["harbour", "lantern", "evening", "tide", "rope", "gull", "salt", "anchor", "fog", "pier", "wind", "stone", "bell", "net", "mast", "sail"]
#: The journals' sizes: the larger is four times the smaller.
_SMALL, _LARGE = 1500, 6000
#: Growth of the peak allowed for the 4,500 entries more. Holding every entry, as verify did, grows it by about 5 KiB an
#: entry (22 MiB here); what verify holds now per entry is its file's path, and SQLite's caches are bounded.
_ALLOWED_GROWTH_KIB = 8 * 1024


def _payloads(count: int) -> list[dict[str, Any]]:
    pick = random.Random(count)
    return [
        {
            "kind": "note",
            "agent": ("alice", "bob")[n % 2],
            "theme": f"harbour {n}",
            "voice": " ".join(pick.choice(_WORDS) + str(pick.randrange(400)) for _ in range(150)),
            "ts": f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
            "tags": [pick.choice(_WORDS)],
        }
        for n in range(count)
    ]


def _peak_kib(root: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, "ghostjournal", "--root", str(root), "verify", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    code, peak = done.stdout.split()[-2:]
    assert code == "0", done.stdout + done.stderr
    return int(peak)


def test_verify_peak_memory_does_not_grow_with_the_journal(tmp_path: Path) -> None:
    """A clean journal of 6,000 entries verifies within a few MiB of the peak of one of 1,500."""
    peaks = {}
    for count in (_SMALL, _LARGE):
        root = tmp_path / str(count)
        with Journal(root) as journal:
            place_entries(journal, _payloads(count))
        peaks[count] = _peak_kib(root)
    assert peaks[_LARGE] - peaks[_SMALL] < _ALLOWED_GROWTH_KIB, peaks
