"""Any text is a valid query: FTS5 syntax in user text is searched, never parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.indexing.index import fts_query

Payload = Callable[..., dict[str, Any]]

SYNTAX = st.sampled_from(['"', "'", "?", "-", "*", "AND", "OR", "NOT", "NEAR(", ")", "col:", "theme:", "^", "+", "{", "}", ":", "\\", "\x00", "  "])
QUERIES = st.one_of(st.text(), st.lists(st.one_of(SYNTAX, st.text(max_size=5)), max_size=12).map(" ".join))


@pytest.fixture
def filled(journal: Journal, make_payload: Payload) -> Journal:
    journal.append(make_payload(voice="AND the NEAR light: col was * here", theme="syntax"))
    journal.append(make_payload(voice="Café crème at the harbour, naïve rêverie", theme="café"))
    return journal


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES)
@example('"unbalanced')
@example("NEAR(light here, 2)")
@example("theme: light AND -dark OR *")
@example("")
@example("🦊 ∀x ∃y")
def test_search_never_raises(filled: Journal, query: str) -> None:
    """search, relate-style queries and prompt_context accept arbitrary text."""
    hits = filled.search(query, k=5, agent="motoko")
    assert all(hit.entry.agent == "motoko" for hit in hits)
    assert filled.prompt_context(query, k=2).endswith("</past_journal_entries>")


def test_operators_are_searched_as_words(filled: Journal) -> None:
    """A query made of FTS5 operator words finds the entry containing them literally."""
    assert [h.entry.theme for h in filled.search("NEAR AND col")] == ["syntax"]


def test_diacritics_fold(filled: Journal) -> None:
    """'cafe' finds 'Café': diacritics are folded by the tokenizer."""
    assert [h.entry.theme for h in filled.search("cafe creme")] == ["café"]


def test_query_of_only_symbols_has_no_terms() -> None:
    """Text without a word becomes no query at all rather than an FTS5 error."""
    assert fts_query("?? -- ** ::") is None
    assert fts_query('say "NEAR(x" now') == '"say" OR "near" OR "x"'
