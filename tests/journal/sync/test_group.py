"""``Journal.append_many``: a group of payloads answered, stored and indexed exactly as the same appends one after another."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from journal import AppendResult, DiskFullError, DuplicateEntryError, EntryValidationError, Journal
from tests._support import entry_files, open_under, place_entries
from tests.attack._faults import Mounts
from tests.journal._proposal_entries import conversation


def _payload(n: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": "alice", "theme": f"harbour {n}", "voice": f"The harbour lights, evening {n}.",
            "ts": f"2026-09-0{1 + n % 3}T10:00:0{n % 10}Z", "client_key": f"k{n}", **extra}


def _seeded(root: Path) -> Journal:
    journal = Journal(root)
    journal.append(_payload(0, id="e0"))
    journal.append({**_payload(50, id="bob-1"), "agent": "bob"})
    return journal


# Every way a payload of a group can meet another of the group or an entry held before it.
GROUP: list[dict[str, Any]] = [
    _payload(1, id="g1"),
    _payload(2, id="g2", client_key="k1"),  # the key of the group's first entry: that entry, as a duplicate
    _payload(3, id="g1", client_key="k3"),  # the id of the group's first entry: refused
    _payload(4, id="g4", client_key="k0"),  # the key of an entry held before: that entry
    _payload(5, id="e0", client_key="k5"),  # the id of an entry held before: refused
    _payload(6, id="g6", signals={"continuity_refs": ["g1"]}),  # continues an entry of the group
    _payload(7, id="g7", signals={"continuity_refs": ["g8"]}),  # continues one further on: refused, as its append would be
    _payload(8, id="g8", signals={"supersedes": ["e0"]}),
    _payload(9, id="g9", kind="no such kind"),  # invalid
    _payload(10, id="g10", signals={"continuity_refs": ["bob-1"]}),  # continues another agent's entry: refused
    _payload(11, id="g11", ts="2026-09-03T23:59:59Z"),  # another day directory
    _payload(1, id="g1"),  # the group's first entry again, byte for byte: its key's duplicate
]


def _shown(outcome: AppendResult | Exception) -> tuple[str, ...]:
    if isinstance(outcome, AppendResult):
        return ("stored" if not outcome.is_duplicate else "duplicate", outcome.entry.id, outcome.entry.to_json_bytes().decode())
    return (type(outcome).__name__, str(outcome))


def _one_at_a_time(journal: Journal, payloads: Sequence[Mapping[str, Any]]) -> list[AppendResult | Exception]:
    """What each of *payloads* appended on its own gives: its result, or the error that refused it."""
    outcomes: list[AppendResult | Exception] = []
    for payload in payloads:
        try:
            outcomes.append(journal.append_with_result(payload))
        except (DuplicateEntryError, EntryValidationError) as exc:
            outcomes.append(exc)
    return outcomes


def test_a_group_answers_stores_and_indexes_as_its_appends_one_after_another(tmp_path: Path) -> None:
    """Each outcome (stored, duplicate, the very error) and every file and index row are those of the same appends made one at a time."""
    with _seeded(tmp_path / "one") as journal:
        expected = _one_at_a_time(journal, GROUP)
        one_by_one = [(entry.id, entry.to_json_bytes()) for entry in journal.list(limit=100)]
        one_by_one_hits = [hit.entry_id for hit in journal.search("harbour lights", k=20)]
        assert journal.verify().is_clean
    with _seeded(tmp_path / "group") as journal:
        outcomes = journal.append_many(GROUP)
        grouped = [(entry.id, entry.to_json_bytes()) for entry in journal.list(limit=100)]
        assert journal.verify().is_clean
        assert [hit.entry_id for hit in journal.search("harbour lights", k=20)] == one_by_one_hits
    assert [_shown(outcome) for outcome in outcomes] == [_shown(outcome) for outcome in expected]
    assert [_shown(outcome)[0] for outcome in outcomes] == [
        "stored", "duplicate", "DuplicateEntryError", "duplicate", "DuplicateEntryError", "stored",
        "EntryValidationError", "stored", "EntryValidationError", "EntryValidationError", "stored", "duplicate",
    ]
    assert grouped == one_by_one
    assert entry_files(tmp_path / "group") == entry_files(tmp_path / "one")


def _index_tables(root: Path) -> dict[str, list[Any]]:
    """Every row of the index as reads see it: each table's rows (rowids included), and each text table's words by row and
    column (the layout of a text table's segments on disk is SQLite's own, and differs with how its rows were batched)."""
    found: dict[str, list[Any]] = {}
    with closing(sqlite3.connect(f"file:{root / 'index' / 'journal.sqlite3'}?mode=ro", uri=True)) as conn:
        conn.execute(f"ATTACH 'file:{root / 'index' / 'journal.sqlite3'}?mode=ro' AS j")
        for name, sql in conn.execute("SELECT name, sql FROM j.sqlite_master WHERE type = 'table'").fetchall():
            if "USING fts5" in sql:
                conn.execute(f"CREATE VIRTUAL TABLE temp.{name}_words USING fts5vocab(j, {name}, instance)")
                found[name] = conn.execute(f"SELECT * FROM temp.{name}_words ORDER BY 1, 2, 3, 4").fetchall()
            elif not name.startswith("fts") or name.endswith("_docsize"):
                found[name] = sorted(conn.execute(f"SELECT * FROM j.{name}").fetchall(), key=repr)
    # A fresh token at every open, and a counter (with its file's stamp) each append moves once and a group once for all its entries.
    found["state"] = [row for row in found["state"] if row[0] not in ("vectors_epoch", "generation", "counter")]
    return found


def _subject_payloads(count: int) -> list[dict[str, Any]]:
    """Entries of two agents sharing tags and a focus, out of time order, continuing, superseding and deciding on one another."""
    rnd = random.Random(34)
    words = ["harbour", "anchor", "keel", "mast", "deck", "storm", "calm", "north", "south", "bright", "dark", "quick", "slow", "ferry", "lantern"]
    payloads: list[dict[str, Any]] = []
    for n in range(count):
        agent = rnd.choice(["alice", "alice", "bob"])
        earlier = [payload["id"] for payload in payloads if payload["agent"] == agent or rnd.random() < 0.05]
        signals: dict[str, Any] = {"focus": rnd.choice(["boat", "Boat ", "sail"])} if rnd.random() < 0.5 else {}
        if earlier and rnd.random() < 0.3:
            signals["continuity_refs"] = sorted({rnd.choice(earlier) for _ in range(2)})
        if earlier and rnd.random() < 0.15:
            signals["supersedes"] = [rnd.choice(earlier)]
        meta: dict[str, Any] = {"origin": "untrusted"} if rnd.random() < 0.1 else {}
        if len(earlier) > 1 and rnd.random() < 0.08:
            meta["proposal"] = {"decision": rnd.choice(["accepted", "rejected"]), "older": earlier[0], "newer": earlier[-1]}
        payloads.append({
            "id": f"s{n}", "kind": "note", "agent": agent, "theme": "log",
            "voice": " ".join(rnd.sample(words, rnd.randint(2, 7))), "tags": rnd.sample(["boat", "sail", "rope", "tide"], rnd.randint(0, 2)),
            "ts": f"2026-09-0{rnd.randint(1, 3)}T{rnd.randint(10, 23)}:{rnd.randint(10, 59)}:00Z", "client_key": f"c{rnd.randint(0, 90)}",
            **({"signals": signals} if signals else {}), **({"meta": meta} if meta else {}),
        })
    return payloads


def test_a_group_indexes_every_row_and_proposal_as_its_appends_one_after_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's rows are written a batch at a time, its supersede proposals weighed in one pass: every table of the index
    (rowids, text, links, subjects, words kept, proposals, decisions) is what the same appends make one at a time, across
    entries held before it on both sides in time, the group's batches (its files named seven at a time here), a stale key
    dropped midway, and entries it refuses."""
    monkeypatch.setattr("journal.sync._group.FILES_AT_ONCE", 7)
    held, group = _subject_payloads(100)[:30], _subject_payloads(100)[30:]
    group.insert(20, {**held[3], "id": "again", "voice": "the key of a held entry whose file is gone"})
    roots = {name: tmp_path / name for name in ("one", "group")}
    for root in roots.values():
        with Journal(root) as journal:
            for payload in held:
                with contextlib.suppress(EntryValidationError):
                    journal.append(payload)
        (root / "entries" / "2026" / "09" / held[3]["ts"][8:10] / f"{held[3]['id']}.json").unlink()
    with Journal(roots["one"]) as journal:
        expected = _one_at_a_time(journal, group)
    with Journal(roots["group"]) as journal:
        outcomes = journal.append_many(group)
    assert [_shown(outcome) for outcome in outcomes] == [_shown(outcome) for outcome in expected]
    grouped, one_by_one = _index_tables(roots["group"]), _index_tables(roots["one"])
    assert len(grouped["proposals"]) > 20 and grouped["decisions"] and grouped["untrusted"]
    assert grouped == one_by_one
    assert entry_files(roots["group"]) == entry_files(roots["one"])


