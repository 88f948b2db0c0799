"""Neighbour-aware ranking: an entry raised by its neighbours' scores (continuity both ways, entries just before and after in time)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.encoding import Encoder
from journal.indexing.index import Window
from journal.ranking.neighbours import NEIGHBOURS, NeighbourParams, lift

Payload = Callable[..., dict[str, Any]]

# The question's words are in the first entry only; the answer is in the entry that continues it.
QUESTION = "which bakery did Batou recommend"
ASKED = "Batou asked me which bakery on the harbor I would recommend for the weekend."
ANSWER = "The one past the ferry terminal, with the blue awning; their sourdough sells out by nine."
UNRELATED = ("Rain again on the tin roof; the gutters are full.", "Tuned the radio to the night station and fell asleep.")


def _note(make_payload: Payload, voice: str, ts: str, **extra: Any) -> dict[str, Any]:
    return make_payload(theme="a conversation", tags=[], voice=voice, ts=ts, **extra)


def test_lift_raises_an_entry_by_its_best_neighbour_and_leaves_one_without_neighbours_alone() -> None:
    """Score + weight x best neighbour's; a neighbour the arms missed joins; no neighbour, no change; excluded ids never join."""
    params = NeighbourParams(weight=0.5)
    ranked = [("a", 4.0), ("b", 3.0), ("c", 1.0)]
    lifted = dict(lift(ranked, {"a": {"c", "new", "gone"}, "b": {"c"}}, params, exclude={"gone"}))
    assert lifted == {"a": 4.0, "b": 3.0, "c": 1.0 + 0.5 * 4.0, "new": 0.5 * 4.0}
    # A neighbour in time lifts an entry the arms found, and brings in none they missed.
    assert dict(lift(ranked, {}, params, adjacent={"a": {"c", "new"}})) == {"a": 4.0, "b": 3.0, "c": 1.0 + 0.5 * 4.0}
    assert lift(ranked, {}, params) == ranked
    assert lift(ranked, {"a": {"c"}}, NeighbourParams(weight=0.0)) == ranked


def test_lift_lends_only_the_best_sources_scores_and_never_a_score_of_zero() -> None:
    ranked = [("a", 2.0), ("b", 1.0), ("z", 0.0)]
    assert dict(lift(ranked, {"b": {"x"}, "z": {"y"}}, NeighbourParams(weight=1.0, sources=1))) == dict(ranked)
    assert dict(lift(ranked, {"b": {"x"}, "z": {"y"}}, NeighbourParams(weight=1.0, sources=3))) == {**dict(ranked), "x": 1.0}


@pytest.mark.parametrize("params", [{"weight": -0.1}, {"sources": 0}, {"window_seconds": -1.0}])
def test_neighbour_parameters_out_of_range_are_refused(params: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="neighbour"):
        NeighbourParams(**params)


def test_the_entry_that_continues_a_match_is_found_by_words_it_does_not_share(root: Path, make_payload: Payload) -> None:
    """Lexical search: the answer shares no word with the question, yet comes right after the entry it continues; rerank=False finds only the match."""
    with Journal(root) as journal:
        asked = journal.append(_note(make_payload, ASKED, "2026-03-01T10:00:00+00:00")).id
        answer = journal.append(_note(make_payload, ANSWER, "2026-03-09T10:00:00+00:00", signals={"continuity_refs": [asked]})).id
        for day, voice in enumerate(UNRELATED, start=20):
            journal.append(_note(make_payload, voice, f"2026-03-{day}T10:00:00+00:00"))
        assert [hit.entry_id for hit in journal.search(QUESTION, k=5, rerank=False)] == [asked]
        hits = journal.search(QUESTION, k=5)
        assert [hit.entry_id for hit in hits] == [asked, answer]
        assert hits[1].score == pytest.approx(NEIGHBOURS.weight * hits[0].score)
        assert "ferry terminal" in hits[1].snippet  # no word matched: the snippet is the entry's start
        # And the other way: the entry a match continues is its neighbour too.
        assert [hit.entry_id for hit in journal.search("sourdough awning", k=5)] == [answer, asked]
        # prompt_context ranks as search does: the answer is a match (records oldest first), not the recent fill.
        shown = [(record.id, record.found_by) for record in journal.context(QUESTION, k=2, max_chars=4000).records]
        assert shown == [(asked, "match"), (answer, "match")]
        assert (answer, "recent") not in [(record.id, record.found_by) for record in journal.context(QUESTION, k=1, max_chars=4000).records]


