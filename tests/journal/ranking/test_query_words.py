"""A search parses its query once: every lexical call of one search, hybrid or lexical, takes the same parsed words."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import Journal
from journal.indexing import _fts
from tests.journal._fakes import FakeEncoder


def _filled(journal: Journal) -> str:
    """A few entries of one agent, one of them corrected by a later one; the id of the corrected entry."""
    for n, voice in enumerate(("Rain on the tin roof tonight.", "The harbor lights flicker in the rain.", "Quiet tea, no rain at all.")):
        journal.append({"kind": "note", "agent": "motoko", "theme": f"evening {n}", "voice": voice, "ts": f"2026-09-0{n + 1}T20:00:00Z"})
    old = journal.append({"kind": "note", "agent": "motoko", "theme": "roof", "voice": "The roof leaks in the rain.", "ts": "2026-09-04T20:00:00Z"})
    journal.append({"kind": "note", "agent": "motoko", "theme": "roof", "voice": "The roof was mended; it holds now.", "ts": "2026-09-05T20:00:00Z",
                    "signals": {"supersedes": [old.id]}})
    return old.id


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_one_search_or_prompt_context_parses_its_query_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Counted at the parser: one parse per search and per prompt context, however many index calls follow (four in hybrid)."""
    with Journal(tmp_path / "j", enable_nn=mode == "hybrid", encoder=FakeEncoder() if mode == "hybrid" else None) as journal:
        _filled(journal)
        expected = [(hit.entry_id, hit.snippet) for hit in journal.search("rain roof", k=5, agent="motoko", mode=mode)]
        parsed: list[str] = []
        real = _fts.query_terms

        def counting(text: str) -> list[str]:
            parsed.append(text)
            return real(text)

        monkeypatch.setattr(_fts, "query_terms", counting)
        hits = journal.search("rain roof", k=5, agent="motoko", mode=mode)
        journal.prompt_context("rain roof", agent="motoko", k=5)
    assert [(hit.entry_id, hit.snippet) for hit in hits] == expected and len(hits) == 5
    assert parsed == ["rain roof", "rain roof"]
