"""The LoCoMo harness stores a conversation as the held-out harness does, and keeps every evidence id out of the index."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from journal import Journal
from journal.ranking.reranker import load_reranker

BENCH = Path(__file__).resolve().parents[2] / "bench"

CONVERSATION = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_2_date_time": "9:00 am on 2 June, 2023",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Back again."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I painted a sunrise."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Show me!", "blip_caption": "a photo of a painting"},
        ],
        "session_3": "not a list: no session",
    },
    "qa": [{"question": "What did Ann paint?", "answer": "a sunrise", "evidence": ["D1:1; D:1:2", "D9:9"], "category": 4}],
}


@pytest.fixture(scope="module")
def sets() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import retrieval_sets

        yield retrieval_sets
    finally:
        sys.path.remove(str(BENCH))


def test_each_turn_is_one_note_as_the_held_out_harness_stores_it(sets: ModuleType, tmp_path: Path) -> None:
    """Voice, caption, theme, ts (session time + turn index in seconds), the link to the session's previous turn; evidence cleaned."""
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    payloads, queries = sets.load_locomo(source)
    first, second, third = payloads
    assert [(p["agent"], p["kind"], p["theme"], p["voice"], p["ts"]) for p in payloads] == [
        ("conv-x", "note", "conversation on 8 May, 2023", 'Ann said, "I painted a sunrise."', "2023-05-08T13:56:00+00:00"),
        ("conv-x", "note", "conversation on 8 May, 2023", 'Bo said, "Show me!" and shared a photo of a painting', "2023-05-08T13:56:01+00:00"),
        ("conv-x", "note", "conversation on 2 June, 2023", 'Bo said, "Back again."', "2023-06-02T09:00:00+00:00"),
    ]
    assert "signals" not in first and "signals" not in third  # a session's first turn continues nothing
    assert second["signals"] == {"continuity_refs": [first["id"]]}
    assert queries == [{"agent": "conv-x", "query": "What did Ann paint?", "category": "single-hop", "relevant": {first["id"]: 1.0, second["id"]: 1.0}}]
    assert sets.gold_leaks(payloads) == []
    assert sets.gold_leaks([{**first, "voice": "see D1:2"}]) == [first["id"]]
    with Journal(tmp_path / "journal") as journal:  # valid entries, the links included
        for payload in payloads:
            journal.append(payload)
        assert journal.get(second["id"]).continuity_refs == (first["id"],)


def test_the_self_check_refuses_an_entry_naming_any_id_a_question_is_scored_against(sets: ModuleType) -> None:
    """A LoCoMo turn id, or (given the set's gold ids) any gold entry id as a whole word, in text that reaches the index is a leak."""
    entries = [{"id": "m01", "theme": "studio", "voice": "moved the studio"}, {"id": "m02", "theme": "studio", "voice": "see m01 for the old one"}]
    assert sets.gold_leaks(entries) == []  # no LoCoMo marker
    assert sets.gold_leaks(entries, {"m01"}) == ["m02"]
    assert sets.gold_leaks(entries, {"m0"}) == []  # a whole word only
    assert sets.gold_leaks([{"id": "m03", "voice": "x", "tags": ["m01"]}], {"m01"}) == ["m03"]
    assert sets.gold_leaks([{"id": "m04", "voice": "x", "signals": {"focus": "D2:7"}}]) == ["m04"]
    assert sets.gold_leaks([{"id": "m06", "theme": "session answer_4be1b6b4_2", "voice": "x"}]) == ["m06"]  # a LongMemEval evidence session
    assert sets.gold_leaks([{"id": "m07", "voice": "the answer_key was wrong"}]) == []
    assert sets.gold_leaks([{"id": "m05", "voice": "x", "signals": {"continuity_refs": ["m01"]}}], {"m01"}) == []  # a link is no text


def _two_conversations(tmp_path: Path) -> Path:
    """Two small conversations of three sessions, each with questions whose evidence is the turn after the one that matches their words."""
    conversations = []
    for n, (a, b) in enumerate((("Ann", "Bo"), ("Cy", "Di"))):
        turns: dict[str, object] = {"speaker_a": a, "speaker_b": b}
        qa = []
        topics = ("painting", "guitar", "garden", "bakery", "marathon", "chess")
        for session, topic in enumerate(topics, 1):
            turns[f"session_{session}_date_time"] = f"1:56 pm on {session} May, 2023"
            turns[f"session_{session}"] = [
                {"speaker": a, "dia_id": f"D{session}:1", "text": f"How is your {topic} going?"},
                {"speaker": b, "dia_id": f"D{session}:2", "text": f"Wonderful, I won a prize last week number {session + 10 * n}."},
                {"speaker": a, "dia_id": f"D{session}:3", "text": "Good to hear."},
            ]
            qa.append({"question": f"What happened with {b}'s {topic}?", "answer": "a prize", "evidence": [f"D{session}:2"], "category": 4})
        conversations.append({"sample_id": f"conv-{n}", "conversation": turns, "qa": qa})
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps(conversations), encoding="utf-8")
    return source


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, check=False, timeout=600, cwd=BENCH.parent)