def test_a_group_out_of_time_order_holds_back_what_its_appends_hold_back_where_a_subject_is_common(tmp_path: Path) -> None:
    """Whether a subject is common where an entry stands is read as its own append read it: the entries of the group after
    it (dated before or after) are not there yet, those held before it are, on either side in time."""
    turns = conversation(70, studio_at=(20, 45, 60))
    rnd = random.Random(36)
    held, group = turns[:6], turns[6:]
    rnd.shuffle(group)
    roots = {name: tmp_path / name for name in ("one", "group")}
    for root in roots.values():
        with Journal(root) as journal:
            journal.append_many(held)
    with Journal(roots["one"]) as journal:
        _one_at_a_time(journal, group)
    with Journal(roots["group"]) as journal:
        journal.append_many(group)
    grouped, one_by_one = _index_tables(roots["group"]), _index_tables(roots["one"])
    assert grouped["proposals"] and grouped == one_by_one


def test_a_chain_through_an_entry_later_in_the_group_is_not_followed_by_the_entries_before_it(tmp_path: Path) -> None:
    """An entry of a group proposes what its own append would: a chain of continuity_refs that leads to the older entry only
    through an entry stored later in the group (a hand-placed file links to that id before it exists) does not hold it back."""
    older = {"id": "o", "kind": "note", "agent": "alice", "theme": "log", "ts": "2026-09-01T10:00:00Z", "tags": ["boat"], "voice": "boat mast blue"}
    hand = {"id": "x", "kind": "note", "agent": "alice", "theme": "log", "ts": "2026-09-01T11:00:00Z", "voice": "a note",
            "signals": {"continuity_refs": ["m"]}}
    group = [
        {"id": "k", "kind": "note", "agent": "alice", "theme": "log", "ts": "2026-09-01T12:00:00Z", "tags": ["boat"],
         "voice": "boat mast red painted fresh coat", "signals": {"continuity_refs": ["x"]}},
        {"id": "m", "kind": "note", "agent": "alice", "theme": "log", "ts": "2026-09-01T13:00:00Z", "voice": "later on",
         "signals": {"continuity_refs": ["o"]}},
    ]
    found = {}
    for name in ("one", "group"):
        with Journal(tmp_path / name) as journal:
            journal.append(older)
            place_entries(journal, [hand])
            if name == "one":
                for payload in group:
                    journal.append(payload)
            else:
                journal.append_many(group)
            found[name] = [(proposal.older, proposal.newer) for proposal in journal.proposals()]
    assert found["group"] == found["one"] == [("o", "k")]


