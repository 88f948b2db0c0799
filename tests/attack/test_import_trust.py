"""An import stores exactly what an append would accept: what a stream says about itself is checked, never believed.

A forged stream (its hash and count made to match) can claim in its
manifest's ``links_outside`` that any link was left out by the export's
scope, link an entry to itself, to another agent's entry, round a circle,
or to a line whose own append then conflicts. Whatever it says, the
journal after the import verifies clean, no entry links to itself, an entry
refused is listed once by its line (never by another agent's id or by the
id it links to) and the journal holds nothing of it, and without
``--partial`` a stream with such a line imports nothing.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import ImportStreamError, Journal
from journal.carry.export import EXPORT_FORMAT_VERSION
from journal.files.entry import Entry, canonical_json
from tests._support import entry_files

START = datetime(2026, 9, 1, tzinfo=UTC)
AGENTS = ("alice", "bob")


def _payload(entry_id: str, agent: str, hours: int, text: str = "line", **signals: list[str]) -> dict[str, Any]:
    payload: dict[str, Any] = {"id": entry_id, "kind": "note", "agent": agent, "theme": "tide", "voice": f"The tide, {text} {hours}.",
                               "ts": (START + timedelta(hours=hours)).isoformat()}
    if any(signals.values()):
        payload["signals"] = {name: refs for name, refs in signals.items() if refs}
    return payload


def _forged(payloads: list[dict[str, Any]], links_outside: list[dict[str, str]] | None = None) -> bytes:
    """A stream of *payloads*' canonical lines and a manifest whose hash and count match, listing *links_outside* (default: every link)."""
    lines = b"".join(Entry.from_payload(payload).to_json_bytes() for payload in payloads)
    if links_outside is None:
        links_outside = [{"entry": p["id"], "link": ref} for p in payloads for refs in p.get("signals", {}).values() for ref in refs]
    manifest = {"ghostjournal_export": EXPORT_FORMAT_VERSION, "journal_id": "forged", "schema_version": 1, "exported_at": "2026-09-02T00:00:00Z",
                "agent": None, "since": None, "until": None, "entries": len(payloads), "agents": {}, "links_outside": links_outside,
                "links_removed": [], "skipped": [], "sha256": f"sha256:{hashlib.sha256(lines).hexdigest()}"}
    return lines + (canonical_json(manifest) + "\n").encode()


