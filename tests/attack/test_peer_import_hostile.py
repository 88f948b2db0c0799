"""`ghostjournal import DIR` of a ghostjournal 0.1.1 directory a hostile peer (or a careless operator) prepared.

The promises under attack (docs/ghostjournal.md, "Bringing in a ghostjournal 0.1.1 journal"): a bad
entry file is named by its path in one line, exit 65, nothing stored; nothing in DIR is ever written;
whatever DIR holds, the command ends with its documented exit code and never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import EntryValidationError, Journal
from journal.carry._peer import peer_entry
from journal.files.entry import entry_from_json_bytes
from tests._support import entry_files, tree_digest
from tests.attack._faults import Mounts, fill
from tests.attack.hostile import hostile_json_bytes, hostile_values
from tests.journal._killer import IMPORT_KILLER

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


@pytest.mark.long
@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="dropping to uid 65534 needs root (CI runs as root, and never skips)")
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


@pytest.mark.parametrize(("step", "after"), [("write_temp", 0), ("publish", 1), ("publish", 6), ("publish", 11)])
def test_an_import_dir_killed_at_any_point_is_finished_exactly_by_a_rerun(tmp_path: Path, step: str, after: int) -> None:
    """SIGKILL before an entry file is written or right after one is published (its index rows not committed): the rerun counts exactly
    the stored entries as duplicates, stores the rest once, lists the same bad file, and the journal equals one imported whole."""
    whole = _import(tmp_path / "whole", SAMPLE, "--partial")
    assert whole.returncode == 0, whole.stderr
    killer = tmp_path / "killer.py"
    killer.write_text(IMPORT_KILLER)
    killed = subprocess.run([sys.executable, str(killer), step, str(after), "--root", str(tmp_path / "j"), "import", str(SAMPLE), "--partial", *ADA],
                            capture_output=True, check=False, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    stored = len(entry_files(tmp_path / "j"))
    assert stored == after
    rerun = _import(tmp_path / "j", SAMPLE, "--partial")
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert (summary["appended"], summary["duplicate"], summary["conflict"]) == (11 - stored, stored, 0)
    assert [bad["file"] for bad in summary["bad_files"]] == ["entries/2026/03/04/peer-008.json"]
    assert entry_files(tmp_path / "j") == entry_files(tmp_path / "whole")
    with Journal(tmp_path / "j") as journal:
        assert journal.verify().is_clean


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="mounting a tmpfs needs root (CI runs as root, and never skips)")
def test_an_import_dir_onto_a_disk_that_clearly_cannot_hold_it_stores_nothing(tmp_path: Path) -> None:
    """A journal on a nearly full tmpfs: exit 74, one line naming the journal's entries/ and the directory import, no entry stored."""
    mounts = Mounts()
    try:
        disk = mounts.tmpfs(size_kib=1024)
        Journal(disk / "j").close()
        fill(disk, leave_pages=8)
        text = _one_line(_import(disk / "j", SAMPLE, "--partial"), 74)
        assert text.startswith(f"ghostjournal: error: cannot import the journal directory into {str(disk / 'j' / 'entries')!r}: no space left"), text
        assert entry_files(disk / "j") == {}
    finally:
        mounts.release()


