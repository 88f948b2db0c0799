"""``ghostjournal verify`` against real damage to entry files: each is found at its file, exits 4, and changes nothing.

Every attack is done the way a person or a tool would do it: an editor's
rewrite, a truncation, two files swapped by ``mv``, ``ln`` of one entry to
another name, a symlink or FIFO planted at an entry path, a copied file. The
check must name the damaged file, say how to fix it, leave every byte of the
journal (its index too) as it was, and a repair must make it verify clean
again without deleting an entry file.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.files.entry import Entry
from journal.files.store import EntryStore
from tests._support import tree_digest

TIMEOUT = 60


def _journal(root: Path) -> list[Path]:
    """Five entries of alice on two days; the paths of their files."""
    with Journal(root) as journal:
        entries = [journal.append({"kind": "note", "agent": "alice", "theme": f"tide {n}", "voice": f"The tide turned at {n}.",
                                   "ts": f"2026-09-0{1 + n % 2}T0{n}:00:00Z", "client_key": f"alice:{n}"}) for n in range(5)]
    return [root / "entries" / EntryStore.rel_path_for(entry) for entry in entries]


def _edit_canonically(paths: list[Path]) -> set[str]:
    data = json.loads(paths[0].read_text())
    data["voice"] = "Rewritten by hand."
    paths[0].write_text(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
    return {"edited"}  # at the file: the index's rows differ from it because the file changed, not the index


def _edit_in_an_editor(paths: list[Path]) -> set[str]:
    data = json.loads(paths[1].read_text())
    data["theme"] = "retitled"
    paths[1].write_text(json.dumps(data, indent=2) + "\n")
    return {"not_canonical", "edited"}


def _truncate(paths: list[Path]) -> set[str]:
    with paths[2].open("r+b") as handle:
        handle.truncate(20)
    return {"unreadable", "index_rows", "index_text", "index_agent_text"}


def _swap(paths: list[Path]) -> set[str]:
    first, second = paths[0], paths[1]
    temporary = first.with_name("swap.tmp")
    os.rename(first, temporary)
    os.rename(second, first)
    os.rename(temporary, second)
    return {"misplaced", "index_rows", "index_text", "index_agent_text"}


def _hard_link(paths: list[Path]) -> set[str]:
    os.link(paths[3], paths[3].parent.parent / "elsewhere.json")
    return {"hard_linked", "not_an_entry"}


def _symlink(paths: list[Path]) -> set[str]:
    target = paths[0].parent.parent.parent.parent.parent / "outside.json"
    target.write_bytes(paths[4].read_bytes())
    paths[4].unlink()
    paths[4].symlink_to(target)
    return {"not_an_entry", "index_rows", "index_text", "index_agent_text"}


def _fifo(paths: list[Path]) -> set[str]:
    paths[4].unlink()
    os.mkfifo(paths[4], 0o600)
    return {"unsafe_file", "index_rows", "index_text", "index_agent_text"}


def _copy_to_another_day(paths: list[Path]) -> set[str]:
    data = json.loads(paths[0].read_text())
    data["ts"] = "2026-09-03T05:00:00Z"  # the same id on another day: both paths are right for their files
    (paths[0].parent.parent / "03").mkdir(mode=0o700)
    copy = paths[0].parent.parent / "03" / paths[0].name
    copy.write_text(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
    copy.chmod(0o600)
    return {"duplicate_id"}


def _copy_with_a_new_id(paths: list[Path]) -> set[str]:
    data = json.loads(paths[1].read_text())
    data["id"] = "copied-entry"
    copy = paths[1].with_name("copied-entry.json")
    copy.write_text(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
    copy.chmod(0o600)
    return {"duplicate_client_key"}


ATTACKS: dict[str, Callable[[list[Path]], set[str]]] = {
    "edited canonically": _edit_canonically, "edited in an editor": _edit_in_an_editor, "truncated": _truncate,
    "swapped between paths": _swap, "hard-linked": _hard_link, "a symlink": _symlink, "a FIFO": _fifo,
    "copied to another day": _copy_to_another_day, "copied with a new id": _copy_with_a_new_id,
}


def _verify(root: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(["ghostjournal", "--root", str(root), "verify", "--json", *args], capture_output=True, text=True, check=False, timeout=TIMEOUT)
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_damage_is_found_at_its_file_and_nothing_changes(tmp_path: Path, attack: str) -> None:
    """The damage is reported by kind at the damaged file with a fix, exit 4, one error line, and the journal's bytes are untouched."""
    root = tmp_path / "j"
    paths = _journal(root)
    expected = ATTACKS[attack](paths)
    before = tree_digest(root)
    code, document, stderr = _verify(root)
    assert code == 4, stderr
    assert stderr.startswith("ghostjournal: error: verify found ") and stderr.count("\n") == 1
    assert {p["kind"] for p in document["problems"]} == expected
    assert all(p["fix"] and (p["path"].startswith("entries/") or p["path"] == "index/journal.sqlite3") for p in document["problems"])
    assert tree_digest(root) == before


