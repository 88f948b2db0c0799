"""``import DIR``: a journal directory written by the real ghostjournal 0.1.1 (tests/data/peer-0.1.1) mapped onto schema v1.

The mapping is checked against an independent reading of the table in docs/ghostjournal.md
(:func:`_mapped`), not against the importer's own code; the peer directory is
hashed before and after every import, which must never change it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journal import EntryValidationError, ImportSourceError, Journal
from tests._support import entry_files, tree_digest
from tests.journal._readme import run_readme_block

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "peer-0.1.1"
ADA = ("--agent-map", "Ada Lovelace=ada")
#: Fields the peer may set to null where our schema leaves them out, by where they sit.
_NULLABLE = {"": ("mood", "client_key", "signals"), "signals": ("focus", "novelty"), "meta": ("source_routine",)}


def _peer(tmp_path: Path) -> Path:
    """A copy of the sample (tests may add hostile files to it), hashed by the caller."""
    copy = tmp_path / "peer"
    shutil.copytree(SAMPLE, copy, symlinks=True)
    return copy


def _peer_entries() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(SAMPLE.glob("entries/*/*/*/*.json"))}


def _mapped(peer: dict[str, Any], agent_map: dict[str, str]) -> dict[str, Any]:
    """What the docs' table says the peer entry *peer* becomes."""
    data = {key: value for key, value in peer.items() if key != "embedding" and not (key in _NULLABLE[""] and value is None)}
    for key in ("signals", "meta"):
        if key in data:
            data[key] = {k: v for k, v in data[key].items() if not (k in _NULLABLE[key] and v is None)}
    if "anchors" in data:
        data["anchors"] = [{k: v for k, v in anchor.items() if not (k == "label" and v is None)} for anchor in data["anchors"]]
    data["ts"] = data["ts"].replace(" ", "T", 1)  # the one peer-only ts form in the sample; the instant and offset are kept
    data["agent"] = agent_map.get(data["agent"], data["agent"])
    return data


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ghostjournal", "--root", str(root), "import", "--json", *args], capture_output=True, check=False, timeout=120)


def _one_line_error(done: subprocess.CompletedProcess[bytes], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    text = done.stderr.decode()
    assert text.startswith("ghostjournal: error: ") and text.count("\n") == 1 and "Traceback" not in text, text
    return text


def test_a_peer_journal_round_trips_by_the_mapping_and_a_second_import_stores_nothing(tmp_path: Path) -> None:
    """Every importable entry is stored as the table maps it, found by search; the unimportable one is listed; again, nothing is stored."""
    peer = _peer(tmp_path)
    before = tree_digest(peer)
    done = _cli(tmp_path / "j", str(peer), "--partial", *ADA)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["from"], document["files"], document["appended"], document["duplicate"], document["conflict"]) == ("ghostjournal-0.1.1", 12, 11, 0, 0)
    assert [b["file"] for b in document["bad_files"]] == ["entries/2026/03/04/peer-008.json"]
    assert "'theme'" in document["bad_files"][0]["reason"] and "control characters" in document["bad_files"][0]["reason"]
    assert document["manifest"]["journal_id"] == json.loads((SAMPLE / "manifest.json").read_text())["journal_id"]
    peers = _peer_entries()
    with Journal(tmp_path / "j") as journal:
        stored = {entry.id: entry.to_dict() for entry in journal.list(limit=100)}
        assert stored == {entry_id: _mapped(entry, {"Ada Lovelace": "ada"}) for entry_id, entry in peers.items() if entry_id != "peer-008"}
        assert "embedding" not in stored["peer-004"] and peers["peer-004"]["embedding"]
        assert [hit.entry_id for hit in journal.search("storm", agent="motoko")][:1] == ["peer-010"]
        assert [hit.entry_id for hit in journal.search("engine weaves", agent="ada")] == ["peer-007"]
        found = journal.find_by_client_key("motoko:2026-03-01:2", agent="motoko")
        assert found is not None and found.id == "peer-002"
    files = entry_files(tmp_path / "j")
    again = _cli(tmp_path / "j", str(peer), "--partial", *ADA)
    assert again.returncode == 0, again.stderr
    assert {k: json.loads(again.stdout)[k] for k in ("appended", "duplicate", "conflict")} == {"appended": 0, "duplicate": 11, "conflict": 0}
    assert entry_files(tmp_path / "j") == files
    assert tree_digest(peer) == before


def test_an_import_with_agent_stores_that_agents_peer_entries_alone(tmp_path: Path) -> None:
    """With --agent, only that agent's entries of the peer journal (after --agent-map) are stored; the others are counted."""
    peers = _peer_entries()
    ada = {entry_id for entry_id, entry in peers.items() if entry["agent"] == "Ada Lovelace"}
    done = _cli(tmp_path / "j", str(_peer(tmp_path)), "--partial", *ADA, "--agent", "ada")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["appended"] == len(ada) and document["agent"] == "ada"
    assert document["other_agents"] == document["files"] - len(ada) - len(document["bad_files"])
    with Journal(tmp_path / "j") as journal:
        assert {entry.id for entry in journal.list(limit=100)} == ada