def test_two_peer_entries_with_one_client_key_are_a_conflict_named_as_from_the_directory(tmp_path: Path) -> None:
    """The peer refuses a repeated client_key; a hostile copy holding one: the later file is a conflict (exit 4), listed by its path, and
    so are peer-003, which continues it, and peer-010, which continues peer-003 (stored, their links would dangle), each naming the file
    it continues; the error line speaks of the journal directory, not of a stream; the journal verifies clean; a rerun counts the same."""
    peer = tmp_path / "peer"
    shutil.copytree(SAMPLE, peer)
    first = peer / "entries/2026/03/01/peer-001.json"
    first.write_text(json.dumps({**json.loads(first.read_text()), "client_key": "motoko:2026-03-01:2"}))  # peer-002's key
    for _ in range(2):
        done = _import(tmp_path / "j", peer, "--partial")
        assert done.returncode == 4, done.stderr
        conflicts = json.loads(done.stdout)["conflicts"]
        assert [(c["file"], c["id"]) for c in conflicts] == [
            ("entries/2026/03/01/peer-002.json", "peer-002"), ("entries/2026/03/01/peer-003.json", "peer-003"),
            ("entries/2026/03/05/peer-010.json", "peer-010")]
        assert "] links to the entry of entries/2026/03/01/peer-002.json, which this journal does not hold" in conflicts[1]["reason"]
        assert "] links to the entry of entries/2026/03/01/peer-003.json, which this journal does not hold" in conflicts[2]["reason"]
        assert done.stderr.startswith("ghostjournal: error: 3 entries of the journal directory clash with entries this journal holds"), done.stderr
        with Journal(tmp_path / "j") as journal:
            assert journal.verify().is_clean


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="making a device node needs root (CI runs as root, and never skips)")
def test_a_fifo_or_device_where_a_directory_belongs_is_reported_never_opened(tmp_path: Path) -> None:
    """A FIFO as a day directory and a character device (/dev/null's numbers) as a year: each named, none opened (no wait on the FIFO);
    a plain file there stays what the peer makes of it, no entry, unreported."""
    peer = tmp_path / "peer"
    shutil.copytree(SAMPLE, peer)
    (peer / "entries/2026/03/04/peer-008.json").unlink()  # the sample's one unimportable entry: the first error is then the FIFO's
    os.mkfifo(peer / "entries/2026/03/07")
    os.mknod(peer / "entries/2027", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (peer / "entries/2026/03/README").write_text("notes")
    before = tree_digest(peer)
    text = _one_line(_import(tmp_path / "j", peer), 65)
    assert "entries/2026/03/07: is a FIFO, not a directory" in text
    done = _import(tmp_path / "j", peer, "--partial")
    assert done.returncode == 0, done.stderr
    reasons = {bad["file"]: bad["reason"] for bad in json.loads(done.stdout)["bad_files"]}
    assert reasons.pop("entries/2026/03/07").startswith("is a FIFO, not a directory")
    assert reasons.pop("entries/2027").startswith("is a character device, not a directory")
    assert reasons == {}
    assert tree_digest(peer) == before


_SAMPLE_ENTRY = json.loads((SAMPLE / "entries/2026/03/01/peer-001.json").read_text(encoding="utf-8"))
_PEER_KEYS = (*_SAMPLE_ENTRY, "signals", "anchors", "embedding", "client_key", "ts", "id")


@pytest.mark.long
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(changes=st.dictionaries(st.sampled_from(_PEER_KEYS), hostile_values(), max_size=4), raw=st.one_of(st.none(), hostile_json_bytes()))
def test_any_peer_entry_file_is_mapped_or_refused_naming_a_field(changes: dict[str, Any], raw: bytes | None) -> None:
    """Hostile values in a peer entry's fields, or hostile bytes for the whole file: an entry whose canonical bytes read back as the
    same entry, or EntryValidationError, never another exception."""
    if raw is None:
        try:
            raw = json.dumps({**_SAMPLE_ENTRY, **changes}).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            return  # no JSON text holds it (NaN is written, a 4,301-digit integer or a 10,000-deep value is not)
    try:
        entry = peer_entry(raw, "entries/2026/03/01/peer-001.json", {})
    except EntryValidationError:
        return
    assert entry_from_json_bytes(entry.to_json_bytes()) == entry


def test_an_entry_continuing_one_this_import_leaves_out_is_left_out_too_so_the_journal_verifies(tmp_path: Path) -> None:
    """peer-010 continues the unimportable peer-008, peer-011 continues peer-010, peer-005 (ops's) motoko's peer-001, peer-012 (ops's) an
    entry of ops the journal already holds: with --partial the first three are listed with the link that would dangle or cross to another
    agent (both problems verify reports for good), the fourth imported; verify is clean; a rerun counts the same."""
    peer = tmp_path / "peer"
    shutil.copytree(SAMPLE, peer)

    def continues(name: str, refs: list[str]) -> None:
        path = next(peer.glob(f"entries/*/*/*/{name}.json"))
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "signals": {**(data.get("signals") or {}), "continuity_refs": refs}}))

    continues("peer-010", ["peer-003", "peer-008"])
    continues("peer-011", ["peer-010"])
    continues("peer-005", ["peer-001"])
    continues("peer-012", ["held-before"])
    with Journal(tmp_path / "j") as journal:
        journal.append({"id": "held-before", "kind": "note", "agent": "ops@example.org", "theme": "earlier", "voice": "Held before."})
    for run in range(2):
        done = _import(tmp_path / "j", peer, "--partial")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        reasons = {bad["file"]: bad["reason"] for bad in summary["bad_files"]}
        assert reasons.pop("entries/2026/03/05/peer-010.json").startswith("signals.continuity_refs[1] names no entry of agent ")
        assert reasons.pop("entries/2026/03/05/peer-011.json") == (
            "signals.continuity_refs[0] links to the entry of entries/2026/03/05/peer-010.json, which this import leaves out")
        assert reasons.pop("entries/2026/03/02/peer-005.json") == (
            "signals.continuity_refs[0] links to an entry of another agent in this import: an append refuses that link")
        assert set(reasons) == {"entries/2026/03/04/peer-008.json"}
        assert (summary["appended"], summary["duplicate"]) == ((8, 0) if run == 0 else (0, 8))
    with Journal(tmp_path / "j") as journal:
        assert journal.verify().is_clean
        assert journal.get("peer-012").continuity_refs == ("held-before",)
    text = _one_line(_import(tmp_path / "k", peer, "--agent-map", "Ada Lovelace=ada"), 65)
    assert "peer-008.json" in text  # without --partial the first file that cannot be imported stops it, as before
