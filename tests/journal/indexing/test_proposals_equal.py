"""Supersede proposals are what appends in order of time make, however the index comes to hold the entries: appends in
any order, one group, a rebuild, and an erase (a rebuild without the erased entries)."""

from __future__ import annotations

import contextlib
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.encoding import Encoder
from tests.journal._proposal_entries import AGAIN, NEW, OLD, OTHER, conversation

Rows = list[tuple[Any, ...]]


def _proposals(root: Path) -> Rows:
    """Every row of the proposals table (pending or decided), its score rounded past float noise."""
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn:
        return conn.execute("SELECT older, newer, agent, round(score, 9), round(cosine, 6), subject FROM proposals ORDER BY older, newer").fetchall()


def _rebuilt(root: Path) -> Rows:
    with Journal(root) as journal:
        journal.reindex()
    return _proposals(root)


def _in_time_order(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(payloads, key=lambda payload: (payload["ts"], payload["id"]))


def test_a_group_or_appends_out_of_time_order_make_what_appends_in_time_order_make(tmp_path: Path) -> None:
    """Turns of a conversation held, then the rest shuffled (a backfill, an import of an older journal): appended one at a
    time or as one group, they propose what the same turns appended in order of time do, and what a rebuild does."""
    turns = conversation(70, studio_at=(20, 45, 60))
    held, rest = turns[:6], turns[6:]
    random.Random(36).shuffle(rest)
    roots = {name: tmp_path / name for name in ("in order", "one at a time", "group")}
    for root in roots.values():
        with Journal(root) as journal:
            journal.append_many(held)
    with Journal(roots["in order"]) as journal:
        for payload in _in_time_order(rest):
            journal.append(payload)
    with Journal(roots["one at a time"]) as journal:
        for payload in rest:
            journal.append(payload)
    with Journal(roots["group"]) as journal:
        journal.append_many(rest)
    found = {name: _proposals(root) for name, root in roots.items()}
    assert found["in order"], "the conversation's turns make proposals before the speakers' tags are common"
    assert found["one at a time"] == found["in order"]
    assert found["group"] == found["in order"]
    assert _rebuilt(roots["group"]) == found["in order"]


def test_an_erase_leaves_the_proposals_a_rebuild_without_the_erased_entries_makes(tmp_path: Path) -> None:
    """Erasing early turns leaves the later ones fewer entries before them: a speaker's tag is no longer judged common
    there, and the turns nearest before them change; the proposals are then those a rebuild makes, as in a journal that
    never held the erased turns."""
    turns = conversation(24)
    erased = [turn["id"] for turn in turns[3:10]]
    root, never = tmp_path / "erased", tmp_path / "never"
    with Journal(root) as journal:
        journal.append_many(turns)
        before = _proposals(root)
        journal.erase(erased, reason="asked to forget", by="operator")
        after = _proposals(root)
    with Journal(never) as journal:
        journal.append_many([turn for turn in turns if turn["id"] not in erased])
    assert after != [row for row in before if row[0] not in erased and row[1] not in erased]  # erasing changed others' proposals
    assert after == _proposals(never)
    assert _rebuilt(root) == after


def test_with_nn_entries_appended_out_of_time_order_or_erased_are_paired_by_meaning_as_a_rebuild_pairs_them(
    tmp_path: Path, real_encoder: Encoder
) -> None:
    """An entry dated before others gets its vector after its words are paired: the entries after it are paired with it
    again by meaning then, as in order of time; an erase leaves what a rebuild (its vectors kept) makes."""
    payloads = [
        {"id": id_, "kind": "note", "agent": "motoko", "theme": "studio", "voice": voice, "tags": ["studio"], "ts": ts}
        for id_, voice, ts in (
            ("old", OLD, "2026-01-10T09:00:00Z"),
            ("other", OTHER, "2026-02-10T09:00:00Z"),
            ("new", NEW, "2026-04-20T09:00:00Z"),
            ("again", AGAIN, "2026-06-01T09:00:00Z"),
        )
    ]
    found = {}
    for name, order in (("in order", payloads), ("backfilled", payloads[::-1])):
        with Journal(tmp_path / name, enable_nn=True, encoder=real_encoder) as journal:
            for payload in order:
                journal.append(payload)
        found[name] = _proposals(tmp_path / name)
    assert any(row[4] is not None for row in found["in order"]), "the pairs carry their vectors' cosine"
    assert found["backfilled"] == found["in order"]
    with Journal(tmp_path / "backfilled", enable_nn=True, encoder=real_encoder) as journal:
        journal.reindex()
        assert _proposals(tmp_path / "backfilled") == found["in order"]
        journal.erase(["new"], reason="asked to forget", by="operator")
        erased = _proposals(tmp_path / "backfilled")
        journal.reindex()
        assert _proposals(tmp_path / "backfilled") == erased


# A small vocabulary, so random entries often share words, and now and then restate, update or ask.
_WORDS = ["studio", "studios", "boat", "garage", "kamakura", "shibuya", "rent", "moved", "leaks", "skylight", "ferry", "beach"]
_ENDINGS = [".", ".", ".", "?", "\uff1f", "? \U0001f914", "?\u201d", "!"]


@st.composite
def _journals(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int], list[str]]:
    """Entries of two agents (mostly one, so a subject can grow common), the order a group brings them in, and ids to erase."""
    count = draw(st.integers(2, 26))
    minutes = draw(st.lists(st.integers(0, 40), min_size=count, max_size=count))  # some share a time
    payloads: list[dict[str, Any]] = []
    for n, minute in enumerate(minutes):
        agent = draw(st.sampled_from(["alice", "alice", "alice", "bob"]))
        tags = draw(st.lists(st.sampled_from(["studio", "boat", "Harbour", "harbour"]), unique=True, max_size=2))
        voice = " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6))) + draw(st.sampled_from(_ENDINGS))
        payload: dict[str, Any] = {"id": f"e{n:02d}", "kind": "note", "agent": agent, "theme": "log", "voice": voice, "tags": tags,
                                   "ts": f"2026-03-01T10:{minute:02d}:00Z"}
        if draw(st.booleans()):
            payload["signals"] = {"focus": draw(st.sampled_from(["the move", "The Move", "rent"]))}
        if draw(st.integers(0, 9)) == 0:
            payload["meta"] = {"origin": "untrusted"}
        payloads.append(payload)
    order = draw(st.permutations(range(count)))
    # A continuity_ref names an entry of the same agent dated before and brought in before: valid whichever way it is appended.
    for at, n in enumerate(order):
        key = (payloads[n]["ts"], payloads[n]["id"])
        earlier = [m for m in order[:at] if payloads[m]["agent"] == payloads[n]["agent"] and (payloads[m]["ts"], payloads[m]["id"]) < key]
        if earlier and draw(st.integers(0, 3)) == 0:
            payloads[n].setdefault("signals", {})["continuity_refs"] = [payloads[draw(st.sampled_from(earlier))]["id"]]
    erased = draw(st.lists(st.sampled_from([payload["id"] for payload in payloads]), unique=True, max_size=4))
    return payloads, list(order), erased


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(journal=_journals())
def test_proposals_are_those_of_appends_in_time_order_however_the_index_is_built(journal: tuple[list[dict[str, Any]], list[int], list[str]]) -> None:
    payloads, order, erased = journal
    with tempfile.TemporaryDirectory() as tmp:
        roots = {name: Path(tmp) / name for name in ("in order", "group")}
        with Journal(roots["in order"]) as opened:
            for payload in _in_time_order(payloads):
                opened.append(payload)
        with Journal(roots["group"]) as opened:
            opened.append_many([payloads[n] for n in order])
        expected = _proposals(roots["in order"])
        assert _proposals(roots["group"]) == expected
        assert _rebuilt(roots["group"]) == expected
        with Journal(roots["in order"]) as opened:
            opened.erase(erased, reason="asked to forget", by="operator")
        assert _proposals(roots["in order"]) == _rebuilt(roots["in order"])
