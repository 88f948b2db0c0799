"""The mark of a pending supersede proposal on reads: search and MCP hits, and the prompt context, which never drops or moves the older entry."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_mcp_lists_accepts_and_rejects_an_agents_own_proposals_and_no_one_elses(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    from tests.journal._mcp import mcp_server

    root = tmp_path / "journal"
    with Journal(root) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        new = add(journal, NEW, "2026-04-20T09:00:00Z")
        add(journal, OLD, "2026-01-11T09:00:00Z", agent="batou")
        theirs = add(journal, NEW, "2026-04-21T09:00:00Z", agent="batou")
    with mcp_server(root, "--agent", "batou") as batou:
        (mine,) = batou.ok("journal_proposals")["proposals"]
        assert (mine["agent"], mine["newer"]) == ("batou", theirs.id)
        # motoko's proposal reads as none
        assert "no pending proposal that entry" in batou.error("journal_accept_proposal", older=old.id, newer=new.id)
        rejected = batou.ok("journal_reject_proposal", older=mine["older"], newer=theirs.id)
        assert rejected["decision"] == "rejected" and rejected["entry"]["agent"] == "batou"
    with mcp_server(root, "--agent", "motoko") as motoko:
        (listed,) = motoko.ok("journal_proposals")["proposals"]
        assert (listed["older"], listed["newer"]) == (old.id, new.id)
        accepted = motoko.ok("journal_accept_proposal", older=old.id, newer=new.id)
        assert accepted["entry"]["signals"]["supersedes"] == [old.id] and accepted["entry"]["meta"]["origin"] == "tool"
        assert motoko.ok("journal_accept_proposal", older=old.id, newer=new.id)["entry"] == accepted["entry"]
        assert "already accepted" in motoko.error("journal_reject_proposal", older=old.id, newer=new.id)
        assert motoko.ok("journal_proposals")["proposals"] == []
    with mcp_server(root, "--agent", "motoko", "--read-only") as reader:
        assert {tool.name for tool in reader.tools()} >= {"journal_proposals"}
        with pytest.raises(MCPError, match="read-only"):
            reader.call("journal_accept_proposal", {"older": old.id, "newer": new.id})
    with Journal(root) as journal:
        assert journal.proposals() == []


def _pending_read_steps(journal: Journal, ids: list[str]) -> int:
    """How many SQLite virtual machine steps the read of *ids*' pending proposals takes: its work, counted rather than timed."""
    conn = journal._keeper.index.conn
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        journal._keeper.index.pending_proposals(ids)
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def test_the_marks_read_does_not_grow_with_the_agents_other_entries(journal: Journal) -> None:
    # Every search and prompt context reads the marks of its hits: walking the agent's entries for each
    # proposal made that read cost milliseconds in a journal of thousands.
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    assert [p.newer for p in journal._keeper.index.pending_proposals([old.id])[old.id]] == [new.id]
    alone = _pending_read_steps(journal, [old.id])
    # Older than both and on another subject, so none of them proposes anything against the older entry (on the studio,
    # they would make it a subject nearly every entry up to the newer one carries, which pairs nothing).
    for n in range(120):
        add(journal, f"Entry {n} on the tram timetable, platform {n % 7}.", f"2025-02-01T{n // 60:02d}:{n % 60:02d}:00Z", theme="tram", tags=("tram",))
    assert [p.newer for p in journal._keeper.index.pending_proposals([old.id])[old.id]] == [new.id]
    assert _pending_read_steps(journal, [old.id]) <= alone + 20
