"""An import's spool: the checked entries' bytes, and a catalogue of them on disk, so that an import's memory does not grow with its source.

The bytes go to one unlinked temporary file, unbuffered (a write the
scratch space refuses fails at once, naming TMPDIR). Each entry's line or
file, id, agent, links and span go to a private SQLite database that SQLite
keeps in ``$TMPDIR`` and deletes when it is closed; the order the import
stores the entries in is written there too. Only a few pages of it are held
in memory at a time, whatever the number of entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Final

from journal.files import scratch_errors
from journal.files.entry import Entry

__all__ = ["Spool", "Spooled"]

#: Rows written to the catalogue at once.
_BATCH: Final = 2048
_WHAT: Final = "the import's spool"


@dataclass(frozen=True, slots=True)
class Spooled:
    """One checked entry in the spool: its position in the source, where it came from, its id and agent (as stored), its links,
    and its bytes' span in the spool file."""

    position: int
    at: int | str  # the line number, or the entry file of a journal directory
    id: str
    agent: str
    continues: tuple[str, ...]
    supersedes: tuple[str, ...]
    offset: int
    size: int

    @property
    def where(self) -> dict[str, Any]:
        """Where it came from, as a report lists it: ``{"line": 3}`` or ``{"file": ...}``."""
        return {"line": self.at} if isinstance(self.at, int) else {"file": self.at}

    @property
    def place(self) -> str:
        """Where it came from, as a reason names it: ``line 3``, or a directory's entry file."""
        return f"line {self.at}" if isinstance(self.at, int) else self.at

    @property
    def key(self) -> tuple[str, str]:
        """Its id and agent: what a link of the same agent resolves to."""
        return self.id, self.agent

    @property
    def links(self) -> Iterator[tuple[str, str]]:
        """(field, id) for each continuity and supersession link, as an append names them."""
        for n, ref in enumerate(self.continues):
            yield f"signals.continuity_refs[{n}]", ref
        for n, ref in enumerate(self.supersedes):
            yield f"signals.supersedes[{n}]", ref


_COLUMNS: Final = "position, at, id, agent, links, offset, size"


def _spooled(row: tuple[Any, ...]) -> Spooled:
    position, at, entry_id, agent, links, offset, size = row
    continues, supersedes = json.loads(links) if links is not None else ((), ())
    return Spooled(position, at, entry_id, agent, tuple(continues), tuple(supersedes), offset, size)


