"""Scoped lexical search takes its word statistics from the agent's own entries.

With ``agent="alice"``, BM25's document frequencies and average length, the
fitted list of common words and the candidates a common-words query ranks
all come from alice's entries. So a journal where bob also writes (in alice's
words, often enough to make them common) answers alice exactly as a journal
holding only her entries: the same ids, the same scores, the same snippets.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import journal.indexing._fts as fts_module
from journal import Journal
from journal.files.store import EntryStore
from journal.indexing._fts import CommonWords
from tests.journal._fakes import FakeEncoder

WORDS = ["harbor", "light", "tide", "fog", "bell", "lens", "rain", "salt", "wire", "kelp", "moth", "ember"]
START = datetime(2026, 9, 1, tzinfo=UTC)
# Small enough that a few dozen entries cross them: a word in a quarter of the
# entries searched (and in at least four) is common, and a query of common
# words alone ranks the newest three matches.
SMALL = CommonWords(share=0.25, min_docs=4, candidates=3)

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)
entry_text = st.fixed_dictionaries({"theme": st.sampled_from(WORDS), "voice": words, "tags": st.lists(st.sampled_from(WORDS), max_size=2, unique=True)})


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fts_module, "COMMON_WORDS", SMALL)


def _payload(agent: str, entry_id: str, hours: float, text: dict[str, Any], refs: list[str]) -> dict[str, Any]:
    ts = (START + timedelta(hours=hours)).isoformat().replace("+00:00", "Z")
    payload = {"id": entry_id, "kind": "note", "agent": agent, "ts": ts, "theme": text["theme"], "voice": " ".join(text["voice"]), "tags": text["tags"]}
    if refs:
        payload["signals"] = {"continuity_refs": refs}
    return payload


@st.composite
def journals(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """alice's entries alone, and the same entries with bob's interleaved (bob leaning on a few of alice's words).

    Each entry continues only earlier entries of its own agent (earlier both in time and in the order
    appended), as append requires; links across agents are attacked in test_scoping, with files placed by hand.
    """
    alice_texts = draw(st.lists(entry_text, min_size=1, max_size=8))
    bob_texts = draw(st.lists(entry_text, min_size=1, max_size=20))
    favourite = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
    alice: list[dict[str, Any]] = []
    for i, text in enumerate(alice_texts):
        refs = draw(st.lists(st.sampled_from([f"alice-{j}" for j in range(i)]), max_size=2, unique=True)) if i else []
        alice.append(_payload("alice", f"alice-{i}", 2 * i, text, refs))
    bob = []
    for i, drawn in enumerate(bob_texts):
        text = {**drawn, "voice": drawn["voice"] + favourite * draw(st.integers(0, 3))}
        bob.append(_payload("bob", f"bob-{i}", draw(st.floats(0, 2 * len(alice))), text, []))
    # bob's entries go in between alice's, in a drawn order: rowids are interleaved.
    both: list[dict[str, Any]] = list(alice)
    for entry in bob:
        both.insert(draw(st.integers(0, len(both))), entry)
    for position, entry in enumerate(both):
        if entry["agent"] == "bob":
            earlier = [e["id"] for e in both[:position] if e["agent"] == "bob" and _instant(e) < _instant(entry)]
            if refs := draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True)) if earlier else []:
                entry["signals"] = {"continuity_refs": refs}
    order = {a["id"]: n for n, a in enumerate(a for a in both if a["agent"] == "alice")}
    assert order == {a["id"]: n for n, a in enumerate(alice)}
    return alice, both


def _instant(payload: dict[str, Any]) -> tuple[datetime, str]:
    """Where a rebuild puts *payload*: its instant, then its id."""
    return datetime.fromisoformat(payload["ts"]), payload["id"]


def _answers(journal: Journal, queries: list[str], ids: list[str], mode: str) -> Any:
    """Everything a read scoped to alice returns, scores and snippets included."""
    return (
        [[(h.entry_id, h.score, h.snippet) for h in journal.search(q, k=5, agent="alice", mode=mode)] for q in queries],
        [journal.prompt_context(q, k=3, agent="alice") for q in queries],
        [[(h.entry_id, h.score, h.snippet, h.reason) for h in journal.relate(entry_id, k=4, agent="alice")] for entry_id in ids],
        journal.digest(agent="alice").to_dict(),
    )


@contextlib.contextmanager
def _opened(base: Path, name: str, payloads: list[dict[str, Any]], nn: bool) -> Iterator[Journal]:
    with Journal(base / name, enable_nn=nn, encoder=FakeEncoder(dimension=32) if nn else None) as journal:
        for payload in payloads:
            journal.append(payload)
        yield journal


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=journals(), queries=st.lists(words.map(" ".join), min_size=1, max_size=4), nn=st.booleans())
def test_what_alice_reads_does_not_depend_on_bobs_entries(drawn: tuple[list[dict[str, Any]], list[dict[str, Any]]], queries: list[str], nn: bool) -> None:
    """search (lexical, or hybrid with NN), prompt_context, relate and digest for alice: identical with and without bob."""
    alice, both = drawn
    mode = "hybrid" if nn else "lexical"
    ids = [a["id"] for a in alice]
    with tempfile.TemporaryDirectory() as tmp:
        with _opened(Path(tmp), "alone", alice, nn) as alone:
            expected = _answers(alone, queries, ids, mode)
        with _opened(Path(tmp), "shared", both, nn) as shared:
            assert _answers(shared, queries, ids, mode) == expected
            shared.reindex()
            assert _answers(shared, queries, ids, mode) == expected


def test_bob_making_alices_words_common_changes_nothing_for_alice(root: Path) -> None:
    """A word bob writes everywhere is common journal-wide, not in alice's entries: her query keeps it and its scores."""
    alice = [_payload("alice", f"alice-{i}", i, {"theme": "garden", "voice": ["harbor", "kelp"] if i == 0 else ["moth", WORDS[i]], "tags": []}, []) for i in range(8)]
    bob = [_payload("bob", f"bob-{i}", i, {"theme": "sea", "voice": ["harbor", "salt"], "tags": []}, []) for i in range(40)]
    with tempfile.TemporaryDirectory() as tmp:
        with _opened(Path(tmp), "alone", alice, False) as alone:
            expected = [(h.entry_id, h.score, h.snippet) for h in alone.search("harbor moth", agent="alice")]
        with _opened(Path(tmp), "shared", alice + bob, False) as shared:
            found = [(h.entry_id, h.score, h.snippet) for h in shared.search("harbor moth", agent="alice")]
            # Unscoped, "harbor" is common (in 41 of 48 entries) and left out of the query.
            assert "alice-0" not in [h.entry_id for h in shared.search("harbor moth", k=20)]
    assert found == expected
    assert found[0][0] == "alice-0"  # in alice's 8 entries "harbor" is rare: her one entry with it ranks first


# -- the per-agent tables stay equal to a fresh rebuild ---------------------------------------


def _index_dump(root: Path) -> Any:
    """The index's text tables, by entry id: every (term, entry, column, offset) of each agent's table, and the agents' counts."""
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn:
        ids = dict(conn.execute("SELECT rowid, id FROM entries"))
        agents = {}
        for agent_id, name, count in conn.execute("SELECT id, name, entries FROM agents WHERE entries > 0").fetchall():
            table = f"fts_agent_{agent_id}"
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
            conn.execute(f"CREATE VIRTUAL TABLE temp.vocab_{agent_id} USING fts5vocab(main, {table}, 'instance')")
            instances = sorted((term, ids[doc], col, offset) for term, doc, col, offset in conn.execute(f"SELECT * FROM temp.vocab_{agent_id}"))
            agents[name] = (count, instances)
            assert count == conn.execute("SELECT count(*) FROM entries WHERE agent = ?", (name,)).fetchone()[0]
        return agents


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=journals(), gone=st.sets(st.integers(0, 40)), queries=st.lists(words.map(" ".join), min_size=1, max_size=3))
def test_entries_dropped_when_their_files_go_leave_the_index_of_a_fresh_rebuild(
    drawn: tuple[list[dict[str, Any]], list[dict[str, Any]]], gone: set[int], queries: list[str],
) -> None:
    """Files removed behind the index's back are dropped from every agent's table on the next check: as if rebuilt."""
    # Appended in the order a rebuild inserts them (the instant, then the file name),
    # so that "the newest matches" of a common-words query are the same rows. The
    # instant, not the text: "…00.000215Z" sorts before "…00Z" as a string.
    both = sorted(drawn[1], key=_instant)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "journal"
        with _opened(Path(tmp), "journal", both, False) as journal:
            removed = {both[i]["id"] for i in gone if i < len(both)}
            for entry_id in removed:
                (root / "entries" / EntryStore.rel_path_for(journal.get(entry_id))).unlink()
        with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
            conn.execute("UPDATE state SET value = 'an-earlier-boot' WHERE key = 'boot_id'")  # the next open checks every file
        with Journal(root) as journal:
            reconciled = _index_dump(root)
            answers = [[(h.entry_id, h.score, h.snippet) for h in journal.search(q, agent=agent)] for q in queries for agent in ("alice", "bob")]
            journal.reindex()
            assert _index_dump(root) == reconciled
            assert [[(h.entry_id, h.score, h.snippet) for h in journal.search(q, agent=agent)] for q in queries for agent in ("alice", "bob")] == answers
        assert sorted(reconciled) == sorted({p["agent"] for p in both if p["id"] not in removed})


def test_an_index_of_the_schema_before_agent_tables_is_rebuilt_with_them(root: Path) -> None:
    """An index without the agents table (schema 3) is rebuilt on open: every agent gets its table, and scoped search ranks by it."""
    payloads = [_payload(agent, f"{agent}-{i}", i, {"theme": "sea", "voice": ["harbor", WORDS[i]], "tags": []}, []) for i in range(3) for agent in ("alice", "bob")]
    with _opened(root.parent, root.name, payloads, False) as journal:
        expected = [(h.entry_id, h.score) for h in journal.search("harbor light", agent="alice")]
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        for (agent_id,) in conn.execute("SELECT id FROM agents").fetchall():
            conn.execute(f"DROP TABLE fts_agent_{agent_id}")
        conn.execute("DROP TABLE agents")
        conn.execute("UPDATE state SET value = '3' WHERE key = 'schema_version'")
    with Journal(root) as journal:
        assert [(h.entry_id, h.score) for h in journal.search("harbor light", agent="alice")] == expected
    assert set(_index_dump(root)) == {"alice", "bob"}