@pytest.mark.parametrize("attack", [name for name in ATTACKS if name != "hard-linked"])
def test_a_repair_makes_it_verify_clean_and_deletes_no_entry_file(tmp_path: Path, attack: str) -> None:
    """After --repair the journal verifies clean (or only an edited file's problems remain: a repair never adopts an edit),
    and every file moved is in quarantine, byte for byte."""
    root = tmp_path / "j"
    paths = _journal(root)
    ATTACKS[attack](paths)
    before = tree_digest(root / "entries")
    code, document, stderr = _verify(root, "--repair")
    remaining = {p["kind"] for p in document["problems"]}
    assert remaining <= {"not_canonical", "edited"} and code == (4 if remaining else 0), stderr
    after = tree_digest(root / "entries")
    quarantined = tree_digest(root / document["quarantine"] / "entries") if document["quarantine"] else {}
    assert set(after) | set(quarantined) == set(before) and not set(after) & set(quarantined)
    assert all(before[name] == digest for name, digest in (after | quarantined).items())


@pytest.mark.parametrize("copy_id", ["0-copied-entry", "zz-copied-entry"])
def test_a_copy_with_a_new_id_never_takes_the_entrys_place(tmp_path: Path, copy_id: str) -> None:
    """A hand-made copy (the same key and time, a new id) is the duplicate whichever id sorts first: verify names the copy,
    --repair moves the copy, and the entry the agent's links name keeps its key after a reindex."""
    root = tmp_path / "j"
    paths = _journal(root)
    original = json.loads(paths[1].read_text())
    copy = paths[1].with_name(f"{copy_id}.json")
    copy.write_text(json.dumps({**original, "id": copy_id}, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
    copy.chmod(0o600)
    code, document, _ = _verify(root)
    assert code == 4 and [(p["kind"], p["path"]) for p in document["problems"]] == [
        ("duplicate_client_key", f"entries/{copy.relative_to(root / 'entries')}")]
    with Journal(root) as journal:
        journal.reindex()
        assert [entry.id for entry in journal.list(agent="alice", limit=10) if entry.client_key == original["client_key"]] == [original["id"]]
    code, document, _ = _verify(root, "--repair")
    assert code == 0 and not copy.exists() and paths[1].exists()


# -- what the index does not hold, the text index's words, the index file itself ------------------------------------------


def _rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit an entry file as a careful tool would: the values changed, the bytes canonical again, the mode kept."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "meta": lambda data: data["meta"].update({"source": "forged"}),
    "anchors": lambda data: data.update({"anchors": [{"type": "url", "ref": "https://example.org/forged"}]}),
    "signals": lambda data: data.update({"signals": {**data.get("signals", {}), "novelty": 0.99}}),
    "voice": lambda data: data.update({"voice": "Rewritten by hand."}),
    "mood": lambda data: data.update({"mood": "forged"}),
}


@pytest.mark.parametrize("field", list(EDITS))
def test_an_edit_of_any_field_is_found_at_its_file_and_reindex_named_as_adopting_it(tmp_path: Path, field: str) -> None:
    """Fields the index holds no row for (meta, anchors) count as much as the voice: one problem, at the entry's file, saying
    what a reindex would do; the index is not blamed and nothing changes."""
    root = tmp_path / "j"
    paths = _journal(root)
    _rewrite(paths[2], EDITS[field])
    before = tree_digest(root)
    code, document, stderr = _verify(root)
    assert code == 4, stderr
    assert [(p["kind"], p["path"]) for p in document["problems"]] == [("edited", f"entries/{paths[2].relative_to(root / 'entries')}")]
    problem = document["problems"][0]
    assert "reindex' would adopt the edit" in problem["detail"] and "restore the file from a backup" in problem["fix"]
    assert tree_digest(root) == before


def test_a_repair_keeps_reporting_an_edit_and_a_reindex_adopts_it(tmp_path: Path) -> None:
    """--repair rebuilds the index but never takes an edited file for what was appended; an explicit reindex does, as documented."""
    root = tmp_path / "j"
    paths = _journal(root)
    _rewrite(paths[0], EDITS["meta"])
    edited = paths[0].read_bytes()
    code, document, _ = _verify(root, "--repair")
    assert code == 4 and {p["kind"] for p in document["problems"]} == {"edited"} and paths[0].read_bytes() == edited
    with Journal(root) as journal:
        journal.reindex()
    code, document, stderr = _verify(root)
    assert code == 0 and document["problems"] == [], stderr


def test_an_edit_is_still_found_after_the_index_is_rebuilt_for_a_new_layout(tmp_path: Path) -> None:
    """An open that rebuilds an outdated index keeps the digest each entry was appended with, so the edit stays visible."""
    root = tmp_path / "j"
    paths = _journal(root)
    _rewrite(paths[3], EDITS["anchors"])
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        conn.execute("UPDATE state SET value = '0' WHERE key = 'schema_version'")  # any other layout is rebuilt on open
    Journal(root).close()
    code, document, _ = _verify(root)
    assert code == 4 and [p["kind"] for p in document["problems"]] == ["edited"]


def _text_of(conn: sqlite3.Connection, rowid: int) -> tuple[str, ...]:
    return tuple(conn.execute("SELECT theme, voice, tags, focus, mood FROM fts WHERE rowid = ?", (rowid,)).fetchone())


def _move_postings(root: Path, first: str, second: str, table: str) -> None:
    """Swap the words the text index *table* holds for two entries, leaving every stored text (and every other table) as it was."""
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        a, b = (conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()[0] for entry_id in (first, second))
        text_a, text_b = _text_of(conn, a), _text_of(conn, b)
        columns = "theme, voice, tags, focus, mood"
        if table == "fts":
            conn.execute(f"UPDATE fts SET ({columns}) = (?, ?, ?, ?, ?) WHERE rowid = ?", (*text_b, a))
            conn.execute(f"UPDATE fts SET ({columns}) = (?, ?, ?, ?, ?) WHERE rowid = ?", (*text_a, b))
            for rowid, text in ((a, text_a), (b, text_b)):  # the stored text back as it was: only the words' postings moved
                conn.execute("UPDATE fts_content SET c0 = ?, c1 = ?, c2 = ?, c3 = ?, c4 = ? WHERE id = ?", (*text, rowid))
        else:
            agent_table = "fts_agent_" + str(conn.execute("SELECT id FROM agents WHERE name = 'alice'").fetchone()[0])
            for rowid, text in ((a, text_a), (b, text_b)):
                conn.execute(f"INSERT INTO {agent_table} ({agent_table}, rowid, {columns}) VALUES ('delete', ?, ?, ?, ?, ?, ?)", (rowid, *text))
            conn.execute(f"INSERT INTO {agent_table} (rowid, {columns}) VALUES (?, ?, ?, ?, ?, ?)", (a, *text_b))
            conn.execute(f"INSERT INTO {agent_table} (rowid, {columns}) VALUES (?, ?, ?, ?, ?, ?)", (b, *text_a))


@pytest.mark.parametrize(("table", "kind", "scope"), [("fts", "index_text", None), ("alice's", "index_agent_text", "alice")])
def test_words_indexed_for_another_entry_are_found_and_the_index_is_untouched(tmp_path: Path, table: str, kind: str, scope: str | None) -> None:
    """A text index whose postings were moved between two entries makes a search find the wrong entry; verify names both entries
    at the index (its stored texts and counts are all right), exits 4 and changes no byte."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        heron = journal.append({"kind": "note", "agent": "alice", "theme": "marsh", "voice": "A heron stood in the reeds."})
        lantern = journal.append({"kind": "note", "agent": "alice", "theme": "quay", "voice": "A lantern swung on the quay."})
        journal.append({"kind": "note", "agent": "bob", "theme": "field", "voice": "Crows over the stubble."})
    _move_postings(root, heron.id, lantern.id, table)
    with Journal(root) as journal:
        assert [hit.entry.id for hit in journal.search("heron", agent=scope, mode="lexical")] == [lantern.id]  # the damage is real
    before = tree_digest(root)
    code, document, stderr = _verify(root)
    assert code == 4, stderr
    assert [(p["kind"], p["path"]) for p in document["problems"]] == [(kind, "index/journal.sqlite3")]
    assert heron.id in document["problems"][0]["detail"] and lantern.id in document["problems"][0]["detail"]
    assert tree_digest(root) == before
    code, document, _ = _verify(root, "--repair")
    assert code == 0 and document["fixed"][0]["kind"] == kind


def test_a_corrupt_index_file_is_reported_as_such_and_left_byte_for_byte(tmp_path: Path) -> None:
    """verify opens nothing through the self-repairing path: a damaged index file is reported, not rebuilt under the check."""
    root = tmp_path / "j"
    _journal(root)
    index = root / "index" / "journal.sqlite3"
    damaged = bytearray(index.read_bytes())
    damaged[4096:8192] = b"\x55" * 4096  # the second page: the state and entries tables' roots are past the header
    index.write_bytes(bytes(damaged))
    before = tree_digest(root)
    code, document, stderr = _verify(root)
    assert code == 4, stderr
    assert [(p["kind"], p["path"]) for p in document["problems"]] == [("index_unreadable", "index/journal.sqlite3")]
    assert tree_digest(root) == before
    code, document, _ = _verify(root, "--repair")
    assert code == 0 and [p["kind"] for p in document["fixed"]] == ["index_unreadable"]


def test_an_index_of_the_layout_before_digests_is_reported_then_rebuilt_by_an_open(tmp_path: Path) -> None:
    """An index of layout 8 (no digests) is named outdated by verify, which leaves it be; an open rebuilds it and records digests."""
    root = tmp_path / "j"
    paths = _journal(root)
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        conn.execute("ALTER TABLE entries DROP COLUMN digest")
        conn.execute("UPDATE state SET value = '8' WHERE key = 'schema_version'")
    before = tree_digest(root)
    code, document, _ = _verify(root)
    assert code == 4 and [p["kind"] for p in document["problems"]] == ["index_outdated"]
    assert "layout 8" in document["problems"][0]["detail"] and tree_digest(root) == before
    Journal(root).close()
    assert _verify(root)[0] == 0
    _rewrite(paths[1], EDITS["meta"])
    assert [p["kind"] for p in _verify(root)[1]["problems"]] == ["edited"]


def test_a_backup_of_a_journal_with_an_edited_entry_reports_the_edit_in_its_copy(tmp_path: Path) -> None:
    """The copy carries the digests recorded at append, and the backup checks it as found: the edit is named at the copy's file."""
    root = tmp_path / "j"
    paths = _journal(root)
    _rewrite(paths[4], EDITS["meta"])
    with Journal(root) as journal:
        report = journal.backup(tmp_path / "copy")
    assert [(p.kind, p.path) for p in report.verify.problems] == [("edited", f"entries/{paths[4].relative_to(root / 'entries')}")]


def test_a_deleted_index_file_is_reported_missing_and_not_made_again(tmp_path: Path) -> None:
    """With index/journal.sqlite3 gone, verify says so and creates nothing; --repair rebuilds it from the files."""
    root = tmp_path / "j"
    _journal(root)
    (root / "index" / "journal.sqlite3").unlink()
    before = tree_digest(root)
    code, document, _ = _verify(root)
    assert code == 4 and [(p["kind"], p["path"]) for p in document["problems"]] == [("index_missing", "index/journal.sqlite3")]
    assert tree_digest(root) == before
    code, document, _ = _verify(root, "--repair")
    assert code == 0 and document["entries"] == 5


def test_an_index_behind_an_interrupted_append_is_reported_not_caught_up(tmp_path: Path) -> None:
    """An entry published by an append killed before its index commit: verify names the lagging index and leaves it be."""
    root = tmp_path / "j"
    _journal(root)
    entry = Entry.from_payload({"kind": "note", "agent": "alice", "theme": "late", "voice": "Published, never indexed.", "ts": "2026-09-01T09:00:00Z"})
    published = root / "entries" / EntryStore.rel_path_for(entry)
    published.write_bytes(entry.to_json_bytes())
    published.chmod(0o600)
    counter = root / "entries" / ".generation"
    width = len(counter.read_bytes())
    counter.write_bytes(str(int(counter.read_bytes()) + 1).rjust(width).encode("ascii"))  # the append's bump, made before it published
    before = tree_digest(root)
    code, document, _ = _verify(root)
    assert code == 4 and {"index_behind", "index_rows"} <= {p["kind"] for p in document["problems"]}
    assert tree_digest(root) == before
    with Journal(root) as journal:  # any other open catches it up
        assert journal.get(entry.id) == entry
    assert _verify(root)[0] == 0
