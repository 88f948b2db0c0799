"""An import's plan: the order it stores a spooled source in, the lines it leaves out, and memory that does not grow with the source."""

from __future__ import annotations

import tracemalloc
from collections.abc import Mapping
from typing import Any

from journal.carry._plan import plan
from journal.carry._spool import Spool
from journal.files.entry import Entry


def _entry(name: str, *refs: str, agent: str = "alice") -> Entry:
    signals = {"continuity_refs": list(refs)} if refs else {}
    return Entry.from_payload(
        {"id": name, "kind": "note", "agent": agent, "theme": name, "voice": f"The tide, {name}.", "ts": "2026-09-01T10:00:00Z",
         "signals": signals}
    )


def _planned(spool: Spool) -> list[str]:
    return [item.id for group in spool.in_plan(3) for item, _ in group]


def test_each_entry_is_stored_after_the_lines_it_links_to_and_the_others_in_the_sources_order() -> None:
    """A line waiting for a later one comes right after it; a circle, a link to nothing, to another agent's line or to a line left
    out is left out, each named by its line; the journal's own entries count as stored."""
    source = [
        _entry("a", "c"),  # line 1: waits for line 3
        _entry("b"),
        _entry("c"),
        _entry("d", "a"),  # stored after a, which came in after c
        _entry("e", "f"),  # lines 5 and 6 link round a circle
        _entry("f", "e"),
        _entry("g", "nowhere"),
        _entry("h", "held"),  # the journal holds it as alice's
        _entry("i", "b", agent="bob"),  # b is alice's
        _entry("j", "g"),  # g is left out
    ]
    reasons: list[tuple[Mapping[str, Any], str]] = []
    with Spool() as spool:
        for number, entry in enumerate(source, start=1):
            spool.add(entry, number)
        plan(spool, lambda entry_id, agent: (entry_id, agent) == ("held", "alice"), lambda where, why: reasons.append((where, why)))
        assert _planned(spool) == ["b", "c", "a", "d", "h"]
    circle = ", and the links from there come back round in a circle: no order of appends can store it"
    assert reasons == [
        ({"line": 5}, f"signals.continuity_refs[0] links to the entry of line 6{circle}"),
        ({"line": 6}, f"signals.continuity_refs[0] links to the entry of line 5{circle}"),
        ({"line": 7}, "signals.continuity_refs[0] names no entry of agent 'alice' that this journal holds or this import brings in"),
        ({"line": 9}, "signals.continuity_refs[0] links to an entry of another agent in this import: an append refuses that link"),
        ({"line": 10}, "signals.continuity_refs[0] links to the entry of line 7, which this import leaves out"),
    ]


def _plan_peak(count: int) -> int:
    """The most memory Python held while planning a source of *count* entries, a third of them continuing the line before."""
    with Spool() as spool:
        for n in range(count):
            spool.add(_entry(f"e{n}", *([f"e{n - 1}"] if n % 3 else [])), n + 1)
        tracemalloc.start()
        try:
            plan(spool, lambda entry_id, agent: False, lambda where, why: None)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_planning_holds_no_memory_for_each_entry() -> None:
    """Planning 40,000 entries holds what planning 10,000 does, give or take a byte an entry: the plan lives in the spool's catalogue
    on disk, not in a Python object per line."""
    small, large = _plan_peak(10_000), _plan_peak(40_000)
    assert large - small < 30_000 + 256 * 1024, (small, large)
