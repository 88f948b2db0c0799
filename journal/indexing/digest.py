"""Digests: the summary of a window computed over its index rows (a search's hits are :mod:`journal.ranking.hit`).

Nothing here touches files or SQL; the facade fetches rows and entries and
hands them over.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from journal.files.entry import Entry, utc_key
from journal.indexing.index import IndexRow

__all__ = ["Digest", "compute_digest", "row_of_entry"]


def _top(counter: Counter[str], n: int, label: str) -> list[dict[str, Any]]:
    # Ties break alphabetically so a digest is the same on every run.
    ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:n]
    return [{label: value, "count": count} for value, count in ranked]


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


@dataclass(frozen=True, slots=True)
class Digest:
    """A computed summary of the entries in a window (see :func:`compute_digest`)."""

    agent: str | None
    since: str | None
    until: str | None
    count: int
    first_ts: str | None
    last_ts: str | None
    kinds: dict[str, int]
    themes: list[dict[str, Any]]
    tags: list[dict[str, Any]]
    focus: list[dict[str, Any]]
    moods: list[dict[str, Any]]
    novelty: dict[str, Any]
    continuity: dict[str, Any]
    corrections: dict[str, int]
    as_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "agent": self.agent,
            "since": self.since,
            "until": self.until,
            "count": self.count,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "kinds": dict(self.kinds),
            "themes": list(self.themes),
            "tags": list(self.tags),
            "focus": list(self.focus),
            "moods": list(self.moods),
            "novelty": dict(self.novelty),
            "continuity": dict(self.continuity),
            "corrections": dict(self.corrections),
        }
        if self.as_of is not None:
            data["as_of"] = self.as_of
        return data


def _novelty_view(rows: Sequence[IndexRow]) -> dict[str, Any]:
    """Mean novelty, its drift between the window's halves, and a weekly series."""
    points = [(row.ts_utc, row.novelty) for row in rows if row.novelty is not None]
    values = [value for _, value in points]
    half = len(values) // 2
    first, second = _mean(values[:half]), _mean(values[half:])
    trend: str | None = None
    if first is not None and second is not None:
        delta = second - first
        trend = "rising" if delta > 0.05 else "falling" if delta < -0.05 else "steady"
    weekly: dict[str, list[float]] = {}
    for ts_utc, value in points:
        year, week, _ = datetime.fromisoformat(ts_utc).isocalendar()
        weekly.setdefault(f"{year}-W{week:02d}", []).append(value)
    series = [{"week": week, "mean": _mean(vals), "count": len(vals)} for week, vals in sorted(weekly.items())]
    return {"mean": _mean(values), "first_half_mean": first, "second_half_mean": second, "trend": trend, "weekly": series}


def _continuity_view(rows: Sequence[IndexRow], links: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Links from the window's entries, the longest chains among them, the most cited entries."""
    in_window = {row.id for row in rows}
    order = {row.id: row.ts_utc for row in rows}
    parents: dict[str, list[str]] = {}
    # Each entry's parents oldest first, so that of two equally deep the older is its chain's: entry ids are random, and an order
    # by id would make the chains (and the refs a digest entry takes from them) differ from one run of the same appends to another.
    for src, dst in sorted(links, key=lambda link: (order.get(link[1], ""), link[1])):
        if dst in in_window and src != dst:
            parents.setdefault(src, []).append(dst)
    depth: dict[str, tuple[int, str | None]] = {}
    # Oldest first: a ref points back in time, so its target's depth is known.
    for entry_id in sorted(in_window, key=lambda i: (order[i], i)):
        best: tuple[int, str | None] = (1, None)
        for parent in parents.get(entry_id, []):
            if parent in depth and depth[parent][0] + 1 > best[0]:
                best = (depth[parent][0] + 1, parent)
        depth[entry_id] = best
    chains: list[list[str]] = []
    used: set[str] = set()
    for entry_id in sorted(depth, key=lambda i: (-depth[i][0], order[i], i)):
        if depth[entry_id][0] < 2 or entry_id in used or len(chains) == 3:
            continue
        chain: list[str] = []
        cursor: str | None = entry_id
        while cursor is not None:
            chain.append(cursor)
            cursor = depth[cursor][1]
        used.update(chain)
        chains.append(list(reversed(chain)))
    cited = Counter(dst for _, dst in links)
    # Equal counts go to the newer entry (ids are random: by id, the refs a digest takes would differ between two runs alike).
    newest_first = sorted(cited.items(), key=lambda item: (-item[1], _descending(order.get(item[0], "")), item[0]))[:5]
    return {
        "links": len(links),
        "linked_entries": len({src for src, _ in links}),
        "longest_chains": chains,
        "most_referenced": [{"entry_id": entry_id, "count": count} for entry_id, count in newest_first],
    }


def _descending(text: str) -> tuple[int, ...]:
    """A key that sorts *text* (a ``ts_utc``) newest first."""
    return tuple(-ord(character) for character in text)


def row_of_entry(entry: Entry, path: str) -> IndexRow:
    """The index row that the entry file at *path* stands for, so a digest can be computed from files."""
    signals = entry.signals or {}
    return IndexRow(
        id=entry.id,
        path=path,
        ts=entry.ts,
        ts_utc=utc_key(entry.timestamp),
        kind=entry.kind,
        agent=entry.agent,
        theme=entry.theme,
        mood=entry.mood,
        focus=signals.get("focus"),
        novelty=signals.get("novelty"),
        tags=tuple(entry.tags),
    )


def compute_digest(
    rows: Sequence[IndexRow],
    links: Sequence[tuple[str, str]],
    *,
    agent: str | None,
    since: str | None,
    until: str | None,
    corrections: Sequence[tuple[str, str]] = (),
    as_of: str | None = None,
) -> Digest:
    """Summarize *rows* (oldest first), the continuity *links* leaving them and the *corrections* (supersessions) they declare."""
    return Digest(
        agent=agent,
        since=since,
        until=until,
        count=len(rows),
        first_ts=rows[0].ts if rows else None,
        last_ts=rows[-1].ts if rows else None,
        kinds=dict(sorted(Counter(row.kind for row in rows).items())),
        themes=_top(Counter(row.theme for row in rows), 10, "theme"),
        tags=_top(Counter(tag for row in rows for tag in row.tags), 15, "tag"),
        focus=_top(Counter(row.focus for row in rows if row.focus), 10, "focus"),
        moods=_top(Counter(row.mood for row in rows if row.mood), 20, "mood"),
        novelty=_novelty_view(rows),
        continuity=_continuity_view(rows, links),
        corrections={"entries": len({src for src, _ in corrections}), "superseded": len({dst for _, dst in corrections})},
        as_of=as_of,
    )