def test_entries_just_before_and_after_in_time_lift_each_other_within_the_window_of_one_agent(root: Path, make_payload: Payload) -> None:
    """Time adjacency: the next entry of the same agent within the window counts; one past the window, another agent's, or a correction does not.

    Nearness in time reorders what the words found and brings in nothing: the entries of a batch are all next to one another.
    """
    with Journal(root) as journal:
        asked = journal.append(_note(make_payload, ASKED, "2026-03-01T10:00:00+00:00")).id
        soon = journal.append(_note(make_payload, ANSWER + " Go early at the weekend.", "2026-03-01T10:05:00+00:00")).id
        fix = journal.append(
            _note(make_payload, "No: the one by the market.", "2026-03-01T10:08:00+00:00", signals={"supersedes": [soon]})
        ).id
        other = journal.append(_note(make_payload, "The weekend bakery queue again.", "2026-03-01T09:58:00+00:00", agent="batou")).id
        late = journal.append(_note(make_payload, UNRELATED[1], "2026-03-01T11:00:00+00:00")).id
        index = journal._keeper.index
        found = index.neighbours([asked, soon, fix, late, other], within_seconds=NEIGHBOURS.window_seconds)
        assert (found.linked, found.adjacent) == ({}, {asked: {soon}, soon: {asked}})
        assert index.neighbours([asked], within_seconds=NEIGHBOURS.window_seconds, window=Window(kind="pulse")).adjacent == {}
        plain = {hit.entry_id: hit.score for hit in journal.search("bakery weekend", k=10, agent="motoko", rerank=False)}
        lifted = {hit.entry_id: hit.score for hit in journal.search("bakery weekend", k=10, agent="motoko")}
        assert set(plain) == set(lifted) == {asked, soon, fix}  # the correction of soon comes with it
        assert lifted[soon] == pytest.approx(plain[soon] + NEIGHBOURS.weight * plain[asked])
        assert lifted[asked] == pytest.approx(plain[asked] + NEIGHBOURS.weight * plain[soon])
        assert [hit.entry_id for hit in journal.search(QUESTION, k=5, agent="motoko")] == [
            asked
        ]  # the answer shares no word: not brought in


def test_a_neighbour_outside_the_searched_window_is_left_out_and_k_hits_still_come_back(root: Path, make_payload: Payload) -> None:
    """kind= (and since/until) hold for lifted neighbours: a pulse continuing a matching note is not a hit of a search of notes."""
    with Journal(root) as journal:
        asked = journal.append(_note(make_payload, ASKED, "2026-03-01T10:00:00+00:00")).id
        journal.append(_note(make_payload, ANSWER, "2026-03-09T10:00:00+00:00", kind="pulse", signals={"continuity_refs": [asked]}))
        second = journal.append(_note(make_payload, "Batou again, about the weekend.", "2026-03-12T10:00:00+00:00")).id
        assert [hit.entry_id for hit in journal.search(QUESTION, k=2, kind="note")] == [asked, second]


def test_a_journal_without_neighbours_ranks_exactly_as_before(root: Path, make_payload: Payload) -> None:
    """No links and entries days apart: the stage changes no order and no score."""
    with Journal(root) as journal:
        for day, voice in enumerate((ASKED, ANSWER, *UNRELATED, "Batou and the harbor bakery, once more."), start=1):
            journal.append(_note(make_payload, voice, f"2026-04-{day:02d}T08:00:00+00:00"))
        for query in (QUESTION, "harbor", "rain roof radio"):
            on = [(hit.entry_id, hit.score) for hit in journal.search(query, k=10)]
            assert on == [(hit.entry_id, hit.score) for hit in journal.search(query, k=10, rerank=False)]


