"""No path tricks: unsafe ids, symlinks and escaping index rows are refused."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import EntryValidationError, InvalidEntryIdError, Journal, UnsafePathError
from tests._support import tree_digest

Payload = Callable[..., dict[str, Any]]

BAD_IDS = ["../escape", "a/b", "a\\b", "..", ".hidden", "*", "a?", "[ab]", "a" * 129, "", "-rf", "a b", "a\x00b", "é"]


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=[repr(i)[:20] for i in BAD_IDS])
def test_unsafe_ids_are_refused_on_append_and_get(journal: Journal, make_payload: Payload, bad_id: str) -> None:
    """Ids with separators, '..', glob characters or over 128 characters are refused before any file access."""
    before = tree_digest(journal.root)
    with pytest.raises(EntryValidationError, match="'id'"):
        journal.append(make_payload(id=bad_id))
    with pytest.raises(InvalidEntryIdError, match="invalid entry id"):
        journal.get(bad_id)
    assert tree_digest(journal.root) == before


def test_root_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """A journal root that is a symlink is refused."""
    real = tmp_path / "real"
    Journal(real).close()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(UnsafePathError, match="symlink"):
        Journal(tmp_path / "link")


def test_entries_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """entries/ replaced by a symlink to elsewhere is refused on open."""
    root = tmp_path / "j"
    Journal(root).close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "entries" / ".generation").unlink()  # a new journal's entries/ holds its write counter alone
    (root / "entries").rmdir()
    (root / "entries").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="symlink"):
        Journal(root)


def test_symlinked_day_dir_and_file_are_refused_and_reported(root: Path, make_payload: Payload, tmp_path: Path) -> None:
    """A symlinked date directory or entry file inside entries/ is never followed: append, get and reindex refuse it."""
    with Journal(root) as journal:
        outside = journal.append(make_payload(ts="2026-01-01T00:00:00Z"))
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (root / "entries" / "2026" / "02").symlink_to(outside_dir, target_is_directory=True)
    (root / "entries" / "2026" / "01" / "01" / "linked.json").symlink_to(root / "entries" / "2026" / "01" / "01" / f"{outside.id}.json")
    with Journal(root) as journal:
        with pytest.raises(UnsafePathError, match="symlink"):
            journal.append(make_payload(ts="2026-02-03T00:00:00Z"))
        assert list(outside_dir.iterdir()) == []
        skipped = []
        assert journal.reindex(on_skip=skipped.append) == 1
        assert {(s.path, s.reason) for s in skipped} == {
            ("entries/2026/02", "symlink refused"),
            ("entries/2026/01/01/linked.json", "symlink refused"),
        }


def test_index_row_pointing_outside_entries_is_refused(journal: Journal, make_payload: Payload, tmp_path: Path) -> None:
    """A tampered index row whose path leaves entries/ is refused on read, never opened."""
    entry = journal.append(make_payload())
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    with contextlib.closing(sqlite3.connect(journal.root / "index" / "journal.sqlite3")) as conn, conn:
        conn.execute("UPDATE entries SET path = ? WHERE id = ?", (os.path.relpath(secret, journal.root / "entries"), entry.id))
    with pytest.raises(UnsafePathError, match="not an entry path"):
        journal.get(entry.id)
    with pytest.raises(UnsafePathError, match="not an entry path"):
        journal.list()
