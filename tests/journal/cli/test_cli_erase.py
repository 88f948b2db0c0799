"""``ghostjournal erase``: by id with a reason, every entry of an agent after a confirmation, and its refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from journal.cli import _views
from tests._support import entry_files


def _cli(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "--root", str(root), *args], input=stdin, capture_output=True, text=True, check=False, timeout=120)


def _journal(root: Path) -> dict[str, list[str]]:
    with Journal(root) as journal:
        return {
            agent: [journal.append({"kind": "note", "agent": agent, "theme": "t", "voice": f"{agent} entry {n}"}).id for n in range(3)]
            for agent in ("alice", "bob")
        }


def test_erase_by_id_and_get_says_when_and_why(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    ids = _journal(root)
    done = _cli(root, "erase", ids["alice"][0], "--reason", "a password was written into it", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["erased"] == [ids["alice"][0]]
    shown = _cli(root, "get", ids["alice"][0], "--json")
    assert json.loads(shown.stdout)["meta"]["erased"]["reason"] == "a password was written into it"
    text = _views.show_entry(json.loads(shown.stdout), 100)
    assert "erased on " in text and "(a password was written into it)" in text and "alice entry 0" not in text


def test_erase_refuses_without_a_reason_or_for_an_unknown_id(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    ids = _journal(root)
    missing = _cli(root, "erase", ids["alice"][0])
    assert missing.returncode == 2 and "--reason" in missing.stderr
    unknown = _cli(root, "erase", ids["alice"][0], "nope-0", "--reason", "r")
    assert unknown.returncode == 3 and unknown.stderr.strip().count("\n") == 0 and "'nope-0'" in unknown.stderr
    other = _cli(root, "erase", ids["bob"][0], "--agent", "alice", "--reason", "r")
    assert other.returncode == 3 and repr(ids["bob"][0]) in other.stderr
    both = _cli(root, "erase", ids["alice"][0], "--agent", "alice", "--all", "--reason", "r")
    assert both.returncode == 2
    with Journal(root) as journal:
        assert all(journal.get(entry_id).erased is None for entry_id in ids["alice"] + ids["bob"])


def test_erase_all_of_an_agent_asks_first_unless_yes(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    ids = _journal(root)
    declined = _cli(root, "erase", "--agent", "alice", "--all", "--reason", "forget me", stdin="n\n")
    assert declined.returncode == 1 and "erase every entry of agent 'alice'" in declined.stderr
    with Journal(root) as journal:
        assert len(journal.list(agent="alice")) == 3
    confirmed = _cli(root, "erase", "--agent", "alice", "--all", "--reason", "forget me", "--json", stdin="y\n")
    assert confirmed.returncode == 0, confirmed.stderr
    assert sorted(json.loads(confirmed.stdout)["erased"]) == sorted(ids["alice"])
    forced = _cli(root, "erase", "--agent", "bob", "--all", "--yes", "--reason", "forget me too", "--json")
    assert forced.returncode == 0 and sorted(json.loads(forced.stdout)["erased"]) == sorted(ids["bob"])
    with Journal(root) as journal:
        assert journal.list() == [] and journal.verify().is_clean


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("empty", "the file is empty, where 64 hex digits were expected"),
        ("garbage", "it holds characters other than hex digits"),
        ("short", "it holds only 4 hex digits, where 64 were expected"),
        ("long", "it holds more than 64 hex digits, where 64 were expected"),
        ("directory", "it is a directory, not a regular file"),
    ],
)
def test_a_damaged_erase_key_is_named_as_the_key_with_its_fix_by_erase_and_backup(tmp_path: Path, damage: str, reason: str) -> None:
    """An erase key that is empty, no hex, of the wrong length or no file is one line naming erase.key, what is wrong and how to
    get a key back (exit 65), never an entry field's error; the erase and the backup write nothing."""
    root = tmp_path / "journal"
    ids = _journal(root)
    assert _cli(root, "erase", ids["alice"][0], "--reason", "makes the key").returncode == 0
    key = root / "erase.key"
    key.unlink()
    if damage == "directory":
        key.mkdir()
    else:
        key.write_text({"empty": "", "garbage": "not a key at all\n", "short": "abcd\n", "long": "ab" * 65 + "\n"}[damage])
    files = entry_files(root)
    for args in (["erase", ids["alice"][1], "--reason", "r"], ["backup", "--out", str(tmp_path / "copy")]):
        done = _cli(root, *args)
        assert done.returncode == 65 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith(f"ghostjournal: error: erase key {str(key)!r}: {reason}"), (args, done.stderr)
        assert "copy erase.key back from a backup of this journal" in done.stderr and "entry field" not in done.stderr
    assert entry_files(root) == files and key.is_dir() == (damage == "directory")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["journal"]
