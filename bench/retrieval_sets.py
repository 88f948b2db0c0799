"""The labelled retrieval sets (LoCoMo, the journal-shaped set) and the measures over a ranking.

Shared by bench_retrieval.py and its freshness and abstention suites, which
bench_retrieval.py runs as subcommands; so they live below all three.
"""

from __future__ import annotations

import hashlib
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


#: How a LoCoMo turn becomes an entry: ``journal`` as the held-out harness stores it, ``paper`` as the benchmark's paper indexes it.
LOCOMO_LAYOUTS = ("journal", "paper")
#: A turn's evidence id (``D3:14``): what must never reach the index.
GOLD_MARKER = re.compile(r"\bD:?\d+:\d+\b")


def _turn_id(agent: str, dia_id: str, layout: str) -> str:
    """The entry id of a turn: opaque in the ``journal`` layout (no evidence id in the index), readable in ``paper``."""
    if layout == "paper":
        return f"{agent}-{dia_id.replace(':', '-')}"
    return "t" + hashlib.sha256(f"{agent} {dia_id}".encode()).hexdigest()[:20]


def load_locomo(path: Path, layout: str = "journal") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Entries (payloads, in append order) and queries ``{agent, query, relevant: {id: grade}, category}`` from LoCoMo.

    Each conversation is one agent and each turn one ``note`` of it, ``ts`` its
    session's time plus the turn's index in seconds. ``journal`` (the default):
    the voice is ``<speaker> said, "<text>"`` (plus `` and shared <caption>``),
    the theme ``conversation on <the session's date>``, and
    ``signals.continuity_refs`` names the previous turn of the same session.
    ``paper``: the voice is ``(<date>) <speaker> said, "<text>"``, the theme the
    speaker, and no links.
    """
    if layout not in LOCOMO_LAYOUTS:
        raise ValueError(f"layout must be one of {LOCOMO_LAYOUTS}, got {layout!r}")
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
            previous: str | None = None
            for position, turn in enumerate(session):
                said = f'{turn["speaker"]} said, "{turn["text"]}"'
                entry_id = _turn_id(agent, turn["dia_id"], layout)
                payload: dict[str, Any] = {"id": entry_id, "kind": "note", "agent": agent, "ts": (start + timedelta(seconds=position)).isoformat()}
                if layout == "paper":
                    payload |= {"theme": turn["speaker"], "voice": f"({date_text}) {said}" + (f' and shared {turn["blip_caption"]}.' if turn.get("blip_caption") else "")}
                else:
                    payload |= {"theme": f"conversation on {date_text.split(' on ', 1)[-1]}", "voice": said + (f' and shared {turn["blip_caption"]}' if turn.get("blip_caption") else "")}
                    if previous is not None:
                        payload["signals"] = {"continuity_refs": [previous]}
                    previous = entry_id
                known.add(turn["dia_id"])
                payloads.append(payload)
        for qa in conversation["qa"]:
            evidence = _evidence_ids(qa.get("evidence", []), known)
            queries.append({
                "agent": agent, "query": qa["question"], "category": LOCOMO_CATEGORIES.get(qa["category"], str(qa["category"])),
                "relevant": {_turn_id(agent, e, layout): 1.0 for e in evidence},
            })
    return payloads, queries


def gold_leaks(payloads: Iterable[dict[str, Any]]) -> list[str]:
    """The ids of entries whose indexed text (theme, voice, tags) names an evidence id: the harness refuses to index them."""
    return [p["id"] for p in payloads if GOLD_MARKER.search(" ".join((p.get("theme", ""), p.get("voice", ""), *p.get("tags", ()))))]


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
