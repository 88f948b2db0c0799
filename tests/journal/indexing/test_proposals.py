"""Supersede proposals: made at append between an agent's entries on one subject, derived state that reindex rebuilds."""

from __future__ import annotations

import json
import subprocess
import unicodedata
from pathlib import Path

import pytest

from journal import Journal
from journal.encoding import Encoder
from journal.indexing import (
    AUTO_ACCEPT_CHANGE_THRESHOLD,
    AUTO_ACCEPT_COSINE,
    AUTO_ACCEPT_THRESHOLD,
    COMMON_WINDOW,
    MEANING_THRESHOLD,
    PROPOSAL_THRESHOLD,
)
from journal.indexing._proposals import asks, similarity, states_change, stems, subjects, words
from tests._support import place_entries
from tests.journal._proposal_entries import AGAIN, NEW, OLD, OTHER, add, conversation


def _pairs(journal: Journal, agent: str | None = None) -> list[tuple[str, str]]:
    return [(p.older, p.newer) for p in journal.proposals(agent)]


def test_an_update_on_the_same_subject_is_proposed_with_its_evidence(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z", theme="the move", tags=("studio", "kamakura"))
    (proposal,) = journal.proposals()
    assert (proposal.older, proposal.newer, proposal.agent) == (old.id, new.id, "motoko")
    assert proposal.subject == "tag:studio"
    assert PROPOSAL_THRESHOLD <= proposal.score <= 1
    assert proposal.to_dict()["subject"] == "tag:studio"


def test_no_proposal_without_a_shared_subject_across_agents_or_between_unlike_words(journal: Journal) -> None:
    add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, NEW, "2026-04-20T09:00:00Z", theme="boats", tags=("kamakura",))  # alike words, no shared subject
    add(journal, NEW, "2026-04-20T10:00:00Z", tags=("kamakura",))  # alike words, the same theme only: a theme is no subject
    add(journal, NEW, "2026-04-21T09:00:00Z", agent="batou")  # same subject, another agent
    add(journal, OTHER, "2026-04-22T09:00:00Z")  # same subject, unlike words
    assert journal.proposals() == []


def test_an_entry_that_already_supersedes_is_no_proposal(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, NEW, "2026-04-20T09:00:00Z", signals={"supersedes": [old.id]})
    assert journal.proposals() == []


