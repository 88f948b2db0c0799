"""The LoCoMo harness stores a conversation as the held-out harness does, and keeps every evidence id out of the index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from journal import Journal

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
