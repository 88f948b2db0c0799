"""The Journal API: append, idempotency, reads, scoping, relate, digest."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from journal import DuplicateEntryError, EntryNotFoundError, Journal, JournalNotFoundError, SemanticUnavailableError
from journal.encoding import resolve_model
from tests._support import entry_files, place_entries
from tests.journal._wheels import altered_copy

Payload = Callable[..., dict[str, Any]]
T0 = datetime(2026, 9, 1, 8, 0, tzinfo=UTC)


def _at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_layout_and_manifest(root: Path) -> None:
    """A new root gets the SPEC layout and a manifest whose bytes are never rewritten."""
    Journal(root).close()
    assert {p.name for p in root.iterdir()} == {"manifest.json", "entries", "index", "models", ".write.lock"}
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["format"] == "ghostjournal" and manifest["format_version"] == 1
    assert len(manifest["journal_id"]) == 36
    before = (root / "manifest.json").read_bytes()
    with Journal(root) as again:
        again.append({"kind": "note", "agent": "a", "theme": "t", "voice": "v"})
        assert again.manifest.journal_id == manifest["journal_id"]
    assert (root / "manifest.json").read_bytes() == before
    assert (root / "index" / "journal.sqlite3").is_file()


def test_missing_root_is_refused_without_create(tmp_path: Path) -> None:
    """Opening a missing journal with create=False names the root and how to create it."""
    with pytest.raises(JournalNotFoundError, match=r"ghostjournal --root .* init"):
        Journal(tmp_path / "absent", create=False)
    assert not (tmp_path / "absent").exists()


def test_nn_request_without_the_extra_names_the_install_command(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for semantic search when the extra's libraries cannot be imported names the extra that brings them.

    The default model needs tokenizers (the NumPy encoder, the nn extra), a model named by its directory
    sentence-transformers (the st extra, after torch's CPU build).
    """
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(SemanticUnavailableError, match=r"the model's libraries cannot be imported.*pip install 'ghostjournal\[nn\]'"):
        Journal(root, enable_nn=True)
    with pytest.raises(SemanticUnavailableError, match=r"sentence-transformers cannot be imported.*download.pytorch.org/whl/cpu.*pip install 'ghostjournal\[st\]'"):
        Journal(root, enable_nn=True, model=altered_copy(resolve_model(), tmp_path / "other-model"))  # another model's directory


@pytest.mark.parametrize(
    ("ts", "day"),
    [("2026-09-05T01:30:00+03:00", "2026/09/04"), ("2026-09-04T23:59:59.999999Z", "2026/09/04"), ("2026-12-31T22:00:00-03:00", "2027/01/01")],
)
def test_append_stores_canonical_file_at_its_date(journal: Journal, make_payload: Payload, ts: str, day: str) -> None:
    """The entry file sits at entries/YYYY/MM/DD/<id>.json by its UTC date and holds canonical JSON."""
    entry = journal.append(make_payload(ts=ts))
    path = journal.root / "entries" / day / f"{entry.id}.json"
    # replace() makes an equal entry that serializes afresh, not from what validation measured
    assert path.read_bytes() == dataclasses.replace(entry).to_json_bytes() == entry.to_json_bytes()
    assert journal.get(entry.id) == entry
    assert entry.timestamp.tzinfo is not None


def test_client_key_returns_first_entry_unchanged(journal: Journal, make_payload: Payload) -> None:
    """A repeated client_key returns the first entry; the second payload is ignored."""
    first = journal.append_with_result(make_payload(client_key="motoko:pulse-4h:2026-09-05T16", voice="first"))
    again = journal.append_with_result(make_payload(client_key="motoko:pulse-4h:2026-09-05T16", voice="second"))
    assert not first.is_duplicate and again.is_duplicate
    assert again.entry == first.entry and again.entry.voice == "first"
    assert len(entry_files(journal.root)) == 1


def test_find_by_client_key(journal: Journal, make_payload: Payload) -> None:
    """An entry is found by its client_key; an unknown key gives None."""
    stored = journal.append(make_payload(client_key="motoko:evening:2026-09-05"))
    assert journal.find_by_client_key("motoko:evening:2026-09-05") == stored
    assert journal.find_by_client_key("motoko:evening:2026-09-06") is None


