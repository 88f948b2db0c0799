"""`ghostjournal import DIR` of a ghostjournal 0.1.1 directory a hostile peer (or a careless operator) prepared.

The promises under attack (docs/ghostjournal.md, "Bringing in a ghostjournal 0.1.1 journal"): a bad
entry file is named by its path in one line, exit 65, nothing stored; nothing in DIR is ever written;
whatever DIR holds, the command ends with its documented exit code and never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support import entry_files, tree_digest

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "peer-0.1.1"
AS_NOBODY = Path(__file__).with_name("_as_nobody.py")
ADA = ("--agent-map", "Ada Lovelace=ada")


def _import(root: Path, peer: Path, *args: str, as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
    command = ["ghostjournal", "--root", str(root), "import", "--json", str(peer), *ADA, *args]
    argv = [sys.executable, str(AS_NOBODY), *command] if as_nobody else command
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert done.stderr.startswith("ghostjournal: error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory uid 65534 can reach (pytest's tmp_path sits below a 0700 directory of root's)."""
    place = Path(tempfile.mkdtemp(prefix="gj-peer-", dir="/tmp"))
    place.chmod(0o755)
    try:
        yield place
    finally:
        for dirpath, _, _ in os.walk(place):
            Path(dirpath).chmod(0o755)
        shutil.rmtree(place)


def test_an_entry_file_name_with_a_line_break_is_named_on_one_line(tmp_path: Path) -> None:
    """A file whose name holds a newline (and text that looks like a second error) is reported on one escaped line, nothing stored."""
    peer = tmp_path / "peer"
    shutil.copytree(SAMPLE, peer)
    (peer / "entries/2026/03/01/x\nghostjournal: error: forged.json").write_text("{}")
    before = tree_digest(peer)
    text = _one_line(_import(tmp_path / "j", peer), 65)
    assert "entries/2026/03/01/x\\u000aghostjournal: error: forged.json: " in text
    assert entry_files(tmp_path / "j") == {}
    assert tree_digest(peer) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to uid 65534 needs root (CI runs as root)")
def test_parts_of_the_peer_dir_this_user_may_not_read_are_one_line_each(shared: Path) -> None:
    """An unreadable manifest, or manifest and entries behind a directory without search permission: one line, exit 65, no traceback;
    with --partial a day directory that cannot be searched or an entries/ that cannot be opened is listed by its path, the rest imported."""
    peer = shared / "peer"
    shutil.copytree(SAMPLE, peer)
    for dirpath, _, filenames in os.walk(peer):
        Path(dirpath).chmod(0o755)
        for name in filenames:
            (Path(dirpath) / name).chmod(0o644)
    (shared / "j").mkdir()
    os.chown(shared / "j", 65534, 65534)

    (peer / "manifest.json").chmod(0o600)
    text = _one_line(_import(shared / "j" / "a", peer, as_nobody=True), 65)
    assert f"{peer}/manifest.json: cannot be read (Permission denied)" in text
    (peer / "manifest.json").chmod(0o644)
    peer.chmod(0o744)  # listable, not searchable: no file in it can be opened
    text = _one_line(_import(shared / "j" / "a", peer, as_nobody=True), 65)
    assert f"{peer}/manifest.json: cannot be read (Permission denied)" in text
    peer.chmod(0o755)
    assert not (shared / "j" / "a").exists()

    (peer / "entries/2026/03/02").chmod(0o744)
    done = _import(shared / "j" / "b", peer, "--partial", as_nobody=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    reasons = {bad["file"]: bad["reason"] for bad in json.loads(done.stdout)["bad_files"]}
    assert reasons.pop("entries/2026/03/02/peer-004.json") == "cannot be read (Permission denied)"
    assert reasons.pop("entries/2026/03/02/peer-005.json") == "cannot be read (Permission denied)"
    assert set(reasons) == {"entries/2026/03/04/peer-008.json"}
    (peer / "entries/2026/03/02").chmod(0o755)

    (peer / "entries").chmod(0o700)
    done = _import(shared / "j" / "c", peer, "--partial", as_nobody=True)
    assert done.returncode == 0, done.stderr
    [bad] = json.loads(done.stdout)["bad_files"]
    assert bad == {"file": "entries", "reason": "cannot be opened (Permission denied)"}