def test_an_explicit_correction_later_ends_the_proposal(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    assert _pairs(journal) == [(old.id, new.id)]
    add(journal, "Correcting the record.", "2026-04-21T09:00:00Z", theme="correction", tags=("records",), signals={"supersedes": [old.id]})
    assert journal.proposals() == []


def test_proposals_are_scoped_by_agent(journal: Journal) -> None:
    m_old = add(journal, OLD, "2026-01-10T09:00:00Z")
    m_new = add(journal, NEW, "2026-04-20T09:00:00Z")
    b_old = add(journal, OLD, "2026-01-11T09:00:00Z", agent="batou")
    b_new = add(journal, NEW, "2026-04-21T09:00:00Z", agent="batou")
    assert _pairs(journal, "motoko") == [(m_old.id, m_new.id)]
    assert _pairs(journal, "batou") == [(b_old.id, b_new.id)]
    assert _pairs(journal, "nobody") == []
    assert len(journal.proposals()) == 2


def test_an_older_entry_appended_later_is_still_the_older_one(journal: Journal) -> None:
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    old = add(journal, OLD, "2026-01-10T09:00:00Z")  # backfilled: written second, dated first
    assert _pairs(journal) == [(old.id, new.id)]


def test_reindex_rebuilds_the_same_proposals_and_no_entry_file_changes(journal: Journal, root: Path) -> None:
    entries = [
        add(journal, OLD, "2026-01-10T09:00:00Z"),
        add(journal, NEW, "2026-04-20T09:00:00Z"),
        add(journal, AGAIN, "2026-05-01T09:00:00Z"),
        add(journal, OTHER, "2026-05-02T09:00:00Z", theme="harbor", tags=("harbor",)),
    ]
    files = {p: p.read_bytes() for p in (root / "entries").rglob("*.json")}
    before = journal.proposals()
    assert len(before) == 3  # each later studio entry against each earlier one
    assert journal.reindex() == len(entries)
    assert journal.proposals() == before
    assert {p: p.read_bytes() for p in (root / "entries").rglob("*.json")} == files


def test_an_index_of_the_previous_layout_is_rebuilt_with_proposals(root: Path) -> None:
    with Journal(root) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        new = add(journal, NEW, "2026-04-20T09:00:00Z")
    import sqlite3

    conn = sqlite3.connect(root / "index" / "journal.sqlite3")
    with conn:
        conn.execute("DROP TABLE proposals")
        conn.execute("UPDATE state SET value = '10' WHERE key = 'schema_version'")
    conn.close()
    with Journal(root) as journal:
        assert _pairs(journal) == [(old.id, new.id)]


def test_erasing_either_entry_ends_its_proposals(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, NEW, "2026-04-20T09:00:00Z")
    journal.erase([old.id], reason="test")
    assert journal.proposals() == []


def test_the_cli_lists_proposals_as_a_table_and_as_json(root: Path) -> None:
    with Journal(root) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        new = add(journal, NEW, "2026-04-20T09:00:00Z")
        add(journal, OLD, "2026-01-11T09:00:00Z", agent="batou")
        add(journal, NEW, "2026-04-21T09:00:00Z", agent="batou")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ghostjournal", "--root", str(root), *args], capture_output=True, text=True, check=False, timeout=120)

    listed = run("proposals", "--agent", "motoko", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(p["older"], p["newer"]) for p in json.loads(listed.stdout)] == [(old.id, new.id)]
    table = run("proposals", "--text")
    assert table.returncode == 0, table.stderr
    assert old.id[:8] in table.stdout and new.id[:8] in table.stdout and "batou" in table.stdout
    assert run("proposals", "--agent", "nobody", "--text").stdout.strip() == "no pending proposals"


def test_reindex_pairs_entries_in_order_of_time_whatever_order_their_files_are_read(journal: Journal) -> None:
    # Alike entries on one day: a rebuild reads a day's files by id, not by time, and still makes what the appends made.
    for hour in range(1, 10):  # appended in order of time, ids in no order; each says something the others do not
        add(journal, NEW + " " + " ".join(f"h{hour}w{n}" for n in range(15)), f"2026-04-20T0{hour}:00:00Z")
    before = sorted(journal.proposals(), key=lambda p: (p.older, p.newer))
    assert before
    journal.reindex()
    assert sorted(journal.proposals(), key=lambda p: (p.older, p.newer)) == before


def test_a_tag_nearly_every_entry_of_an_agent_carries_is_no_shared_subject(journal: Journal) -> None:
    # A conversation stored turn by turn, each turn tagged with its speaker: alike turns of one speaker are no update of
    # one another. Until the agent has written half a window, a tag on every turn is not told from a first subject.
    turns = conversation(60, studio_at=(40, 48, 56))
    journal.append_many(turns)
    ids = [str(turn["id"]) for turn in turns]
    by_speaker = [(p.older, p.newer) for p in journal.proposals() if p.subject != "tag:studio"]
    assert by_speaker and all(ids.index(newer) < COMMON_WINDOW // 2 - 1 for _, newer in by_speaker)
    # A tag few entries carry still pairs entries that also share the speaker's.
    studio = [(p.older, p.newer, p.subject) for p in journal.proposals() if p.subject == "tag:studio"]
    assert studio == [(ids[40], ids[48], "tag:studio"), (ids[40], ids[56], "tag:studio"), (ids[48], ids[56], "tag:studio")]


def test_reindex_and_a_group_make_what_appends_make_where_a_subject_is_common(root: Path) -> None:
    turns = conversation(60, studio_at=(10, 40, 56))
    with Journal(root) as journal:
        for turn in turns:
            journal.append(turn)
        appended = sorted(_pairs(journal))
        assert len(appended) > 3  # the rule holds some pairs back and lets others through
        journal.reindex()
        assert sorted(_pairs(journal)) == appended
    with Journal(root.parent / "grouped") as grouped:
        grouped.append_many(turns)
        assert sorted(_pairs(grouped)) == appended


def test_a_question_updates_nothing_but_may_be_outdated_itself(journal: Journal) -> None:
    # Alike in words and saying something new, but asking: no value is stated, so nothing is replaced.
    add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, "Should I move the studio out of Shibuya, to a boat garage in Kamakura by the beach?", "2026-03-01T09:00:00Z")
    question = add(journal, 'Jun said, "Is the studio in Shibuya still leaking from the skylight when it storms?"', "2026-03-02T09:00:00Z")
    assert journal.proposals() == []
    new = add(journal, NEW, "2026-04-20T09:00:00Z")
    assert _pairs(journal) == [(question.id, new.id)]
    journal.reindex()
    assert _pairs(journal) == [(question.id, new.id)]


_ASKING = "Is the studio in Shibuya still leaking from the skylight when it storms"


@pytest.mark.parametrize(
    "ending",
    [
        "\uff1f",  # a full-width question mark
        "?!",
        "?\u2026",  # and an ellipsis
        "?...",
        "\u2048",  # one mark for "?!"
        "? \U0001f914",  # a trailing emoji
        "? \U0001f937\U0001f3fd\u200d\u2640\ufe0f",  # one with a skin tone, a joiner and a variation selector
        "?\u300d",  # a closing corner bracket
        "?\u201d)",  # a closing quote and bracket
        "?\u200b",  # a zero-width space
        "?\u00a0\n\t",  # spaces of other kinds
        "\u061f",  # Arabic's question mark
        "?**",  # markdown's emphasis
    ],
)
def test_a_question_asks_whatever_form_its_mark_takes_and_whatever_follows_it(journal: Journal, ending: str) -> None:
    assert asks(_ASKING + ending)
    add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, "Should I move the studio out of Shibuya, to a boat garage in Kamakura by the beach" + ending, "2026-03-01T09:00:00Z")
    assert journal.proposals() == []