def test_an_unimportable_entry_is_named_and_nothing_is_stored_without_partial(tmp_path: Path) -> None:
    """The agent our schema refuses, then (renamed) the theme with a line break: exit 65, one line naming the file and field, no entry stored."""
    peer = _peer(tmp_path)
    text = _one_line_error(_cli(tmp_path / "j", str(peer)), 65)
    assert f"{peer}/entries/2026/03/03/peer-007.json: entry field 'agent'" in text and '"Ada Lovelace"' in text and "--agent-map" in text
    assert "nothing was imported (pass --partial" in text
    assert entry_files(tmp_path / "j") == {}
    text = _one_line_error(_cli(tmp_path / "j", str(peer), *ADA), 65)
    assert f"{peer}/entries/2026/03/04/peer-008.json: entry field 'theme'" in text
    assert entry_files(tmp_path / "j") == {}
    with Journal(tmp_path / "j") as journal, pytest.raises(ImportSourceError) as raised:
        journal.import_dir(peer, agent_map={"Ada Lovelace": "ada"})
    assert raised.value.path == peer / "entries/2026/03/04/peer-008.json" and "theme" in raised.value.reason
    assert entry_files(tmp_path / "j") == {}


def test_links_fifos_huge_files_and_stray_copies_in_the_peer_dir_are_refused_and_never_followed(tmp_path: Path) -> None:
    """A symlinked entry file and day directory pointing outside, a FIFO, a file over 4 MiB, an entry at the wrong path: each named; a .tmp ignored."""
    peer = _peer(tmp_path)
    outside = tmp_path / "outside"
    (outside / "01").mkdir(parents=True)
    good = json.loads((SAMPLE / "entries/2026/03/01/peer-001.json").read_text())
    for name, ts in (("outside-1", "2026-03-07T10:00:00+00:00"), ("outside-2", "2027-01-01T10:00:00+00:00")):
        (outside / f"{name}.json").write_text(json.dumps({**good, "id": name, "ts": ts, "client_key": None}))
    (outside / "01" / "outside-2.json").write_bytes((outside / "outside-2.json").read_bytes())
    day = peer / "entries/2026/03/07"
    day.mkdir()
    (day / "outside-1.json").symlink_to(outside / "outside-1.json")
    (peer / "entries/2027").mkdir()
    (peer / "entries/2027/01").symlink_to(outside, target_is_directory=True)  # entries/2027/01/01/outside-2.json, through a link
    os.mkfifo(day / "peer-fifo.json")
    (day / "peer-huge.json").write_bytes(b" " * (4 * 1024 * 1024 + 1))
    shutil.copy(peer / "entries/2026/03/01/peer-001.json", peer / "entries/2026/03/02/peer-001.json")
    (day / "peer-009.json.k2v8.tmp").write_bytes(b"{half a write")  # the peer's own temporary file: no entry
    before = tree_digest(peer)

    text = _one_line_error(_cli(tmp_path / "j", str(peer), *ADA), 65)
    assert "entries/2026/03/02/peer-001.json" in text and "entries/2026/03/01/peer-001.json" in text  # the stray copy, where it belongs
    assert entry_files(tmp_path / "j") == {}
    done = _cli(tmp_path / "j", str(peer), "--partial", *ADA)
    assert done.returncode == 0, done.stderr
    reasons = {b["file"]: b["reason"] for b in json.loads(done.stdout)["bad_files"]}
    assert "symlink" in reasons.pop("entries/2026/03/07/outside-1.json")
    assert "symlink" in reasons.pop("entries/2027/01")
    assert "a FIFO" in reasons.pop("entries/2026/03/07/peer-fifo.json")
    assert "larger than 4194304 bytes" in reasons.pop("entries/2026/03/07/peer-huge.json")
    assert "stray" in reasons.pop("entries/2026/03/02/peer-001.json")
    assert set(reasons) == {"entries/2026/03/04/peer-008.json"}
    with Journal(tmp_path / "j") as journal:
        ids = {entry.id for entry in journal.list(limit=100)}
    assert len(ids) == 11 and not ids & {"outside-1", "outside-2"}
    assert tree_digest(peer) == before


