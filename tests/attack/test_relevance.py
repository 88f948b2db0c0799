"""Attacks on "nothing relevant is no hits": words that say when, or words every entry holds, cannot lift the relevance floor.

With NN on, an entry the words matched is kept whatever its cosine, so the
floor stands only if a match on words that carry no evidence does not count:
a time word ("new", "today", "last week"), a function word, or a word common
to the entries searched. And a query of common words alone must rank the same
entries after a rebuild as before it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import journal.indexing._fts as fts_module
from journal import Journal
from journal.encoding import Encoder
from journal.indexing._fts import CommonWords
from tests.journal.conftest import real_encoder  # noqa: F401 - the session's real model, loaded once for these tests too

Payload = Callable[..., dict[str, Any]]

LIFE = (
    ("pets", "I adopted a puppy last week; she chews my shoes."),
    ("cooking", "Made miso soup from scratch today; the dashi took an hour."),
    ("work", "Rolled back release 4.12.3 after the payment queue stalled; incident ticket OPS-7731 is still open."),
    ("running", "Ran along the canal before dawn, 6 km, lungs burning in the cold air of the new year."),
    ("family", "Called my mother on Sunday. She talks about the garden in Nagano as if I had never left it."),
)


def _cosines(journal: Journal, query: str) -> dict[str, float]:
    return {hit.entry_id: hit.score for hit in journal.search(query, k=100, mode="semantic", floor=False)}


@pytest.mark.parametrize("question", ["what's new today?", "last week", "what happened last week?", "anything new this week?"])
def test_time_words_alone_do_not_lift_the_floor(root: Path, make_payload: Payload, real_encoder: Encoder, question: str) -> None:  # noqa: F811 - the imported fixture
    """An entry sharing only "today" or "last week" with the question is kept only if its cosine reaches the floor."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        for theme, voice in LIFE:
            journal.append(make_payload(theme=theme, tags=[], voice=voice))
        assert journal.search(question, k=10, mode="lexical") != []  # the words do match
        floor = journal.relevance_floor
        assert floor is not None
        above = {entry_id for entry_id, cosine in _cosines(journal, question).items() if cosine >= floor}
        assert {hit.entry_id for hit in journal.search(question, k=10)} == above
        assert [record.found_by for record in journal.context(question, k=3).records].count("match") == min(len(above), 3)


def test_a_telling_word_beside_time_words_still_keeps_its_match(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:  # noqa: F811 - the imported fixture
    """A place name keeps its entry below the floor; the time words of the same question keep nothing."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        ids = {theme: journal.append(make_payload(theme=theme, tags=[], voice=voice)).id for theme, voice in LIFE}
        question = "Nagano lattice gauge theory of quark confinement, today and last week"
        floor = journal.relevance_floor
        assert floor is not None
        cosines = _cosines(journal, question)
        assert max(cosines.values()) < floor
        assert {hit.entry_id for hit in journal.search(question, k=10, mode="lexical")} == {ids["family"], ids["pets"], ids["cooking"]}
        assert [hit.entry_id for hit in journal.search(question, k=10)] == [ids["family"]]


def test_words_common_to_a_big_journal_do_not_lift_the_floor(
    root: Path, make_payload: Payload, real_encoder: Encoder, monkeypatch: pytest.MonkeyPatch,  # noqa: F811 - the imported fixture
) -> None:
    """A question whose every word is in most entries ranks the newest matches by words, but only the floor keeps them."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.25, min_docs=4, candidates=3))
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        for theme, voice in LIFE:
            journal.append(make_payload(theme=theme, tags=[], voice=f"{voice} Noted and filed."))
        question = "noted, filed?"
        assert len(journal.search(question, k=10, mode="lexical")) == 3  # common: only the newest three matches are ranked
        floor = journal.relevance_floor
        assert floor is not None
        above = {entry_id for entry_id, cosine in _cosines(journal, question).items() if cosine >= floor}
        assert {hit.entry_id for hit in journal.search(question, k=10)} == above


def test_a_common_words_query_ranks_the_same_entries_before_and_after_reindex(
    root: Path, make_payload: Payload, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Appended out of time order, the newest matches are the newest by time, and a rebuild from the files changes no hit."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.25, min_docs=4, candidates=3))
    days = [5, 9, 1, 7, 3, 8, 2, 6, 4]  # the last three appended are not the three newest
    with Journal(root) as journal:
        for day in days:
            journal.append(make_payload(ts=f"2026-09-{day:02d}T10:00:00Z", theme="harbor", tags=[], voice=f"harbor log, day {day} of the watch"))

        def answers() -> list[list[tuple[str, float]]]:
            return [[(hit.entry_id, hit.score) for hit in journal.search(query, k=10)] for query in ("harbor", "harbor watch")]

        before = answers()
        newest = sorted(days)[-3:]
        assert [sorted(int(h.entry.ts[8:10]) for h in journal.search(q, k=10)) for q in ("harbor", "harbor watch")] == [newest, newest]
        assert journal.reindex() == len(days)
        assert answers() == before


def test_entries_of_one_text_rank_the_same_before_and_after_reindex(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:  # noqa: F811 - the imported fixture
    """Equal cosines go to the newer entry, then the id: not to the order of the appends, which a rebuild from the files does not keep."""
    days = [5, 9, 1, 7, 3]
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        for day in days:
            journal.append(make_payload(ts=f"2026-09-{day:02d}T10:00:00Z", theme="harbor", tags=[], voice="Watched the ferry leave the harbor at dusk."))

        def answers() -> list[list[str]]:
            return [[hit.entry.ts for hit in journal.search("ferry at dusk", k=10, mode=mode)] for mode in ("semantic", "hybrid")]

        before = answers()
        by_time = sorted((entry.ts for entry in journal.list()), reverse=True)
        assert before == [by_time, by_time]
        journal.reindex()
        assert answers() == before
