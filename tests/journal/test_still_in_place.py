"""Journal.still_in_place: an open journal tells whether it is still the journal at its path, after real moves, replacements and restores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, JournalNotFoundError

Payload = Callable[..., dict[str, Any]]


def _copied_in(source: Path, target: Path) -> None:
    """Put a copy of the file *source* at *target* as a restore copies a file in: under another name, then renamed over it."""
    temporary = target.with_name(f".{target.name}.restoring")
    shutil.copy2(source, temporary)
    temporary.replace(target)


def _backup(root: Path, out: Path) -> None:
    """``ghostjournal backup``, run as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "journal.cli.cli", "--root", str(root), "backup", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _moved_away(root: Path, _: Path) -> None:
    root.rename(root.with_name("moved"))


def _directory_restored(root: Path, backup: Path) -> None:
    """The journal lost, and its backup put back in its place."""
    root.rename(root.with_name("lost"))
    backup.rename(root)


def _backup_copied_in(root: Path, backup: Path) -> None:
    """Every file of the backup copied into the journal (rsync's way: each under another name, then renamed over the old one)."""
    for directory, _, names in os.walk(backup):
        for name in names:
            source = Path(directory, name)
            target = root / source.relative_to(backup)
            target.parent.mkdir(parents=True, exist_ok=True)
            _copied_in(source, target)


def _entries_replaced(root: Path, _: Path) -> None:
    shutil.copytree(root / "entries", root / "entries.restored")
    (root / "entries").rename(root / "entries.old")
    (root / "entries.restored").rename(root / "entries")


def _contents_moved_into_a_new(directory: str) -> Callable[[Path, Path], None]:
    """Everything in *directory* (the root, or entries/) moved into a new directory put at its path: every file is the one it
    was, only the directory is another."""

    def move(root: Path, _: Path) -> None:
        old = root / directory
        new = old.with_name(f"{old.name}.new")
        new.mkdir(mode=0o700)
        for path in list(old.iterdir()):
            path.rename(new / path.name)
        old.rename(old.with_name(f"{old.name}.old"))
        new.rename(old)

    return move


def _file_replaced(name: str) -> Callable[[Path, Path], None]:
    def replace(root: Path, _: Path) -> None:
        _copied_in(root / name, root / name)

    return replace


def _other_journals_manifest(root: Path, _: Path) -> None:
    """Another journal's manifest written over this one's, in place (the same file, other bytes)."""
    other = root.with_name("other")
    Journal(other).close()
    (root / "manifest.json").write_bytes((other / "manifest.json").read_bytes())


