"""An entry's neighbours in its agent's journal: the entries it continues, those that continue it, and those written just before and after it.

Corrections (``supersedes``) are no neighbourhood: they live in a table of
their own and are never read here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from journal.indexing._tables import Window

__all__ = ["Neighbours", "neighbours"]

# Each continuity link whose either end is among the ids, when both ends are entries of one agent.
_LINKS = (
    "SELECT l.src, l.dst FROM links l JOIN entries a ON a.id = l.src JOIN entries b ON b.id = l.dst"
    " WHERE a.agent = b.agent AND (l.src IN ({marks}) OR l.dst IN ({marks}))"
)
_CORRECTIONS = "SELECT src, dst FROM supersessions WHERE src IN ({marks}) OR dst IN ({marks})"
# The entry of the same agent just before and just after each id in time, as "id ts" (an id holds no space;
# entries_agent_ts answers each subquery).
_ADJACENT = (
    "SELECT e.id, e.ts_utc,"
    " (SELECT p.id || ' ' || p.ts_utc FROM entries p WHERE p.agent = e.agent AND p.ts_utc < e.ts_utc ORDER BY p.ts_utc DESC LIMIT 1),"
    " (SELECT n.id || ' ' || n.ts_utc FROM entries n WHERE n.agent = e.agent AND n.ts_utc > e.ts_utc ORDER BY n.ts_utc LIMIT 1)"
    " FROM entries e WHERE e.id IN ({marks})"
)


def _seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


@dataclass(frozen=True, slots=True)
class Neighbours:
    """Each asked id's neighbours, by kind: *linked* by continuity (either way), *adjacent* in time."""

    linked: dict[str, set[str]] = field(default_factory=dict)
    adjacent: dict[str, set[str]] = field(default_factory=dict)


def neighbours(conn: sqlite3.Connection, ids: Sequence[str], within_seconds: float, window: Window) -> Neighbours:
    """The neighbours in *window* of those of *ids* that have any: continuity links both ways, and the entries just before and after within *within_seconds*.

    Entries written at the very same instant are no time neighbours of each other
    (neither is before the other), nor are an entry and one it supersedes or that
    supersedes it: a correction is no continuation.
    """
    if not ids:
        return Neighbours()
    wanted = set(ids)
    linked: dict[str, set[str]] = {}
    adjacent: dict[str, set[str]] = {}
    marks = ",".join("?" * len(ids))
    for src, dst in conn.execute(_LINKS.format(marks=marks), [*ids, *ids]):
        if src in wanted and src != dst:
            linked.setdefault(src, set()).add(dst)
        if dst in wanted and src != dst:
            linked.setdefault(dst, set()).add(src)
    if within_seconds > 0:
        for entry_id, ts, before, after in conn.execute(_ADJACENT.format(marks=marks), list(ids)):
            for other in (before, after):
                if other is not None:
                    other_id, other_ts = other.split(" ", 1)
                    if abs(_seconds_between(ts, other_ts)) <= within_seconds:
                        adjacent.setdefault(entry_id, set()).add(other_id)
    if adjacent:
        corrections = {(src, dst) for src, dst in conn.execute(_CORRECTIONS.format(marks=marks), [*ids, *ids])}
        adjacent = {e: {n for n in near if (e, n) not in corrections and (n, e) not in corrections} for e, near in adjacent.items()}
    every = set().union(*linked.values(), *adjacent.values())
    if not every:
        return Neighbours()
    if window.kind is None and window.since is None and window.until is None:
        # A neighbour is of its source's agent, which is the window's: nothing to leave out.
        return Neighbours({e: near for e, near in linked.items() if near}, {e: near for e, near in adjacent.items() if near})
    # Only neighbours the search may show count: the window's kind and times.
    clauses, params = window.where()
    candidates = sorted(every)
    clauses.append(f"e.id IN ({','.join('?' * len(candidates))})")
    shown = {row[0] for row in conn.execute(f"SELECT e.id FROM entries e WHERE {' AND '.join(clauses)}", [*params, *candidates])}
    return Neighbours(
        {e: kept for e, near in linked.items() if (kept := near & shown)},
        {e: kept for e, near in adjacent.items() if (kept := near & shown)},
    )
