"""The order an import stores its spooled entries in: each after the entries of the source it links to, and the entries left out.

A link is resolved within the source first: to the lines of the same id and the linking entry's
agent, stored before it. Only an id no such line can bring in is looked up in the journal, whose
answer this import cannot have changed, so a rerun plans the same. An entry is left out, reported
(in the order of the positions), when an append would refuse one of its links: to itself; to an id
that no line of its agent brings in and the journal does not hold as its agent's (an unknown id and
another agent's alike, as an append says); to an entry left out, in turn; or round a circle of
links, which no order of appends can store. A reason names a linked entry of the same agent by its
position in the source, never a linked entry by its id, nor another agent's entry at all.

The order is the source's, but that an entry waiting for a later line is stored right after the
last line it waits for (among several such, the earliest first). It is found in one pass over the
spool in the source's order: an entry whose lines linked to are all stored by the time the pass
reaches it is stored then, so only the entries that wait for a later line (and those left out) are
held in memory, with one byte of each entry's; the catalogue on disk answers the rest.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any

from journal.carry._spool import Spool, Spooled

__all__ = ["plan"]

#: An entry as a link resolves it: its id and the agent of the entry linking to it (a link crosses no agents).
_Key = tuple[str, str]


def plan(spool: Spool, journal_holds: Callable[[str, str], bool], bad: Callable[[Mapping[str, Any], str], None]) -> None:
    """Write into *spool* the order to store its entries in (see the module's text); report each entry left out to *bad*.

    *journal_holds* answers whether the journal holds an id as an agent's entry (as an append's link check would).
    """
    spool.sealed()
    _Planner(spool, journal_holds).run(bad)


class _Planner:
    def __init__(self, spool: Spool, journal_holds: Callable[[str, str], bool]) -> None:
        self.spool = spool
        self._holds = journal_holds
        self.held: dict[_Key, bool] = {}  # the journal's answers, each asked once
        self.placed = bytearray(spool.count)
        self.out: dict[int, tuple[Spooled, str]] = {}  # position -> (its entry, why it is left out)
        # The entries reached before a line they wait for was stored: position -> (entry, {a key it waits for: the link's field}).
        self.waiting: dict[int, tuple[Spooled, dict[_Key, str]]] = {}
        self.remaining: dict[int, int] = {}
        self.dependents: dict[_Key, list[int]] = {}  # of the waiting entries, by a key not yet resolved
        self.by_journal: set[_Key] = set()  # keys no stored line resolved, that the journal holds
        self.ready: list[int] = []  # waiting entries whose every key is now resolved

    def holds(self, key: _Key) -> bool:
        if key not in self.held:
            self.held[key] = self._holds(*key)
        return self.held[key]

    def resolved(self, key: _Key) -> bool:
        """Whether a line of *key* is stored (or, once no line can be, the journal holds it)."""
        return key in self.by_journal or any(self.placed[position] for position in self.spool.positions(*key))

    def run(self, bad: Callable[[Mapping[str, Any], str], None]) -> None:
        for item in self.spool.entries():
            while self.ready and self.ready[0] < item.position:
                self.place(self.waiting[heapq.heappop(self.ready)][0])
            waits = self.waits_of(item)
            if waits is None:
                continue
            pending = [key for key in waits if not self.resolved(key)]
            if not pending:
                self.place(item)
                continue
            self.waiting[item.position] = (item, waits)
            self.remaining[item.position] = len(pending)
            for key in pending:
                self.dependents.setdefault(key, []).append(item.position)
        while True:
            while self.ready:
                self.place(self.waiting[heapq.heappop(self.ready)][0])
            # Stuck: what the waiting lines still need, no line brought in. The journal's answer for those is
            # the one from before this import (no line of them was stored), so a rerun resolves the same.
            needed = sorted(
                {
                    key
                    for position, (_, waits) in self.waiting.items()
                    if not self.placed[position]
                    for key in waits
                    if key in self.dependents
                }
            )
            found = [key for key in needed if self.holds(key)]
            if not found:
                break
            for key in found:
                self.by_journal.add(key)
                self.resolve(key)
        self.spool.plan_done()
        self.explain_left_out()
        for position in sorted(self.out):
            item, reason = self.out[position]
            bad(item.where, reason)

    def waits_of(self, item: Spooled) -> dict[_Key, str] | None:
        """The keys of the source *item* links to, each with the field of its first link; None when it is left out for a link."""
        waits: dict[_Key, str] = {}
        for name, ref in item.links:
            key = (ref, item.agent)
            if ref == item.id:
                reason = f"{name} is the entry's own id: an append refuses a link to itself"
            elif self.spool.positions(*key):
                waits.setdefault(key, name)
                continue
            elif self.holds(key):
                continue
            elif self.spool.holds_id(ref):
                reason = f"{name} links to an entry of another agent in this import: an append refuses that link"
            else:
                reason = f"{name} names no entry of agent {item.agent!r} that this journal holds or this import brings in"
            self.out[item.position] = (item, reason)
            return None
        return waits

    def place(self, item: Spooled) -> None:
        """Store *item* next; the entries waiting for it alone now follow."""
        self.spool.planned(item.position)
        self.placed[item.position] = 1
        self.resolve(item.key)

    def resolve(self, key: _Key) -> None:
        for dependent in dict.fromkeys(self.dependents.pop(key, ())):
            self.remaining[dependent] -= 1
            if self.remaining[dependent] == 0:
                heapq.heappush(self.ready, dependent)

    def explain_left_out(self) -> None:
        """Add to *out* the reason of each waiting entry never stored: it links to a line left out, or round a circle."""
        stuck = {position for position in self.waiting if not self.placed[position]}
        if not stuck:
            return
        # Who waits for each key still unresolved: the stuck entries alone.
        waiting_for: dict[_Key, list[int]] = {}
        for position in sorted(stuck):
            for key in self.waiting[position][1]:
                waiting_for.setdefault(key, []).append(position)
        # A worklist from the lines left out, so a hostile source's long chains of links cost one pass.
        pending = sorted(self.out)
        while pending:
            gone = pending.pop()
            key = self.out[gone][0].key
            lines = self.spool.positions(*key)
            if self.resolved(key) or not all(line in self.out for line in lines):
                continue
            for dependent in waiting_for.get(key, ()):
                if dependent in stuck and dependent not in self.out:
                    item, waits = self.waiting[dependent]
                    self.out[dependent] = (
                        item,
                        f"{waits[key]} links to the entry of {self.spool.item(lines[0]).place}, which this import leaves out",
                    )
                    pending.append(dependent)
        left_out = set(self.out)
        for position in sorted(stuck - left_out):
            item, waits = self.waiting[position]
            key, name = next((key, name) for key, name in waits.items() if not self.resolved(key))
            # were all its lines left out, the worklist would have left this out too
            linked = next(line for line in self.spool.positions(*key) if line not in left_out)
            circle = (
                f"{name} links to the entry of {self.spool.item(linked).place}, and the links from there come back round in a circle: "
                "no order of appends can store it"
            )
            self.out[position] = (item, circle)
