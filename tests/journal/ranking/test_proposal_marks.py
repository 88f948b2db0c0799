"""The mark of a pending supersede proposal on reads: search and MCP hits, and the prompt context, which never drops or moves the older entry."""

from __future__ import annotations

from pathlib import Path

from journal import Journal
from tests.journal._proposal_entries import NEW, OLD, OTHER, add


def test_search_hits_carry_the_mark_and_keep_their_order(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    hits = journal.search("ramen shop skylight", k=5, agent="motoko")
    assert hits[0].entry_id == old.id
    (marked,) = [hit for hit in hits if hit.entry_id == old.id]
    short = journal.short_ids([new.id], agent="motoko")[new.id]
    assert marked.outdated == f"possibly outdated by {short} (2026-04-20)"
    assert marked.outdated_by == (new.id,)
    assert marked.to_dict()["possibly_outdated"] == marked.outdated
    assert marked.to_dict()["possibly_outdated_by"] == [new.id]
    assert all(not hit.outdated for hit in hits if hit.entry_id != old.id)
    # Read as of a time before the newer entry, nothing marks the older one.
    assert not journal.search("ramen shop skylight", k=5, agent="motoko", as_of="2026-03-01T00:00:00Z")[0].outdated


def test_prompt_context_marks_the_older_entry_and_brings_in_the_newer(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    for day in range(11, 18):  # recent fill on other subjects, so the newer one is found only through the mark
        add(journal, OTHER + f" Day {day}.", f"2026-02-{day}T09:00:00Z", theme="harbor", tags=("harbor",))
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    context = journal.context("ramen shop skylight", k=1, agent="motoko")
    by_id = {record.id: record for record in context.records}
    assert by_id[old.id].found_by == "match"
    assert by_id[old.id].outdated.startswith("possibly outdated by ") and by_id[old.id].outdated.endswith("(2026-04-20)")
    assert by_id[new.id].found_by == "newer" and not by_id[new.id].outdated
    assert [r.id for r in context.records] == [old.id, new.id]  # oldest first, as always
    assert f'"possibly_outdated":"{by_id[old.id].outdated}"' in context.text


def test_a_tight_prompt_context_keeps_the_older_entry_and_leaves_the_newer_out(journal: Journal) -> None:
    old = add(journal, OLD * 3, "2026-01-10T09:00:00Z")
    add(journal, NEW * 3, "2026-04-20T09:00:00Z")
    context = journal.context("ramen shop skylight", k=1, agent="motoko", max_chars=800)
    assert [record.id for record in context.records] == [old.id]
    assert context.records[0].outdated


def test_mcp_search_hits_carry_the_mark(tmp_path: Path) -> None:
    from tests.journal._mcp import mcp_server

    root = tmp_path / "journal"
    with Journal(root) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        new = add(journal, NEW, "2026-04-20T09:00:00Z")
    with mcp_server(root, "--agent", "motoko") as server:
        hits = server.ok("journal_search", query="ramen shop skylight")["hits"]
    (marked,) = [hit for hit in hits if hit["entry_id"] == old.id]
    assert marked["possibly_outdated_by"] == [new.id]
    assert marked["possibly_outdated"].endswith("(2026-04-20)")
