"""A word in half or more of the entries searched, which FTS5's BM25 weighs as nothing, still counts for what a query is about."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from journal import Journal
from journal.indexing._floored import floored, floored_scores

# "pentax" and "shutter" are each in two of the four entries (FTS5 gives them no weight); "fixed" is in one.
_ENTRIES = (
    (
        "2026-01-10T09:00:00Z",
        "pentax repair",
        ["pentax", "shutter"],
        "Collected the Pentax from the camera doctor in Koenji: the shutter was replaced, 15,000 yen.",
    ),
    ("2026-02-10T09:00:00Z", "festival", ["pentax"], "Took the Pentax to the harbour festival; two rolls of night frames."),
    ("2026-03-10T09:00:00Z", "olympus", ["olympus", "shutter"], "The shutter of the little Olympus sticks in the cold."),
    ("2026-04-10T09:00:00Z", "garden gate", ["garden"], "Fixed the squeaky garden gate with a drop of oil."),
)
_QUERY = "where did I get the Pentax shutter fixed?"


def _fill(journal: Journal, agent: str = "motoko") -> list[str]:
    return [
        journal.append({"kind": "note", "agent": agent, "ts": ts, "theme": theme, "tags": tags, "voice": voice}).id
        for ts, theme, tags, voice in _ENTRIES
    ]


def test_a_small_journal_ranks_the_entry_holding_the_querys_words_above_one_holding_a_rarer_incidental_word(journal: Journal) -> None:
    answer, _, _, incidental = _fill(journal)
    for agent in (None, "motoko"):  # the journal-wide text table and the agent's own
        hits = journal.search(_QUERY, agent=agent, mode="lexical")
        ids = [hit.entry_id for hit in hits]
        assert ids[0] == answer, ids
        assert incidental in ids  # still found, below
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
        assert all(hit.score > 0 for hit in hits)


def test_an_agent_with_few_entries_in_a_larger_journal_is_ranked_on_its_own_words(root: Path) -> None:
    """A search scoped to an agent reads the agent's own text table: four entries there, in a journal of more than 100."""
    with Journal(root) as journal:
        journal.append_many(
            [
                {"kind": "note", "agent": "batou", "theme": "patrol", "tags": ["patrol"], "voice": f"Patrol {n} along the river; quiet."}
                for n in range(120)
            ]
        )
        answer, *_ = _fill(journal)
        assert journal.search(_QUERY, agent="motoko", mode="lexical")[0].entry_id == answer


def test_a_write_landing_while_the_words_are_counted_never_gives_a_word_more_rows_than_its_table(tmp_path: Path) -> None:
    """Another connection commits entries just as the counting starts: the table's size and its words' counts agree."""
    path = tmp_path / "words.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE VIRTUAL TABLE words USING fts5(body)")
    writer.execute("INSERT INTO words (body) VALUES ('kiriko pay invoice')")
    reader = sqlite3.connect(path, isolation_level=None)
    written: list[str] = []

    def write_when_a_word_is_counted(statement: str) -> None:
        if "MATCH" in statement and not written:
            written.append(statement)
            writer.execute("INSERT INTO words (body) VALUES ('kiriko pay late'), ('kiriko pay again')")

    reader.set_trace_callback(write_when_a_word_is_counted)
    found = floored(reader, "words", ["kiriko"], estimate=1)
    reader.set_trace_callback(None)
    assert written  # the write did land while the words were being counted
    assert found is not None and found.counts == (found.size,)  # every row holds the word, whichever rows were seen
    assert floored_scores(reader, "words", "1.0", found)  # and the rows are scored
    reader.close()
    writer.close()
