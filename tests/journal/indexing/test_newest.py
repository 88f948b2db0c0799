"""A query of common words alone: reading the entries newest first finds the very hits that ranking every match by time finds.

The reference below is the rule stated plainly: score every row the query
matches in the window, keep the newest *candidates* by (ts_utc, id), and rank
those by BM25, ties to the newer entry, then the greater id. The search walks
the entries' time index instead; the two must agree on every hit and score,
through search (lexical and hybrid) and the prompt context, on any journal.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import journal.indexing._fts as fts_module
import journal.indexing._newest as newest_module
from journal import Journal
from journal.indexing._fts import CommonWords
from journal.indexing._newest import newest_ranked
from journal.indexing._tables import COLUMNS
from tests.journal._fakes import FakeEncoder

WORDS = ("harbor", "tide", "ferry", "lantern")
RARE = "zeppelin"
AGENTS = ("motoko", "batou")
KINDS = ("note", "pulse")
START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
# Small enough that a journal of a few dozen entries has common words; few candidates, so that they are a choice.
SMALL = CommonWords(share=0.2, min_docs=6, candidates=5)


def full_rule(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    clauses: list[str],
    params: list[Any],
    k: int,
    *,
    candidates: int,
    weights: str,
    columns: str = COLUMNS,
    sole: bool = False,
) -> list[tuple[Any, ...]]:
    """Every match in the window scored, the newest *candidates* kept by (ts_utc, id), the best *k* of them by BM25 (*sole* changes nothing)."""
    where = " AND ".join([f"{table} MATCH ?", *clauses])
    every = conn.execute(
        f"SELECT e.rowid, e.ts_utc, e.id, bm25({table}, {weights}) FROM {table} JOIN entries e ON e.rowid = {table}.rowid WHERE {where}",
        [match, *params],
    ).fetchall()
    newest = sorted(every, key=lambda row: (row[1], row[2]), reverse=True)[:candidates]
    best = sorted(newest, key=lambda row: row[3])[:k]  # stable: ties stay newest first
    rows = {row[-1]: row for row in conn.execute(f"SELECT {columns}, e.rowid FROM entries e")}
    return [(*rows[row[0]][:-1], -row[3], row[0]) for row in best]


class Spy:
    """The search's own newest-matches reader, counting its calls (so a test knows the common-words plan ran)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        self.calls += 1
        return newest_ranked(*args, **kwargs)


@st.composite
def journals(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Payloads with times that tie (equal instants in other zones too), two agents and kinds, common words, a rare one, corrections."""
    count = draw(st.integers(min_value=8, max_value=28))
    payloads: list[dict[str, Any]] = []
    for n in range(count):
        instant = START + timedelta(hours=draw(st.integers(min_value=0, max_value=6)))
        zone = draw(st.sampled_from([0, 2, -5]))
        local = instant.astimezone(timezone(timedelta(hours=zone)))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            words.append(RARE)
        payload: dict[str, Any] = {
            "kind": draw(st.sampled_from(KINDS)),
            "agent": draw(st.sampled_from(AGENTS)),
            "theme": draw(st.sampled_from(["watch", "night", *WORDS])),
            "voice": " ".join(words) + f" entry {n}",
            "tags": [],
            "ts": local.isoformat(),
        }
        payloads.append(payload)
    return payloads


QUERIES = st.lists(st.sampled_from([*WORDS, RARE, "the", "today"]), min_size=1, max_size=3).map(" ".join)
OPTIONS = st.fixed_dictionaries(
    {
        "k": st.integers(min_value=1, max_value=40),
        "agent": st.sampled_from([None, *AGENTS]),
        "kind": st.sampled_from([None, *KINDS]),
        "since": st.sampled_from([None, (START + timedelta(hours=2)).isoformat()]),
        "until": st.sampled_from([None, (START + timedelta(hours=5)).isoformat()]),
        "current_only": st.booleans(),
    }
)


@contextmanager
def filled(payloads: list[dict[str, Any]], *, hybrid: bool, supersede_every: int = 4) -> Iterator[Journal]:
    """A fresh journal of *payloads*; every *supersede_every*-th entry corrects the entry of its agent before it."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        Journal(Path(tmp) / "j", enable_nn=hybrid, encoder=FakeEncoder() if hybrid else None) as journal,
    ):
        last: dict[str, str] = {}
        for n, payload in enumerate(payloads):
            corrects = n % supersede_every == supersede_every - 1 and payload["agent"] in last
            signals = {"signals": {"supersedes": [last[payload["agent"]]]}} if corrects else {}
            last[payload["agent"]] = journal.append({**payload, **signals}).id
        yield journal