def test_a_directory_that_is_no_peer_journal_is_refused_before_a_journal_is_created(tmp_path: Path) -> None:
    """No manifest, our own journal, another manifest version: exit 65 with one line saying what to do; --root is not created."""
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "holds no manifest.json" in _one_line_error(_cli(tmp_path / "j", str(plain)), 65)
    ours = tmp_path / "ours"
    with Journal(ours) as journal:
        journal.append({"kind": "note", "agent": "alice", "theme": "t", "voice": "v"})
    text = _one_line_error(_cli(tmp_path / "j", str(ours)), 65)
    assert "is a journal of this ghostjournal" in text and "backup" in text and "export" in text
    newer = _peer(tmp_path)
    manifest = json.loads((newer / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps({**manifest, "manifest_version": 2}))
    assert "manifest_version is 2" in _one_line_error(_cli(tmp_path / "j", str(newer)), 65)
    (newer / "manifest.json").unlink()
    (newer / "manifest.json").symlink_to(SAMPLE / "manifest.json")
    assert "manifest.json is a symlink" in _one_line_error(_cli(tmp_path / "j", str(newer)), 65)
    (newer / "manifest.json").unlink()
    os.mkfifo(newer / "manifest.json")
    assert "a FIFO" in _one_line_error(_cli(tmp_path / "j", str(newer)), 65)  # refused at once: the subprocess would time out on a wait
    assert not (tmp_path / "j").exists()


def test_a_root_inside_the_peer_dir_is_refused_and_a_peer_journal_as_root_says_how_to_import_it(tmp_path: Path) -> None:
    """Nothing may be written into the peer directory: a --root inside it is refused; --root on it explains itself."""
    peer = _peer(tmp_path)
    before = tree_digest(peer)
    assert "holds the journal to import into" in _one_line_error(_cli(peer / "mine", str(peer)), 65)
    done = subprocess.run(["ghostjournal", "--root", str(peer), "list"], capture_output=True, check=False, timeout=60)
    assert "ghostjournal 0.1.1 journal" in _one_line_error(done, 4) and "import" in done.stderr.decode()
    assert tree_digest(peer) == before


def test_an_agent_map_to_an_invalid_name_is_refused_before_reading(tmp_path: Path) -> None:
    """OLD may be any name the peer takes; NEW must be one of ours: exit 2 naming --agent-map, nothing created."""
    peer = _peer(tmp_path)
    text = _one_line_error(_cli(tmp_path / "j", str(peer), "--agent-map", "Ada Lovelace=ada lovelace"), 2)
    assert "--agent-map" in text and '"ada lovelace"' in text
    assert not (tmp_path / "j").exists()
    with Journal(tmp_path / "j") as journal, pytest.raises(EntryValidationError, match="agent-map"):
        journal.import_dir(peer, agent_map={"Ada Lovelace": "../x"})
    assert entry_files(tmp_path / "j") == {}


def test_an_entry_held_with_other_bytes_is_a_conflict_listed_by_file(tmp_path: Path) -> None:
    """Our journal already has id peer-001 with another text: that file is a conflict (exit 4), skipped, the rest stored."""
    with Journal(tmp_path / "j") as journal:
        journal.append({"id": "peer-001", "kind": "note", "agent": "motoko", "theme": "other", "voice": "Other words."})
    done = _cli(tmp_path / "j", str(SAMPLE), "--partial", *ADA)
    assert done.returncode == 4, done.stderr
    document = json.loads(done.stdout)
    assert (document["appended"], document["conflict"]) == (10, 1)
    assert document["conflicts"][0]["file"] == "entries/2026/03/01/peer-001.json" and document["conflicts"][0]["id"] == "peer-001"
    with Journal(tmp_path / "j") as journal:
        assert journal.get("peer-001").theme == "other"
    text = subprocess.run(["ghostjournal", "--root", str(tmp_path / "j"), "import", "--text", str(SAMPLE), "--partial", *ADA],
                          capture_output=True, text=True, check=False, timeout=120)
    lines = text.stdout.splitlines()
    assert lines[0] == "appended 0, duplicate 10, conflict 1 (of 12 entry files of a ghostjournal-0.1.1 journal)"
    assert lines[1].startswith("  entries/2026/03/01/peer-001.json: peer-001: its id is held") and "peer-008.json left out" in lines[2]


def test_the_readme_peer_import_commands_run_as_written(tmp_path: Path) -> None:
    """The docs' block: an import, the same import storing nothing, and a search finding the imported entries."""
    shutil.copytree(SAMPLE, tmp_path / "peer-journal")
    outputs = run_readme_block("Bringing in a ghostjournal 0.1.1 journal: `ghostjournal import DIR`", tmp_path, lines=3, page="docs/ghostjournal.md")
    first, second = (json.loads(output) for output in outputs[:2])
    assert (first["appended"], first["duplicate"], len(first["bad_files"])) == (11, 0, 1)
    assert (second["appended"], second["duplicate"]) == (0, 11)
    assert json.loads(outputs[2])[0]["entry_id"] == "peer-010"