@pytest.mark.parametrize(
    "text",
    [
        _ASKING + "? No: it moved to Kamakura.",
        "Moved the studio to Kamakura \U0001f389",
        "Moved the studio to Kamakura!",
        "Moved the studio to Kamakura (for good)",
        "Kept the keycap 1\ufe0f\u20e3",
        "",
    ],
)
def test_a_statement_ending_in_other_marks_asks_nothing(text: str) -> None:
    assert not asks(text)


def test_words_and_subjects_are_one_however_unicode_writes_them() -> None:
    """Compatibility forms, case and Latin diacritics are folded as search's tokenizer folds diacritics: one word, one subject."""
    nfd = unicodedata.normalize("NFD", "caf\u00e9")
    assert words("\u0130stanbul CAF\u00c9 \uff46\uff55\uff4c\uff4c \ufb01le Stra\u00dfe") == words(f"istanbul {nfd} full file strasse")
    assert subjects(["Caf\u00e9", "\u0130stanbul"], "\uff2b\uff41\uff4d\uff41\uff4b\uff55\uff52\uff41") == subjects(
        [nfd, "istanbul"], "kamakura"
    )
    assert words("\u65e5\u672c\u8a9e\u306e\u6587") == {"\u65e5\u672c\u8a9e\u306e\u6587"}  # no diacritic to drop, nothing else lost


@pytest.mark.parametrize("text", ["The studio is \uff2e\uff4f\uff57 in Kamakura", "Rented in Zushi in\ufb06ead", "MOVED to Zushi"])
def test_a_change_is_told_in_whatever_unicode_form_its_words_take(text: str) -> None:
    """Auto-accept's reading of "something changed" folds letters as pairing does: full-width, compatibility and case forms."""
    assert states_change(text)


def test_an_update_written_in_another_unicode_form_is_proposed(journal: Journal) -> None:
    """A tag and words composed one way by one writer and another way by the next are the same subject and words."""
    nfd = unicodedata.normalize("NFD", "Caf\u00e9")
    old = add(journal, "Caf\u00e9 Roux on \u0130stiklal opens at nine; the espresso is three lira.", "2026-01-10T09:00:00Z",
              theme="caf\u00e9", tags=("Caf\u00e9",))
    new = add(journal, f"{nfd} Roux on istiklal moved: it opens at ten now, espresso costs five lira, and the terrace shut for winter repairs.",
              "2026-04-20T09:00:00Z", theme="caf\u00e9", tags=(nfd.casefold(),))
    assert _pairs(journal) == [(old.id, new.id)]


