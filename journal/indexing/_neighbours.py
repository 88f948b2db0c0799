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

# Each continuity link whose either end is among the ids (one index read per end: the primary key and links_dst).
# Whether both ends are entries of one agent is checked with the rows of every end, read once (see _rows).
_LINKS = "SELECT src, dst FROM links WHERE src IN ({marks}) UNION ALL SELECT src, dst FROM links WHERE dst IN ({marks})"
_CORRECTIONS = "SELECT src, dst FROM supersessions WHERE src IN ({marks}) OR dst IN ({marks})"
# The entry of the same agent just before and just after each id in time, as "id ts" (an id holds no space;
# entries_agent_ts answers each subquery).
_ADJACENT = (
    "SELECT e.id, e.ts_utc,"
    " (SELECT p.id || ' ' || p.ts_utc FROM entries p WHERE p.agent = e.agent AND p.ts_utc < e.ts_utc ORDER BY p.ts_utc DESC LIMIT 1),"
    " (SELECT n.id || ' ' || n.ts_utc FROM entries n WHERE n.agent = e.agent AND n.ts_utc > e.ts_utc ORDER BY n.ts_utc LIMIT 1)"
    " FROM entries e WHERE e.id IN ({marks})"
)


def _rows(conn: sqlite3.Connection, ids: set[str], window: Window) -> dict[str, tuple[str, str, bool]]:
    """Each of *ids* that is an entry: its agent, its ``ts_utc`` and whether it lies in *window*, in one read."""
    clauses, params = window.where()
    shown = " AND ".join(clauses) or "1"
    wanted = sorted(ids)
    found = conn.execute(
        f"SELECT e.id, e.agent, e.ts_utc, {shown} FROM entries e WHERE e.id IN ({','.join('?' * len(wanted))})", [*params, *wanted]
    )
    return {entry_id: (agent, ts, bool(inside)) for entry_id, agent, ts, inside in found}


@dataclass(frozen=True, slots=True)
class Neighbours:
    """Each asked id's neighbours, by kind: *linked* by continuity (either way), *adjacent* in time; *times* holds each linked one's ``ts_utc``."""

    linked: dict[str, set[str]] = field(default_factory=dict)
    adjacent: dict[str, set[str]] = field(default_factory=dict)
    times: dict[str, str] = field(default_factory=dict)


def neighbours(conn: sqlite3.Connection, ids: Sequence[str], within_seconds: float, window: Window) -> Neighbours:
    """The neighbours in *window* of those of *ids* that have any: continuity links both ways, and the entries just before and after within *within_seconds*.

    Entries written at the very same instant are no time neighbours of each other
    (neither is before the other), nor are an entry and one it supersedes or that
    supersedes it: a correction is no continuation.
    """
    if not ids:
        return Neighbours()
    wanted = set(ids)
    marks = ",".join("?" * len(ids))
    pairs = {(src, dst) for src, dst in conn.execute(_LINKS.format(marks=marks), [*ids, *ids]) if src != dst}
    near_in_time: dict[str, set[str]] = {}
    if within_seconds > 0:
        around = [
            (entry_id, ts, other.split(" ", 1))
            for entry_id, ts, before, after in conn.execute(_ADJACENT.format(marks=marks), list(ids))
            for other in (before, after)
            if other is not None
        ]
        # Each time parsed once: neighbouring entries share theirs.
        moment = {t: datetime.fromisoformat(t) for _, ts, (_, other_ts) in around for t in (ts, other_ts)}
        for entry_id, ts, (other_id, other_ts) in around:
            if abs((moment[other_ts] - moment[ts]).total_seconds()) <= within_seconds:
                near_in_time.setdefault(entry_id, set()).add(other_id)
    if near_in_time:
        corrections = {(src, dst) for src, dst in conn.execute(_CORRECTIONS.format(marks=marks), [*ids, *ids])}
        near_in_time = {e: {n for n in near if (e, n) not in corrections and (n, e) not in corrections} for e, near in near_in_time.items()}
    ends = {end for pair in pairs for end in pair}
    if not ends and not any(near_in_time.values()):
        return Neighbours()
    # Every end's agent and time, and whether the search may show it (the window's kind and times), in one read.
    rows = _rows(conn, ends | wanted | set().union(*near_in_time.values()), window)
    linked: dict[str, set[str]] = {}
    for src, dst in pairs:
        if src not in rows or dst not in rows or rows[src][0] != rows[dst][0]:
            continue
        if src in wanted and rows[dst][2]:
            linked.setdefault(src, set()).add(dst)
        if dst in wanted and rows[src][2]:
            linked.setdefault(dst, set()).add(src)
    adjacent = {e: kept for e, near in near_in_time.items() if (kept := {n for n in near if n in rows and rows[n][2]})}
    times = {other: rows[other][1] for near in linked.values() for other in near}
    return Neighbours(linked, adjacent, times)
