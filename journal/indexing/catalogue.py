"""A catalogue of the entries an import spools: each one's position, origin, id, agent, links and span, and the order to store them in.

It lives in a private SQLite database that SQLite keeps in its temporary
directory (``$TMPDIR``) and deletes when it is closed, so that however long
the source, only a few of its pages are in memory at a time. Nobody else
reads or writes it. Rows are written in batches; the catalogue is indexed by
id and agent once every entry is in (:meth:`SpoolCatalogue.seal`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

__all__ = ["CatalogueRow", "SpoolCatalogue"]

#: Rows written, or read, at once.
BATCH: Final = 2048

#: position, at (a line number or a file's name), id, agent, links (JSON, or NULL for none), offset, size.
CatalogueRow = tuple[int, int | str, str, str, str | None, int, int]

_COLUMNS: Final = "position, at, id, agent, links, offset, size"


class SpoolCatalogue:
    """The catalogue of one import's spool; :meth:`close` deletes it."""

    def __init__(self) -> None:
        # An empty name: a private database on disk, deleted when closed.
        self._conn = sqlite3.connect("", isolation_level=None)
        try:
            self._conn.execute("PRAGMA journal_mode = OFF")  # nothing to recover: a spool lives as long as its import
            self._conn.execute("PRAGMA synchronous = OFF")
            self._conn.execute(
                "CREATE TABLE items (position INTEGER PRIMARY KEY, at, id TEXT NOT NULL, agent TEXT NOT NULL, links TEXT,"
                " offset INTEGER NOT NULL, size INTEGER NOT NULL)"
            )
            self._conn.execute("CREATE TABLE plan (step INTEGER PRIMARY KEY, position INTEGER NOT NULL)")
            self._conn.execute("BEGIN")
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        """Delete the catalogue."""
        self._conn.close()

    def add(self, rows: list[CatalogueRow]) -> None:
        """List *rows*."""
        self._conn.executemany(f"INSERT INTO items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def add_steps(self, steps: list[tuple[int, int]]) -> None:
        """Add ``(step, position)`` *steps* to the order to store the entries in."""
        self._conn.executemany("INSERT INTO plan (step, position) VALUES (?, ?)", steps)

    def seal(self) -> None:
        """Every row is in: index them by id and agent."""
        self._conn.execute("CREATE INDEX items_key ON items (id, agent)")

    def rows(self) -> Iterator[list[CatalogueRow]]:
        """Every row, in the order of positions, a batch at a time."""
        cursor = self._conn.execute(f"SELECT {_COLUMNS} FROM items ORDER BY position")
        while rows := cursor.fetchmany(BATCH):
            yield rows

    def row(self, position: int) -> CatalogueRow:
        """The row at *position*."""
        found: CatalogueRow = self._conn.execute(f"SELECT {_COLUMNS} FROM items WHERE position = ?", (position,)).fetchone()
        return found

    def positions(self, entry_id: str, agent: str) -> list[int]:
        """The positions of the rows of *entry_id* and *agent*, in order."""
        return [
            row[0]
            for row in self._conn.execute("SELECT position FROM items WHERE id = ? AND agent = ? ORDER BY position", (entry_id, agent))
        ]

    def holds_id(self, entry_id: str) -> bool:
        """Whether a row of any agent holds *entry_id*."""
        return self._conn.execute("SELECT 1 FROM items WHERE id = ? LIMIT 1", (entry_id,)).fetchone() is not None

    def in_plan(self, size: int) -> Iterator[list[CatalogueRow]]:
        """The rows in the order of the plan's steps, *size* at a time."""
        columns = ", ".join(f"i.{column}" for column in _COLUMNS.split(", "))
        cursor = self._conn.execute(f"SELECT {columns} FROM plan p JOIN items i ON i.position = p.position ORDER BY p.step")
        while rows := cursor.fetchmany(size):
            yield rows