def _self_links(journal: Journal) -> list[str]:
    return [e.id for e in journal.list(limit=100) if e.id in (*e.continuity_refs, *e.supersedes)]


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Entries held before, then the lines of a forged stream: two agents, ids from one pool (some lines repeat an id or reuse a held
    one), each line linking to any id of the pool (its own, a later line's, another agent's, one nothing holds)."""
    count = draw(st.integers(1, 8))
    pool = [f"entry-{n:02d}" for n in range(count + 2)]
    lines = []
    for n in range(count):
        entry_id = draw(st.sampled_from([pool[n], pool[n], pool[n], *pool]))
        refs = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True))
        supersedes = draw(st.lists(st.sampled_from(pool), max_size=1))
        hours = draw(st.integers(0, 40))
        lines.append(_payload(entry_id, draw(st.sampled_from(AGENTS)), hours, continuity_refs=refs, supersedes=supersedes))
    held = []
    for entry_id in draw(st.lists(st.sampled_from(pool), max_size=4, unique=True)):
        copies = [line for line in lines if line["id"] == entry_id and "signals" not in line]
        if copies and draw(st.booleans()):
            held.append(copies[0])  # the same bytes: a duplicate
        else:
            held.append(_payload(entry_id, draw(st.sampled_from(AGENTS)), draw(st.integers(0, 40)), text="held"))
    return held, lines


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_whatever_a_forged_stream_says_the_import_stores_only_what_appends_accept(case: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """A forged stream whose manifest lists every link under links_outside: without --partial it imports all or nothing; with it, the
    journal verifies clean with no self-link, every line is counted once, a refused line is named by its line alone (no id, no other
    agent), the held entries stay byte for byte, and a rerun stores nothing and reports the same lines."""
    held, lines = case
    stream = _forged(lines)
    with tempfile.TemporaryDirectory() as tmp, Journal(Path(tmp) / "j") as journal:
        root = Path(tmp) / "j"
        for payload in held:
            journal.append(payload)
        before = entry_files(root)
        try:
            summary = journal.import_stream(io.BytesIO(stream))
        except ImportStreamError as exc:
            assert entry_files(root) == before
            assert "entry-" not in str(exc) and str(exc).count("\n") == 0
            summary = journal.import_stream(io.BytesIO(stream), partial=True)
            assert summary.bad_lines
        else:
            assert summary.bad_lines == []
        report = journal.verify()
        assert report.is_clean, [(p.kind, p.detail) for p in report.problems]
        assert _self_links(journal) == []
        after = entry_files(root)
        assert {name: after[name] for name in before} == before
        assert len(after) - len(before) == summary.appended
        refused = [*summary.bad_lines, *summary.conflicts]
        assert summary.appended + summary.duplicate + len(refused) == len(lines)
        assert len({item["line"] for item in refused}) == len(refused)
        for item in refused:
            agent = lines[item["line"] - 1]["agent"]
            assert "entry-" not in item["reason"] and not {*AGENTS} - {agent} & set(item["reason"].replace("'", " ").split()), item
        stored = {e.id: e for e in journal.list(limit=100)}
        for item in refused:
            line = lines[item["line"] - 1]
            if line["id"] in stored and all(line["id"] != h["id"] for h in held):
                # Stored under that id by another line (the stream repeats it): then this line is that entry's duplicate or conflict.
                assert stored[line["id"]].to_json_bytes() != Entry.from_payload(line).to_json_bytes() or item in summary.bad_lines
        again = journal.import_stream(io.BytesIO(stream), partial=True)
        assert (again.appended, again.duplicate) == (0, summary.appended + summary.duplicate)
        assert again.bad_lines == summary.bad_lines
        assert entry_files(root) == after


def test_a_forged_links_outside_never_stores_a_link_to_another_agents_entry(tmp_path: Path) -> None:
    """A stream whose manifest claims alice's link to bob's entry was left out by its scope: without --partial nothing is imported; with
    it the line is refused by its field and line alone, her other line stored, and the journal verifies clean."""
    with Journal(tmp_path / "j") as journal:
        theirs = journal.append(_payload("bobs-entry", "bob", 0))
        before = entry_files(tmp_path / "j")
        stream = _forged([_payload("alices-1", "alice", 1), _payload("alices-2", "alice", 2, continuity_refs=["alices-1", theirs.id])])
        with pytest.raises(ImportStreamError) as refused:
            journal.import_stream(io.BytesIO(stream))
        assert str(refused.value).startswith("import stream line 2: signals.continuity_refs[1] names no entry of agent 'alice' that this")
        assert theirs.id not in str(refused.value)
        assert entry_files(tmp_path / "j") == before
        summary = journal.import_stream(io.BytesIO(stream), partial=True)
        assert summary.appended == 1 and [bad["line"] for bad in summary.bad_lines] == [2]
        assert journal.verify().is_clean


def test_an_entry_linking_to_itself_is_refused_as_an_append_refuses_it(tmp_path: Path) -> None:
    """A line continuing (or superseding) its own id, listed under links_outside or not, is refused by its field; nothing of it is stored."""
    for name in ("continuity_refs", "supersedes"):
        stream = _forged([_payload("selfish", "alice", 0, **{name: ["selfish"]})])
        with Journal(tmp_path / name) as journal:
            summary = journal.import_stream(io.BytesIO(stream), partial=True)
            assert summary.appended == 0
            assert summary.bad_lines == [{"line": 1, "reason": f"signals.{name}[0] is the entry's own id: an append refuses a link to itself"}]
            assert entry_files(tmp_path / name) == {}


def test_a_line_continuing_one_whose_own_append_conflicts_is_refused_by_line(tmp_path: Path) -> None:
    """Line 1's id is bob's entry here (or its client_key alice's with other bytes), so line 1 conflicts; line 3 continues it and is a
    conflict too, named by line 1's position and never by bob's id, and so is line 2, which continues line 3 and is tried after it; the
    journal verifies clean and the command prints one line each, exit 4."""
    taken = tmp_path / "taken"
    keyed = tmp_path / "keyed"
    with Journal(taken) as journal:
        journal.append(_payload("shared-id", "bob", 0, text="bob's own"))
    with Journal(keyed) as journal:
        journal.append({**_payload("elsewhere", "alice", 0, text="held"), "client_key": "k1"})
    lines = [
        {**_payload("shared-id", "alice", 1), "client_key": "k1"},
        _payload("alices-3", "alice", 2, continuity_refs=["alices-2"]),  # before the line it continues
        _payload("alices-2", "alice", 3, continuity_refs=["shared-id"]),
    ]
    stream = _forged(lines)
    for root in (taken, keyed):
        before = entry_files(root)
        done = subprocess.run(["ghostjournal", "--root", str(root), "import", "--text", "-"], input=stream, capture_output=True, check=False, timeout=120)
        assert done.returncode == 4, done.stderr
        out = done.stdout.decode()
        assert out.startswith("appended 0, duplicate 0, conflict 3 (of 3")
        conflicts = out.splitlines()[1:]
        assert [line.split(":")[0] for line in conflicts] == ["  line 1", "  line 3", "  line 2"]
        refused = "which this journal does not hold as an entry of agent 'alice'; nothing stored"
        assert conflicts[1] == f"  line 3: alices-2: signals.continuity_refs[0] links to the entry of line 1, {refused}"
        assert conflicts[2] == f"  line 2: alices-3: signals.continuity_refs[0] links to the entry of line 3, {refused}"
        assert "bob" not in out and "elsewhere" not in out.replace("held by entry 'elsewhere'", "")
        assert entry_files(root) == before
        with Journal(root) as journal:
            assert journal.verify().is_clean


def test_lines_linking_round_a_circle_are_refused_and_so_is_a_line_continuing_one(tmp_path: Path) -> None:
    """Lines 1 and 2 supersede each other, which no order of appends can store; line 3 continues line 2: each is a bad line naming the
    line it links to, line 4 is stored, and without --partial nothing is."""
    stream = _forged([_payload("a", "bob", 0, supersedes=["b"]), _payload("b", "bob", 1, supersedes=["a"]),
                      _payload("c", "bob", 2, continuity_refs=["b"]), _payload("d", "bob", 3)])
    with Journal(tmp_path / "j") as journal:
        with pytest.raises(ImportStreamError, match=r"^import stream line 1: signals.supersedes\[0\] links to the entry of line 2, and the "):
            journal.import_stream(io.BytesIO(stream))
        assert entry_files(tmp_path / "j") == {}
        summary = journal.import_stream(io.BytesIO(stream), partial=True)
        circle = "and the links from there come back round in a circle: no order of appends can store it"
        assert summary.bad_lines == [
            {"line": 1, "reason": f"signals.supersedes[0] links to the entry of line 2, {circle}"},
            {"line": 2, "reason": f"signals.supersedes[0] links to the entry of line 1, {circle}"},
            {"line": 3, "reason": f"signals.continuity_refs[0] links to the entry of line 2, {circle}"},
        ]
        assert [entry.id for entry in journal.list(limit=10)] == ["d"]
