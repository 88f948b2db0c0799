"""Hybrid ranking with the real model in a journal of runner-like entries: a meaning match is not buried."""

from __future__ import annotations

import random
import tomllib
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from journal import Journal
from journal.encoding import Encoder, load_encoder
from runner import load_config, run_demo, simulation_window

PERSONA = Path(__file__).resolve().parents[3] / "runner" / "data" / "motoko.toml"
ENTRIES = 2500
DISTINCT_VOICES = 300


class _OncePerText:
    """The real encoder, embedding each distinct text once (the journal repeats its voices)."""

    def __init__(self, inner: Encoder) -> None:
        self._inner = inner
        self._seen: dict[str, npt.NDArray[np.float32]] = {}

    @property
    def identity(self) -> str:
        return self._inner.identity

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        new = [text for text in dict.fromkeys(texts) if text not in self._seen]
        if new:
            self._seen.update(zip(new, self._inner.encode(new), strict=True))
        return np.stack([self._seen[text] for text in texts])


def _runner_like_payloads(count: int, seed: int) -> list[dict[str, Any]]:
    """Pulses in the simulated backend's shapes, from the demo persona's phrases; a third say "Something new on my mind"."""
    persona = tomllib.loads(PERSONA.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    voices = []
    for n in range(DISTINCT_VOICES):
        interest, other = rng.sample(persona["interests"], 2)
        focus = rng.choice(interest["focus"])
        opening = (f"Something new on my mind: {interest['theme']}, {focus}.", f"Back to {interest['theme']}: the thread from last week is still open, {focus}.",
                   f"What was {other['theme']} last week has slid into {interest['theme']}; now it is {focus}.")[n % 3]
        image = f"{rng.choice(interest['images']).capitalize()}, at {rng.choice(persona['places'])}."
        voices.append((interest, f"{rng.choice(persona['openers'])} {opening} {image} {rng.choice(persona['closers'])}"))
    start = datetime(2025, 1, 1, tzinfo=UTC)
    payloads = []
    for n in range(count):
        interest, voice = rng.choice(voices)
        payloads.append({"kind": "pulse", "agent": "motoko", "ts": (start + timedelta(hours=3 * n)).isoformat(), "theme": interest["theme"],
                         "tags": interest["tags"][:2], "voice": voice})
    return payloads


def test_a_paraphrase_stays_in_hybrids_top_three_amid_weak_lexical_hits(root: Path) -> None:
    """'new canine companion' against thousands of pulses that all say 'new': the puppy note is in hybrid's top 3."""
    with Journal(root) as writer:
        for payload in _runner_like_payloads(ENTRIES, seed=5):
            writer.append(payload)
        puppy = writer.append({"kind": "note", "agent": "motoko", "theme": "home", "ts": "2025-06-01T10:00:00+00:00",
                               "voice": "I adopted a puppy last week; she chews my shoes."})
    with Journal(root, enable_nn=True, encoder=_OncePerText(load_encoder())) as journal:
        lexical = journal.search("new canine companion", k=50, mode="lexical")
        assert len(lexical) == 50 and puppy.id not in {hit.entry_id for hit in lexical}  # only weak hits on "new"
        assert journal.search("new canine companion", k=1, mode="semantic")[0].entry_id == puppy.id
        assert puppy.id in [hit.entry_id for hit in journal.search("new canine companion", k=3, mode="hybrid")]
        # a run's prompt context ranks the same way
        records = journal.context("new canine companion", k=3, agent="motoko").records
        assert (puppy.id, "match") in [(record.id, record.found_by) for record in records]


def test_the_demo_journal_finds_the_puppy_note_in_hybrids_top_three() -> None:
    """After `ghostrunner demo` (its default 28 days), a puppy note is in hybrid's top 3 for 'new canine companion'."""
    config = load_config()
    start, _ = simulation_window(28, config.timezone, date(2026, 8, 3))
    report = run_demo(config, "motoko", start, 28)
    with Journal(report.journal_root, enable_nn=True) as journal:
        puppy = journal.append({"kind": "note", "agent": "motoko", "theme": "home", "voice": "I adopted a puppy last week; she chews my shoes."})
        assert journal.search("new canine companion", k=10, mode="lexical")  # the demo's pulses say "new"
        assert puppy.id in [hit.entry_id for hit in journal.search("new canine companion", k=3, mode="hybrid")]


def test_in_a_small_journal_a_one_word_lexical_hit_does_not_bury_the_meaning_matches(root: Path) -> None:
    """'the animal that adopted me' in a dozen notes: only the harbour note holds a searched word ("animals"),
    and hybrid's top 3, with both notes about the adopted cat, is the vectors' own."""
    notes = [
        ("harbor light", "Night walk to the pier: sodium lamps turn the fog orange, and the cranes look like sleeping animals."),
        ("cat", "The stray tabby from the garage now waits at the door every morning; I bought her a bowl."),
        ("cat", "Named the tabby Kusanagi. She sleeps on the enlarger now."),
        ("mother", "Called my mother. She talks about the garden in Nagano as if I had never left it."),
        ("work", "The payment queue stalled again after the release; rolled back at midnight."),
        ("darkroom", "Printed the harbour series on fibre paper; the grain is finally right."),
        ("running", "Ran along the canal before work; my knee held up for ten kilometres."),
        ("cooking", "Made miso soup with dashi from scratch and ate it on the balcony."),
        ("reading", "Finished the second volume of the detective novel on the night train."),
        ("sleep", "Woke at four again and watched the ceiling until the birds started."),
        ("studio", "Moved the studio to the third floor of the old textile building."),
        ("phone", "Changed my phone number; the old one kept getting vendor calls."),
    ]
    with Journal(root, enable_nn=True) as journal:
        ids = [journal.append({"kind": "note", "agent": "motoko", "theme": theme, "voice": voice}).id for theme, voice in notes]
        query = "the animal that adopted me"
        assert [hit.entry_id for hit in journal.search(query, k=10, mode="lexical")] == [ids[0]]
        by_meaning = [hit.entry_id for hit in journal.search(query, k=3, mode="semantic")]
        assert set(by_meaning) >= {ids[1], ids[2]}
        # Before the partial hit set the floor, it took the whole lexical weight and came first, pushing a cat note out of the top 3.
        # The fusion alone (rerank=False): the notes are appended in one second, so each is the next one's neighbour in time.
        assert [hit.entry_id for hit in journal.search(query, k=3, mode="hybrid", rerank=False)] == by_meaning