def test_a_shared_focus_is_a_subject(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z", tags=(), signals={"focus": "Studio"})
    new = add(journal, NEW, "2026-04-20T09:00:00Z", tags=("kamakura",), signals={"focus": "studio"})
    (proposal,) = journal.proposals()
    assert (proposal.older, proposal.newer, proposal.subject) == (old.id, new.id, "focus:studio")


def test_a_restatement_is_no_proposal(journal: Journal) -> None:
    # The same value said again, in passing: nearly every word of the newer entry is the older one's.
    add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, "Above the ramen shop again: the Shibuya studio skylight leaks, third floor.", "2026-02-10T09:00:00Z")
    assert journal.proposals() == []


def test_an_entry_continuing_another_along_a_chain_is_no_proposal(journal: Journal) -> None:
    # A conversation going on: each turn continues the one before; however alike, no turn replaces an earlier one.
    first = add(journal, OLD, "2026-01-10T09:00:00Z")
    middle = add(journal, OTHER, "2026-01-10T09:01:00Z", signals={"continuity_refs": [first.id]})
    add(journal, NEW, "2026-01-10T09:02:00Z", signals={"continuity_refs": [middle.id]})
    assert journal.proposals() == []
    journal.reindex()
    assert journal.proposals() == []


def test_another_agents_entry_is_no_step_of_a_chain(tmp_path: Path) -> None:
    # Motoko's update refers to batou's entry, which refers to her older one (files placed by hand: append refuses such
    # refs, a restore or a copied file can hold them). Her proposals must be those of a journal of her entries alone.
    old = {
        "id": "m-old",
        "ts": "2026-01-10T09:00:00Z",
        "kind": "note",
        "agent": "motoko",
        "theme": "studio",
        "voice": OLD,
        "tags": ["studio"],
    }
    new = {**old, "id": "m-new", "ts": "2026-04-20T09:00:00Z", "voice": NEW, "signals": {"continuity_refs": ["b-1"]}}
    bobs = {**old, "id": "b-1", "ts": "2026-02-01T09:00:00Z", "agent": "batou", "voice": OTHER, "signals": {"continuity_refs": ["m-old"]}}
    with Journal(tmp_path / "both") as both, Journal(tmp_path / "alone") as alone:
        place_entries(both, [old, bobs, new])
        place_entries(alone, [old, new])
        for journal in (both, alone):
            assert _pairs(journal, "motoko") == [("m-old", "m-new")]
            journal.reindex()
            assert _pairs(journal, "motoko") == [("m-old", "m-new")]


def test_untrusted_text_neither_proposes_nor_is_proposed(journal: Journal) -> None:
    old = add(journal, OLD, "2026-01-10T09:00:00Z")
    add(journal, NEW, "2026-04-20T09:00:00Z", meta={"origin": "untrusted"})
    assert journal.proposals() == []
    add(journal, NEW, "2026-05-20T09:00:00Z", meta={"origin": "untrusted"}, tags=("studio", "again"))
    trusted = add(journal, AGAIN, "2026-06-20T09:00:00Z")
    assert _pairs(journal) == [(old.id, trusted.id)]


def test_the_cli_accepts_and_rejects_proposals_by_their_short_ids(root: Path) -> None:
    with Journal(root) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        new = add(journal, NEW, "2026-04-20T09:00:00Z")
        again = add(journal, AGAIN, "2026-05-01T09:00:00Z")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ghostjournal", "--root", str(root), *args], capture_output=True, text=True, check=False, timeout=120)

    accepted = run("accept-proposal", old.id[:8], new.id[:8], "--json")
    assert accepted.returncode == 0, accepted.stderr
    document = json.loads(accepted.stdout)
    assert (document["decision"], document["older"], document["newer"]) == ("accepted", old.id, new.id)
    assert document["entry"]["signals"]["supersedes"] == [old.id] and document["entry"]["meta"]["origin"] == "operator"
    assert json.loads(run("accept-proposal", old.id, new.id, "--json").stdout)["entry"] == document["entry"]  # again: the same
    conflict = run("reject-proposal", old.id, new.id)
    assert conflict.returncode == 4 and "already accepted by entry" in conflict.stderr and "Traceback" not in conflict.stderr
    rejected = run("reject-proposal", new.id, again.id, "--text")
    assert rejected.returncode == 0 and rejected.stdout.startswith(f"rejected: {again.id} does not update {new.id}")
    missing = run("accept-proposal", new.id, old.id)
    assert missing.returncode == 3 and "no pending proposal that entry" in missing.stderr
    assert run("accept-proposal", old.id, new.id, "--agent", "batou").returncode == 3  # another agent's ids are unknown to it
    assert run("proposals", "--text").stdout.strip() == "no pending proposals"


