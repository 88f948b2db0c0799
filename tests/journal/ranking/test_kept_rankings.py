"""Searches and prompt contexts of a fixed journal give exactly the answers kept in ``tests/data/kept-rankings.json``.

The journal is made here from a seeded generator, ids and times included, so
two trees build the same one. Its queries are mostly common words (every
entry holds some: the newest-matches plan ranks them) and a few rarer ones,
asked unscoped, scoped to an agent and with filters. The kept file holds
every hit's id, score and snippet and a digest of every prompt context's text as
the ranking gave them when it was made; a change that makes the ranking faster
must leave them all as they are. To make the file again (only for a change
meant to alter rankings): ``GHOSTJOURNAL_KEEP_RANKINGS=1 python -m pytest``
on this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import journal.indexing._fts as fts_module
from journal import Journal
from journal.indexing._fts import CommonWords
from journal.indexing._newest import newest_ranked

KEPT = Path(__file__).resolve().parents[2] / "data" / "kept-rankings.json"
WORDS = ["harbor", "tide", "ferry", "lantern", "signal", "review", "sprint", "garden", "queue", "canal"]
RARER = ["zeppelin", "mackerel", "violin", "umbrella", "sculpture", "dumpling", "heron", "platform"]
AGENTS = ("motoko", "batou", "togusa")
START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
# A journal of a few hundred entries has common words under these thresholds, and more matches than candidates.
SMALL = CommonWords(share=0.05, min_docs=40, candidates=60)


def payloads(count: int = 360, seed: int = 34) -> list[dict[str, Any]]:
    """*count* entries of three agents, minutes apart (some at one instant), continuing and correcting their own."""
    rng = random.Random(seed)
    made: list[dict[str, Any]] = []
    mine: dict[str, list[str]] = {agent: [] for agent in AGENTS}
    clock = START
    for n in range(count):
        clock += timedelta(minutes=rng.choice((0, 4, 9, 13, 25, 60)))
        agent = rng.choice(AGENTS)
        words = [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(rng.randint(4, 40))]
        words += rng.sample(RARER, rng.choice((0, 0, 0, 1, 2)))
        rng.shuffle(words)
        signals: dict[str, Any] = {"focus": rng.choice(WORDS)}
        if mine[agent] and rng.random() < 0.3:
            signals["continuity_refs"] = [rng.choice(mine[agent][-6:])]
        if mine[agent] and rng.random() < 0.06:
            signals["supersedes"] = [mine[agent][-1]]
        entry_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        made.append(
            {
                "id": entry_id,
                "ts": clock.isoformat(),
                "kind": rng.choice(("note", "pulse")),
                "agent": agent,
                "theme": rng.choice(WORDS[:6]),
                "voice": " ".join(words) + f" entry {n}",
                "tags": rng.sample(WORDS, rng.randint(0, 2)),
                "signals": signals,
            }
        )
        mine[agent].append(entry_id)
    return made


def queries() -> list[str]:
    rng = random.Random(7)
    common = [f"{a} {b}" for a in WORDS[:5] for b in WORDS[:5] if a != b]
    return [*common, "what did I do with the harbor today", *(f"{rng.choice(RARER)} {rng.choice(WORDS)}" for _ in range(6))]


ASKED: list[dict[str, Any]] = [
    {},
    {"k": 30},
    {"agent": "batou"},
    {"agent": "motoko", "k": 12, "current_only": True},
    {"since": (START + timedelta(days=1)).isoformat(), "until": (START + timedelta(days=4)).isoformat()},
    {"rerank": False},
]


def answers(journal: Journal) -> dict[str, Any]:
    """Every hit (id, score, snippet, reason) of each query under each option set, and each prompt context's text."""
    found: dict[str, Any] = {}
    for query in queries():
        for options in ASKED:
            key = f"{query} | {json.dumps(options, sort_keys=True)}"
            hits = journal.search(query, mode="lexical", **options)
            found[f"search {key}"] = [[hit.entry_id, hit.score, hit.snippet, hit.reason] for hit in hits]
            # A digest: the texts are long, and a hit that differs shows in the searches.
            found[f"prompt_context {key}"] = hashlib.sha256(journal.prompt_context(query, **options).encode()).hexdigest()
    return found


def test_searches_and_prompt_contexts_give_the_kept_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fts_module, "COMMON_WORDS", SMALL)
    newest_only = []
    # Counts the rankings of the newest matches only, so the test knows the plan of common words ran.
    monkeypatch.setattr(fts_module, "newest_ranked", lambda *a, **kw: newest_only.append(1) or newest_ranked(*a, **kw))
    with Journal(tmp_path / "j") as journal:
        for payload in payloads():
            journal.append(payload)
        got = answers(journal)
    assert len(newest_only) > 100
    if os.environ.get("GHOSTJOURNAL_KEEP_RANKINGS") == "1":
        lines = (f"{json.dumps(key)}: {json.dumps(answer, ensure_ascii=False)}" for key, answer in got.items())
        KEPT.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")  # an answer a line
    kept = json.loads(KEPT.read_text(encoding="utf-8"))
    assert sorted(got) == sorted(kept)
    for key, answer in kept.items():
        assert got[key] == answer, key
