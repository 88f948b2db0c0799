"""``verify`` and ``verify --repair``: each kind of damage is found with its file and fix, nothing is changed, a repair deletes nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, SemanticUnavailableError
from journal.files.entry import Entry
from journal.files.store import EntryStore
from tests._support import place_entries, tree_digest
from tests.journal._busy import busy_writer
from tests.journal._fakes import FakeEncoder
from tests.journal._readme import run_readme_block


def _payload(n: int, agent: str = "alice", **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "theme": f"harbour {n}", "voice": f"The harbour lights, evening {n}.",
            "ts": f"2026-09-{1 + n % 20:02d}T0{n % 10}:00:00Z", "client_key": f"{agent}:{n}", **extra}


def _journal(root: Path, count: int = 6, **kwargs: Any) -> list[str]:
    with Journal(root, **kwargs) as journal:
        ids = [journal.append(_payload(n)).id for n in range(count)]
        journal.append(_payload(100, agent="bob", signals={"continuity_refs": []}))
    return ids


def _path(root: Path, entry_id: str) -> Path:
    with Journal(root) as journal:
        return root / "entries" / EntryStore.rel_path_for(journal.get(entry_id))


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "--root", str(root), "verify", "--json", *args], capture_output=True, text=True, check=False, timeout=120)


def _kinds(root: Path, **kwargs: Any) -> dict[str, list[str]]:
    with Journal(root) as journal:
        report = journal.verify(**kwargs)
    found: dict[str, list[str]] = {}
    for problem in report.problems:
        found.setdefault(problem.kind, []).append(problem.path)
    return found


def test_a_clean_journal_verifies_with_exit_0_and_every_file_counted(tmp_path: Path) -> None:
    """A journal written by appends has no problem; the CLI prints the sums as JSON and exits 0."""
    _journal(tmp_path / "j")
    done = _cli(tmp_path / "j")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["ok"] is True and document["files"] == 7 and document["entries"] == 7 and document["problems"] == []


def test_verify_changes_no_byte_of_a_damaged_journal(tmp_path: Path) -> None:
    """A journal with a truncated file and a stale index is reported, exit 4, and every file (the index too) is left as it was."""
    root = tmp_path / "j"
    ids = _journal(root)
    _path(root, ids[0]).write_bytes(b'{"id": ')
    before = tree_digest(root)
    done = _cli(root)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("ghostjournal: error: verify found ") and done.stderr.count("\n") == 1
    kinds = {p["kind"] for p in json.loads(done.stdout)["problems"]}
    assert {"unreadable", "index_rows"} <= kinds
    assert tree_digest(root) == before


def test_each_problem_names_its_file_and_a_fix(tmp_path: Path) -> None:
    """Every reported problem carries the file (relative to the root) and a fix to run."""
    root = tmp_path / "j"
    ids = _journal(root)
    path = _path(root, ids[1])
    path.chmod(0o644)
    document = json.loads(_cli(root).stdout)
    (problem,) = document["problems"]
    assert problem == {"kind": "mode", "path": str(path.relative_to(root)), "detail": "mode 0644, not 0600", "fix": f"chmod 600 {path.relative_to(root)}"}
    assert document["counts"] == {"mode": 1}


def _write_file(root: Path, payload: dict[str, Any]) -> str:
    """An entry file placed by hand (as a copy or a restore would), without the index; its path below the root."""
    entry = Entry.from_payload(payload)
    path = root / "entries" / EntryStore.rel_path_for(entry)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(entry.to_json_bytes())
    path.chmod(0o600)
    return str(path.relative_to(root))


def test_files_claiming_one_id_and_one_key_in_a_chain_are_settled_as_a_rebuild_settles_them(tmp_path: Path) -> None:
    """A copy of an entry's id with a key of its own loses the id to the indexed entry, so the key is free for a third file.

    The copy is read first (its day is the earliest) and takes the id and the key until the files after it claim them:
    the check must still choose as a rebuild of every file does, naming the copy alone and taking the third file as an
    entry the index lacks, not as a copy of the copy's key.
    """
    root = tmp_path / "j"
    with Journal(root) as journal:
        indexed = journal.append(_payload(1)).id
    copy = _write_file(root, _payload(2, id=indexed, ts="2026-08-01T00:00:00Z", client_key="shared"))
    third = _write_file(root, _payload(3, ts="2026-08-02T00:00:00Z", client_key="shared"))
    with Journal(root, repair_index=False) as journal:
        report = journal.verify()
    assert [(p.kind, p.path) for p in report.problems] == [("duplicate_id", copy)] + [
        (kind, "index/journal.sqlite3") for kind in ("index_rows", "index_text", "index_agent_text")]
    third_id = third.rsplit("/", 1)[1].removesuffix(".json")
    assert report.problems[1].detail == f"the index has no rows for 1 in the files ({third_id!r})" and report.entries == 2


def test_links_to_a_missing_or_another_agents_entry_are_found(tmp_path: Path) -> None:
    """An entry continuing an id no entry holds, and one continuing bob's entry, are each reported at their own file.

    Append refuses both links; an earlier version, a restore or a copied file can leave them, so they are placed by hand.
    """
    root = tmp_path / "j"
    with Journal(root) as journal:
        bobs = journal.append(_payload(1, agent="bob"))
        dangling, foreign = place_entries(journal, [_payload(2, signals={"continuity_refs": ["no-such-entry"]}),
                                                    _payload(3, signals={"continuity_refs": [bobs.id]})])
    kinds = _kinds(root)
    assert kinds == {"dangling_link": [f"entries/{EntryStore.rel_path_for(dangling)}"], "foreign_link": [f"entries/{EntryStore.rel_path_for(foreign)}"]}
    with Journal(root) as journal:
        scoped = journal.verify(agent="alice")
    assert bobs.id not in json.dumps(scoped.to_dict())  # scoped to alice, bob's id is never shown
    assert {p.kind for p in scoped.problems} == {"dangling_link", "foreign_link"}


def test_index_damage_is_found_table_by_table(tmp_path: Path) -> None:
    """A row removed from an agent's own text table, a changed theme, a lost link: each differs from a rebuild and is reported."""
    root = tmp_path / "j"
    ids = _journal(root)
    with Journal(root) as journal:
        journal.append(_payload(50, signals={"continuity_refs": [ids[0]]}))
    conn = sqlite3.connect(root / "index" / "journal.sqlite3")
    with conn:
        conn.execute("UPDATE entries SET theme = 'changed' WHERE id = ?", (ids[2],))
        conn.execute("DELETE FROM links")
        table = f"fts_agent_{conn.execute('SELECT id FROM agents WHERE name = ?', ('bob',)).fetchone()[0]}"
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
    conn.close()
    kinds = _kinds(root)
    assert set(kinds) == {"index_rows", "index_links", "index_agent_text"}
    with Journal(root) as journal:
        report = journal.verify()
    assert any(ids[2] in p.detail for p in report.problems if p.kind == "index_rows")