# The studio entry's update in words it hardly shares (a word score under the threshold), alike in meaning;
# its restatement in passing; and an update alike enough in meaning to be accepted on it alone.
MOVED = "The studio lease ended; I paint in a boat garage near the beach in Kamakura now."
RESTATED = "Moved out of the Shibuya studio with its leaking skylight: I now rent the third floor above a fish shop in Zushi."
LEASE = "The Shibuya studio lease is over; my new studio is a room above the fish market in Zushi, no skylight to drip."


def test_with_nn_an_update_in_other_words_is_proposed_by_meaning_and_a_restatement_is_not(root: Path, real_encoder: Encoder) -> None:
    """With vectors, a pair whose words are too unlike is proposed when their cosine is high; one the newer restates never is."""
    with Journal(root / "lexical") as lexical:
        add(lexical, OLD, "2026-01-10T09:00:00Z")
        add(lexical, MOVED, "2026-04-20T09:00:00Z")
        assert lexical.proposals() == []  # words alone do not pair them
    with Journal(root / "nn", enable_nn=True, encoder=real_encoder) as journal:
        old = add(journal, OLD, "2026-01-10T09:00:00Z")
        moved = add(journal, MOVED, "2026-04-20T09:00:00Z")
        (proposal,) = journal.proposals()
        assert (proposal.older, proposal.newer) == (old.id, moved.id)
        assert proposal.score < PROPOSAL_THRESHOLD and proposal.cosine is not None and proposal.cosine >= MEANING_THRESHOLD
        assert proposal.to_dict()["cosine"] == round(proposal.cosine, 4)
        restated = add(journal, RESTATED, "2026-04-21T09:00:00Z")  # as alike to the first in meaning, but it says nothing new of it
        assert (old.id, restated.id) not in _pairs(journal)
        before = journal.proposals()
        journal.reindex()  # the vectors are kept, and pair the entries again
        assert journal.proposals() == before
    # Entries appended without NN are paired by meaning once their vectors are stored.
    with Journal(root / "lexical", enable_nn=True, encoder=real_encoder) as later:
        assert later.proposals() == []
        later.embed()
        (found,) = later.proposals()
        assert found.cosine == proposal.cosine and found.score == proposal.score


def test_auto_accept_takes_a_proposal_alike_enough_in_meaning_whatever_its_word_score(root: Path, real_encoder: Encoder) -> None:
    """auto_accept accepts a proposal under the word threshold when its cosine reaches AUTO_ACCEPT_COSINE, and not without vectors."""
    for enable_nn in (False, True):
        options = {"enable_nn": True, "encoder": real_encoder} if enable_nn else {}
        with Journal(root / str(enable_nn), **options) as journal:
            old = add(journal, OLD, "2026-01-10T09:00:00Z")
            new = add(journal, LEASE, "2026-04-20T09:00:00Z")
            (proposal,) = journal.proposals()
            assert proposal.score < AUTO_ACCEPT_THRESHOLD
            accepted = journal.auto_accept(new.id)
            if enable_nn:
                assert proposal.cosine is not None and proposal.cosine >= AUTO_ACCEPT_COSINE
                assert [c.supersedes for c in accepted] == [(old.id,)]
            else:
                assert proposal.cosine is None and accepted == []


_RENT = "Rent on the Kamakura house is 118,000 yen a month, garage included, due on the 27th."
# Both newer entries share the same words with the older (a score between the two auto-accept thresholds); the first
# says that the rent changed, the second is about something else on the same subject.
_RENT_CHANGED = "The lease came back from the agency: rent on the house is now 126,000 yen, starting in December. Grumbled, signed anyway."
_RENT_UNCHANGED = "The agency sent a man to look at the gutters of the house; he quoted 126,000 yen for December. Grumbled, signed anyway."


