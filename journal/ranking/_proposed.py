"""The mark a read puts on an entry that a later entry of its agent may update: "possibly outdated by <short id> (<date>)".

A pending supersede proposal (see :meth:`journal.indexing.index.Index.proposals`)
is only a guess made from words, so a read never drops or moves the older
entry for it: it says so beside the entry, naming the newest proposer by the
short id the tables show and the day it was written, and lists every proposer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from journal.indexing import shortids
from journal.indexing.index import Index
from journal.ranking.hit import Hit

__all__ = ["OutdatedMark", "mark_hits", "outdated_marks"]


@dataclass(frozen=True, slots=True)
class OutdatedMark:
    """An entry's mark: the text shown, and the ids of the later entries that may update it, newest first."""

    text: str
    newer: tuple[str, ...]


def outdated_marks(index: Index, ids: Sequence[str], *, agent: str | None, before: str | None) -> dict[str, OutdatedMark]:
    """The mark of each of *ids* with a pending proposal made by an entry written before *before* (a UTC key), if given."""
    pending = index.pending_proposals(list(dict.fromkeys(ids)), before=before)
    if not pending:
        return {}
    # The text names the newest proposer alone: only its short id is worked out (two index reads each).
    short = shortids.short_ids(index, {found[0].newer for found in pending.values()}, agent)
    marks = {}
    for older, found in pending.items():
        newest = found[0]
        marks[older] = OutdatedMark(
            f"possibly outdated by {short.get(newest.newer, newest.newer)} ({newest.newer_ts[:10]})", tuple(p.newer for p in found)
        )
    return marks


def mark_hits(index: Index, hits: Sequence[Hit], *, agent: str | None, before: str | None) -> list[Hit]:
    """*hits* in their order, each one a later entry may update carrying its mark."""
    marks = outdated_marks(index, [hit.entry_id for hit in hits], agent=agent, before=before)
    return [
        dataclasses.replace(hit, outdated=marks[hit.entry_id].text, outdated_by=marks[hit.entry_id].newer) if hit.entry_id in marks else hit
        for hit in hits
    ]