def test_vectors_must_name_their_encoder_and_cover_every_entry(tmp_path: Path) -> None:
    """Vectors whose encoder record is gone, and an encoder with fewer vectors than entries, are both reported."""
    root = tmp_path / "j"
    _journal(root, enable_nn=True, encoder=FakeEncoder())
    assert _kinds(root) == {}
    with Journal(root) as journal:
        journal.append(_payload(77))  # no NN: this entry has no vector
    assert set(_kinds(root)) == {"vectors_count"}
    conn = sqlite3.connect(root / "index" / "journal.sqlite3")
    with conn:
        conn.execute("DELETE FROM state WHERE key LIKE 'encoder:%'")
    conn.close()
    assert set(_kinds(root)) == {"vectors_unnamed"}


def test_deep_re_embeds_a_sample_and_finds_a_changed_vector(tmp_path: Path) -> None:
    """--deep compares fresh embeddings with the stored vectors: a vector overwritten with another entry's is found; without NN it is refused."""
    root = tmp_path / "j"
    ids = _journal(root, count=4, enable_nn=True, encoder=FakeEncoder())
    encoder = FakeEncoder()
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        report = journal.verify(deep=True)
        assert report.is_clean and report.deep_checked == 5
    conn = sqlite3.connect(root / "index" / "journal.sqlite3")
    with conn:
        other = conn.execute("SELECT vector FROM vectors v JOIN entries e ON e.rowid = v.entry WHERE e.agent = 'bob'").fetchone()[0]
        conn.execute("UPDATE vectors SET vector = ? WHERE entry = (SELECT rowid FROM entries WHERE id = ?)", (other, ids[1]))
    conn.close()
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        (problem,) = journal.verify(deep=True).problems
    assert problem.kind == "vector_stale" and problem.path.endswith(f"{ids[1]}.json")
    with Journal(root) as journal, pytest.raises(SemanticUnavailableError, match="verify --deep re-embeds entries"):
        journal.verify(deep=True)


