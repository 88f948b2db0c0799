"""The relevance floor with the real model: a question about nothing the journal holds finds nothing by meaning."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.encoding import Encoder
from journal.encoding.semantic import RELEVANCE_FLOORS
from journal.errors import SemanticUnavailableError
from journal.files.entry import Entry
from tests.journal._fakes import FakeEncoder

Payload = Callable[..., dict[str, Any]]

LIFE = (
    ("pets", "I adopted a puppy last week; she chews my shoes."),
    ("cooking", "Made miso soup from scratch; the dashi took an hour but the kitchen smelled like my grandmother's house."),
    ("work", "Rolled back release 4.12.3 after the payment queue stalled; incident ticket OPS-7731 is still open."),
    ("running", "Ran along the canal before dawn, 6 km, lungs burning in the cold air."),
    ("family", "Called my mother. She talks about the garden in Nagano as if I had never left it."),
)
UNRELATED = "lattice gauge theory of quark confinement"


def _fill(journal: Journal, make_payload: Payload) -> dict[str, str]:
    return {theme: journal.append(make_payload(theme=theme, tags=[], voice=voice)).id for theme, voice in LIFE}


def test_a_question_about_nothing_in_the_journal_finds_nothing_by_meaning(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """Below the calibrated floor, semantic and hybrid search return no hits; floor=False ranks every entry; a paraphrase still passes."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        ids = _fill(journal, make_payload)
        floor = journal.relevance_floor
        assert floor == RELEVANCE_FLOORS[real_encoder.identity.split(":l2:", 1)[1]]
        unfloored = journal.search(UNRELATED, k=10, mode="semantic", floor=False)
        assert len(unfloored) == len(LIFE) and max(hit.score for hit in unfloored) < floor  # the floor, not a lack of entries, decides
        assert journal.search(UNRELATED, k=10, mode="semantic") == []
        assert journal.search(UNRELATED, k=10) == []  # hybrid: no word matches either
        [puppy] = journal.search("new canine companion", k=1, mode="semantic")
        assert puppy.entry_id == ids["pets"] and puppy.score >= floor


def test_hybrid_keeps_an_entry_the_words_matched_whatever_its_cosine(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """The floor is for the semantic arm: a ticket number found by BM25 stays, though its cosine is below the floor."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        ids = _fill(journal, make_payload)
        query = "OPS-7731 quark confinement"
        cosines = {hit.entry_id: hit.score for hit in journal.search(query, k=10, mode="semantic", floor=False)}
        assert cosines[ids["work"]] < journal.relevance_floor  # type: ignore[operator]  # NN is on: a float
        assert [hit.entry_id for hit in journal.search(query, k=10)] == [ids["work"]]
        assert journal.search(query, k=10, mode="semantic") == []


def test_the_prompt_context_fills_with_recent_entries_and_says_none_matched(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """With nothing relevant, the block still holds the recent fill, and its header counts 0 matches; without the floor, k."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        _fill(journal, make_payload)
        context = journal.context(UNRELATED, k=3)
        assert [record.found_by for record in context.records] == ["recent"] * 3
        assert json.loads(context.text.splitlines()[2])["matched"] == 0
        unfloored = journal.context(UNRELATED, k=3, floor=False)
        assert json.loads(unfloored.text.splitlines()[2])["matched"] == 3


def test_no_floor_without_nn_or_for_a_model_without_one(root: Path, make_payload: Payload) -> None:
    """Lexical journals and uncalibrated models have no floor, and rank as before."""
    with Journal(root) as journal:
        _fill(journal, make_payload)
        assert journal.relevance_floor is None
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        assert journal.relevance_floor is None
        assert len(journal.search(UNRELATED, k=10, mode="semantic")) == len(LIFE)


@pytest.mark.parametrize("command", ["search", "prompt-context"])
def test_the_cli_applies_the_floor_and_no_floor_lifts_it(root: Path, make_payload: Payload, command: str) -> None:
    """`--nn search` finds nothing for an unrelated question and `--no-floor` ranks every entry; prompt-context counts its matches."""
    with Journal(root) as journal:
        _fill(journal, make_payload)

    def run(*extra: str) -> Any:
        args = [sys.executable, "-m", "journal.cli.cli", "--root", str(root), "--nn", command, UNRELATED, "-k", "3", "--json", *extra]
        result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=300)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    if command == "search":
        assert run() == []
        assert len(run("--no-floor")) == 3
    else:
        header = [json.loads(run(*extra)["context"].splitlines()[2])["matched"] for extra in ((), ("--no-floor",))]
        assert header == [0, 3]


