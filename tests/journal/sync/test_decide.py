"""Accepting and rejecting a supersede proposal: an ordinary entry, appended once per pair, that survives reindex."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import Journal
from journal.errors import InvalidEntryIdError, ProposalDecidedError, ProposalNotFoundError
from tests.journal._proposal_entries import AGAIN, NEW, OLD, add


def _files(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in (root / "entries").rglob("*.json")}


def test_accepting_appends_a_correction_that_supersedes_the_older_and_ranks_above_it(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z", mood="calm", signals={"focus": "studio"})
    correction = journal.accept_proposal(old.id, new.id)
    assert correction.supersedes == (old.id,) and correction.continuity_refs == (new.id,)
    assert (correction.agent, correction.voice, correction.tags, correction.mood) == ("motoko", NEW, ("studio",), "calm")
    assert correction.meta["proposal"] == {"decision": "accepted", "older": old.id, "newer": new.id}
    assert correction.origin == "operator"
    assert journal.proposals() == []  # decided: no longer pending, and the correction proposes nothing of its own
    hits = journal.search("Shibuya studio skylight", agent="motoko")
    ids = [hit.entry_id for hit in hits]
    assert ids.index(correction.id) < ids.index(old.id)
    assert next(hit for hit in hits if hit.entry_id == old.id).superseded_by == (correction.id,)
    assert not any(hit.outdated for hit in hits)


def test_accepting_twice_returns_the_same_correction_and_writes_nothing(journal: Journal, root: Path) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    first = journal.accept_proposal(old.id, new.id)
    files = _files(root)
    assert journal.accept_proposal(old.id, new.id, agent="motoko") == first
    assert _files(root) == files


def test_a_rejection_is_kept_so_the_pair_is_never_proposed_again_even_after_reindex(journal: Journal, root: Path) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    again = add(journal, AGAIN, "2026-05-01T09:00:00Z")
    note = journal.reject_proposal(old.id, new.id)
    assert note.meta["proposal"] == {"decision": "rejected", "older": old.id, "newer": new.id} and not note.supersedes
    pending = {(p.older, p.newer) for p in journal.proposals()}
    assert (old.id, new.id) not in pending and (new.id, again.id) in pending  # only the rejected pair is decided
    assert journal.reject_proposal(old.id, new.id) == note  # again: the same note
    journal.reindex()
    assert {(p.older, p.newer) for p in journal.proposals()} == pending
    # The note states no subject and proposes nothing; a search shows the older entry without a mark from the rejected one.
    marks = {hit.entry_id: hit.outdated_by for hit in journal.search("Shibuya studio", agent="motoko")}
    assert new.id not in marks.get(old.id, ())


def test_a_decision_stands_rejecting_an_accepted_one_or_accepting_a_rejected_one_writes_nothing(journal: Journal, root: Path) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    again = add(journal, AGAIN, "2026-05-01T09:00:00Z")
    correction = journal.accept_proposal(old.id, new.id)
    note = journal.reject_proposal(new.id, again.id)
    files = _files(root)
    with pytest.raises(ProposalDecidedError, match=f"already accepted by entry '{correction.id}'") as accepted:
        journal.reject_proposal(old.id, new.id)
    assert accepted.value.exit_code == 4
    with pytest.raises(ProposalDecidedError, match=f"already rejected by entry '{note.id}'"):
        journal.accept_proposal(new.id, again.id)
    assert _files(root) == files


def test_no_proposal_no_decision_missing_entries_other_agents_and_pairs_never_made(journal: Journal, root: Path) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    theirs = add(journal, NEW, "2026-04-21T09:00:00Z", agent="batou")
    files = _files(root)
    cases = [
        (new.id, old.id, {}),  # the wrong way round: never proposed
        (old.id, "0" * 26, {}),  # no such entry
        (old.id, theirs.id, {}),  # across agents: never proposed
        (old.id, new.id, {"agent": "batou"}),  # another agent's proposal reads as none
    ]
    for older, newer, scope in cases:
        with pytest.raises(ProposalNotFoundError, match="no pending proposal that entry") as missing:
            journal.accept_proposal(older, newer, **scope)
        assert missing.value.exit_code == 3
        with pytest.raises(ProposalNotFoundError):
            journal.reject_proposal(older, newer, **scope)
    with pytest.raises(InvalidEntryIdError):
        journal.accept_proposal("../x", new.id)
    assert _files(root) == files


def test_a_proposal_that_no_longer_exists_cannot_be_accepted(journal: Journal, root: Path) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    journal.erase([new.id], reason="written by mistake")
    with pytest.raises(ProposalNotFoundError):
        journal.accept_proposal(old.id, new.id)
    # Superseded by hand: the proposal is decided already, and accepting it adds nothing.
    other = add(journal, NEW, "2026-04-22T09:00:00Z")
    add(journal, AGAIN, "2026-05-01T09:00:00Z", signals={"supersedes": [old.id]})
    files = _files(root)
    with pytest.raises(ProposalNotFoundError):
        journal.accept_proposal(old.id, other.id)
    assert _files(root) == files


def test_erasing_a_rejection_makes_the_pair_pending_again(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    note = journal.reject_proposal(old.id, new.id)
    assert journal.proposals() == []
    journal.erase([note.id], reason="decided too soon")
    assert [(p.older, p.newer) for p in journal.proposals()] == [(old.id, new.id)]


def test_a_correction_copying_an_entry_later_superseded_ranks_below_what_supersedes_that_entry(journal: Journal) -> None:
    """Accepting v1 -> v2, then v2 -> v3: the copy of v2 the first acceptance appended is outdated by v3's correction too."""
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    first = journal.accept_proposal(old.id, new.id)
    again = add(journal, AGAIN, "2026-05-01T09:00:00Z")
    second = journal.accept_proposal(new.id, again.id)
    for reindexed in (False, True):
        if reindexed:
            journal.reindex()
        hits = journal.search("Shibuya studio skylight", agent="motoko")
        assert hits[0].entry_id == second.id  # the newest version's text, not the copy of the one it replaced
        assert next(hit for hit in hits if hit.entry_id == first.id).superseded_by == (second.id,)
        current = {hit.entry_id for hit in journal.search("studio", agent="motoko", current_only=True)}
        assert first.id not in current and old.id not in current and new.id not in current
        assert second.id in current