def test_a_group_storing_nothing_changes_nothing(tmp_path: Path) -> None:
    """A group of duplicates and refusals alone writes no file and moves no counter: the journal's files stay byte for byte."""
    with _seeded(tmp_path / "j") as journal:
        before = entry_files(tmp_path / "j"), (tmp_path / "j" / "entries" / ".generation").read_bytes()
        outcomes = journal.append_many([_payload(0, id="e0"), _payload(7, id="g7", signals={"continuity_refs": ["nowhere"]})])
        assert [_shown(outcome)[0] for outcome in outcomes] == ["duplicate", "EntryValidationError"]
    assert (entry_files(tmp_path / "j"), (tmp_path / "j" / "entries" / ".generation").read_bytes()) == before


def test_a_file_at_an_entrys_name_the_index_does_not_hold_refuses_that_entry_alone(tmp_path: Path) -> None:
    """A stray file where an entry of the group would be named is a DuplicateEntryError for that entry, as its append's publish is;
    the others are stored, and the stray file is left as it was."""
    with _seeded(tmp_path / "j") as journal:
        stray = tmp_path / "j" / "entries" / "2026" / "09" / "02" / "g1.json"
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_bytes(b"not an entry\n")
        outcomes = journal.append_many([_payload(1, id="g1"), _payload(4, id="g4")])
        assert [_shown(outcome)[0] for outcome in outcomes] == ["DuplicateEntryError", "stored"]
        with pytest.raises(DuplicateEntryError):
            journal.append(_payload(1, id="g1"))
    assert stray.read_bytes() == b"not an entry\n"