class Spool:
    """The spool of one import: :meth:`add` each checked entry, :meth:`close` (or leave the ``with`` block) to delete it all."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._db: sqlite3.Connection | None = None
        self._rows: list[tuple[Any, ...]] = []
        self._order: list[tuple[int, int]] = []
        self._planned = 0  # steps of the plan written
        self.count = 0  # entries spooled
        self.size = 0  # their bytes
        with contextlib.ExitStack() as stack:
            stack.callback(self.close)
            with scratch_errors(_WHAT):
                self._file = tempfile.TemporaryFile(prefix="ghostjournal-import-", buffering=0)  # noqa: SIM115 - closed by close()
                # An empty name: a private database on disk, deleted when closed (in SQLite's temporary directory, TMPDIR).
                self._db = sqlite3.connect("", isolation_level=None)
                self._db.execute("PRAGMA journal_mode = OFF")
                self._db.execute("PRAGMA synchronous = OFF")
                self._db.execute(
                    "CREATE TABLE items (position INTEGER PRIMARY KEY, at, id TEXT NOT NULL, agent TEXT NOT NULL, links TEXT,"
                    " offset INTEGER NOT NULL, size INTEGER NOT NULL)"
                )
                self._db.execute("CREATE TABLE plan (step INTEGER PRIMARY KEY, position INTEGER NOT NULL)")
                self._db.execute("BEGIN")
            stack.pop_all()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Delete the spool: its file and its catalogue."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def _conn(self) -> sqlite3.Connection:
        assert self._db is not None  # noqa: S101 - narrows the type: only a closed spool has none, and it is not used
        return self._db

    def add(self, entry: Entry, at: int | str) -> None:
        """Spool *entry*'s canonical line, from line or file *at*, with its links and its span in the spool."""
        assert self._file is not None  # noqa: S101 - narrows the type, as _conn
        data = entry.to_json_bytes()
        view = memoryview(data)
        with scratch_errors(_WHAT):
            while view:  # an unbuffered write may take part of the bytes
                view = view[self._file.write(view) :]
        links = json.dumps([entry.continuity_refs, entry.supersedes]) if entry.continuity_refs or entry.supersedes else None
        self._rows.append((self.count, at, entry.id, entry.agent, links, self.size, len(data)))
        self.count += 1
        self.size += len(data)
        if len(self._rows) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        with scratch_errors(_WHAT):
            if self._rows:
                self._conn.executemany(f"INSERT INTO items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", self._rows)
            if self._order:
                self._conn.executemany("INSERT INTO plan (step, position) VALUES (?, ?)", self._order)
        self._rows, self._order = [], []

    def sealed(self) -> None:
        """Every entry is spooled: index the catalogue for the plan's lookups."""
        self._flush()
        with scratch_errors(_WHAT):
            self._conn.execute("CREATE INDEX items_key ON items (id, agent)")

    def entries(self) -> Iterator[Spooled]:
        """Every spooled entry, in the source's order."""
        with scratch_errors(_WHAT):
            cursor = self._conn.execute(f"SELECT {_COLUMNS} FROM items ORDER BY position")
            rows = cursor.fetchmany(_BATCH)
        while rows:
            yield from map(_spooled, rows)  # outside scratch_errors: what the caller raises meanwhile is its own
            with scratch_errors(_WHAT):
                rows = cursor.fetchmany(_BATCH)

    def item(self, position: int) -> Spooled:
        """The entry spooled at *position*."""
        with scratch_errors(_WHAT):
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM items WHERE position = ?", (position,)).fetchone()
        return _spooled(row)

    def positions(self, entry_id: str, agent: str) -> list[int]:
        """The positions of the lines of *entry_id* and *agent*, in the source's order."""
        with scratch_errors(_WHAT):
            rows = self._conn.execute("SELECT position FROM items WHERE id = ? AND agent = ? ORDER BY position", (entry_id, agent))
            return [row[0] for row in rows]

    def holds_id(self, entry_id: str) -> bool:
        """Whether a line of any agent holds *entry_id*."""
        with scratch_errors(_WHAT):
            return self._conn.execute("SELECT 1 FROM items WHERE id = ? LIMIT 1", (entry_id,)).fetchone() is not None

    def planned(self, position: int) -> None:
        """*position* is the next entry to store."""
        self._order.append((self._planned, position))
        self._planned += 1
        if len(self._order) >= _BATCH:
            self._flush()

    def plan_done(self) -> None:
        """Every entry to store is planned."""
        self._flush()

    def in_plan(self, size: int) -> Iterator[list[tuple[Spooled, bytes]]]:
        """The planned entries with their bytes, in the planned order, *size* at a time."""
        assert self._file is not None  # noqa: S101 - narrows the type, as _conn
        fd = self._file.fileno()
        with scratch_errors(_WHAT):
            cursor = self._conn.execute(
                f"SELECT {', '.join('i.' + column for column in _COLUMNS.split(', '))} FROM plan p JOIN items i ON i.position = p.position"
                " ORDER BY p.step"
            )
            rows = cursor.fetchmany(size)
        while rows:
            group = [_spooled(row) for row in rows]
            with scratch_errors(_WHAT):
                read = [(item, os.pread(fd, item.size, item.offset)) for item in group]
            yield read  # outside scratch_errors: what the caller raises meanwhile is its own
            with scratch_errors(_WHAT):
                rows = cursor.fetchmany(size)