def answers(journal: Journal, query: str, options: dict[str, Any], *, mode: str) -> tuple[Any, ...]:
    """Everything a user sees of *query*: the hits of search (ids, scores, order) and the prompt context's text."""
    hits = journal.search(query, mode=mode, **options)
    context_options = {key: value for key, value in options.items() if key != "kind"}
    return [(hit.entry_id, hit.score, hit.snippet) for hit in hits], journal.prompt_context(query, **context_options)


def both_rules(
    journal: Journal, query: str, options: dict[str, Any], *, mode: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any, Spy]:
    spy = Spy()
    with monkeypatch.context() as patched:
        patched.setattr(fts_module, "newest_ranked", spy)
        fast = answers(journal, query, options, mode=mode)
    with monkeypatch.context() as patched:
        patched.setattr(fts_module, "newest_ranked", full_rule)
        full = answers(journal, query, options, mode=mode)
    return fast, full, spy


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(payloads=journals(), queries=st.lists(QUERIES, min_size=1, max_size=4), options=OPTIONS, hybrid=st.booleans())
def test_reading_newest_first_gives_the_hits_of_ranking_every_match(
    payloads: list[dict[str, Any]], queries: list[str], options: dict[str, Any], hybrid: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On any journal, for any query and filters, lexical or hybrid: the same hits, scores, snippets and prompt context."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", SMALL)
    with filled(payloads, hybrid=hybrid) as journal:
        for query in queries:
            fast, full, _ = both_rules(journal, query, options, mode="hybrid" if hybrid else "lexical", monkeypatch=monkeypatch)
            assert fast == full, query


