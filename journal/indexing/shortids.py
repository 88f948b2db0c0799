"""Entry ids cut short for a person, and a cut id taken back to its entry, as git abbreviates commit hashes.

A table on a terminal shows the start of each id, long enough to name one
entry among those the reader can see: at least :data:`MIN_SHORT_ID`
characters, more where another id starts the same way. Such a start is
taken back by :func:`resolve_id`, which looks among the same entries: with
an agent given, that agent's alone, so neither the length of a short id nor
the answer to a prefix says anything of another agent's ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from journal.errors import AmbiguousEntryIdError, EntryNotFoundError
from journal.files.entry import check_entry_id, check_text_arguments
from journal.indexing.index import Index

__all__ = ["MIN_SHORT_ID", "resolve_id", "short_ids"]

#: The fewest characters of an id a table shows (a shorter id is shown whole).
MIN_SHORT_ID: Final = 8


def _shared_start(a: str, b: str | None) -> int:
    if b is None:
        return 0
    size = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        size += 1
    return size


def short_ids(index: Index, ids: Iterable[str], agent: str | None = None) -> dict[str, str]:
    """Each id of *ids* cut to the shortest start that :func:`resolve_id` (with the same *agent*) takes back to it.

    Of the ids in id order, the two beside an id share the most of its start with it, so one character more
    than they share names it alone; an id is never cut below :data:`MIN_SHORT_ID` characters, and one that is
    the start of another's stays whole (the whole id always names its own entry first).
    """
    check_text_arguments(agent=agent)
    shown: dict[str, str] = {}
    asked = list(dict.fromkeys(ids))
    if agent is not None:
        # An agent's ids are some of the journal's, so the ids beside one among the agent's share no more of its start than
        # those beside it among all: where those share too little to lengthen it past MIN_SHORT_ID, so do the agent's, and the
        # journal's neighbours (two index steps) give the agent's answer. Only the others walk the id index for the agent's
        # own neighbours, a row read a step over the other agents' entries between them.
        shown = {entry_id: entry_id[:MIN_SHORT_ID] for entry_id, size in _sizes(index, asked, None).items() if size <= MIN_SHORT_ID}
        asked = [entry_id for entry_id in asked if entry_id not in shown]
    for entry_id, size in _sizes(index, asked, agent).items():
        shown[entry_id] = entry_id[: max(size, MIN_SHORT_ID)]
    return shown


def _sizes(index: Index, ids: list[str], agent: str | None) -> dict[str, int]:
    """How many characters of each of *ids* name it among the ids of *agent*'s entries (all entries' without one): one more than it shares with either beside it."""
    if not ids:
        return {}
    return {
        entry_id: max(_shared_start(entry_id, before), _shared_start(entry_id, after)) + 1
        for entry_id, (before, after) in index.neighbour_ids(ids, agent).items()
    }


def resolve_id(index: Index, text: str, agent: str | None = None) -> str:
    """The id of the one entry *text* names: the entry whose id it is, else the one entry whose id starts with it.

    With *agent* given, only that agent's entries are looked at, exactly as if no other agent had written.

    Raises:
        InvalidEntryIdError: *text* could be no id's start (path, glob or length trouble).
        EntryNotFoundError: no entry's id is or starts with *text*.
        AmbiguousEntryIdError: more than one entry's id starts with *text* and none is *text* itself.
    """
    check_entry_id(text)
    check_text_arguments(agent=agent)
    found, count = index.ids_starting(text, agent, limit=2)
    if (
        text in found or index.is_tombstone(text)
    ):  # an erased entry's id is named whole (its tombstone has no short id)  # ids sort after their own starts, so a whole id is always first of its range
        return text
    if count == 1:
        return found[0]
    if count == 0:
        raise EntryNotFoundError(text, as_prefix=True)
    raise AmbiguousEntryIdError(text, count)
