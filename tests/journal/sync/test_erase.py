"""Erasing entries: a tombstone in the entry's place, and not one byte of the erased text left in any file of the journal."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.errors import EntryNotFoundError, EntryValidationError
from tests.journal._fakes import FakeEncoder
from tests.journal._killer import ERASE_KILLER

#: A provider key planted in an entry; its pieces are searched for too, since the full-text index stores words lowercased and
#: each beside the start it shares with the word before it (so a whole word may never appear as one run of bytes).
SECRET = "sk-proj-Qw7Zx9Lm2Np4Rt6Vb8Yc3Hd"  # noqa: S105 - a made-up key, planted to be erased
_PIECES = (SECRET, SECRET.lower(), "qw7zx9lm2np4rt6vb8yc3hd", "rt6vb8yc3hd", "Rt6Vb8Yc3Hd")


def _files(root: Path) -> Iterator[Path]:
    for directory, _, names in os.walk(root):
        for name in names:
            yield Path(directory) / name


def _holding_secret(root: Path) -> list[str]:
    """Every file under *root* whose raw bytes hold the secret or a piece of it."""
    return sorted(str(path.relative_to(root)) for path in _files(root) if any(piece.encode() in path.read_bytes() for piece in _PIECES))


def _payload(n: int, agent: str = "alice", **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "theme": f"day {n}", "voice": f"Entry {n} about the harbor and tide {n % 7}.", **extra}


def _planted(root: Path, *, entries: int = 120, encoder: FakeEncoder | None = None) -> str:
    """A journal of *entries* entries (each committed on its own, so the text index has many segments), one holding the secret.

    Redaction is off, as in a journal written before it or by a deployment that turned it off: the secret is stored.
    """
    with Journal(root, enable_nn=encoder is not None, encoder=encoder, redact="off") as journal:
        for n in range(entries):
            journal.append(_payload(n, client_key=f"slot-{n}"))
            if n == entries // 2:
                secret = journal.append(
                    _payload(
                        n, voice=f"The deploy key is {SECRET}, keep it safe.", tags=["keys"], theme="deploy key", client_key="slot-secret"
                    )
                )
    return secret.id


def test_an_erased_secret_leaves_no_byte_in_any_file_of_the_journal_nor_after_reindex_export_backup_or_import(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    secret_id = _planted(root, encoder=FakeEncoder())
    assert _holding_secret(root)  # the check can see it: the entry file and the index hold it before the erase
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        result = journal.erase([secret_id], reason="a provider key was written into it")
        assert result.erased == [secret_id]
        assert _holding_secret(root) == []
        conn = sqlite3.connect(root / "index" / "journal.sqlite3")
        try:
            assert conn.execute("SELECT count(*) FROM vectors").fetchone() == conn.execute("SELECT count(*) FROM entries").fetchone()
        finally:
            conn.close()
        journal.reindex()
        assert _holding_secret(root) == []
        stream = io.BytesIO()
        journal.export(stream)
        assert not any(piece.encode() in stream.getvalue() for piece in _PIECES)
        assert json.loads(stream.getvalue().splitlines()[len(stream.getvalue().splitlines()) // 2])  # the stream is well formed
        journal.backup(tmp_path / "backup")
    assert _holding_secret(tmp_path / "backup") == []
    with Journal(tmp_path / "imported") as copy:
        summary = copy.import_stream(io.BytesIO(stream.getvalue()))
        assert summary.conflict == 0
        assert copy.get(secret_id).erased is not None
    assert _holding_secret(tmp_path / "imported") == []


def test_a_tombstone_keeps_the_id_the_slot_and_the_links_and_says_when_and_why(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal", redact="off")
    first = journal.append(_payload(1, voice=f"key {SECRET}", client_key="alice:pulse:1"))
    assert SECRET in journal.get(first.id).voice
    later = journal.append(_payload(2, signals={"continuity_refs": [first.id]}))
    journal.erase([first.id], reason="leaked key", by="ops")
    tombstone = journal.get(first.id)
    assert (tombstone.id, tombstone.ts, tombstone.kind, tombstone.agent, tombstone.client_key) == (
        first.id,
        first.ts,
        first.kind,
        first.agent,
        first.client_key,
    )
    assert tombstone.erased is not None
    assert (tombstone.erased["reason"], tombstone.erased["by"]) == ("leaked key", "ops")
    assert SECRET not in tombstone.to_json_bytes().decode()
    # A retried run of the erased slot is a duplicate, never a rewrite.
    retried = journal.append_with_result(_payload(1, voice="again", client_key="alice:pulse:1"))
    assert retried.is_duplicate and retried.entry.id == first.id
    assert [entry.id for entry in journal.list()] == [later.id]
    for query in ("key", "erased", "leaked", "day 1"):
        assert first.id not in {hit.entry.id for hit in journal.search(query)}
    assert first.id not in journal.prompt_context("key", agent="alice")
    # Links to it stay valid: a new entry may continue it, and verify is clean.
    journal.append(_payload(3, signals={"continuity_refs": [first.id]}))
    assert journal.verify().is_clean
    journal.close()
    assert _holding_secret(tmp_path / "journal") == []


def test_every_id_is_checked_before_anything_is_erased(journal: Journal) -> None:
    kept = journal.append(_payload(1))
    bob = journal.append(_payload(2, agent="bob"))
    with pytest.raises(EntryNotFoundError, match="no entry with id 'nope'"):
        journal.erase([kept.id, "nope"], reason="r")
    with pytest.raises(EntryNotFoundError, match=repr(bob.id)):  # another agent's id reads as an unknown one
        journal.erase([kept.id, bob.id], reason="r", agent="alice")
    with pytest.raises(EntryValidationError, match="reason"):
        journal.erase([kept.id], reason="  ")
    assert journal.get(kept.id).erased is None and journal.get(bob.id).erased is None
    assert not (journal.root / "erase.key").exists()


def test_erasing_an_erased_entry_again_changes_nothing(journal: Journal) -> None:
    entry = journal.append(_payload(1))
    journal.erase([entry.id], reason="first")
    path = next(journal.root.glob(f"entries/*/*/*/{entry.id}.json"))
    before = path.read_bytes()
    again = journal.erase([entry.id], reason="second")
    assert (again.erased, again.already) == ([], [entry.id])
    assert path.read_bytes() == before


def test_every_entry_of_an_agent_is_erased_and_no_other(journal: Journal) -> None:
    alice = [journal.append(_payload(n)).id for n in range(5)]
    bob = journal.append(_payload(9, agent="bob")).id
    result = journal.erase(reason="right to be forgotten", agent="alice", all_of_agent=True)
    assert sorted(result.erased) == sorted(alice)
    assert journal.list(agent="alice") == []
    assert journal.get(bob).erased is None
    with pytest.raises(ValueError, match="all_of_agent"):
        journal.erase([bob], reason="r", all_of_agent=True)


def test_verify_names_a_tombstone_edited_by_hand(journal: Journal) -> None:
    entry = journal.append(_payload(1))
    journal.erase([entry.id], reason="leaked")
    path = next(journal.root.glob(f"entries/*/*/*/{entry.id}.json"))
    path.write_bytes(path.read_bytes().replace(b'"reason":"leaked"', b'"reason":"nothing to see"'))
    report = journal.verify()
    assert not report.is_clean
    assert any(entry.id in problem.path for problem in report.problems), report.problems
    path.write_bytes(path.read_bytes().replace(b'"voice":"(erased)"', b'"voice":"the text is back"'))
    report = journal.verify()
    assert any(problem.kind != "edited" and entry.id in problem.path for problem in report.problems), report.problems


def test_an_older_export_imported_again_does_not_bring_an_erased_entry_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal", redact="off")
    entry = journal.append(_payload(1, voice=f"key {SECRET}", client_key="k1"))
    journal.append(_payload(2))
    old = io.BytesIO()
    journal.export(old)
    journal.erase([entry.id], reason="leaked")
    summary = journal.import_stream(io.BytesIO(old.getvalue()))
    assert (summary.appended, summary.duplicate, summary.conflict, summary.erased) == (0, 1, 0, 1)
    assert journal.get(entry.id).erased is not None
    journal.close()
    assert _holding_secret(tmp_path / "journal") == []


def test_a_tombstone_from_another_journal_cannot_erase_an_entry_it_does_not_match(tmp_path: Path) -> None:
    with Journal(tmp_path / "a") as a:
        entry = a.append(_payload(1))
        a.erase([a.append(_payload(2)).id], reason="makes a's own key")
        stream = io.BytesIO()
        a.export(stream)
    with Journal(tmp_path / "b") as b:
        b.import_stream(io.BytesIO(stream.getvalue()))
        b.erase([entry.id], reason="erased in b, with b's key")
        forged = io.BytesIO()
        b.export(forged)
    with Journal(tmp_path / "a") as a:
        summary = a.import_stream(io.BytesIO(forged.getvalue()))
        assert summary.erased == 0 and summary.conflict == 1
        assert "does not match" in summary.conflicts[0]["reason"]
        assert a.get(entry.id).erased is None


def test_a_tombstone_made_with_the_journal_s_key_erases_its_entry_in_a_backup_on_import(tmp_path: Path) -> None:
    with Journal(tmp_path / "a", redact="off") as a:
        entry = a.append(_payload(1, voice=f"key {SECRET}"))
        a.erase([a.append(_payload(2)).id], reason="the key is made")
        a.backup(tmp_path / "before")
        a.erase([entry.id], reason="leaked")
        stream = io.BytesIO()
        a.export(stream)
    assert _holding_secret(tmp_path / "before")  # a backup made before the erase still holds the text, as documented
    with Journal(tmp_path / "before") as copy:
        summary = copy.import_stream(io.BytesIO(stream.getvalue()))
        assert (summary.erased, summary.conflict) == (1, 0)
        assert copy.get(entry.id).erased is not None
    assert _holding_secret(tmp_path / "before") == []


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "--root", str(root), *args], capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.parametrize("step", ["replace:before", "replace:after", "delete_entry:after", "scrub:before"])
def test_an_erase_killed_at_any_point_is_finished_by_a_rerun(tmp_path: Path, step: str) -> None:
    root = tmp_path / "journal"
    secret_id = _planted(root, entries=40)
    killer = tmp_path / "killer.py"
    killer.write_text(ERASE_KILLER)
    killed = subprocess.run(
        [sys.executable, str(killer), step, "--root", str(root), "erase", secret_id, "--reason", "leaked"],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if step != "replace:before":  # the file is a tombstone: no read shows the entry, even before the rerun
        with Journal(root) as journal:
            assert secret_id not in {hit.entry_id for hit in journal.search("deploy key", k=50)}
            assert secret_id not in {entry.id for entry in journal.list(limit=None)}
    rerun = _cli(root, "erase", secret_id, "--reason", "leaked", "--json")
    assert rerun.returncode == 0, rerun.stderr
    done = json.loads(rerun.stdout)
    assert done["erased" if step == "replace:before" else "already_erased"] == [secret_id]
    assert _holding_secret(root) == []
    with Journal(root) as journal:
        assert journal.get(secret_id).erased is not None
        assert journal.verify().is_clean
        assert secret_id not in {hit.entry.id for hit in journal.search("deploy key")}


def test_a_full_disk_while_the_index_is_rewritten_says_the_erase_is_done_and_a_rerun_finishes_it(tmp_path: Path) -> None:
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    from tests.attack._faults import Mounts, fill

    mounts = Mounts()
    try:
        disk = mounts.tmpfs(size_kib=8192)
        secret_id = _planted(tmp_path / "journal", entries=300)
        with sqlite3.connect(tmp_path / "journal" / "index" / "journal.sqlite3") as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the copy starts with the appends' WAL in the database file
        root = disk / "journal"
        shutil.copytree(tmp_path / "journal", root)
        fill(disk, leave_pages=64)  # room for the tombstone and the transaction, not for a VACUUM's copy of the index
        failed = _cli(root, "erase", secret_id, "--reason", "leaked")
        assert failed.returncode == 74, failed.stderr
        message = failed.stderr.strip()
        assert message.count("\n") == 0 and "Traceback" not in message
        assert "no space left" in message and "rewrite the index after erasing" in message and "run the same erase again" in message
        with Journal(root) as journal:
            assert journal.get(secret_id).erased is not None
        (disk / "filler").unlink()
        rerun = _cli(root, "erase", secret_id, "--reason", "leaked", "--json")
        assert rerun.returncode == 0, rerun.stderr
        assert _holding_secret(root) == []
    finally:
        mounts.release()
