"""``ghostjournal verify`` against real damage to entry files: each is found at its file, exits 4, and changes nothing.

Every attack is done the way a person or a tool would do it: an editor's
rewrite, a truncation, two files swapped by ``mv``, ``ln`` of one entry to
another name, a symlink or FIFO planted at an entry path, a copied file. The
check must name the damaged file, say how to fix it, leave every byte of the
journal (its index too) as it was, and a repair must make it verify clean
again without deleting an entry file.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
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
    return {"index_rows", "index_text", "index_agent_text"} - {"index_rows"}  # the row's metadata is unchanged; its text is not


def _edit_in_an_editor(paths: list[Path]) -> set[str]:
    data = json.loads(paths[1].read_text())
    data["theme"] = "retitled"
    paths[1].write_text(json.dumps(data, indent=2) + "\n")
    return {"not_canonical", "index_rows", "index_text", "index_agent_text"}


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
    """After --repair the journal verifies clean (or only not_canonical remains), and every file moved is in quarantine, byte for byte."""
    root = tmp_path / "j"
    paths = _journal(root)
    ATTACKS[attack](paths)
    before = tree_digest(root / "entries")
    code, document, stderr = _verify(root, "--repair")
    remaining = {p["kind"] for p in document["problems"]}
    assert remaining <= {"not_canonical"} and code == (4 if remaining else 0), stderr
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