CHANGES = {
    "the directory moved away": _moved_away,
    "the directory replaced by its backup": _directory_restored,
    "a backup's files copied in": _backup_copied_in,
    "entries/ replaced": _entries_replaced,
    "the directory's contents moved into a new one": _contents_moved_into_a_new("."),
    "entries/'s contents moved into a new one": _contents_moved_into_a_new("entries"),
    ".write.lock replaced": _file_replaced(".write.lock"),
    "entries/.generation replaced": _file_replaced("entries/.generation"),
    "index/journal.sqlite3 replaced": _file_replaced("index/journal.sqlite3"),
    "manifest.json of another journal": _other_journals_manifest,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_an_open_journal_is_no_longer_in_place_once_its_files_are_moved_or_replaced(
    root: Path, tmp_path: Path, make_payload: Payload, change: str
) -> None:
    """Each change is a real one on the file system; the journal then at the path is in place for a new open, and holds the entries."""
    backup = tmp_path / "backup"
    with Journal(root, writable=True) as journal:
        journal.append(make_payload(client_key="before-the-backup"))
        _backup(root, backup)
        journal.append(make_payload(client_key="after-the-backup"))
        assert journal.still_in_place()
        CHANGES[change](root, backup)
        assert not journal.still_in_place()
        assert not journal.still_in_place()  # asking changes nothing
    with Journal(root, writable=True) as again:
        assert again.still_in_place()
        again.append(make_payload(client_key="after-the-change"))
        keys = {entry.client_key for entry in again.list()}
    assert "after-the-change" in keys
    if change == "the directory replaced by its backup":
        assert keys == {"before-the-backup", "after-the-change"}


def test_writes_reads_and_catch_ups_of_other_processes_leave_an_open_journal_in_place(root: Path, make_payload: Payload) -> None:
    """Nothing any process does through the journal itself (an append, a read, a rebuild of the index, a check) replaces what an open
    one holds: it stays in place until closed."""
    with Journal(root, writable=True) as journal:
        assert journal.still_in_place()
        journal.append(make_payload(client_key="own"))
        appended = json.dumps(make_payload(client_key="other", ts="2026-09-02T08:00:00Z"))
        for command, stdin in (("append", appended), ("list", None), ("reindex", None), ("verify", None)):
            done = subprocess.run(
                [sys.executable, "-m", "journal.cli.cli", "--root", str(root), command],
                input=stdin,
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
        assert {entry.client_key for entry in journal.list()} == {"own", "other"}
        assert journal.still_in_place()
        assert journal.verify().is_clean
        assert journal.still_in_place()
    assert not journal.still_in_place()


def test_a_writers_open_makes_the_write_counter_and_a_readers_open_does_not(root: Path, make_payload: Payload) -> None:
    """A journal of an older version kept its count in the lock file: a writer's open makes the counter holding that count, at once."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="first"))
        journal.append(make_payload(client_key="second"))
    counter = root / "entries" / ".generation"
    (root / ".write.lock").write_bytes(counter.read_bytes())
    counter.unlink()
    with Journal(root) as reader:
        assert reader.still_in_place() and len(reader.list()) == 2
    assert not counter.exists()
    with Journal(root, writable=True) as writer:
        assert int(counter.read_text(encoding="ascii")) == 2
        assert writer.still_in_place()
        writer.append(make_payload(client_key="third"))
    assert int(counter.read_text(encoding="ascii")) == 3


def test_a_new_journal_has_its_write_counter_and_verifies_clean(root: Path) -> None:
    with Journal(root) as journal:
        assert journal.still_in_place()
        assert journal.verify().is_clean
    assert sorted(os.listdir(root / "entries")) == [".generation"]
    assert int((root / "entries" / ".generation").read_text(encoding="ascii")) == 0


def test_a_journal_in_a_forked_child_is_not_in_place_there(root: Path) -> None:
    """A child inherits the parent's handles, which are not its own to use: it must open the journal anew."""
    with Journal(root, writable=True) as journal:
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            os.write(writer, b"1" if journal.still_in_place() else b"0")
            os._exit(0)
        os.close(writer)
        answer = os.read(reader, 1)
        os.close(reader)
        os.waitpid(pid, 0)
        assert answer == b"0"
        assert journal.still_in_place()


def test_reopened_opens_the_journal_now_at_the_path_as_the_old_one_was_opened(root: Path, tmp_path: Path, make_payload: Payload) -> None:
    """After a restore, the journal reopened is the one at the path, redacting as the first was told to; with none there, it says so."""
    backup = tmp_path / "backup"
    secret = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    with Journal(root, writable=True, redact="off") as journal:
        journal.append(make_payload(client_key="before-the-backup"))
        _backup(root, backup)
        journal.append(make_payload(client_key="after-the-backup"))
        _directory_restored(root, backup)
        with journal.reopened() as again:
            assert again.still_in_place() and not journal.still_in_place()
            stored = again.append(make_payload(client_key="after-the-restore", voice=f"The key was {secret}."))
            assert stored.voice == f"The key was {secret}."  # redact="off", as the first open said
            assert {entry.client_key for entry in again.list()} == {"before-the-backup", "after-the-restore"}
        root.rename(tmp_path / "away")
        with pytest.raises(JournalNotFoundError, match="no journal at"):
            journal.reopened()
        assert not root.exists()  # never created


_APPEND_AFTER_THE_MOVE = """
import json, sys
from pathlib import Path
from journal import Journal, JournalNotFoundError
root = Path(sys.argv[1])
journal = Journal(root, writable=True)
journal.search("harbor")
root.rename(root.with_name("moved"))
try:
    journal.append({"kind": "note", "agent": "motoko", "theme": "ferry", "voice": "The night ferry."})
except JournalNotFoundError as exc:
    print(json.dumps(str(exc)))
"""


def test_an_append_through_a_journal_moved_away_says_no_journal_is_there(root: Path, make_payload: Payload) -> None:
    """It stopped at once with the error, rather than trying for ever to make the write counter in a directory that is gone."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="before"))
    done = subprocess.run(
        [sys.executable, "-c", _APPEND_AFTER_THE_MOVE, str(root)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout).startswith(f"no journal at {str(root)!r}")
    with Journal(root.with_name("moved"), create=False) as moved:
        assert [entry.client_key for entry in moved.list()] == ["before"]