def test_hybrid_search_lifts_the_continuing_entry_too(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """With vectors: the answer, below the relevance floor on its own, comes in right after its neighbour; rerank=False leaves it out."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        asked = journal.append(_note(make_payload, ASKED, "2026-03-01T10:00:00+00:00")).id
        answer = journal.append(_note(make_payload, ANSWER, "2026-03-09T10:00:00+00:00", signals={"continuity_refs": [asked]})).id
        for day, voice in enumerate(UNRELATED, start=20):
            journal.append(_note(make_payload, voice, f"2026-03-{day}T10:00:00+00:00"))
        plain = [hit.entry_id for hit in journal.search(QUESTION, k=2, mode="hybrid", rerank=False)]
        assert plain[0] == asked
        assert [hit.entry_id for hit in journal.search(QUESTION, k=2, mode="hybrid")] == [asked, answer]


@pytest.mark.parametrize("older_id", ["a0000000", "f0000000"])
def test_entries_brought_in_with_equal_lifts_come_newer_first_whatever_their_ids(tmp_path: Path, older_id: str) -> None:
    """Two entries that both continue the one match join with the same lift: the newer comes first in both journals, whichever id sorts
    first (ids are random, so an order by id made two simulations of the same appends differ)."""
    newer_id = "f0000000" if older_id == "a0000000" else "a0000000"
    with Journal(tmp_path / "journal", redact="off") as journal:
        asked = journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": ASKED, "ts": "2026-03-01T10:00:00+00:00"})
        for entry_id, ts in ((older_id, "2026-03-02T10:00:00+00:00"), (newer_id, "2026-03-03T10:00:00+00:00")):
            journal.append(
                {
                    "id": entry_id,
                    "kind": "note",
                    "agent": "motoko",
                    "theme": "t",
                    "voice": ANSWER,
                    "ts": ts,
                    "signals": {"continuity_refs": [asked.id]},
                }
            )
        hits = journal.search(QUESTION, k=3, agent="motoko")
    assert [hit.entry.id for hit in hits] == [asked.id, newer_id, older_id]


_KINDS = st.sampled_from(["note", "pulse", "Note"])
_AGENTS = st.sampled_from(["motoko", "batou", "motoko2", "é"])
_TIMES = st.sampled_from(
    ["2026-03-01T10:00:00.000000Z", "2026-03-01T10:00:00.000001Z", "2026-03-02T00:00:00.000000Z", "2025-12-31T23:59:59.999999Z"]
)


@settings(max_examples=60, deadline=None)
@given(
    window=st.builds(Window, kind=st.none() | _KINDS, agent=st.none() | _AGENTS, since=st.none() | _TIMES, until=st.none() | _TIMES),
    rows=st.lists(st.tuples(_KINDS, _AGENTS, _TIMES), min_size=1, max_size=12),
)
def test_a_windows_test_in_python_keeps_the_rows_its_sql_keeps(window: Window, rows: list[tuple[str, str, str]]) -> None:
    # The neighbours' read places each neighbour in the window with Window.holds instead of one more read of its row.
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE entries (n INTEGER PRIMARY KEY, kind TEXT, agent TEXT, ts_utc TEXT)")
    conn.executemany("INSERT INTO entries (kind, agent, ts_utc) VALUES (?, ?, ?)", rows)
    clauses, params = window.where()
    kept = [n for (n,) in conn.execute(f"SELECT e.n FROM entries e WHERE {' AND '.join(clauses) or '1'} ORDER BY e.n", params)]
    assert kept == [n for n, (kind, agent, ts) in enumerate(rows, 1) if window.holds(kind=kind, agent=agent, ts_utc=ts)]


def test_time_neighbours_asked_among_some_entries_are_those_of_the_full_read_in_them(tmp_path: Path) -> None:
    """The neighbours' stage asks only for time neighbours among the ranked candidates: the read that skips the entries far from every
    candidate gives, for any set of candidates and window, exactly the full read's neighbours that are candidates, and every link."""
    rng = random.Random(5)
    clock = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    made: dict[str, list[str]] = {"motoko": [], "batou": []}
    with Journal(tmp_path / "journal", redact="off") as journal:
        for n in range(48):
            clock += timedelta(minutes=rng.choice((0, 0, 5, 14, 15, 16, 40, 300)))
            agent = rng.choice(tuple(made))
            signals: dict[str, Any] = {}
            if made[agent] and rng.random() < 0.25:
                signals["continuity_refs"] = [rng.choice(made[agent])]
            if made[agent] and rng.random() < 0.1:
                signals["supersedes"] = [made[agent][-1]]
            payload = {"kind": rng.choice(("note", "pulse")), "agent": agent, "theme": "t", "voice": f"entry {n}", "ts": clock.isoformat()}
            made[agent].append(journal.append({**payload, "signals": signals}).id)
        index = journal._keeper.index
        every = [*made["motoko"], *made["batou"]]
        lifting = 0
        for trial in range(40):
            among = set(rng.sample(every, rng.randint(1, len(every))))
            ids = rng.sample(sorted(among), min(len(among), rng.randint(1, 20)))
            window = Window(kind="note") if trial % 3 == 0 else Window()
            full = index.neighbours(ids, within_seconds=NEIGHBOURS.window_seconds, window=window)
            pruned = index.neighbours(ids, within_seconds=NEIGHBOURS.window_seconds, window=window, among=among)
            wanted = {entry_id: kept for entry_id, near in full.adjacent.items() if (kept := near & among)}
            assert (pruned.linked, pruned.times, pruned.adjacent) == (full.linked, full.times, wanted)
            # The candidates' agents and times handed over by the ranking's read, as the lexical stage does, place them the same.
            rows = {row.id: row for row in index.rows(Window(), ids=sorted(among))}
            places = {entry_id: (row.agent, row.ts_utc) for entry_id, row in rows.items()}
            placed = index.neighbours(ids, within_seconds=NEIGHBOURS.window_seconds, window=window, among=among, places=places)
            assert (placed.linked, placed.times, placed.adjacent) == (full.linked, full.times, wanted)
            lifting += bool(wanted)
        assert lifting > 10  # the trials met time neighbours among the candidates, not only entries without any


def _lift_by_places(
    ranked: list[tuple[str, float]], best: dict[str, float], times: dict[str, str], weight: float
) -> list[tuple[str, float]]:
    """The lift's order as first written: each entry's place kept in a map (ranked first, then those joining, newer first, then by id)."""
    position = {entry_id: rank for rank, (entry_id, _) in enumerate(ranked)}
    joining = sorted(best.keys() - position.keys())
    joining.sort(key=lambda entry_id: times.get(entry_id, ""), reverse=True)
    position.update((entry_id, len(ranked) + rank) for rank, entry_id in enumerate(joining))
    lifted = [(entry_id, score + weight * best.get(entry_id, 0.0)) for entry_id, score in ranked]
    lifted += [(entry_id, weight * best[entry_id]) for entry_id in joining]
    return sorted(lifted, key=lambda item: (-item[1], position[item[0]]))


_IDS = st.sampled_from([f"e{n}" for n in range(12)])


@settings(max_examples=200, deadline=None)
@given(
    scores=st.dictionaries(_IDS, st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]), max_size=8),
    links=st.dictionaries(_IDS, st.sets(_IDS, max_size=3), max_size=6),
    beside=st.dictionaries(_IDS, st.sets(_IDS, max_size=2), max_size=6),
    times=st.dictionaries(_IDS, st.sampled_from(["2026-03-01T10:00:00.000000Z", "2026-03-02T10:00:00.000000Z"]), max_size=12),
    exclude=st.sets(_IDS, max_size=2),
)
def test_the_lifts_one_sort_by_score_orders_as_the_places_it_kept_did(
    scores: dict[str, float], links: dict[str, set[str]], beside: dict[str, set[str]], times: dict[str, str], exclude: set[str]
) -> None:
    # The lift sorts its list by score alone, stably: the ranked entries first in their order, then those joining.
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    params = NeighbourParams(sources=4)
    lifted = lift(ranked, links, params, adjacent=beside, exclude=exclude, times=times)
    best: dict[str, float] = {}
    for source, score in ranked[: params.sources]:
        for other in [*links.get(source, ()), *(o for o in beside.get(source, ()) if o in scores)]:
            if score > 0 and other not in exclude and score > best.get(other, 0.0):
                best[other] = score
    assert lifted == (_lift_by_places(ranked, best, times, params.weight) if best else ranked)
