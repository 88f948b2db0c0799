"""An entry's neighbours in its agent's journal: the entries it continues, those that continue it, and those written just before and after it.

Corrections (``supersedes``) are no neighbourhood: they live in a table of
their own and are never read here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from journal.indexing._tables import WHOLE_JOURNAL, Window

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
# Each entry's agent and time, for the entries among which time neighbours are wanted.
_PLACES = "SELECT id, agent, ts_utc FROM entries WHERE id IN ({marks})"


@dataclass(frozen=True, slots=True)
class Neighbours:
    """Each asked id's neighbours, by kind: *linked* by continuity (either way), *adjacent* in time; *times* holds each linked one's ``ts_utc``."""

    linked: dict[str, set[str]] = field(default_factory=dict)
    adjacent: dict[str, set[str]] = field(default_factory=dict)
    times: dict[str, str] = field(default_factory=dict)


def neighbours(
    conn: sqlite3.Connection,
    ids: Sequence[str],
    within_seconds: float,
    window: Window,
    among: Collection[str] | None = None,
    places: Mapping[str, tuple[str, str]] | None = None,
) -> Neighbours:
    """The neighbours in *window* of those of *ids* that have any: continuity links both ways, and the entries just before and after within *within_seconds*.

    Entries written at the very same instant are no time neighbours of each other
    (neither is before the other), nor are an entry and one it supersedes or that
    supersedes it: a correction is no continuation. The asked entries come with
    those around them in one read, the links with their other ends in another,
    and whether a neighbour lies in *window* is :meth:`Window.holds` of what they bring.
    With *among*, only the time neighbours in *among* are wanted (see :func:`_near_among`); *places*, when it
    holds the agent and ``ts_utc`` of each of *ids* and *among* (the ranking read them), spares reading them again.
    """
    if not ids:
        return Neighbours()
    agents: dict[str, str] = {}
    around: list[tuple[str, str, str, str, str, str | None]] = []
    asked = list(ids)
    if among is not None and within_seconds > 0:
        asked = _near_among(conn, ids, within_seconds, among, agents, places)
    if asked:
        marks = ",".join("?" * len(asked))
        # Each asked entry's agent and time; the entries around one are of its agent, so their time and kind place them in the window.
        if within_seconds > 0:
            kinds = window.kind is not None
            sql = _ADJACENT.format(marks=marks, p_kind=" || ' ' || p.kind" if kinds else "", n_kind=" || ' ' || n.kind" if kinds else "")
        else:
            sql = _OWN.format(marks=marks)
        for entry_id, agent, ts, before, after in conn.execute(sql, asked):
            agents[entry_id] = agent
            for other in (before, after):
                if other is not None:
                    other_id, other_ts, *kind = other.split(" ", 2)
                    if among is None or other_id in among:
                        around.append((entry_id, agent, ts, other_id, other_ts, kind[0] if kind else None))
    marks = ",".join("?" * len(ids))
    linked: dict[str, set[str]] = {}
    times: dict[str, str] = {}
    holds = None if window == WHOLE_JOURNAL else window.holds  # a read of the whole journal holds every link: no test a link
    for end, other, agent, ts, kind in conn.execute(_LINKS.format(marks=marks), [*ids, *ids]):
        if end != other and agents.get(end) == agent and (holds is None or holds(kind=kind, agent=agent, ts_utc=ts)):
            linked.setdefault(end, set()).add(other)
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


def _near_among(
    conn: sqlite3.Connection,
    ids: Sequence[str],
    within_seconds: float,
    among: Collection[str],
    agents: dict[str, str],
    places: Mapping[str, tuple[str, str]] | None = None,
) -> list[str]:
    """Those of *ids* with an entry of *among* of their agent written within *within_seconds* of them, at another instant.

    Only those can have a time neighbour in *among*: the entry just before or
    after one is of its agent and at least as close in time as any other.
    So only those are asked for the entries around them, which costs three
    index reads each, while most of a ranking's best candidates lie far in
    time from every other. Fills *agents* with the agent of each of *ids*.
    *places* gives each entry's agent and time when it holds them all; else they are read.

    Of the entries of *ids* and *among*, an agent's at one instant make a group: an entry of *ids* is taken when the
    group of its agent just before or just after its own lies within *within_seconds* and holds an entry of *among*.
    A time is a UTC key (one width, so its text sorts as the time does): only the times of groups side by side are parsed.
    """
    wanted = list(dict.fromkeys([*ids, *among]))
    if places is None or any(entry_id not in places for entry_id in wanted):
        sql = _PLACES.format(marks=",".join("?" * len(wanted)))
        places = {entry_id: (agent, ts) for entry_id, agent, ts in conn.execute(sql, wanted)}
    asked = set(ids)
    # Each agent's entries by instant.
    groups: dict[str, dict[str, list[str]]] = {}
    for entry_id in wanted:
        place = places.get(entry_id)
        if place is not None:
            groups.setdefault(place[0], {}).setdefault(place[1], []).append(entry_id)
            if entry_id in asked:
                agents[entry_id] = place[0]
    near: set[str] = set()
    for instants in groups.values():
        if len(instants) < 2:
            continue
        order = sorted(instants)
        moments = [datetime.fromisoformat(ts) for ts in order]
        for n in range(len(order) - 1):
            if (moments[n + 1] - moments[n]).total_seconds() <= within_seconds:
                earlier, later = instants[order[n]], instants[order[n + 1]]
                if any(entry_id in among for entry_id in earlier):
                    near.update(later)
                if any(entry_id in among for entry_id in later):
                    near.update(earlier)
    return [entry_id for entry_id in ids if entry_id in near]
