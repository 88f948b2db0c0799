"""The rebuild a check compares the index with, made in a scratch file one entry at a time so that no list of entries is held.

A check hands each entry to :meth:`ScratchIndex.add` as it reads the entry's
file, under the rowid the journal's index gives its id (so that the two
text indexes' postings compare by sums). Two files with one id, or with one
agent's client_key, cannot both be rows: the second is refused and the
caller settles which file a rebuild keeps (:meth:`ScratchIndex.claimants`
names the rows in its way, :meth:`ScratchIndex.drop` takes one out). Each
entry's links are noted in their order too (:meth:`ScratchIndex.note_links`),
so that the links to no entry, or to another agent's, are found by one query
once every file is in (:meth:`ScratchIndex.link_targets`).

The file is the check's own: nobody else reads or writes it, and it is
removed with its directory afterwards.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

from journal.files.entry import Entry
from journal.indexing._tables import create_tables
from journal.indexing.index import Index

__all__ = ["ScratchIndex"]

#: Each link of each entry file read, in the order read (``continues`` before ``supersedes``, each in the entry's order).
#: ``path`` tells the file apart from another holding the same id: only the rows' own files' links are looked at.
_NOTED_LINKS: Final = "CREATE TABLE noted_links (src TEXT NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL, ref TEXT NOT NULL)"


class ScratchIndex(Index):
    """An index filled by a check in one transaction: :meth:`start`, :meth:`add` each entry, :meth:`finish`."""

    _filling: sqlite3.Connection | None = None

    def start(self) -> None:
        """Open the transaction that fills the index, with its tables made anew."""
        conn = self.begin()
        create_tables(conn)
        conn.execute("DROP TABLE IF EXISTS noted_links")
        conn.execute(_NOTED_LINKS)
        self._filling = conn

    def finish(self) -> None:
        """Commit what was added: its reads see it from now on."""
        self.commit()
        self._filling = None

    def _conn_filling(self) -> sqlite3.Connection:
        if self._filling is None:
            raise RuntimeError("ScratchIndex: call start() before adding entries")
        return self._filling

    def add(self, entry: Entry, rel_path: str, rowid: int | None) -> bool:
        """Index *entry* (of the file *rel_path*) under *rowid*; False, adding nothing, when a row holds its id, its agent's client_key or *rowid*."""
        try:
            self.insert_entry(self._conn_filling(), entry, rel_path, rowid, pair=False)
        except sqlite3.IntegrityError:
            # The statement that failed is the entry row's, the first one: nothing of the entry is in.
            return False
        return True

    def note_links(self, entry: Entry, rel_path: str) -> None:
        """Note the links of *entry*, read from *rel_path*, whether or not it is added."""
        links = [("continues", ref) for ref in entry.continuity_refs] + [("supersedes", ref) for ref in entry.supersedes]
        if links:
            self._conn_filling().executemany(
                "INSERT INTO noted_links (src, path, name, ref) VALUES (?, ?, ?, ?)",
                ((entry.id, rel_path, name, ref) for name, ref in links),
            )

    def claimants(self, entry: Entry) -> list[tuple[str, str]]:
        """The id and file of each row holding *entry*'s id, or its agent's client_key."""
        rows = self._conn_filling().execute(
            "SELECT id, path FROM entries WHERE id = ? OR (agent = ? AND client_key = ?)"
            " UNION ALL SELECT id, path FROM tombstones WHERE id = ? OR (agent = ? AND client_key = ?)",
            (entry.id, entry.agent, entry.client_key) * 2,
        )
        return [(str(entry_id), str(path)) for entry_id, path in rows]

    def drop(self, entry_id: str) -> None:
        """Take the entry *entry_id*'s rows out again (its noted links stay, and name a file that is no row)."""
        self.delete_entry(self._conn_filling(), entry_id)

    def link_targets(self, agent: str | None = None) -> Iterator[tuple[str, str, str, str, str | None]]:
        """Each noted link of a row's file (with *agent*: of that agent's rows) to no row or another agent's, in the rows' order of time then file.

        Yields ``(path, agent, name, ref, owner)``: the link's file and its entry's agent, ``continues`` or
        ``supersedes``, the id linked to, and the agent of the row holding that id, an erased entry's tombstone
        included (None: no row holds it).
        """
        where = " AND e.agent = ?" if agent is not None else ""
        sql = (
            "SELECT e.path, e.agent, l.name, l.ref, t.agent FROM noted_links l"
            " JOIN entries e ON e.id = l.src AND e.path = l.path"
            " LEFT JOIN (SELECT id, agent FROM entries UNION ALL SELECT id, agent FROM tombstones) t ON t.id = l.ref"
            f" WHERE (t.agent IS NULL OR t.agent != e.agent){where} ORDER BY e.ts_utc, e.path, l.rowid"
        )
        for path, owner_agent, name, ref, owner in self.conn.execute(sql, [] if agent is None else [agent]):
            yield str(path), str(owner_agent), str(name), str(ref), None if owner is None else str(owner)