def test_the_held_out_bench_prints_recall_per_category_for_locomo_and_the_journal_set_after_its_self_check(tmp_path: Path) -> None:
    """``bench_retrieval.py locomo`` prints the self-check, then R@5/10/25 per variant and category for both sets; a leak stops it."""
    source = _two_conversations(tmp_path)
    journal_set = BENCH / "journal_set.json"
    result = _run(BENCH / "bench_retrieval.py", "locomo", source, "--modes", "lexical", "--journal-set", journal_set)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "LoCoMo dev as the held-out harness stores it: 36 entries, 12 questions; self-check: no evidence id (12)" in out
    assert "journal set journal_set.json: 35 entries, 21 questions; self-check: no evidence id" in out
    rows = [m.groups() for line in out.splitlines() if (m := re.fullmatch(r"  (lexical(?: \+ stages| \+ reranker)?) +(\S+) +(\d+) +([\d.]+) +([\d.]+) +([\d.]+)", line))]
    pairs = {(variant, group, int(n)) for variant, group, n, *_ in rows}
    for variant in ("lexical", "lexical + stages", "lexical + reranker"):
        assert {(variant, "overall", 12), (variant, "single-hop", 12), (variant, "overall", 21), (variant, "updated-fact", 4)} <= pairs
    assert all(0 <= float(value) <= 1 for row in rows for value in row[3:])
    leaking = json.loads(source.read_text(encoding="utf-8"))
    leaking[0]["conversation"]["session_1"][0]["text"] = "see D1:2"
    source.write_text(json.dumps(leaking), encoding="utf-8")
    refused = _run(BENCH / "bench_retrieval.py", "locomo", source, "--modes", "lexical")
    assert refused.returncode != 0 and "an evidence id would reach the index in 1 entries" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_reranker_trial_scores_each_conversation_with_a_model_fitted_on_the_others_and_writes_weights_the_journal_loads(tmp_path: Path) -> None:
    """``train_reranker.py`` prints, per conversation or set held apart, the L2 chosen without it, recall of the stage -> the model per set, and writes a usable file."""
    pytest.importorskip("numpy")
    written = tmp_path / "weights.json"
    result = _run(BENCH / "train_reranker.py", _two_conversations(tmp_path), "--synthetic", "2", "--runner", "0", "--write", written)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for mode in ("lexical", "hybrid"):
        chosen = [found[1] for line in lines if (found := re.fullmatch(rf"{mode}: held apart (.+): L2 [\d.]+ chosen without it", line))]
        assert chosen == ["conv-0", "conv-1", "journal set", "syn-0", "syn-1"]
        overall = next(line for line in lines if line.split()[:4] == [mode, "LoCoMo", "dev", "overall"])
        assert re.fullmatch(rf"\s*{mode} LoCoMo dev\s+overall\s+12(  R@\d+ [\d.]+ -> [\d.]+){{3}}", overall)
        assert any(line.split()[:3] == [mode, "synthetic", "overall"] for line in lines)
        assert any(line.split()[:4] == [mode, "journal", "set", "overall"] for line in lines)
    assert re.search(r"^on by default: (yes|no) ", result.stdout, re.MULTILINE)
    loaded = load_reranker(written, chosen=True)
    assert loaded is not None and loaded.enabled == ("on by default: yes" in result.stdout)
    assert "2 synthetic conversations" in json.loads(written.read_text(encoding="utf-8"))["trained_on"]


def test_the_synthetic_conversations_are_stored_as_locomo_is_and_their_asked_answers_share_no_word_with_the_question(
    sets: ModuleType, tmp_path: Path
) -> None:
    """The reranker's own training conversations: one note a turn in the held-out layout, evidence among the turns and named nowhere, the same for a seed."""
    from conversation_sets import synthetic_conversations  # bench/ is on the path while `sets` is

    from journal.indexing import QueryWords

    payloads, queries = synthetic_conversations(2, seed=5)
    assert (payloads, queries) == synthetic_conversations(2, seed=5) and payloads != synthetic_conversations(2, seed=6)[0]
    by_id = {p["id"]: p for p in payloads}
    assert len(by_id) == len(payloads) and {p["agent"] for p in payloads} == {"syn-0", "syn-1"}
    previous: dict[str, Any] | None = None
    for p in payloads:
        assert p["kind"] == "note" and p["theme"].startswith("conversation on ") and re.fullmatch(r'\w+ said, ".+"', p["voice"])
        same_session = previous is not None and previous["agent"] == p["agent"] and previous["theme"] == p["theme"]
        assert p.get("signals") == ({"continuity_refs": [previous["id"]]} if same_session and previous else None)
        previous = p
    assert {q["category"] for q in queries} == {"asked", "told", "when", "two sessions"}
    assert all(q["relevant"] and set(q["relevant"]) <= by_id.keys() for q in queries)
    assert sets.gold_leaks(payloads, {entry_id for q in queries for entry_id in q["relevant"]}) == []
    for q in (q for q in queries if q["category"] == "asked"):
        answer = by_id[next(iter(q["relevant"]))]["voice"]
        teller, said = answer.split(" said, ", 1)
        assert not set(QueryWords.of(q["query"].replace(teller, "")).terms) & set(QueryWords.of(said).terms), (q["query"], answer)
    with Journal(tmp_path / "journal") as journal:  # valid entries, the links included
        for payload in payloads:
            journal.append(payload)
