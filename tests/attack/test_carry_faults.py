"""Carrying a journal onto a full disk: a real tmpfs filled to the brim; the command fails with one line and leaves nothing.

The mounts need root; CI runs as root, so these tests never skip there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from tests._support import tree_digest
from tests.attack._faults import Mounts, fill

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"),
    reason="mounting a tmpfs needs root (CI runs as root)",
)


def _journal(root: Path, count: int = 40) -> None:
    with Journal(root) as journal:
        for n in range(count):
            journal.append({"kind": "note", "agent": "alice", "theme": f"tide {n}", "voice": "The tide came in. " * 40,
                            "ts": f"2026-09-0{1 + n % 9}T00:{n:02d}:00Z", "client_key": f"alice:{n}"})


def test_export_onto_a_full_disk_is_one_line_exit_74_and_leaves_no_file(tmp_path: Path, mounts: Mounts) -> None:
    """An export whose file cannot be written whole: exit 74 naming the file, no temporary file left, an earlier export there unchanged."""
    root = tmp_path / "j"
    _journal(root)
    disk = mounts.tmpfs(size_kib=64)
    earlier = disk / "export.jsonl"
    earlier.write_bytes(b'{"entries":0,"ghostjournal_export":1}\n')  # the manifest line alone: an empty earlier export
    fill(disk, leave_pages=2)
    before = tree_digest(root)
    done = subprocess.run(["ghostjournal", "--root", str(root), "export", "--out", str(earlier)], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 74, done.stderr
    assert done.stderr.startswith(f"ghostjournal: error: cannot write the export to {str(earlier)!r}: no space left on device (ENOSPC)")
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in disk.iterdir()) == ["export.jsonl", "filler"] and earlier.read_bytes() == b'{"entries":0,"ghostjournal_export":1}\n'
    assert tree_digest(root) == before


def test_backup_onto_a_full_disk_is_one_line_exit_74_and_leaves_nothing(tmp_path: Path, mounts: Mounts) -> None:
    """A backup that cannot be written whole: exit 74, no backup directory and no partial one, the journal untouched."""
    root = tmp_path / "j"
    _journal(root)
    disk = mounts.tmpfs(size_kib=256)
    fill(disk, leave_pages=6)
    before = tree_digest(root)
    out = disk / "backup"
    done = subprocess.run(["ghostjournal", "--root", str(root), "backup", "--out", str(out)], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 74, done.stderr
    assert done.stderr.startswith(f"ghostjournal: error: cannot write the backup to {str(out)!r}: no space left on device (ENOSPC)")
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    assert tree_digest(root) == before
