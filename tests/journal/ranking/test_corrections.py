"""Corrections that never delete: ``signals.supersedes``, ``current_only`` and ``as_of`` on every read."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.errors import EntryValidationError
from journal.files.entry import Entry

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "journal" / "schemas" / "entry-v1.schema.json").read_text())


def _at(days: int) -> str:
    return (T0 + timedelta(days=days)).isoformat()


def _note(journal: Journal, voice: str, days: int, *, agent: str = "motoko", theme: str = "office", supersedes: list[str] | None = None,
          **extra: Any) -> Entry:
    payload: dict[str, Any] = {"kind": "note", "agent": agent, "theme": theme, "voice": voice, "ts": _at(days), **extra}
    if supersedes is not None:
        payload["signals"] = {"supersedes": supersedes}
    return journal.append(payload)


@pytest.fixture
def facts(journal: Journal) -> dict[str, Entry]:
    """An old fact, its correction two months later, and an unrelated entry in between."""
    old = _note(journal, "The office wifi password is tern-42, written on the card by the door.", 0)
    other = _note(journal, "Bought a new kettle for the office kitchen; it whistles.", 20, theme="kitchen")
    new = _note(journal, "The office wifi password changed: it is heron-77 now.", 60, supersedes=[old.id])
    return {"old": old, "other": other, "new": new}


def test_a_superseding_entry_validates_against_the_schema_file_and_keeps_its_field(facts: dict[str, Entry], journal: Journal) -> None:
    stored = journal.get(facts["new"].id)
    assert stored.supersedes == (facts["old"].id,)
    jsonschema.validate(stored.to_dict(), SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**stored.to_dict(), "signals": {"supersedes": [facts["old"].id, facts["old"].id]}}, SCHEMA)


@pytest.mark.parametrize(("value", "field", "expected"), [
    ("abc", "signals.supersedes", "an array of entry ids"),
    (["../etc"], "signals.supersedes[0]", "an entry id"),
    ([7], "signals.supersedes[0]", "an entry id"),
    (["a1", "a1"], "signals.supersedes", "unique entry ids"),
])
def test_a_malformed_supersedes_is_refused_by_field(journal: Journal, value: object, field: str, expected: str) -> None:
    with pytest.raises(EntryValidationError, match=expected) as caught:
        journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "v", "signals": {"supersedes": value}})
    assert caught.value.field == field


def test_search_puts_a_correction_above_what_it_corrects_even_when_only_the_old_words_match(facts: dict[str, Entry], journal: Journal) -> None:
    hits = journal.search("wifi password tern-42", agent="motoko")
    ids = [hit.entry_id for hit in hits]
    assert ids.index(facts["new"].id) < ids.index(facts["old"].id)
    assert hits[ids.index(facts["old"].id)].superseded_by == (facts["new"].id,)
    # Only the old entry holds "tern": its correction is brought in, above it.
    only_old = journal.search("tern", agent="motoko")
    assert [hit.entry_id for hit in only_old] == [facts["new"].id, facts["old"].id]
    assert only_old[1].to_dict()["superseded_by"] == [facts["new"].id]
    assert "superseded_by" not in only_old[0].to_dict()


def test_k_counts_the_correction_brought_in(facts: dict[str, Entry], journal: Journal) -> None:
    assert [hit.entry_id for hit in journal.search("tern", agent="motoko", k=1)] == [facts["new"].id]


def test_a_correction_brought_in_past_k_or_linked_past_the_similar_carries_its_own_score(journal: Journal) -> None:
    """By words, a correction that ranks below k comes in with its own BM25 score, and relate scores a link the similar ones pushed out."""
    old = _note(journal, "The office wifi password is swordfish-12; the office router sits by the office door.", 0, tags=["wifi"])
    for day in (1, 2, 3):
        _note(journal, f"The office wifi password and the office router door, floor {day}.", day)
    new = _note(journal, "Correction: the wifi password is heron-77.", 4, theme="misc", supersedes=[old.id])
    for day in range(5, 15):  # entries without the words, so that BM25 weighs them
        _note(journal, f"Ran along the canal, lap {day}.", day, theme="running")
    query = "office wifi password"
    own = {hit.entry_id: hit.score for hit in journal.search(query, k=10)}
    assert min(score for entry_id, score in own.items() if entry_id != new.id) > own[new.id] > 0
    [brought] = journal.search(query, k=1)
    assert (brought.entry_id, brought.score) == (new.id, own[new.id])
    related = {hit.entry_id: hit for hit in journal.relate(old.id, k=10)}
    [link, *_] = journal.relate(old.id, k=1)
    assert (link.entry_id, link.reason, link.score) == (new.id, "superseded_by", related[new.id].score)
    assert link.score > 0


def test_current_only_hides_superseded_entries_in_every_read(facts: dict[str, Entry], journal: Journal) -> None:
    assert facts["old"].id not in [hit.entry_id for hit in journal.search("wifi password tern", agent="motoko", current_only=True)]
    assert [entry.id for entry in journal.list(agent="motoko", current_only=True)] == [facts["new"].id, facts["other"].id]
    context = journal.context("wifi password", agent="motoko", k=6, current_only=True)
    assert facts["old"].id not in [record.id for record in context.records]
    assert {record.id for record in context.records} == {facts["new"].id, facts["other"].id}


def test_as_of_answers_from_the_journal_as_it_stood(facts: dict[str, Entry], journal: Journal) -> None:
    march = _at(30)
    hits = journal.search("wifi password", agent="motoko", as_of=march)
    assert [hit.entry_id for hit in hits] == [facts["old"].id]
    assert hits[0].superseded_by == ()
    assert journal.search("wifi password", agent="motoko", as_of=march, current_only=True)[0].entry_id == facts["old"].id
    assert [entry.id for entry in journal.list(agent="motoko", as_of=march)] == [facts["other"].id, facts["old"].id]
    # as_of includes its own instant; until stays exclusive.
    assert journal.list(agent="motoko", as_of=_at(60))[0].id == facts["new"].id
    assert facts["new"].id not in [entry.id for entry in journal.list(agent="motoko", until=_at(60))]
    then = journal.digest(agent="motoko", as_of=march).to_dict()
    assert then["count"] == 2 and then["corrections"] == {"entries": 0, "superseded": 0} and then["as_of"].startswith("2026-04-01T09:00:00")
    context = journal.context("wifi password", agent="motoko", as_of=march)
    assert [record.id for record in context.records] == [facts["old"].id, facts["other"].id]
    assert "superseded_by" not in context.text


def test_the_prompt_context_says_superseded_by_and_how_many_matched(facts: dict[str, Entry], journal: Journal) -> None:
    context = journal.context("tern", agent="motoko", k=3)
    records = {record.id: record for record in context.records}
    assert records[facts["old"].id].superseded_by == (facts["new"].id,)
    assert records[facts["new"].id].found_by == "match" and records[facts["other"].id].found_by == "recent"
    lines = [json.loads(line) for line in context.text.splitlines()[2:-1]]
    assert lines[0] == {"query": "tern", "records": 3, "matched": 2, "omitted": 0}
    assert next(line for line in lines[1:] if line["id"] == facts["old"].id)["superseded_by"] == [facts["new"].id]


def test_a_superseded_entry_of_the_recent_fill_says_superseded_by_too(facts: dict[str, Entry], journal: Journal) -> None:
    """Nothing matches the query: every record is recent fill, and the corrected one still names its correction."""
    context = journal.context("zeppelin", agent="motoko", k=3)
    records = {record.id: record for record in context.records}
    assert {record.found_by for record in context.records} == {"recent"}
    assert records[facts["old"].id].superseded_by == (facts["new"].id,)
    assert records[facts["new"].id].superseded_by == () and records[facts["other"].id].superseded_by == ()


def test_relate_shows_the_link_both_ways_and_digest_counts_corrections(facts: dict[str, Entry], journal: Journal) -> None:
    from_new = journal.relate(facts["new"].id, agent="motoko")
    assert (from_new[0].entry_id, from_new[0].reason) == (facts["old"].id, "supersedes")
    from_old = journal.relate(facts["old"].id, agent="motoko")
    assert (from_old[0].entry_id, from_old[0].reason) == (facts["new"].id, "superseded_by")
    for agent in ("motoko", None):
        assert journal.digest(agent=agent).to_dict()["corrections"] == {"entries": 1, "superseded": 1}
    # A window that holds only the correction still counts it: what it corrects is older.
    assert journal.digest(agent="motoko", since=_at(50)).to_dict()["corrections"] == {"entries": 1, "superseded": 1}


def test_a_rebuilt_index_keeps_every_supersession(facts: dict[str, Entry], journal: Journal, root: Path) -> None:
    journal.reindex()
    with Journal(root) as reopened:
        assert [hit.entry_id for hit in reopened.search("tern", agent="motoko")] == [facts["new"].id, facts["old"].id]
    (root / "index" / "journal.sqlite3").unlink()
    with Journal(root) as rebuilt:
        assert rebuilt.search("tern", agent="motoko")[1].superseded_by == (facts["new"].id,)


def test_entries_without_supersedes_are_unchanged_on_disk(journal: Journal, root: Path, make_payload: Callable[..., dict[str, Any]]) -> None:
    entry = journal.append(make_payload(signals={"focus": "tides", "continuity_refs": []}))
    stored = json.loads(next((root / "entries").rglob(f"{entry.id}.json")).read_text())
    assert "supersedes" not in stored["signals"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.sampled_from(["motoko", "batou"]), st.sampled_from(["rain", "tide", "rain tide", "lamp"]),
                               st.lists(st.integers(min_value=0, max_value=30), max_size=3)), min_size=1, max_size=14),
       query=st.sampled_from(["rain", "tide", "lamp", "rain tide"]), current_only=st.booleans())
def test_no_superseded_hit_ever_comes_before_what_supersedes_it(tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[str, str, list[int]]],
                                                                 query: str, current_only: bool) -> None:
    """Random chains of corrections (each naming earlier entries of its own agent): every read keeps the order, and the agent."""
    root = tmp_path_factory.mktemp("chains") / "journal"
    with Journal(root) as journal:
        written: list[Entry] = []
        for position, (agent, words, picks) in enumerate(plan):
            own = [entry.id for entry in written if entry.agent == agent]
            supersedes = sorted({own[pick % len(own)] for pick in picks}) if own else []
            written.append(_note(journal, f"{words} entry {position}", position, agent=agent, theme=words, supersedes=supersedes or None))
        superseded_by: dict[str, set[str]] = {}
        for entry in written:
            for ref in entry.supersedes:
                superseded_by.setdefault(ref, set()).add(entry.id)
        hits = journal.search(query, agent="motoko", k=20, current_only=current_only)
        ids = [hit.entry_id for hit in hits]
        assert all(hit.entry.agent == "motoko" for hit in hits)
        for hit in hits:
            assert set(hit.superseded_by) == superseded_by.get(hit.entry_id, set())
            assert not (current_only and hit.superseded_by)
            for newer in hit.superseded_by:
                if newer in ids:
                    assert ids.index(newer) < ids.index(hit.entry_id)
        assert len(ids) == len(set(ids))


def test_the_cli_takes_as_of_and_current_only(facts: dict[str, Entry], root: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ghostjournal", "--root", str(root), *args], capture_output=True, text=True, timeout=60, check=False)

    corrected = json.loads(run("search", "tern", "--agent", "motoko").stdout)
    assert [hit["entry_id"] for hit in corrected] == [facts["new"].id, facts["old"].id]
    assert corrected[1]["superseded_by"] == [facts["new"].id]
    current = json.loads(run("search", "wifi password", "--agent", "motoko", "--current-only").stdout)
    assert [hit["entry_id"] for hit in current] == [facts["new"].id]
    listed = json.loads(run("list", "--agent", "motoko", "--as-of", _at(30)).stdout)
    assert [entry["id"] for entry in listed] == [facts["other"].id, facts["old"].id]
    assert json.loads(run("digest", "--as-of", _at(61)).stdout)["corrections"] == {"entries": 1, "superseded": 1}
    block = run("prompt-context", "wifi", "--agent", "motoko", "--current-only", "--raw").stdout
    assert facts["new"].id in block and facts["old"].id not in block
    # --as-of takes the command line's time forms: a relative time, and nothing else.
    assert json.loads(run("list", "--agent", "motoko", "--as-of", "-1d").stdout)[0]["id"] == facts["new"].id
    garbled = run("search", "tern", "--as-of", "last spring")
    assert garbled.returncode == 2 and "--as-of" in garbled.stderr and "Traceback" not in garbled.stderr


def test_current_only_shows_the_correction_of_an_entry_only_its_old_words_find(facts: dict[str, Entry], journal: Journal) -> None:
    """Only the old entry holds "tern": current_only leaves it out but still brings in its correction, and k counts it."""
    assert [hit.entry_id for hit in journal.search("tern", agent="motoko", current_only=True)] == [facts["new"].id]
    context = journal.context("tern", agent="motoko", k=1, current_only=True)
    assert [(record.id, record.found_by) for record in context.records] == [(facts["new"].id, "match")]
