"""One instant of the index: a read transaction, and the reads a check, an export or a backup makes of it.

A caller that must see the index and the entry files as of one instant
starts the snapshot under the writer lock: :meth:`IndexSnapshot.begin` opens
the read transaction and makes its first read there, which is what fixes the
instant in WAL mode (a ``BEGIN`` alone reads nothing yet). An append that
publishes after the lock is released is then in neither the snapshot nor the
file listing taken under the same lock. Every later read of the snapshot,
with the lock released, sees that instant only.

The reads raise SQLite's own errors, not :class:`~journal.indexing._sqlite.IndexCorruptError`:
a check reports a damaged index as a problem of its own and must not have it
rebuilt under it. Reads of many rows are iterators, so a caller comparing two
indexes row by row holds one row of each at a time.

:func:`copy_index` is the backup's instant: SQLite's online backup API copies
the index whole, under the writer lock.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from journal.files import FILE_MODE
from journal.indexing._kept_vectors import ENCODER_PREFIX, ENCODER_RANGE
from journal.indexing._sqlite import Database
from journal.indexing._tables import ALL_ROWS, FTS_COLUMNS, Window, text_table_of

__all__ = ["IndexSnapshot", "copy_index"]

#: Rows fetched at a time by the reads that stream a window.
_BATCH: Final = 500
_ROW_COLUMNS: Final = (
    "e.id, e.path, e.ts, e.ts_utc, e.kind, e.agent, e.theme, e.mood, e.focus, e.novelty, e.tags, e.client_key, e.simulated"
)
_TEXT_COLUMNS: Final = ", ".join("f." + column for column in FTS_COLUMNS.split(", "))
#: The checksum of :meth:`IndexSnapshot.postings`, over ``fts5vocab`` 'instance' rows: the place (row, column, offset) times the
#: word's first letter, each posting's term kept below 2**31 so that no sum of SQLite's 64-bit integers can overflow. Reading the
#: whole word (its length, say) costs as much again at 100,000 entries; the letter and the row together catch a word moved.
_POSTING_SUM: Final = "sum((doc * 8191 + col * 4099 + offset) * unicode(term) % 2147483647)"
#: A read-only connection waits this long (ms) for a writer's lock rather than fail at once.
_BUSY_TIMEOUT_MS: Final = 60000
#: SQLite's primary result codes as the errnos they amount to, for a copy's file that refused.
_SQLITE_ERRNOS: Final = {13: errno.ENOSPC, 8: errno.EROFS, 14: errno.EACCES, 23: errno.EACCES}


class IndexSnapshot:
    """Reads of one index, as of one instant once :meth:`begin` has run (or of a private index nobody else writes).

    Use it as a context manager to end the read transaction, or call :meth:`end`.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @classmethod
    def of(cls, index: Database) -> IndexSnapshot:
        """A snapshot over *index*'s own connection (open it under the writer lock, after any catch-up that may reopen it)."""
        return cls(index.conn)

    @classmethod
    @contextlib.contextmanager
    def read_only(cls, path: Path) -> Iterator[IndexSnapshot]:
        """A snapshot over a connection of its own to the index file at *path*, which only reads; closed afterwards.

        It runs no statement that writes to the file, whatever the file holds,
        and leaves the journal's connection (which may be an in-memory fallback)
        alone. It is opened for writing where that is allowed (never creating
        the file) only so that, closing last, it removes the WAL side files it
        made, as every connection of the journal does: a read-only one would
        leave them behind in the journal.

        Raises:
            sqlite3.Error: the file cannot be read as an index (checked with one read of its state table).
        """
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            conn.execute("SELECT 1 FROM state LIMIT 1").fetchall()
            yield cls(conn)
        finally:
            conn.close()

    # -- the transaction -------------------------------------------------------------

    def begin(self) -> int | None:
        """Under the writer lock: start the read transaction with its first read, the generation the index caught up with (None: none recorded)."""
        self._conn.execute("BEGIN")
        try:
            return self.generation()
        except BaseException:
            self.end()  # a transaction left open on a shared connection would refuse its next writer
            raise

    def end(self) -> None:
        """End the read transaction, if one is open."""
        if self._conn.in_transaction:
            self._conn.execute("COMMIT")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.end()

    # -- the state -------------------------------------------------------------------

    def schema_version(self) -> int | None:
        """The layout the index's tables were made in (see :data:`journal.indexing.index.INDEX_SCHEMA_VERSION`), or None when none is recorded."""
        row = self._conn.execute("SELECT value FROM state WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row is not None else None

    def generation(self) -> int | None:
        """The writer lock's generation the index last caught up with, or None when none is recorded."""
        row = self._conn.execute("SELECT value FROM state WHERE key = 'generation'").fetchone()
        return int(row[0]) if row is not None else None

    def encoder_records(self) -> dict[str, list[dict[str, Any]]]:
        """Each encoder key's recorded identities (one per implementation), as stored by :meth:`journal.indexing.index.Index.record_encoder`."""
        records: dict[str, list[dict[str, Any]]] = {}
        for key, value in self._conn.execute("SELECT key, value FROM state WHERE key >= ? AND key < ?", ENCODER_RANGE):
            model = key[len(ENCODER_PREFIX) :].rsplit("\n", 1)[0]
            records.setdefault(model, []).append(json.loads(value))
        return records

    # -- entries ---------------------------------------------------------------------

    def paths(self) -> set[str]:
        """The entry files the index holds, relative to ``entries/``."""
        return {row[0] for row in self._conn.execute("SELECT path FROM entries UNION ALL SELECT path FROM tombstones")}

    def entry_count(self, agent: str | None = None) -> int:
        """How many entries the index holds (with *agent*: of that agent)."""
        sql = "SELECT count(*) FROM entries" + (" WHERE agent = ?" if agent is not None else "")
        return int(self._conn.execute(sql, [] if agent is None else [agent]).fetchone()[0])

    def rows(self, agent: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Every column of each entry row but its rowid (with *agent*: that agent's rows), by id."""
        return self._by_id(f"SELECT {_ROW_COLUMNS} FROM entries e {{where}} ORDER BY e.id", agent)

    def digests(self, agent: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Each entry's id and the digest recorded when it was indexed (with *agent*: that agent's entries), by id."""
        return self._by_id(f"SELECT e.id, e.digest FROM {ALL_ROWS} e {{where}} ORDER BY e.id", agent)

    def texts(self, agent: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Each entry's id and its row of the text table (with *agent*: that agent's entries), by id."""
        return self._by_id(f"SELECT e.id, {_TEXT_COLUMNS} FROM entries e JOIN fts f ON f.rowid = e.rowid {{where}} ORDER BY e.id", agent)

    def links(self, agent: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Each continuity link as one ``"<src> <dst>"`` column (with *agent*: from that agent's entries), in order."""
        return self._pairs("links", agent)

    def supersessions(self, agent: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Each supersession as one ``"<src> <dst>"`` column (with *agent*: from that agent's entries), in order."""
        return self._pairs("supersessions", agent)

    def _pairs(self, table: str, agent: str | None) -> Iterator[tuple[Any, ...]]:
        return self._by_id(f"SELECT l.src || ' ' || l.dst FROM {table} l JOIN entries e ON e.id = l.src {{where}} ORDER BY 1", agent)

    def _by_id(self, sql: str, agent: str | None) -> Iterator[tuple[Any, ...]]:
        """The rows of *sql*, whose ``{where}`` keeps the entries (as ``e``) of *agent*, one at a time."""
        where, params = ("WHERE e.agent = ?", [agent]) if agent is not None else ("", [])
        yield from (tuple(row) for row in self._conn.execute(sql.format(where=where), params))

    def window_rows(self, window: Window) -> Iterator[tuple[str, str, str]]:
        """``(id, path, agent)`` of each entry in *window*, in order of time then id, fetched a batch at a time."""
        clauses, params = window.where()
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        cursor = self._conn.execute(f"SELECT e.id, e.path, e.agent FROM {ALL_ROWS} e {where} ORDER BY e.ts_utc, e.id", params)
        while rows := cursor.fetchmany(_BATCH):
            yield from ((entry_id, rel_path, agent) for entry_id, rel_path, agent in rows)

    def agents_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The agent of each entry of *ids* the index holds (a handful: one entry's links)."""
        if not ids:
            return {}
        rows = self._conn.execute(f"SELECT id, agent FROM {ALL_ROWS} WHERE id IN ({','.join('?' * len(ids))})", list(ids)).fetchall()
        return dict(rows)

    def holds(self, entry_id: str, window: Window) -> bool:
        """Whether the index holds *entry_id* inside *window*."""
        clauses, params = window.where()
        sql = f"SELECT 1 FROM {ALL_ROWS} e WHERE e.id = ?" + "".join(f" AND {c}" for c in clauses)
        return self._conn.execute(sql, [entry_id, *params]).fetchone() is not None

    # -- each agent's text table -------------------------------------------------------

    def agent_tables(self, agent: str | None = None) -> dict[str, tuple[int, int]]:
        """Each agent's name (with *agent*: that agent's alone) mapped to its id and the count of entries its text table records."""
        sql = "SELECT name, id, entries FROM agents" + (" WHERE name = ?" if agent is not None else "")
        return {name: (int(agent_id), int(count)) for name, agent_id, count in self._conn.execute(sql, [] if agent is None else [agent])}

    def agent_text_rowids(self, agent_id: int) -> set[int]:
        """The rowids the text table of the agent with *agent_id* holds."""
        return {row[0] for row in self._conn.execute(f"SELECT rowid FROM {text_table_of(agent_id)}")}

    def entry_rowids(self, agent: str) -> set[int]:
        """The rowids of *agent*'s entry rows."""
        return {row[0] for row in self._conn.execute("SELECT rowid FROM entries WHERE agent = ?", (agent,))}

    def rowids(self) -> dict[str, int]:
        """Each entry's id mapped to its rowid (which keys its rows in the text tables)."""
        return dict(self._conn.execute("SELECT id, rowid FROM entries"))

    def rowid_of(self, entry_id: str) -> int | None:
        """The rowid of the entry *entry_id*, or None when the index holds no such entry."""
        row = self._conn.execute("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return None if row is None else int(row[0])

    def top_rowid(self) -> int:
        """The highest rowid of an entry row (0 when there is none)."""
        return int(self._conn.execute("SELECT max(rowid) FROM entries").fetchone()[0] or 0)

    def id_rowids(self) -> Iterator[tuple[str, int]]:
        """Each entry's id and rowid, by id, one at a time."""
        yield from ((entry_id, int(rowid)) for entry_id, rowid in self._conn.execute("SELECT id, rowid FROM entries ORDER BY id"))

    def id_paths(self) -> Iterator[tuple[str, str]]:
        """Each entry's id and file (relative to ``entries/``), by id, one at a time."""
        yield from ((entry_id, rel_path) for entry_id, rel_path in self._conn.execute("SELECT id, path FROM entries ORDER BY id"))

    def paths_of(self, ids: Iterable[str]) -> dict[str, str]:
        """The file (relative to ``entries/``) of each entry of *ids* the index holds, an erased entry's tombstone included."""
        return dict(self._in_batches(f"SELECT e.id, e.path FROM {ALL_ROWS} e WHERE e.id IN ({{marks}})", list(ids)))

    def ids_of(self, rowids: Iterable[int]) -> dict[int, str]:
        """The id of each entry row of *rowids* the index holds."""
        return {
            int(rowid): entry_id
            for rowid, entry_id in self._in_batches("SELECT rowid, id FROM entries WHERE rowid IN ({marks})", list(rowids))
        }

    def held_paths(self, paths: Iterable[str]) -> set[str]:
        """Those of *paths* (relative to ``entries/``) that an entry row (or a tombstone's) of the index names as its file."""
        return {row[0] for row in self._in_batches(f"SELECT e.path FROM {ALL_ROWS} e WHERE e.path IN ({{marks}})", list(paths))}

    def _in_batches(self, sql: str, values: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        """The rows of *sql* for *values*, its ``{marks}`` a list of parameters, a batch of values at a time."""
        for start in range(0, len(values), _BATCH):
            batch = values[start : start + _BATCH]
            yield from (tuple(row) for row in self._conn.execute(sql.format(marks=",".join("?" * len(batch))), batch))

    def leave_out(self, rowids: Iterable[int]) -> None:
        """Leave the rows *rowids* out of :meth:`postings` and :meth:`postings_by_row` from now on (a temporary table of this connection)."""
        self._conn.execute("CREATE TEMP TABLE IF NOT EXISTS snapshot_left_out (rowid INTEGER PRIMARY KEY)")
        self._conn.executemany("INSERT OR IGNORE INTO temp.snapshot_left_out (rowid) VALUES (?)", ((r,) for r in rowids))

    def postings(self, agent_id: int | None, agent: str | None = None) -> tuple[int, int]:
        """How many postings a text table holds and their checksum (with *agent*: of that agent's rows), in one pass in SQLite.

        The table is the journal-wide ``fts`` (*agent_id* None) or the text table
        of the agent with *agent_id*. A posting is one word at one place (column
        and offset) of one row; the checksum sums, over the postings, a number
        made of the row's rowid, the place, and the word's first letter. Two
        indexes whose rows of one entry have one rowid (see
        :meth:`journal.indexing.index.Index.rebuild`) give equal sums when each
        entry's words are indexed for it and no other: a word indexed for
        another row changes the sum. It is a checksum, not a proof: a word
        replaced by another of the same first letter at its place, or damage
        made to keep the sum, is not ruled out.
        """
        count, total = self._postings(agent_id, agent, f"count(*), {_POSTING_SUM}", "")[0]
        return int(count), int(total or 0)

    def postings_by_row(self, agent_id: int | None, agent: str | None = None) -> dict[int, tuple[int, int]]:
        """:meth:`postings` per row: each rowid mapped to its count and sum (a sort of every posting: for a table whose sums differ)."""
        return {
            int(row[0]): (int(row[1]), int(row[2]))
            for row in self._postings(agent_id, agent, f"doc, count(*), {_POSTING_SUM}", "GROUP BY doc")
        }

    def _postings(self, agent_id: int | None, agent: str | None, columns: str, group: str) -> list[tuple[Any, ...]]:
        table = "fts" if agent_id is None else text_table_of(agent_id)
        name = f"snapshot_postings_{table}"
        self._conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING fts5vocab(main, {table}, 'instance')")
        self._conn.execute("CREATE TEMP TABLE IF NOT EXISTS snapshot_left_out (rowid INTEGER PRIMARY KEY)")
        clauses, params = ["doc NOT IN (SELECT rowid FROM temp.snapshot_left_out)"], []
        if agent is not None and agent_id is None:
            clauses.append("doc IN (SELECT rowid FROM main.entries WHERE agent = ?)")
            params.append(agent)
        try:
            return [
                tuple(row) for row in self._conn.execute(f"SELECT {columns} FROM temp.{name} WHERE {' AND '.join(clauses)} {group}", params)
            ]
        finally:
            self._conn.execute(f"DROP TABLE IF EXISTS temp.{name}")

    # -- vectors ---------------------------------------------------------------------

    def vector_counts(self, agent: str | None = None) -> dict[str, int]:
        """How many vectors each encoder key has (with *agent*: of that agent's entries)."""
        join, params = _agent_join(agent)
        return dict(self._conn.execute(f"SELECT v.model, count(*) FROM vectors v {join} GROUP BY v.model", params).fetchall())

    def vectors_of_other_sizes(self, model: str, sizes: Sequence[int], agent: str | None = None) -> int:
        """How many vectors of *model* (with *agent*: of that agent's entries) are of none of the byte lengths *sizes*."""
        join, params = _agent_join(agent)
        sql = (
            f"SELECT count(*) FROM vectors v {join or 'WHERE 1'} AND v.model = ? AND length(v.vector) NOT IN ({','.join('?' * len(sizes))})"
        )
        return int(self._conn.execute(sql, [*params, model, *sizes]).fetchone()[0])

    def orphan_vectors(self) -> int:
        """How many vectors belong to no entry row."""
        return int(
            self._conn.execute("SELECT count(*) FROM vectors v LEFT JOIN entries e ON e.rowid = v.entry WHERE e.rowid IS NULL").fetchone()[
                0
            ]
        )

    def vector_ids(self, model: str) -> Iterator[str]:
        """The id of each entry holding a stored vector of *model*, by id (the vectors themselves are not read)."""
        yield from (
            row[0]
            for row in self._conn.execute(
                "SELECT e.id FROM vectors v JOIN entries e ON e.rowid = v.entry WHERE v.model = ? ORDER BY e.id", (model,)
            )
        )

    def vector_for(self, entry_id: str, model: str) -> bytes | None:
        """The stored vector of *model* of the entry *entry_id*, or None."""
        row = self._conn.execute(
            "SELECT v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry WHERE e.id = ? AND v.model = ?", (entry_id, model)
        ).fetchone()
        return None if row is None else bytes(row[0])


def _agent_join(agent: str | None) -> tuple[str, list[Any]]:
    """The join and condition keeping the vectors (as ``v``) of *agent*'s entries, with its parameters; nothing without *agent*."""
    return ("JOIN entries e ON e.rowid = v.entry WHERE e.agent = ?", [agent]) if agent is not None else ("", [])


def copy_index(index: Database, target: Path, counter: Callable[[int], str]) -> int:
    """Copy *index* whole to the new file *target* through SQLite's online backup API; return the generation the copy has caught up with.

    Run under the writer lock: the copy is then the index as of that instant.
    *counter* writes the copy's write counter at that generation and returns
    the stamp of its file, which the copy records in place of the source
    counter's (see :mod:`journal.files._lock`), so the copy opens caught up.
    *target* is created here (mode 0600, never over an existing file) and left
    without WAL side files, so it opens as any journal's index does.

    Raises:
        OSError: the copy's file refused (its errno says why: ENOSPC, EROFS, EACCES, else EIO), naming *target*.
    """
    source = index.conn  # opened first: a failure to open the journal's index is its own, not the copy's
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE))
    copy = sqlite3.connect(target, isolation_level=None)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode = WAL")
        generation = IndexSnapshot(copy).generation() or 0
        copy.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('counter', ?)", (counter(generation),))
    except sqlite3.Error as exc:
        # The copy's file refused, not the journal's index: name the copy.
        code = _SQLITE_ERRNOS.get(getattr(exc, "sqlite_errorcode", 0) & 0xFF, errno.EIO)
        raise OSError(code, os.strerror(code), str(target)) from None
    finally:
        copy.close()
    with contextlib.suppress(FileNotFoundError):
        for suffix in ("-wal", "-shm"):
            os.unlink(f"{target}{suffix}")
    return generation
