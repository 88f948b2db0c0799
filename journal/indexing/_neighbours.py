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

# Each continuity link with either end among the ids, as the asked end, the other end and that end's agent, time
# and kind (one index read per end: the primary key and links_dst; CROSS JOIN keeps the links the outer loop).
_LINK_ENDS = "SELECT l.{asked}, l.{other}, o.agent, o.ts_utc, o.kind FROM links l CROSS JOIN entries o ON o.id = l.{other} WHERE l.{asked} IN ({{marks}})"
_LINKS = f"{_LINK_ENDS.format(asked='src', other='dst')} UNION ALL {_LINK_ENDS.format(asked='dst', other='src')}"
_CORRECTIONS = "SELECT src, dst FROM supersessions WHERE src IN ({marks}) OR dst IN ({marks})"
# Each id's agent and time, and the entries of the same agent just before and just after it in time, as "id ts"
# (an id and a time hold no space), from entries_agent_ts alone; with " kind" added when the window asks for a kind.
_ADJACENT = (
    "SELECT e.id, e.agent, e.ts_utc,"
    " (SELECT p.id || ' ' || p.ts_utc{p_kind} FROM entries p WHERE p.agent = e.agent AND p.ts_utc < e.ts_utc ORDER BY p.ts_utc DESC LIMIT 1),"
    " (SELECT n.id || ' ' || n.ts_utc{n_kind} FROM entries n WHERE n.agent = e.agent AND n.ts_utc > e.ts_utc ORDER BY n.ts_utc LIMIT 1)"
    " FROM entries e WHERE e.id IN ({marks})"
)
# The asked entries alone (no time neighbours asked).
_OWN = "SELECT e.id, e.agent, e.ts_utc, NULL, NULL FROM entries e WHERE e.id IN ({marks})"


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
    supersedes it: a correction is no continuation. The asked entries come with
    those around them in one read, the links with their other ends in another,
    and whether a neighbour lies in *window* is :meth:`Window.holds` of what they bring.
    """
    if not ids:
        return Neighbours()
    marks = ",".join("?" * len(ids))
    # Each asked entry's agent and time; the entries around one are of its agent, so their time and kind place them in the window.
    if within_seconds > 0:
        kinds = window.kind is not None
        sql = _ADJACENT.format(marks=marks, p_kind=" || ' ' || p.kind" if kinds else "", n_kind=" || ' ' || n.kind" if kinds else "")
    else:
        sql = _OWN.format(marks=marks)
    agents: dict[str, str] = {}
    around: list[tuple[str, str, str, str, str, str | None]] = []
    for entry_id, agent, ts, before, after in conn.execute(sql, list(ids)):
        agents[entry_id] = agent
        for other in (before, after):
            if other is not None:
                other_id, other_ts, *kind = other.split(" ", 2)
                around.append((entry_id, agent, ts, other_id, other_ts, kind[0] if kind else None))
    linked: dict[str, set[str]] = {}
    times: dict[str, str] = {}
    for asked, other, agent, ts, kind in conn.execute(_LINKS.format(marks=marks), [*ids, *ids]):
        if asked != other and agents.get(asked) == agent and window.holds(kind=kind, agent=agent, ts_utc=ts):
            linked.setdefault(asked, set()).add(other)
            times[other] = ts
    adjacent: dict[str, set[str]] = {}
    if around:
        # Each time parsed once: neighbouring entries share theirs.
        moment = {t: datetime.fromisoformat(t) for _, _, ts, _, other_ts, _ in around for t in (ts, other_ts)}
        for entry_id, agent, ts, other_id, other_ts, other_kind in around:
            if abs((moment[other_ts] - moment[ts]).total_seconds()) <= within_seconds and window.holds(
                kind=other_kind, agent=agent, ts_utc=other_ts
            ):
                adjacent.setdefault(entry_id, set()).add(other_id)
    if adjacent:
        corrections = {(src, dst) for src, dst in conn.execute(_CORRECTIONS.format(marks=marks), [*ids, *ids])}
        adjacent = {
            e: kept
            for e, near in adjacent.items()
            if (kept := {n for n in near if (e, n) not in corrections and (n, e) not in corrections})
        }
    return Neighbours(linked, adjacent, times)