def test_duplicate_supplied_id_is_refused(journal: Journal, make_payload: Payload) -> None:
    """A supplied id that exists (even on another day) is refused."""
    journal.append(make_payload(id="fixed-1", ts=_at(0)))
    with pytest.raises(DuplicateEntryError, match="'fixed-1' already exists"):
        journal.append(make_payload(id="fixed-1", ts=_at(72)))
    assert len(entry_files(journal.root)) == 1


@pytest.mark.parametrize("index_state", ["deleted", "older-copy"])
def test_idempotency_survives_a_stale_or_missing_index(root: Path, make_payload: Payload, index_state: str, tmp_path: Path) -> None:
    """The files decide: with index/ deleted or an older copy restored, keys and ids still dedupe."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="k0", voice="zero"))
        shutil.copytree(root / "index", tmp_path / "old-index")
        kept = journal.append(make_payload(client_key="k1", id="known-id", voice="one"))
    shutil.rmtree(root / "index")
    if index_state == "older-copy":
        shutil.copytree(tmp_path / "old-index", root / "index")
    with Journal(root) as journal:
        again = journal.append_with_result(make_payload(client_key="k1", voice="retry"))
        assert again.is_duplicate and again.entry == kept
        with pytest.raises(DuplicateEntryError):
            journal.append(make_payload(id="known-id"))
        assert sorted(e.client_key for e in journal.list()) == ["k0", "k1"]
    assert len(entry_files(root)) == 2


def test_stale_index_is_caught_up_without_opening_anew(root: Path, make_payload: Payload, tmp_path: Path) -> None:
    """An older index restored under a running journal is repaired at the next append."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="k0"))
        shutil.copy(root / "index" / "journal.sqlite3", tmp_path / "old.sqlite3")
        journal.append(make_payload(client_key="k1"))
    with Journal(root) as journal:
        journal._keeper.index.close()
        for suffix in ("-wal", "-shm"):
            (root / "index" / f"journal.sqlite3{suffix}").unlink(missing_ok=True)
        shutil.copy(tmp_path / "old.sqlite3", root / "index" / "journal.sqlite3")
        assert journal.append_with_result(make_payload(client_key="k1")).is_duplicate
        assert len(journal.list()) == 2


def test_list_filters_and_orders_newest_first(journal: Journal, make_payload: Payload) -> None:
    """list() filters by kind, agent and a [since, until) window, newest first, with a limit."""
    for hour, kind, agent in [(0, "pulse", "motoko"), (1, "evening", "motoko"), (2, "pulse", "batou"), (3, "pulse", "motoko")]:
        journal.append(make_payload(ts=_at(hour), kind=kind, agent=agent, voice=f"hour {hour}"))
    assert [e.voice for e in journal.list()] == ["hour 3", "hour 2", "hour 1", "hour 0"]
    assert [e.voice for e in journal.list(kind="pulse", agent="motoko")] == ["hour 3", "hour 0"]
    assert [e.voice for e in journal.list(since=_at(1), until=_at(3))] == ["hour 2", "hour 1"]
    assert [e.voice for e in journal.list(since=T0 + timedelta(hours=1), limit=1)] == ["hour 3"]
    with pytest.raises(ValueError, match="since must be"):
        journal.list(since="2026-09-01T00:00:00")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        journal.list(limit=0)


def test_get_unknown_id(journal: Journal) -> None:
    """An unknown id raises EntryNotFoundError quoting it."""
    with pytest.raises(EntryNotFoundError, match="no entry with id 'nope'"):
        journal.get("nope")


def test_search_ranks_stems_and_snippets(journal: Journal, make_payload: Payload) -> None:
    """Porter stemming matches word forms; the best match ranks first with a snippet and its entry."""
    journal.append(make_payload(theme="cooking", tags=["food"], voice="Simmered a broth of kelp all afternoon."))
    lit = journal.append(make_payload(theme="lighting", tags=["film"], voice="Relit the set: lights lighting the lit alley."))
    journal.append(make_payload(theme="walk", tags=[], voice="A long walk past the lighthouse."))
    hits = journal.search("light the scene", k=5)
    assert hits[0].entry_id == lit.id and hits[0].entry == lit
    assert hits[0].score >= hits[-1].score
    assert "light" in hits[0].snippet.lower()
    assert all(h.to_dict()["entry"]["id"] == h.entry_id for h in hits)


