"""Snippets read in one pass over the hits' rowid range are the snippets a statement per hit reads, hit for hit."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import journal.indexing._fts as fts_module
from journal import Journal

WORDS = ("harbor", "tide", "ferry", "lantern", "zeppelin")
START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    voices=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join), min_size=2, max_size=30),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    picks=st.lists(st.integers(min_value=0, max_value=29), min_size=1, max_size=12),
)
def test_range_snippets_are_those_of_a_statement_per_hit(
    voices: list[str], query: str, picks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whichever way they are read, the asked entries the query matches get the same snippet, and the others none; a search's hits too."""
    with tempfile.TemporaryDirectory() as tmp, Journal(Path(tmp) / "j") as journal:
        ids = [
            journal.append(
                {
                    "kind": "note",
                    "agent": "motoko",
                    "theme": "watch",
                    "voice": voice,
                    "tags": [],
                    "ts": (START + timedelta(minutes=n)).isoformat(),
                }
            ).id
            for n, voice in enumerate(voices)
        ]
        asked = [ids[n % len(ids)] for n in picks]
        index = journal._keeper.index
        ranged = index.snippets(query, asked), [(r.row.id, r.snippet) for r in index.search(query, k=len(picks))]
        with monkeypatch.context() as patched:
            patched.setattr(fts_module, "_SNIPPET_SPAN", 0)  # a statement per hit, whatever the span
            one_by_one = index.snippets(query, asked), [(r.row.id, r.snippet) for r in index.search(query, k=len(picks))]
        assert ranged == one_by_one
        ranged_hits = ranged[0]
        assert set(ranged_hits) == {
            entry_id for entry_id, voice in zip(ids, voices, strict=True) if entry_id in asked and set(query.split()) & set(voice.split())
        }