@pytest.mark.parametrize("question", [
    "What's the status of quark confinement?",
    "Where’s the lattice gauge theory paper? It's due",
    "I don't know anything about quark confinement, didn't you?",
])
def test_a_contraction_in_the_question_is_no_word_match(root: Path, make_payload: Payload, real_encoder: Encoder, question: str) -> None:
    """'what's' is split into 'what' and 's' like 'grandmother's' in the entry: the clitic alone must not lift the floor."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        _fill(journal, make_payload)
        assert journal.search(question, k=10) == []
        assert journal.search(question, k=10, mode="lexical") == []
        # The word before the apostrophe is still searched.
        [cooking] = journal.search("my grandmother’s place", k=1, mode="lexical")
        assert cooking.entry.theme == "cooking"


def _corrected_wifi(journal: Journal, make_payload: Payload) -> tuple[Entry, Entry, str]:
    """The life entries, a fact the question is about, its correction in other words (below the floor on its own), and the question."""
    _fill(journal, make_payload)
    old = journal.append(make_payload(theme="office", tags=[], voice="The office wifi password is swordfish-12."))
    new = journal.append(make_payload(theme="misc", tags=[], voice="Correction: use heron-77 from now on.", signals={"supersedes": [old.id]}))
    return old, new, "what is the office wifi password?"


def test_current_only_keeps_the_correction_of_an_entry_above_the_floor(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """A correction in other words is below the floor on its own; what it corrects is not, so current_only shows the correction."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        old, new, question = _corrected_wifi(journal, make_payload)
        cosines = {hit.entry_id: hit.score for hit in journal.search(question, k=10, mode="semantic", floor=False)}
        assert cosines[new.id] < journal.relevance_floor <= cosines[old.id]  # type: ignore[operator]  # NN is on: a float
        assert [hit.entry_id for hit in journal.search(question, k=10)] == [new.id, old.id]
        for mode in ("hybrid", "semantic", "lexical"):
            assert [hit.entry_id for hit in journal.search(question, k=10, mode=mode, current_only=True)] == [new.id], mode
        context = journal.context(question, k=3, current_only=True)
        assert [(record.id, record.found_by) for record in context.records if record.found_by == "match"] == [(new.id, "match")]
        assert old.id not in [record.id for record in context.records]


def test_a_correction_brought_in_below_the_floor_shows_its_own_score(root: Path, make_payload: Payload, real_encoder: Encoder) -> None:
    """The correction the floor left out comes back with the score the same ranking gives it, never the score of what it corrects.

    Without the neighbours' stage: the entries are written one second apart, so with it a score also counts its
    neighbour's in time, a neighbour floor=False keeps and the floor may leave out.
    """
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
        old, new, question = _corrected_wifi(journal, make_payload)
        for mode in ("hybrid", "semantic"):
            own = {hit.entry_id: hit.score for hit in journal.search(question, k=10, mode=mode, floor=False, rerank=False)}
            assert own[new.id] != own[old.id], mode
            for current_only in (False, True):
                floored = journal.search(question, k=10, mode=mode, current_only=current_only, rerank=False)
                assert {hit.entry_id: hit.score for hit in floored} == {entry_id: own[entry_id] for entry_id in [new.id, old.id][: 1 if current_only else 2]}
        # By words alone the correction matches nothing: it scores 0, not the BM25 score of the entry it corrects.
        [brought, corrected] = journal.search(question, k=10, mode="lexical")
        assert (brought.entry_id, brought.score) == (new.id, 0.0) and corrected.score > 0


def test_no_floor_without_nn_is_an_error_naming_what_to_do(root: Path, make_payload: Payload) -> None:
    """Ranking by words has no floor to lift: floor=False without NN is refused, in search and in both prompt-context calls."""
    with Journal(root) as journal:
        _fill(journal, make_payload)
        message = r"floor=False \(--no-floor; floor: false over MCP\) lifts the relevance floor of ranking by meaning, and this journal was opened without NN"
        for call in (journal.search, journal.context, journal.prompt_context):
            with pytest.raises(SemanticUnavailableError, match=message):
                call("puppy", floor=False)
        assert [hit.entry.theme for hit in journal.search("puppy", floor=True)] == ["pets"]
