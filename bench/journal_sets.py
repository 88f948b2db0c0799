"""Journal-shaped labelled sets generated at bench time: a runner-written journal with planted entries.

The journal is what ``ghostrunner simulate`` writes for the embedded default
agent (motoko, simulated backend), long enough for the asked number of
entries. Two kinds of entries are then planted at seeded random times:

- *paraphrase*: an event told in words its question never uses (checked
  against the journal's own stemmer: the lexical arm cannot find it), while
  the question carries common words of the journal ("new", "day", "work"), so
  BM25 returns a list of weak hits;
- *rare word*: a runner-like sentence carrying a made-up name that occurs
  nowhere else; the question asks for that name in the journal's own words,
  so only the exact word points at the entry. Each has decoys: the same
  sentence with names one syllable away, which read alike to an encoder's
  word pieces but are other words to BM25.

Everything is deterministic for a seed.
"""

from __future__ import annotations

import random
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from journal import Journal
from runner import configure_logging, load_config, simulate

AGENT: Final = "motoko"
RUNS_PER_DAY: Final = 6 + 1 + 1 / 7  # pulse-4h, evening, the weekly digest

#: (planted entry, its question): no word of the question is in the entry.
PARAPHRASES: Final = (
    ("I adopted a puppy last week; she chews my shoes.", "new canine companion"),
    ("Booked flights to Lisbon for the spring holiday.", "upcoming vacation by airplane"),
    ("My grandmother passed away on Sunday morning.", "a death in the family"),
    ("Started taking violin lessons on Thursdays.", "learning to play a musical instrument"),
    ("The dentist pulled my wisdom tooth today.", "oral surgery appointment"),
    ("We finally bought the apartment near the river.", "purchasing a new home"),
    ("Sprained my ankle jogging along the canal.", "injury while running"),
    ("My sister gave birth to twins last night.", "new babies born to a sibling"),
    ("Quit smoking three weeks ago and the cravings are fading.", "giving up cigarettes"),
    ("Got promoted to team lead at the office.", "career advancement at my job"),
    ("Our basement flooded after the storm.", "water damage in the house"),
    ("I burned the lasagna and set off the smoke alarm.", "cooking disaster"),
    ("Planted tomatoes and basil in pots.", "growing vegetables and herbs"),
    ("Lost my wallet on the subway with every card in it.", "misplaced purse during commute"),
    ("Ran my first marathon in under four hours.", "completed a long distance race"),
    ("Caught a cold and spent the day in bed with fever.", "feeling sick and unwell"),
    ("Our wedding is set for June at the lakeside chapel.", "marriage ceremony plans"),
    ("Learned to make sourdough from scratch.", "homemade bread baking"),
    ("The landlord raised the rent by fifteen percent.", "higher housing costs this year"),
    ("Spotted a heron fishing in the pond at dawn.", "birdwatching early"),
    ("My laptop screen cracked when it fell.", "broken computer display"),
    ("Volunteered at the soup kitchen on Saturday.", "charity work feeding homeless people"),
    ("Passed my driving test on the second try.", "got a license for a car"),
    ("Adopted a kitten from the shelter.", "new feline pet"),
)

_SYLLABLES: Final = ("ka", "vor", "thi", "zel", "mu", "rin", "qua", "dex", "lo", "sar", "vek", "ny", "osh", "tam", "bri", "gol")
_RARE_TEMPLATES: Final = (
    ("Noted: the team, a message from {word} about the briefing. Back to work.", "what did {word} say about the briefing"),
    ("Short one. {word} left a note at the data room. Keep watching it.", "the note {word} left"),
    ("Something new on my mind: the file marked {word}, what the logs leave out.", "the {word} file"),
    ("Another pass. Walked the long way back with {word} after the dive.", "walking back with {word}"),
)


DECOYS: Final = 3


def _rare_words(rng: random.Random, taken: set[str]) -> list[str]:
    """A new made-up name and its decoys (each differs from it in one syllable)."""
    while True:
        syllables = [rng.choice(_SYLLABLES) for _ in range(3)]
        words = ["".join(syllables).capitalize()]
        for _ in range(DECOYS):
            changed = list(syllables)
            changed[rng.randrange(3)] = rng.choice([s for s in _SYLLABLES if s not in syllables])
            words.append("".join(changed).capitalize())
        if len(set(words)) == len(words) and not taken & set(words):
            taken.update(words)
            return words


def simulate_background(root: Path, entries: int) -> None:
    """Fill *root* with a runner-written journal of about *entries* entries (the default agent, simulated backend)."""
    work = root.parent
    persona = Path(__file__).resolve().parent.parent / "runner" / "data" / "motoko.toml"
    config_file = work / "ghostrunner.toml"
    config_file.write_text(
        f'[runner]\njournal_root = "{root.name}"\ntimezone = "Asia/Tokyo"\n'
        f'[agents.{AGENT}]\npersona = "{persona}"\nroutines = ["pulse-4h", "evening", "digest"]\nbackend = "simulated"\n',
        encoding="utf-8",
    )
    config = load_config(config_file)
    configure_logging(level="warning")  # one line per run would drown the figures
    start = datetime(2025, 1, 1, tzinfo=config.timezone)
    simulate(config, [AGENT], start, start + timedelta(days=round(entries / RUNS_PER_DAY)), workers=1)


def build_runner_set(root: Path, entries: int, *, seed: int = 11) -> list[dict[str, Any]]:
    """Write a runner journal of about *entries* entries with planted ones into *root*; return the queries.

    Each query is ``{agent, query, category, relevant: {entry_id: 1.0}}``.
    """
    simulate_background(root, entries)
    rng = random.Random(seed)
    queries: list[dict[str, Any]] = []
    with Journal(root) as journal:
        newest = journal.list(agent=AGENT)
        first, last = datetime.fromisoformat(newest[-1].ts), datetime.fromisoformat(newest[0].ts)
        span = (last - first).total_seconds()

        def plant(voice: str, theme: str) -> str:
            ts = first + timedelta(seconds=rng.uniform(0, span))
            return journal.append({"kind": "note", "agent": AGENT, "theme": theme, "voice": voice, "ts": ts.isoformat()}).id

        for voice, question in PARAPHRASES:
            entry_id = plant(voice, "life")
            if any(hit.entry_id == entry_id for hit in journal.search(question, k=10_000, agent=AGENT, mode="lexical", rerank=False)):
                raise AssertionError(f"the paraphrase question {question!r} shares a word with its entry")
            queries.append({"agent": AGENT, "query": question, "category": "paraphrase", "relevant": {entry_id: 1.0}})
        taken: set[str] = set()
        for n in range(len(PARAPHRASES)):
            voice, question = _RARE_TEMPLATES[n % len(_RARE_TEMPLATES)]
            word, *decoys = _rare_words(rng, taken)
            entry_id = plant(voice.format(word=word), "the team")
            for decoy in decoys:
                plant(voice.format(word=decoy), "the team")
            queries.append({"agent": AGENT, "query": question.format(word=word), "category": "rare-word", "relevant": {entry_id: 1.0}})
    return queries


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        found = build_runner_set(Path(tmp) / "journal", 1000)
        print(len(found), found[0], found[-1])