def test_every_read_is_scoped_by_agent(journal: Journal, make_payload: Payload) -> None:
    """With agent= given, no read returns another agent's entries, nor one linking to hers (placed by hand: append refuses the link)."""
    mine = journal.append(make_payload(agent="motoko", voice="secret harbor plans", ts=_at(0)))
    place_entries(journal, [make_payload(agent="batou", voice="secret harbor plans of batou", ts=_at(1), signals={"continuity_refs": [mine.id]})])
    assert {h.entry.agent for h in journal.search("secret harbor", agent="motoko")} == {"motoko"}
    assert {e.agent for e in journal.list(agent="motoko")} == {"motoko"}
    assert {h.entry.agent for h in journal.relate(mine.id, agent="motoko")} <= {"motoko"}
    assert "batou" not in journal.prompt_context("secret harbor", agent="motoko")
    assert journal.digest(agent="motoko").count == 1


def test_relate_follows_links_both_ways_then_similarity(journal: Journal, make_payload: Payload) -> None:
    """relate() lists what an entry continues, what continues it, then lexically similar entries."""
    base = journal.append(make_payload(ts=_at(0), theme="tide tables", voice="Studied tide tables and moon phases."))
    older = journal.append(make_payload(ts=_at(-5), theme="kitchen", voice="Bread and salt."))
    middle = journal.append(make_payload(ts=_at(1), theme="kitchen", voice="Soup again.", signals={"continuity_refs": [base.id]}))
    similar = journal.append(make_payload(ts=_at(2), theme="tide", voice="The tide tables were wrong about the moon."))
    journal.append(make_payload(ts=_at(3), theme="unrelated", voice="Nothing to do with anything."))
    moved = journal.append(make_payload(ts=_at(4), theme="x", voice="Later.", signals={"continuity_refs": [older.id]}))
    hits = journal.relate(base.id, k=3)
    assert [(h.entry_id, h.reason) for h in hits][:2] == [(middle.id, "continued_by"), (similar.id, "similar")]
    assert base.id not in {h.entry_id for h in hits}
    assert [(h.entry_id, h.reason) for h in journal.relate(moved.id, k=1)] == [(older.id, "continues")]


def test_digest_counts_themes_moods_novelty_and_chains(journal: Journal, make_payload: Payload) -> None:
    """digest() counts themes, tags, focus and moods, reads the novelty trend and finds continuity chains."""
    previous: str | None = None
    ids = []
    for i in range(6):
        signals: dict[str, Any] = {"novelty": 0.1 if i < 3 else 0.9, "focus": "light" if i % 2 else "sound"}
        if previous:
            signals["continuity_refs"] = [previous]
        entry = journal.append(make_payload(ts=_at(i), theme="light" if i < 4 else "sound", mood="calm", tags=["a"], signals=signals))
        previous = entry.id
        ids.append(entry.id)
    digest = journal.digest(agent="motoko", since=_at(0), until=_at(6)).to_dict()
    assert digest["count"] == 6
    assert digest["themes"] == [{"theme": "light", "count": 4}, {"theme": "sound", "count": 2}]
    assert digest["tags"] == [{"tag": "a", "count": 6}]
    assert digest["moods"] == [{"mood": "calm", "count": 6}]
    assert {f["focus"] for f in digest["focus"]} == {"light", "sound"}
    assert digest["novelty"]["trend"] == "rising"
    assert digest["continuity"]["longest_chains"] == [ids]
    assert digest["continuity"]["links"] == 5
    empty = journal.digest(agent="nobody").to_dict()
    assert empty["count"] == 0 and empty["novelty"]["trend"] is None