def test_a_file_at_the_name_of_an_entry_later_in_a_day_the_group_writes_to_refuses_that_entry_alone(tmp_path: Path) -> None:
    """The stray file is found in a day directory the group already holds open for an entry before it, as it is in one it has not opened."""
    with _seeded(tmp_path / "j") as journal:
        stray = tmp_path / "j" / "entries" / "2026" / "09" / "02" / "g1.json"
        stray.parent.mkdir(parents=True, exist_ok=True)
        stray.write_bytes(b"not an entry\n")
        outcomes = journal.append_many([_payload(4, id="g4"), _payload(1, id="g1"), _payload(7, id="g7")])
        assert [_shown(outcome)[0] for outcome in outcomes] == ["stored", "DuplicateEntryError", "stored"]
    assert stray.read_bytes() == b"not an entry\n"


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="mounting a tmpfs needs root (CI runs as root)")
def test_a_group_whose_files_run_out_of_room_midway_stores_nothing_and_a_rerun_stores_it_all(mounts: Mounts) -> None:
    """The files of a group are made while it is checked; when the filesystem refuses one halfway (no inode left), the group
    raises the full disk, and no file, name, index row, descriptor or counter change is left; once room is made, the same
    group stores every entry."""
    disk = mounts.tmpfs(size_kib=8192)
    group = [_payload(n, id=f"g{n}", ts="2026-09-01T10:00:00Z") for n in range(1, 41)]
    with Journal(disk / "j") as journal:
        journal.append(_payload(0, id="e0", ts="2026-09-01T09:00:00Z"))
        before = entry_files(disk / "j"), (disk / "j" / "entries" / ".generation").read_bytes()
        # What the journal holds open under the disk: a count of the whole process's descriptors would change whenever
        # the garbage collector closes a file an earlier test left to it.
        descriptors = sorted(open_under(disk))
        (disk / "inodes").mkdir()
        made = 0
        while os.statvfs(disk).f_ffree > 10:  # ten inodes left for a group of forty files
            (disk / "inodes" / str(made)).touch()
            made += 1
        with pytest.raises(DiskFullError):
            journal.append_many(group)
        assert (entry_files(disk / "j"), (disk / "j" / "entries" / ".generation").read_bytes()) == before
        assert [entry.id for entry in journal.list(limit=100)] == ["e0"]
        assert sorted(open_under(disk)) == descriptors
        shutil.rmtree(disk / "inodes")
        outcomes = journal.append_many(group)
        assert [_shown(outcome)[0] for outcome in outcomes] == ["stored"] * len(group)
        assert len(journal.list(limit=100)) == len(group) + 1
    assert sorted(path.name for path in (disk / "j" / "entries" / "2026" / "09" / "01").iterdir()) == sorted(
        f"{entry_id}.json" for entry_id in ["e0", *(f"g{n}" for n in range(1, 41))]
    )


#: Appends a group of 640 entries under a limit of 256 descriptors (journal.sync.FILES_AT_ONCE is then 64).
MANY_FILES = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from journal import AppendResult, Journal
payloads = [{"kind": "note", "agent": "alice", "theme": f"tide {n}", "voice": f"The tide at {n}.", "ts": "2026-09-01T10:00:00Z",
             "client_key": f"k{n}"} for n in range(640)]
with Journal(sys.argv[1]) as journal:
    outcomes = journal.append_many(payloads)
    stored = sum(isinstance(o, AppendResult) and not o.is_duplicate for o in outcomes)
    print(json.dumps({"stored": stored, "listed": len(journal.list(limit=1000)), "clean": journal.verify().is_clean}))
"""


def test_a_group_larger_than_the_descriptors_allow_is_stored_whole(tmp_path: Path) -> None:
    """A group of ten times the files a process may hold open at once (under a limit of 256 descriptors) stores every entry, its
    files named a part at a time, and verifies clean: the group's size is the caller's, not bounded by the process's limits."""
    done = subprocess.run([sys.executable, "-c", MANY_FILES, str(tmp_path / "j")], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"stored": 640, "listed": 640, "clean": True}
    assert len(entry_files(tmp_path / "j")) == 640


def test_a_group_writes_with_a_wider_page_cache_and_gives_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's rows are written while the index connection may cache more pages than SQLite's default, and the connection
    has its own size again once the group is stored, refused or failed: a long-lived process that imports once does not
    keep the wider cache."""
    from journal.indexing.index import Index

    seen: list[int] = []
    insert_entries = Index.insert_entries

    def recording(self: Index, conn: sqlite3.Connection, entries: Any) -> None:
        seen.append(int(conn.execute("PRAGMA cache_size").fetchone()[0]))
        insert_entries(self, conn, entries)

    monkeypatch.setattr(Index, "insert_entries", recording)
    with Journal(tmp_path / "j") as journal:
        journal.append(_payload(0))
        default = int(journal._keeper.index.conn.execute("PRAGMA cache_size").fetchone()[0])
        journal.append_many([_payload(n) for n in range(1, 5)])
        assert seen and all(size < 0 and -size > -default for size in seen)  # negative: KiB, not pages
        assert int(journal._keeper.index.conn.execute("PRAGMA cache_size").fetchone()[0]) == default

        def failing(self: Index, conn: sqlite3.Connection, entries: Any) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(Index, "insert_entries", failing)
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            journal.append_many([_payload(9)])
        assert int(journal._keeper.index.conn.execute("PRAGMA cache_size").fetchone()[0]) == default
