"""The labelled retrieval sets (LoCoMo, the journal-shaped set) and the measures over a ranking.

Shared by bench_retrieval.py and its freshness and abstention suites, which
bench_retrieval.py runs as subcommands; so they live below all three.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


# -- labelled sets -------------------------------------------------------------------


def _locomo_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _evidence_ids(raw: Iterable[str], known: set[str]) -> list[str]:
    """Evidence ids cleaned as the data's README says (split on ';'/space, 'D:11:26' -> 'D11:26', drop unknown)."""
    found = []
    for item in raw:
        for raw_part in re.split(r"[;\s]+", item):
            part = re.sub(r"^D:(\d+):", r"D\1:", raw_part.strip())
            if part in known and part not in found:
                found.append(part)
    return found


def load_locomo(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Entries (payloads) and queries ``{agent, query, relevant: {id: grade}, category}`` from LoCoMo."""
    source = path / "locomo-dev.json" if path.is_dir() else path
    conversations = json.loads(source.read_text(encoding="utf-8"))
    payloads: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for conversation in conversations:
        agent = conversation["sample_id"]
        turns = conversation["conversation"]
        known: set[str] = set()
        sessions = sorted((int(key.split("_")[1]), value) for key, value in turns.items() if re.fullmatch(r"session_\d+", key) and isinstance(value, list))
        for number, session in sessions:
            date_text = turns[f"session_{number}_date_time"]
            start = _locomo_time(date_text)
            for position, turn in enumerate(session):
                voice = f'({date_text}) {turn["speaker"]} said, "{turn["text"]}"'
                if turn.get("blip_caption"):
                    voice += f' and shared {turn["blip_caption"]}.'
                known.add(turn["dia_id"])
                payloads.append({
                    "id": f"{agent}-{turn['dia_id'].replace(':', '-')}", "kind": "note", "agent": agent,
                    "ts": (start + timedelta(seconds=position)).isoformat(), "theme": turn["speaker"], "voice": voice,
                })
        for qa in conversation["qa"]:
            evidence = _evidence_ids(qa.get("evidence", []), known)
            queries.append({
                "agent": agent, "query": qa["question"], "category": LOCOMO_CATEGORIES.get(qa["category"], str(qa["category"])),
                "relevant": {f"{agent}-{e.replace(':', '-')}": 1.0 for e in evidence},
            })
    return payloads, queries


def load_journal_set(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Entries and queries from the journal-shaped set (see bench/journal_set.json)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    queries = [{"agent": q["agent"], "query": q["query"], "category": q["category"], "relevant": q["relevant"]} for q in data["queries"]]
    return data["entries"], queries


# -- metrics -------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], relevant: dict[str, float], k: int) -> float:
    """Fraction of relevant ids in the top k (1 when nothing is relevant, as in the LoCoMo paper)."""
    if not relevant:
        return 1.0
    return len(set(ranked[:k]) & relevant.keys()) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], relevant: dict[str, float]) -> float:
    """1 / rank of the first relevant id with a positive grade (0 when none is retrieved)."""
    return next((1.0 / rank for rank, entry_id in enumerate(ranked, 1) if relevant.get(entry_id, 0) > 0), 0.0)


def ndcg_at(ranked: Sequence[str], relevant: dict[str, float], k: int) -> float:
    """Normalised discounted cumulative gain at k with graded relevance."""
    gain = sum(relevant.get(entry_id, 0.0) / math.log2(rank + 1) for rank, entry_id in enumerate(ranked[:k], 1))
    ideal = sum(grade / math.log2(rank + 1) for rank, grade in enumerate(sorted(relevant.values(), reverse=True)[:k], 1))
    return gain / ideal if ideal > 0 else 0.0