@pytest.mark.parametrize("older_id", ["a0000000", "f0000000"])
def test_a_digests_ties_go_to_the_older_parent_and_the_newer_cited_entry_whatever_their_ids(
    journal: Journal, make_payload: Payload, older_id: str
) -> None:
    """Ids are random: a digest's chains and most cited entries broke ties by id, so two journals of the same appends had digests (and
    digest entries' refs) that differed. A chain's parent is the older of two equally deep; of entries cited alike the newer comes first."""
    newer_id = "f0000000" if older_id == "a0000000" else "a0000000"
    older = journal.append({**make_payload(ts=_at(0), voice="The first."), "id": older_id})
    newer = journal.append({**make_payload(ts=_at(1), voice="The second."), "id": newer_id})
    journal.append(make_payload(ts=_at(2), voice="Both.", signals={"continuity_refs": [newer.id, older.id]}))
    continuity = journal.digest(agent="motoko", since=_at(0), until=_at(3)).to_dict()["continuity"]
    assert [item["entry_id"] for item in continuity["most_referenced"]] == [newer.id, older.id]
    assert continuity["longest_chains"][0][0] == older.id


def test_search_quality_prefers_theme_and_tags(journal: Journal, make_payload: Payload) -> None:
    """A query word in an entry's theme or tags outranks the same word once in long prose."""
    prose = journal.append(make_payload(theme="errands", tags=[], voice="Went out for groceries, saw a camera shop, bought milk and bread and eggs."))
    themed = journal.append(make_payload(theme="camera", tags=["camera"], voice="Notes on lenses."))
    assert [h.entry_id for h in journal.search("camera")] == [themed.id, prose.id]


def _drop_row_behind_the_counter(root: Path, entry_id: str, boot_id: str | None) -> None:
    """Make the index lose one entry while its generation still matches, as a power loss could."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        rowid = conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
        conn.execute("DELETE FROM fts WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))
        if boot_id is not None:
            conn.execute("UPDATE state SET value = ? WHERE key = 'boot_id'", (boot_id,))


def test_first_open_after_a_reboot_checks_every_file(root: Path, make_payload: Payload) -> None:
    """An index last checked during another boot is reconciled with the files once, on open."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="k0"))
        lost = journal.append(make_payload(client_key="k1"))
    _drop_row_behind_the_counter(root, lost.id, boot_id="an-earlier-boot")
    with Journal(root) as journal:
        assert journal.append_with_result(make_payload(client_key="k1")).is_duplicate
        assert len(journal.list()) == 2


def test_same_boot_open_does_not_list_the_files(root: Path, make_payload: Payload) -> None:
    """Within one boot a matching generation is trusted: opening costs no walk of entries/."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="k0"))
        hidden = journal.append(make_payload(client_key="k1"))
    _drop_row_behind_the_counter(root, hidden.id, boot_id=None)
    with Journal(root) as journal:
        assert [e.client_key for e in journal.list()] == ["k0"]


def test_words_common_in_a_large_journal_give_way_to_rarer_ones(journal: Journal, make_payload: Payload, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a big journal a word found in most entries does not pick candidates; alone, it ranks only the newest matches."""
    import journal.indexing._fts as fts_module

    monkeypatch.setattr(fts_module, "COMMON_WORDS", fts_module.CommonWords(min_docs=10, candidates=5))
    for i in range(30):
        journal.append(make_payload(ts=_at(i), voice=f"harbor watch number {i}" + (" harbor harbor harbor" if i == 3 else ""), theme="watch", tags=[]))
    rare = journal.append(make_payload(ts=_at(40), voice="a zeppelin over the water", theme="sky", tags=[]))
    assert [h.entry_id for h in journal.search("harbor zeppelin")] == [rare.id]
    newest = journal.search("harbor", k=10)
    assert {h.entry.voice for h in newest} == {f"harbor watch number {i}" for i in range(25, 30)}
    assert len(journal.search("harbor watch", k=10)) == 5
    monkeypatch.setattr(fts_module, "COMMON_WORDS", fts_module.CommonWords(min_docs=10_000))
    assert journal.search("harbor", k=1)[0].entry.voice.endswith("harbor harbor harbor")


def test_options_after_the_first_argument_are_keyword_only(root: Path) -> None:
    """Journal(...), search, list and digest take their options by name only, so a positional slip cannot pick the wrong one."""
    with pytest.raises(TypeError):
        Journal(root, True)  # type: ignore[misc]
    with Journal(root) as journal:
        for call in (lambda: journal.search("x", 3), lambda: journal.list("note", "motoko"), lambda: journal.digest("motoko", "2026-01-01T00:00:00Z")):
            with pytest.raises(TypeError, match="positional argument"):
                call()