def test_repair_quarantines_what_is_no_entry_rebuilds_the_index_and_deletes_nothing(tmp_path: Path) -> None:
    """After --repair the journal verifies clean; each file moved is byte for byte under the quarantine folder the report names."""
    root = tmp_path / "j"
    ids = _journal(root)
    broken = _path(root, ids[0])
    broken.write_bytes(b"not json\n")
    stray = broken.parent / "notes.txt"
    stray.write_text("mine")
    before = {path: data for path, data in tree_digest(root / "entries").items() if not path.startswith(".")}
    done = _cli(root, "--repair")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["ok"] is True and {p["kind"] for p in document["fixed"]} >= {"unreadable", "not_an_entry", "index_rows"}
    quarantine = root / document["quarantine"]
    assert quarantine.parent == root / "quarantine"
    moved = {str(p.relative_to(quarantine / "entries")): p for p in quarantine.rglob("*") if p.is_file()}
    kept = {path: data for path, data in tree_digest(root / "entries").items() if not path.startswith(".")}
    assert set(moved) == {str(broken.relative_to(root / "entries")), str(stray.relative_to(root / "entries"))}
    assert set(kept) | set(moved) == set(before) and all(before[path] == data for path, data in kept.items())
    assert moved[str(stray.relative_to(root / "entries"))].read_text() == "mine"
    with Journal(root) as journal:
        assert journal.verify().is_clean and len(journal.list(limit=100)) == 6


def test_repair_of_what_it_cannot_fix_still_exits_4(tmp_path: Path) -> None:
    """A file of the wrong mode is not the repair's to change: it stays, and the exit code says a problem remains."""
    root = tmp_path / "j"
    ids = _journal(root)
    _path(root, ids[0]).chmod(0o640)
    done = _cli(root, "--repair")
    assert done.returncode == 4 and "these remain after the repair" in done.stderr
    assert oct(_path(root, ids[0]).stat().st_mode & 0o777) == "0o640"


def test_repair_refuses_an_agent(tmp_path: Path) -> None:
    """--repair rebuilds the whole index, so --agent with it is a usage error."""
    _journal(tmp_path / "j")
    done = _cli(tmp_path / "j", "--repair", "--agent", "alice")
    assert done.returncode == 2 and "--repair rebuilds the whole index and takes no --agent" in done.stderr


def test_verify_while_another_process_appends_reports_no_problem(tmp_path: Path) -> None:
    """Verifies run while a real writer process appends without pause; each sees files and index of one instant, so none reports a problem."""
    root = tmp_path / "j"
    _journal(root, count=30)
    overlapped = 0
    with busy_writer(root) as writer, Journal(root) as journal:
        writer.wait_for_more()  # it has started
        for _ in range(200):
            before = len(writer.appended)
            report = journal.verify()
            assert report.is_clean, report.to_dict()["problems"]
            overlapped += len(writer.appended) > before
            if overlapped >= 5:
                break
    assert overlapped >= 5, "the writer never appended during a verify"
    with Journal(root) as journal:
        assert journal.verify().is_clean


def test_the_readme_verify_commands_run_as_written(tmp_path: Path) -> None:
    """Each line of the verify block of docs/ghostjournal.md runs on a journal in the working directory and exits 0."""
    _journal(tmp_path / "journal")
    for output in run_readme_block("Checking a journal: `ghostjournal verify`", tmp_path, lines=3, page="docs/ghostjournal.md"):
        assert json.loads(output)["ok"] is True
