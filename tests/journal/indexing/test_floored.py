"""A word in half or more of the entries searched, which FTS5's BM25 weighs as nothing, still counts for what a query is about."""

from __future__ import annotations

from pathlib import Path

from journal import Journal

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