def _tied(count: int) -> list[dict[str, Any]]:
    """*count* entries of common words at three instants, written in three zones, of both agents and kinds."""
    payloads = []
    for n in range(count):
        instant = START + timedelta(hours=n % 3)
        zone = timezone(timedelta(hours=(n % 3) - 1))
        payloads.append(
            {
                "kind": KINDS[n % 2],
                "agent": AGENTS[(n // 2) % 2],
                "theme": "watch",
                "voice": " ".join(WORDS[: 1 + n % 4]) + f" entry {n}",
                "tags": [],
                "ts": instant.astimezone(zone).isoformat(),
            }
        )
    return payloads


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize(
    "options",
    [
        {"k": 3},
        {"k": 200},  # more than match
        {"k": 4, "agent": "batou"},
        {"k": 4, "kind": "pulse"},
        {"k": 4, "since": (START + timedelta(hours=1)).isoformat()},
        {"k": 4, "until": (START + timedelta(hours=2)).isoformat()},
        {"k": 4, "current_only": True},
        {"k": 4, "agent": "motoko", "kind": "note", "since": START.isoformat(), "until": (START + timedelta(hours=2)).isoformat()},
    ],
    ids=["k3", "k-beyond-matches", "agent", "kind", "since", "until", "current-only", "every-filter"],
)
def test_ties_on_time_filters_and_a_large_k_give_the_same_hits(mode: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries sharing one instant (written in other zones) are ordered by id in both; the window's filters apply alike."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", SMALL)
    with filled(_tied(36), hybrid=mode == "hybrid", supersede_every=5) as journal:
        for query in ("harbor", "what did the harbor do", "harbor tide", "tide ferry lantern"):
            fast, full, spy = both_rules(journal, query, options, mode=mode, monkeypatch=monkeypatch)
            assert fast == full, query
            if "harbor" in query:  # in every entry: common in every window, which finds some
                assert spy.calls and fast[0], f"{query!r} did not take the common-words plan"


def test_the_newest_candidates_are_read_a_batch_at_a_time_when_few_entries_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the newest entries are mostly not matches, the walk reads further batches until it has its candidates, or none are left."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.05, min_docs=6, candidates=12))
    payloads = [
        {"kind": "note", "agent": "motoko", "theme": "t", "voice": "harbor" if n % 7 == 0 else f"quiet {n}", "tags": [],
         "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(120)
    ]  # fmt: skip
    with filled(payloads, hybrid=False, supersede_every=10_000) as journal:
        for k in (1, 12, 30):
            fast, full, spy = both_rules(journal, "harbor", {"k": k}, mode="lexical", monkeypatch=monkeypatch)
            assert fast == full
            assert spy.calls
            assert len(fast[0]) == min(k, 12)


def test_entries_appended_in_time_order_score_only_the_newest_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appended in time order, the newest entries' rowids follow their times: the first read scores the newest candidates alone, and finds the same hits."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.05, min_docs=6, candidates=12))
    payloads = [
        {"kind": "note", "agent": AGENTS[n % 2], "theme": "t", "voice": f"harbor {'tide ' * (n % 5)}{n}", "tags": [],
         "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(60)
    ]  # fmt: skip
    scored = _scored_reads(monkeypatch)
    with filled(payloads, hybrid=False, supersede_every=10_000) as journal:
        for k in (1, 5, 12):
            scored.clear()
            fast, full, spy = both_rules(journal, "harbor tide", {"k": k}, mode="lexical", monkeypatch=monkeypatch)
            assert fast == full and spy.calls
            assert scored and scored[0] == 12  # every one of the newest matches, and no older one


def test_appended_in_time_order_the_words_are_counted_once_when_the_newest_batch_holds_too_few_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One entry in seven matches, so the first batch of the newest entries holds fewer matches than the candidates: the one scored
    read goes on past it, and the later batches' picks need no second (each scored statement counts every row holding each word)."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.05, min_docs=6, candidates=12))
    payloads = [
        {"kind": "note", "agent": AGENTS[n % 2], "theme": "t", "voice": f"harbor {'tide ' * (n % 3)}{n}" if n % 7 == 0 else f"quiet {n}",
         "tags": [], "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(160)
    ]  # fmt: skip
    scored = _scored_reads(monkeypatch)
    with filled(payloads, hybrid=False, supersede_every=10_000) as journal:
        for k in (1, 5, 12):
            scored.clear()
            fast, full, spy = both_rules(journal, "harbor", {"k": k}, mode="lexical", monkeypatch=monkeypatch)
            assert fast == full and len(fast[0]) == k
            assert spy.calls  # the search's and the prompt context's
            assert scored == [12] * spy.calls  # one scored read a ranking, of the newest candidates alone


def _scored_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each scored read of the common-words plan returns, in order, from now on (the list fills as reads are made)."""
    scored: list[int] = []
    read = newest_module._Scorer._read

    def counted(self: Any, low: int | None, high: int, **kwargs: Any) -> dict[int, float]:
        found = read(self, low, high, **kwargs)
        if kwargs.get("scored"):
            scored.append(len(found))
        return found

    monkeypatch.setattr(newest_module._Scorer, "_read", counted)
    return scored


def test_scoped_to_an_agent_whose_entries_lie_between_anothers_the_first_read_scores_only_the_newest_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent's own text table holds its entries alone, their rowids falling in time order but not one apart (the other agent's
    lie between): the newest matches are still its greatest rowids, so one scored read of the newest candidates finds the same hits."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.05, min_docs=6, candidates=12))
    payloads = [
        {"kind": "note", "agent": AGENTS[n % 3 == 0], "theme": "t", "voice": f"harbor {'tide ' * (n % 5)}{n}", "tags": [],
         "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(90)
    ]  # fmt: skip
    scored = _scored_reads(monkeypatch)
    with filled(payloads, hybrid=False, supersede_every=10_000) as journal:
        for agent in AGENTS:
            for k in (1, 5, 12):
                scored.clear()
                fast, full, spy = both_rules(journal, "harbor tide", {"k": k, "agent": agent}, mode="lexical", monkeypatch=monkeypatch)
                assert fast == full and len(fast[0]) == k and spy.calls
                assert scored == [12] * spy.calls  # one scored read a ranking, of the newest candidates alone


@pytest.mark.parametrize("at", [60, 84, 89])
def test_an_agents_entry_appended_among_its_newest_but_dated_before_them_still_gives_the_hits_of_ranking_every_match(
    at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry appended among the agent's newest but dated before them all has a rowid among theirs and is no entry of their batch:
    a read of the greatest rowids would take it for one of the newest matches. The walk sees it and scores the batch's range whole;
    the hits are those of the full rule."""
    monkeypatch.setattr(fts_module, "COMMON_WORDS", CommonWords(share=0.05, min_docs=6, candidates=12))
    payloads = [
        {"kind": "note", "agent": AGENTS[n % 3 == 0], "theme": "t", "voice": f"harbor {'tide ' * (n % 5)}{n}", "tags": [],
         "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(90)
    ]  # fmt: skip
    early = {**payloads[0], "agent": AGENTS[1], "voice": "harbor tide tide tide early", "ts": (START - timedelta(days=1)).isoformat()}
    payloads.insert(at, early)
    with filled(payloads, hybrid=False, supersede_every=10_000) as journal:
        for k in (1, 5, 12, 30):
            fast, full, spy = both_rules(journal, "harbor tide", {"k": k, "agent": AGENTS[1]}, mode="lexical", monkeypatch=monkeypatch)
            assert fast == full and spy.calls