def test_auto_accept_takes_a_proposal_whose_newer_entry_says_what_changed_by_words_alone(root: Path) -> None:
    """Without vectors, a proposal under AUTO_ACCEPT_THRESHOLD is accepted when its newer entry says that something changed, and only then."""
    for name, voice, taken in (("changed", _RENT_CHANGED, True), ("unchanged", _RENT_UNCHANGED, False)):
        with Journal(root / name) as journal:
            old = add(journal, _RENT, "2026-01-10T09:00:00Z", theme="rent", tags=("rent",))
            new = add(journal, voice, "2026-04-20T09:00:00Z", theme="rent", tags=("rent",))
            (proposal,) = journal.proposals()
            assert proposal.cosine is None
            assert AUTO_ACCEPT_CHANGE_THRESHOLD <= proposal.score < AUTO_ACCEPT_THRESHOLD
            accepted = journal.auto_accept(new.id)
            assert [c.supersedes for c in accepted] == ([(old.id,)] if taken else [])
            assert journal.proposals() == ([] if taken else [proposal])
            assert journal.auto_accept(new.id) == []  # nothing is left to accept, or it was accepted once


# An update that shares its fact's words only in other forms ("bottles" and "bottle", "bags" and "bag"): unlike word for word.
_BOTTLES = "Bottles and cans go out on Tuesdays; the recycling bags must be clear ones, or they are left behind with a sticker."
_BOTTLES_MOVED = "The ward changed the rota: bottle collection is Friday mornings from April, in a see-through bag."


def test_an_update_sharing_words_in_other_forms_is_proposed(root: Path) -> None:
    """Pairing compares stems: a plural and its singular, or "-ing" and the bare word, are one word; and reindex makes the same."""
    with Journal(root) as journal:
        old = add(journal, _BOTTLES, "2026-01-10T09:00:00Z", theme="recycling", tags=("recycling",))
        new = add(journal, _BOTTLES_MOVED, "2026-04-20T09:00:00Z", theme="recycling", tags=("recycling",))
        (proposal,) = journal.proposals()
        assert (proposal.older, proposal.newer) == (old.id, new.id)
        assert proposal.score < PROPOSAL_THRESHOLD  # the score kept is the words' as written
        journal.reindex()
        assert journal.proposals() == [proposal]


_DOMAIN = "Renewed the shop's domain for five years with the registrar; the invoices go to the studio address."
# Both newer entries are on the domain. The first states another fact of it (the fee, "next year"): alike to the older
# only by stem ("years" and "year", "invoices" and "invoice"); the second updates where the invoices go, in its words.
_DOMAIN_FEE = "Registrar's notice: the domain fee goes up next year, and the invoice will list the tax separately."
_DOMAIN_MOVED = "The shop's domain registrar sends invoices to the Zushi flat's address instead of the studio, since the move."


def test_a_pair_alike_only_by_stem_is_proposed_but_auto_accept_judges_the_words_as_written(root: Path) -> None:
    """Stems make a proposal; auto_accept, deciding with nobody looking, takes only what the words as written score high enough."""
    for name, voice, taken in (("by stem", _DOMAIN_FEE, False), ("as written", _DOMAIN_MOVED, True)):
        with Journal(root / name) as journal:
            old = add(journal, _DOMAIN, "2026-01-10T09:00:00Z", theme="domain", tags=("domain",))
            new = add(journal, voice, "2026-04-20T09:00:00Z", theme="domain", tags=("domain",))
            (proposal,) = journal.proposals()
            assert (proposal.older, proposal.newer) == (old.id, new.id)
            older, newer = words("domain", _DOMAIN), words("domain", voice)
            assert proposal.score == similarity(older, newer)
            # By stem, both reach the auto-accept threshold; as written, only the update does.
            assert similarity(stems(older), stems(newer)) >= AUTO_ACCEPT_THRESHOLD
            assert (proposal.score >= AUTO_ACCEPT_THRESHOLD) is taken
            accepted = journal.auto_accept(new.id)
            assert [c.supersedes for c in accepted] == ([(old.id,)] if taken else [])
            assert journal.proposals() == ([] if taken else [proposal])
