"""What a group's checks need of the index, asked once for the whole group instead of once for each entry.

An append asks the index, for its entry, whether its client_key is held,
whether its id is, and whose each id it links to is: three or more queries
an entry, most of a group's index time when its rows are few. A group asks
them for all its entries in a few queries before the first is staged, then
follows what it stages itself. Only two things change the index meanwhile:
the rows the group stages, which :class:`GroupKnown` is told of, and a stale
client_key row dropped by :func:`journal.sync._append._earlier_for_key`,
which only frees a key or an id. So "not held" from here is exact for the
whole group; any other answer is asked again of the index as an append asks
it, since a dropped row may have made it wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from journal.files.entry import Entry
from journal.indexing.index import Index

__all__ = ["GroupKnown"]


class GroupKnown:
    """The ids, client_keys and links' agents the index held before a group, and the entries the group has staged since."""

    def __init__(self, index: Index, entries: Iterable[Entry]) -> None:
        ids: set[str] = set()
        keys: set[tuple[str, str]] = set()
        for entry in entries:
            ids.add(entry.id)
            ids.update(entry.continuity_refs)
            ids.update(entry.supersedes)
            if entry.client_key is not None:
                keys.add((entry.agent, entry.client_key))
        self._index = index
        self._agents = index.agents_of(ids) if ids else {}
        self._keys = index.held_client_keys(keys) if keys else set()
        self._staged: dict[str, Entry] = {}
        self._staged_keys: dict[tuple[str, str], Entry] = {}
        self._dropped = False

    def staged(self, entry: Entry) -> None:
        """*entry*'s rows are staged in the group's transaction."""
        self._staged[entry.id] = entry
        if entry.client_key is not None:
            self._staged_keys[(entry.agent, entry.client_key)] = entry

    def dropped(self) -> None:
        """A stale row was dropped: what the index held before the group may no longer be held."""
        self._dropped = True

    def staged_entry(self, entry_id: str) -> Entry | None:
        """The entry of *entry_id* the group has staged, if any (it has no file yet, or none the group has published)."""
        return self._staged.get(entry_id)

    def staged_for_key(self, agent: str, client_key: str) -> Entry | None:
        """The entry of *agent* and *client_key* the group has staged, if any: it holds the key (the group checked it did not stand before)."""
        return self._staged_keys.get((agent, client_key))

    def may_hold_key(self, agent: str, client_key: str) -> bool:
        """False only when no entry of *agent* held *client_key* before the group: the index need not be asked."""
        return (agent, client_key) in self._keys

    def may_hold_id(self, entry_id: str) -> bool:
        """False only when the index holds no entry or tombstone of *entry_id*: it need not be asked."""
        return entry_id in self._agents or entry_id in self._staged

    def agent_of(self, entry_id: str) -> str | None:
        """The agent of the entry or tombstone indexed as *entry_id* (None: none), as the index answers it now."""
        staged = self._staged.get(entry_id)
        if staged is not None:
            return staged.agent
        if entry_id not in self._agents:
            return None
        held = self._agents[entry_id]
        if held is None or self._dropped:
            row = self._index.row_for(entry_id=entry_id)
            return None if row is None else row.agent
        return held
