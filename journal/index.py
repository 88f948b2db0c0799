"""The derived SQLite index: entry metadata, FTS5 text, continuity links, vectors, state.

Everything here can be rebuilt from the entry files. The database runs in WAL
mode, so readers keep reading their snapshot while a writer (or a whole
rebuild, which is one transaction) is in progress. The index never reads
entry files: the facade hands it :class:`Entry` objects.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from journal._safefs import Owner, check_dir, check_regular, open_regular
from journal.entry import Entry, utc_key

__all__ = ["COMMON_WORDS", "INDEX_SCHEMA_VERSION", "CommonWords", "Index", "IndexCorruptError", "IndexRow", "IndexState", "SearchRow", "VectorRow", "VectorState", "fts_query", "query_terms"]

#: Bump when the tables change; an index of another version is rebuilt from files.
INDEX_SCHEMA_VERSION: Final = 4

_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26

_TABLES: Final = """
CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE entries (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    ts TEXT NOT NULL,
    ts_utc TEXT NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT NOT NULL,
    theme TEXT NOT NULL,
    mood TEXT,
    focus TEXT,
    novelty REAL,
    tags TEXT NOT NULL,
    client_key TEXT UNIQUE
);
CREATE INDEX entries_agent_ts ON entries (agent, ts_utc);
CREATE INDEX entries_ts ON entries (ts_utc);
CREATE TABLE links (src TEXT NOT NULL, dst TEXT NOT NULL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
CREATE INDEX links_dst ON links (dst);
CREATE TABLE vectors (rowid INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5 (
    theme, voice, tags, focus, mood,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE agents (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, entries INTEGER NOT NULL DEFAULT 0, writes INTEGER NOT NULL DEFAULT 0);
"""
_DROP: Final = (
    "DROP TABLE IF EXISTS agents; DROP TABLE IF EXISTS vectors; DROP TABLE IF EXISTS fts;"
    " DROP TABLE IF EXISTS links; DROP TABLE IF EXISTS entries; DROP TABLE IF EXISTS state;"
)

# Each agent's entries are indexed a second time in a table of their own, so
# that a search scoped to the agent takes its word statistics (BM25's document
# frequencies and average length, the fitted common words) from that agent's
# entries alone. The table is contentless (the text stays in ``fts`` only, and
# snippets come from there: snippet() weighs only the matches in its own row)
# and named after the agent's integer id, never after its text.
_AGENT_FTS: Final = "fts_agent_{id}"
_AGENT_FTS_NAME: Final = re.compile(r"fts_agent_[0-9]+")
_AGENT_TABLE: Final = """
CREATE VIRTUAL TABLE {table} USING fts5 (
    theme, voice, tags, focus, mood,
    content = '',
    tokenize = 'porter unicode61 remove_diacritics 2'
)
"""
_FTS_COLUMNS: Final = "theme, voice, tags, focus, mood"

#: BM25 column weights, in fts column order: a theme or tag match says more than prose.
_BM25_WEIGHTS: Final = (3.0, 1.0, 2.0, 1.5, 0.5)

_COLUMNS: Final = "e.id, e.path, e.ts, e.ts_utc, e.kind, e.agent, e.theme, e.mood, e.focus, e.novelty, e.tags"

# Words too common to carry meaning in a query; dropping them keeps BM25 from
# scoring most of the journal for "what did I ...".
_STOPWORDS: Final = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves"]
)
_TOKEN: Final = re.compile(r"[^\W_]+")
_MAX_QUERY_TERMS: Final = 64



@dataclass(frozen=True, slots=True)
class CommonWords:
    """When a query word counts as common, and what a query of common words alone ranks.

    BM25 scores every entry that holds any query word, so a word found in a
    large share of a big journal makes a query slow while adding little to the
    ranking (its inverse document frequency is low). Such "common" words (in at
    least *share* of the entries searched, and in at least *min_docs*) are left
    out when the query has rarer words, as a stop list fitted to the entries
    searched; a query of common words alone ranks only the newest *candidates*
    entries that match. Fewer than *min_docs* entries are searched plainly.
    """

    share: float = 0.05
    min_docs: int = 2000
    candidates: int = 1000


#: The thresholds searches use (read at each search, so a test may replace them).
COMMON_WORDS = CommonWords()


def query_terms(text: str) -> list[str]:
    """The distinct searchable words of any user text, function words left out unless nothing else is left."""
    words = [w.lower() for w in _TOKEN.findall(text)]
    meaningful = [w for w in words if w not in _STOPWORDS] or words
    return list(dict.fromkeys(meaningful))[:_MAX_QUERY_TERMS]


def _any_of(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{term}"' for term in terms)


def fts_query(text: str) -> str | None:
    """Turn any user text into a safe FTS5 query: quoted terms joined by OR.

    Quoting every term means FTS5 operators (``AND``, ``NEAR(``, ``col:``,
    ``*``, ``-``) in the text are searched as words, never parsed. Returns
    None when the text holds no searchable word.
    """
    terms = query_terms(text)
    return _any_of(terms) if terms else None


class IndexCorruptError(Exception):
    """SQLite reported the index file as corrupt or not a database (internal signal)."""


@dataclass(frozen=True, slots=True)
class IndexState:
    """The index's bookkeeping: its table version and how far it has caught up.

    ``generation`` is the writer lock's counter at the index's last commit;
    ``boot_id`` names the machine boot during which the index last checked
    every file (see :mod:`journal._lock`).
    """

    schema_version: int
    generation: int
    boot_id: str


@dataclass(frozen=True, slots=True)
class IndexRow:
    """What the index knows about one entry, without reading its file."""

    id: str
    path: str
    ts: str
    ts_utc: str
    kind: str
    agent: str
    theme: str
    mood: str | None
    focus: str | None
    novelty: float | None
    tags: tuple[str, ...]

    @classmethod
    def from_sql(cls, row: Sequence[Any]) -> IndexRow:
        return cls(*row[:10], tags=tuple(json.loads(row[10])))


@dataclass(frozen=True, slots=True)
class SearchRow:
    """An index row that matched a text query, with its BM25 score (higher is better)."""

    row: IndexRow
    score: float
    snippet: str


@dataclass(frozen=True, slots=True)
class VectorState:
    """What a vector cache needs to know to stay in step with the ``vectors`` table.

    ``epoch`` changes whenever vectors are removed or written below the
    highest rowid (a rebuild, a deletion, a re-embedding); otherwise new
    vectors only ever appear above ``max_vector_rowid``.
    """

    epoch: str
    max_entry_rowid: int
    max_vector_rowid: int


@dataclass(frozen=True, slots=True)
class VectorRow:
    """One stored vector with the entry fields a semantic query filters on."""

    rowid: int
    id: str
    agent: str
    kind: str
    ts_utc: str
    vector: bytes


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or not isinstance(exc, sqlite3.OperationalError | sqlite3.IntegrityError)


@contextlib.contextmanager
def _corruption_guard() -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if _is_corruption(exc):
            raise IndexCorruptError(str(exc)) from exc
        raise


_BUSY_TIMEOUT: Final = 60.0  # seconds a statement waits for another connection's lock
_CHECKPOINT_PAGES: Final = 4000  # WAL pages (about 16 MB) between automatic checkpoints
_WAL_SIZE_LIMIT: Final = 32 * 1024 * 1024  # bytes a reset WAL is truncated back to (after a rebuild, say)


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """Put a (new) database in WAL mode, waiting out other processes doing the same.

    Changing the journal mode needs a moment of exclusive access, and SQLite
    answers "database is locked" at once instead of calling the busy handler
    when two processes open a new journal together; so retry here.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT
    pause = 0.001
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _window(clauses: list[str], params: list[Any], *, kind: str | None, agent: str | None, since: str | None, until: str | None) -> None:
    if kind is not None:
        clauses.append("e.kind = ?")
        params.append(kind)
    if agent is not None:
        clauses.append("e.agent = ?")
        params.append(agent)
    if since is not None:
        clauses.append("e.ts_utc >= ?")
        params.append(since)
    if until is not None:
        clauses.append("e.ts_utc < ?")
        params.append(until)


_SIDE_FILES: Final = ("", "-wal", "-shm", "-journal")


class Index:
    """One connection to ``index/journal.sqlite3``, or to a private in-memory copy.

    Args:
        path: the database file.
        owner: who must own the database file when this process creates it
            (see :func:`journal._safefs.journal_owner`).
        in_memory: keep the index in this process's memory instead (for a
            reader that may not write to the journal); *path* is then only
            named in messages.
    """

    def __init__(self, path: Path, *, owner: Owner = None, in_memory: bool = False) -> None:
        self.path = path
        self.owner = owner
        self.in_memory = in_memory
        self._conn: sqlite3.Connection | None = None
        # The in-memory copy set aside while a writer tries the on-disk index again (see switch_to_disk).
        self._memory: sqlite3.Connection | None = None
        # Query plans by (table, terms, what the table holds): hybrid search and its snippets share one.
        self._plans: dict[tuple[str, tuple[str, ...], int, int, CommonWords], tuple[str, bool]] = {}

    # -- lifecycle -----------------------------------------------------------------

    def check_files(self) -> bool:
        """Refuse a symlink, FIFO, device or directory at the database or its side files; True if the database exists.

        SQLite follows symlinks and opens whatever it finds: a link planted at
        ``journal.sqlite3`` (or at its ``-wal``/``-shm``) would let a rebuild
        drop and replace another application's tables.

        Raises:
            UnsafePathError: naming the path that is not a regular file.
        """
        check_dir(self.path.parent, "index/")
        found = [check_regular(f"{self.path}{suffix}", f"the index file {self.path.name}{suffix}") for suffix in _SIDE_FILES]
        return found[0] is not None

    def _create_file(self) -> None:
        """Create the empty database file ourselves: mode 0600 and the journal's owner, whatever the umask.

        SQLite gives the ``-wal`` and ``-shm`` files it creates the mode (and,
        running as root, the owner) of the database file, so they follow.
        """
        os.close(open_regular(self.path, os.O_RDWR, f"the index file {self.path.name}", create=True, owner=self.owner))

    def connect(self) -> None:
        """Open the database file, creating an empty one if it is missing.

        Raises:
            UnsafePathError: the database or a side file is not a regular file.
        """
        if self._conn is not None:
            return
        if not self.in_memory and not self.check_files():
            self._create_file()
        with _corruption_guard():
            conn = sqlite3.connect(":memory:" if self.in_memory else self.path, isolation_level=None, check_same_thread=False)
            try:
                if not self.in_memory:
                    self.check_files()  # nothing was swapped in between the check and the open
                conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
                if self.in_memory:
                    self._conn = conn
                    return
                _switch_to_wal(conn)
                # NORMAL in WAL mode: a commit survives a process crash; the
                # entry files, fsynced before the index commit, survive power loss.
                conn.execute("PRAGMA synchronous = NORMAL")
                # Each checkpoint fsyncs the WAL and the database; at SQLite's
                # default of 1,000 pages that happened every ~50 appends and cost
                # more than the index insert itself. A larger WAL amortizes it.
                conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
                conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
            except BaseException:
                conn.close()
                raise
        self._conn = conn

    def close(self) -> None:
        """Close the connection (and an in-memory copy set aside)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self.forget_memory()

    def switch_to_memory(self) -> None:
        """Use a private in-memory database from now on (empty, or the copy :meth:`switch_to_disk` set aside)."""
        if self.in_memory:
            return
        if self._conn is not None:
            self._conn.close()
        self._conn, self._memory = self._memory, None
        self.in_memory = True
        self._plans.clear()

    def switch_to_disk(self) -> None:
        """Use the database file again; an in-memory copy in use is set aside until :meth:`forget_memory`."""
        if not self.in_memory:
            return
        self._memory, self._conn = self._conn, None
        self.in_memory = False
        self._plans.clear()

    def forget_memory(self) -> None:
        """Drop the in-memory copy set aside by :meth:`switch_to_disk`, if any."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.connect()
        assert self._conn is not None
        return self._conn

    def remove_files(self) -> None:
        """Delete the database and its WAL side files (only under the writer lock)."""
        self.close()
        if self.in_memory:
            return
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def state(self) -> IndexState | None:
        """Return the index's bookkeeping, or None if the tables are not built yet."""
        with _corruption_guard():
            try:
                rows = dict(self.conn.execute("SELECT key, value FROM state").fetchall())
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return None
                raise
        if "schema_version" not in rows or "generation" not in rows:
            return None
        return IndexState(int(rows["schema_version"]), int(rows["generation"]), rows.get("boot_id", ""))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back on any error."""
        conn = self.begin()
        try:
            with _corruption_guard():
                yield conn
        except BaseException as exc:
            try:
                self.rollback()
            except Exception as failure:  # noqa: BLE001 - the error being raised is the one that matters
                # A rollback that fails too (a disk gone bad) must not hide why the
                # transaction failed; the connection is closed (SQLite rolls back
                # on close) and reopens when next needed.
                exc.add_note(f"the rollback failed too: {failure}")
                with contextlib.suppress(Exception):
                    self.close()
            raise
        self.commit()

    def begin(self) -> sqlite3.Connection:
        """Open a write transaction, for a caller that commits it at a moment of its choosing."""
        with _corruption_guard():
            self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def commit(self) -> None:
        """Commit the open write transaction."""
        with _corruption_guard():
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        """Undo the open write transaction, if any (after a commit there is none)."""
        if self._conn is not None and self._conn.in_transaction:
            with _corruption_guard():
                self._conn.execute("ROLLBACK")

    # -- writing -------------------------------------------------------------------

    def set_generation(self, conn: sqlite3.Connection, generation: int, boot_id: str | None = None) -> None:
        """Record the write generation (and, after a full check, the boot) the index has caught up with."""
        conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('generation', ?)", (str(generation),))
        if boot_id is not None:
            conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('boot_id', ?)", (boot_id,))

    def insert_entry(self, conn: sqlite3.Connection, entry: Entry, rel_path: str) -> None:
        """Add one entry's rows (metadata, text, links) inside an open transaction."""
        signals = entry.signals or {}
        cursor = conn.execute(
            "INSERT INTO entries (id, path, ts, ts_utc, kind, agent, theme, mood, focus, novelty, tags, client_key)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.id, rel_path, entry.ts, utc_key(entry.timestamp), entry.kind, entry.agent, entry.theme,
                entry.mood, signals.get("focus"), signals.get("novelty"), json.dumps(list(entry.tags)), entry.client_key,
            ),
        )
        text = (cursor.lastrowid, entry.theme, entry.voice, " ".join(entry.tags), signals.get("focus") or "", entry.mood or "")
        conn.execute(f"INSERT INTO fts (rowid, {_FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", text)
        conn.execute(f"INSERT INTO {self._agent_table(conn, entry.agent)} (rowid, {_FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", text)
        conn.execute("UPDATE agents SET entries = entries + 1, writes = writes + 1 WHERE name = ?", (entry.agent,))
        conn.executemany("INSERT OR IGNORE INTO links (src, dst) VALUES (?, ?)", ((entry.id, ref) for ref in entry.continuity_refs))

    @staticmethod
    def _agent_table(conn: sqlite3.Connection, agent: str) -> str:
        """The name of *agent*'s text table, created (with the agent's id) on its first entry."""
        row = conn.execute("SELECT id FROM agents WHERE name = ?", (agent,)).fetchone()
        if row is not None:
            return _AGENT_FTS.format(id=int(row[0]))
        agent_id = conn.execute("INSERT INTO agents (name) VALUES (?)", (agent,)).lastrowid
        table = _AGENT_FTS.format(id=int(agent_id or 0))
        conn.execute(_AGENT_TABLE.format(table=table))
        return table

    def delete_entry(self, conn: sqlite3.Connection, entry_id: str) -> None:
        """Remove one entry's rows inside an open transaction."""
        row = conn.execute("SELECT rowid, agent FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            return
        # A contentless table forgets a row only when told the very text it was given.
        text = conn.execute(f"SELECT rowid, {_FTS_COLUMNS} FROM fts WHERE rowid = ?", (row[0],)).fetchone()
        if text is not None:
            table = self._agent_table(conn, row[1])
            conn.execute(f"INSERT INTO {table} ({table}, rowid, {_FTS_COLUMNS}) VALUES ('delete', ?, ?, ?, ?, ?, ?)", text)
            conn.execute("UPDATE agents SET entries = entries - 1, writes = writes + 1 WHERE name = ?", (row[1],))
        conn.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM entries WHERE rowid = ?", (row[0],))
        if conn.execute("DELETE FROM vectors WHERE rowid = ?", (row[0],)).rowcount:
            self.bump_vectors_epoch(conn)
        conn.execute("DELETE FROM links WHERE src = ?", (entry_id,))

    def rebuild(self, entries: Iterable[tuple[Entry, str]], generation: int, boot_id: str) -> int:
        """Replace every table with rows for *entries*, in one transaction.

        Readers keep their old snapshot until the commit, then see the new one.
        """
        count = 0
        with self.transaction() as conn:
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'").fetchall():
                if _AGENT_FTS_NAME.fullmatch(name):
                    conn.execute(f"DROP TABLE {name}")
            for statement in (_DROP + _TABLES).split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO state (key, value) VALUES ('schema_version', ?)", (str(INDEX_SCHEMA_VERSION),))
            self.bump_vectors_epoch(conn)
            self.set_generation(conn, generation, boot_id)
            for entry, rel_path in entries:
                self.insert_entry(conn, entry, rel_path)
                count += 1
        with contextlib.suppress(sqlite3.OperationalError):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return count

    # -- vectors -------------------------------------------------------------------

    @staticmethod
    def bump_vectors_epoch(conn: sqlite3.Connection) -> None:
        """Tell vector caches to reload everything (inside an open transaction)."""
        conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('vectors_epoch', ?)", (uuid.uuid4().hex,))

    @staticmethod
    def insert_vector(conn: sqlite3.Connection, entry_id: str, model: str, vector: bytes) -> None:
        """Store the vector of an entry inserted in the same open transaction."""
        conn.execute("INSERT OR REPLACE INTO vectors (rowid, model, vector) SELECT rowid, ?, ? FROM entries WHERE id = ?", (model, vector, entry_id))

    def store_vectors(self, model: str, rows: Sequence[tuple[int, str, bytes]]) -> None:
        """Store ``(rowid, entry_id, vector)`` rows in one transaction; rows whose entry changed meanwhile are dropped."""
        with self.transaction() as conn:
            top = conn.execute("SELECT max(rowid) FROM vectors").fetchone()[0] or 0
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (rowid, model, vector) SELECT rowid, ?, ? FROM entries WHERE rowid = ? AND id = ?",
                ((model, vector, rowid, entry_id) for rowid, entry_id, vector in rows),
            )
            if any(rowid <= top for rowid, _, _ in rows):
                self.bump_vectors_epoch(conn)

    def vector_state(self) -> VectorState:
        """The vectors table's epoch and high-water marks."""
        with _corruption_guard():
            row = self.conn.execute(
                "SELECT (SELECT value FROM state WHERE key = 'vectors_epoch'), (SELECT max(rowid) FROM entries), (SELECT max(rowid) FROM vectors)"
            ).fetchone()
        return VectorState(row[0] or "", row[1] or 0, row[2] or 0)

    def count_missing_vectors(self, model: str) -> int:
        """How many entries have no vector from *model*."""
        with _corruption_guard():
            return int(
                self.conn.execute(
                    "SELECT count(*) FROM entries e LEFT JOIN vectors v ON v.rowid = e.rowid AND v.model = ? WHERE v.rowid IS NULL", (model,)
                ).fetchone()[0]
            )

    def missing_vectors(self, model: str, *, limit: int) -> list[tuple[int, str, str, tuple[str, ...], str | None, str]]:
        """Up to *limit* entries lacking a *model* vector: ``(rowid, id, theme, tags, focus, voice)``, oldest rowid first."""
        with _corruption_guard():
            rows = self.conn.execute(
                "SELECT e.rowid, e.id, e.theme, e.tags, e.focus, f.voice FROM entries e JOIN fts f ON f.rowid = e.rowid"
                " LEFT JOIN vectors v ON v.rowid = e.rowid AND v.model = ? WHERE v.rowid IS NULL ORDER BY e.rowid LIMIT ?",
                (model, limit),
            ).fetchall()
        return [(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5]) for r in rows]

    def vectors_after(self, model: str, after_rowid: int) -> list[VectorRow]:
        """Every *model* vector above *after_rowid*, with its entry's filter fields, by rowid."""
        with _corruption_guard():
            return [
                VectorRow(*r)
                for r in self.conn.execute(
                    "SELECT v.rowid, e.id, e.agent, e.kind, e.ts_utc, v.vector FROM vectors v JOIN entries e ON e.rowid = v.rowid"
                    " WHERE v.rowid > ? AND v.model = ? ORDER BY v.rowid",
                    (after_rowid, model),
                )
            ]

    def vector_of(self, entry_id: str, model: str) -> bytes | None:
        """The stored *model* vector of one entry."""
        with _corruption_guard():
            row = self.conn.execute(
                "SELECT v.vector FROM vectors v JOIN entries e ON e.rowid = v.rowid WHERE e.id = ? AND v.model = ?", (entry_id, model)
            ).fetchone()
        return row[0] if row else None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run several reads against one consistent snapshot of the database."""
        conn = self.conn
        with _corruption_guard():
            conn.execute("BEGIN")
            try:
                yield
            finally:
                conn.execute("COMMIT")

    # -- reading -------------------------------------------------------------------

    def find_id(self, entry_id: str) -> str | None:
        """The path of the entry with *entry_id*, if indexed."""
        with _corruption_guard():
            row = self.conn.execute("SELECT path FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return row[0] if row else None

    def find_client_key(self, client_key: str) -> str | None:
        """The path of the entry appended with *client_key*, if indexed."""
        with _corruption_guard():
            row = self.conn.execute("SELECT path FROM entries WHERE client_key = ?", (client_key,)).fetchone()
        return row[0] if row else None

    def client_key_entry(self, client_key: str) -> tuple[str, str] | None:
        """``(id, path)`` of the entry appended with *client_key*, if indexed."""
        with _corruption_guard():
            row = self.conn.execute("SELECT id, path FROM entries WHERE client_key = ?", (client_key,)).fetchone()
        return (row[0], row[1]) if row else None
    def row_for(self, *, entry_id: str | None = None, client_key: str | None = None) -> IndexRow | None:
        """The index row of the entry with *entry_id*, or the one appended with *client_key*."""
        column, value = ("id", entry_id) if entry_id is not None else ("client_key", client_key)
        with _corruption_guard():
            row = self.conn.execute(f"SELECT {_COLUMNS} FROM entries e WHERE e.{column} = ?", (value,)).fetchone()
        return IndexRow.from_sql(row) if row else None

    def paths(self) -> dict[str, str]:
        """Map every indexed path to its entry id."""
        with _corruption_guard():
            return dict(self.conn.execute("SELECT path, id FROM entries").fetchall())

    def count(self) -> int:
        with _corruption_guard():
            return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def rows(
        self, *, kind: str | None = None, agent: str | None = None, since: str | None = None,
        until: str | None = None, limit: int | None = None, ids: Sequence[str] | None = None, oldest_first: bool = False,
    ) -> list[IndexRow]:
        """Index rows in a window, newest first unless *oldest_first*."""
        clauses: list[str] = []
        params: list[Any] = []
        _window(clauses, params, kind=kind, agent=agent, since=since, until=until)
        if ids is not None:
            clauses.append(f"e.id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        order = "ASC" if oldest_first else "DESC"
        sql = f"SELECT {_COLUMNS} FROM entries e {where} ORDER BY e.ts_utc {order}, e.id {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with _corruption_guard():
            return [IndexRow.from_sql(r) for r in self.conn.execute(sql, params)]

    def _text_table(self, agent: str | None) -> tuple[str, int, int] | None:
        """The text table a search scoped to *agent* reads, its entry count and write counter; None for an agent with no entries.

        Unscoped, the journal-wide table; its size is its highest rowid, which
        grows with every insert.
        """
        if agent is None:
            size = int(self.conn.execute("SELECT max(rowid) FROM fts").fetchone()[0] or 0)
            return "fts", size, size
        row = self.conn.execute("SELECT id, entries, writes FROM agents WHERE name = ?", (agent,)).fetchone()
        if row is None or not row[1]:
            return None
        return _AGENT_FTS.format(id=int(row[0])), int(row[1]), int(row[2])

    def _is_common(self, table: str, term: str, threshold: int) -> bool:
        """True if *term* is in at least *threshold* rows of *table* (counting stops there)."""
        found = self.conn.execute(f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)", (f'"{term}"', threshold)).fetchone()[0]
        return int(found) >= threshold

    def _plan(self, table: str, size: int, writes: int, terms: list[str]) -> tuple[str, bool]:
        """The FTS5 expression for *terms* in *table*, and whether to rank only the newest matches (see :class:`CommonWords`)."""
        common = COMMON_WORDS
        key = (table, tuple(terms), size, writes, common)
        if key not in self._plans:
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[key] = self._plan_for(table, terms, size, common)
        return self._plans[key]

    def _plan_for(self, table: str, terms: list[str], size: int, common: CommonWords) -> tuple[str, bool]:
        threshold = max(common.min_docs, int(size * common.share))
        if size < threshold:
            return _any_of(terms), False
        rare = [term for term in terms if not self._is_common(table, term, threshold)]
        if not rare:
            return _any_of(terms), True
        # Scoring a common word would cost a pass over its whole posting list
        # (BM25's document frequency) for a term whose weight is small anyway.
        return _any_of(rare), False

    def search(
        self, query: str, *, k: int, kind: str | None = None, agent: str | None = None,
        since: str | None = None, until: str | None = None, exclude: Sequence[str] = (), with_snippets: bool = True,
    ) -> list[SearchRow]:
        """Rank entries for *query* by BM25 (any text is accepted).

        With *agent*, the word statistics are that agent's own (see
        ``_AGENT_FTS``). Without *with_snippets* the rows carry empty
        snippets; :meth:`snippets` makes them later for the few rows that are kept.
        """
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        with _corruption_guard():
            found_table = self._text_table(agent)
            if found_table is None:
                return []
            table, size, writes = found_table
            match, newest_only = self._plan(table, size, writes, terms)
            clauses = [f"{table} MATCH ?"]
            params: list[Any] = [match]
            _window(clauses, params, kind=kind, agent=agent, since=since, until=until)
            if exclude:
                clauses.append(f"e.id NOT IN ({','.join('?' * len(exclude))})")
                params.extend(exclude)
            weights = ", ".join(str(w) for w in _BM25_WEIGHTS)
            matches = (
                f"SELECT {table}.rowid AS rid, bm25({table}, {weights}) AS rank FROM {table}"
                f" JOIN entries e ON e.rowid = {table}.rowid WHERE {' AND '.join(clauses)}"
            )
            if newest_only:
                matches += f" ORDER BY {table}.rowid DESC LIMIT {COMMON_WORDS.candidates}"
            # Ties go to the newer entry, then to the id, so equal scores come out in one order.
            sql = (
                f"SELECT {_COLUMNS}, -h.rank, h.rid FROM ({matches}) h JOIN entries e ON e.rowid = h.rid"
                " ORDER BY h.rank, e.ts_utc DESC, e.id DESC LIMIT ?"
            )
            found = self.conn.execute(sql, [*params, k]).fetchall()
            if not with_snippets:
                return [SearchRow(IndexRow.from_sql(r[:11]), float(r[11]), "") for r in found]
            return [SearchRow(IndexRow.from_sql(r[:11]), float(r[11]), self._snippet(match, r[12])) for r in found]

    def _snippet(self, match: str, rowid: int) -> str:
        found = self.conn.execute("SELECT snippet(fts, -1, '', '', '…', 24) FROM fts WHERE fts MATCH ? AND rowid = ?", (match, rowid)).fetchone()
        return found[0] if found else ""

    def snippets(self, query: str, entry_ids: Sequence[str], *, agent: str | None = None) -> dict[str, str]:
        """Snippets of *query* in the given entries (those it matches), with the query words a search scoped to *agent* keeps."""
        terms = query_terms(query)
        if not terms or not entry_ids:
            return {}
        with _corruption_guard():
            found_table = self._text_table(agent)
            if found_table is None:
                return {}
            match, _ = self._plan(found_table[0], found_table[1], found_table[2], terms)
            rowids = self.conn.execute(f"SELECT id, rowid FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})", list(entry_ids)).fetchall()
            found = {entry_id: self._snippet(match, rowid) for entry_id, rowid in rowids}
        return {entry_id: text for entry_id, text in found.items() if text}

    def links_from(self, entry_id: str) -> list[str]:
        with _corruption_guard():
            return [r[0] for r in self.conn.execute("SELECT dst FROM links WHERE src = ? ORDER BY dst", (entry_id,))]

    def links_to(self, entry_id: str) -> list[str]:
        with _corruption_guard():
            return [r[0] for r in self.conn.execute("SELECT src FROM links WHERE dst = ? ORDER BY src", (entry_id,))]

    def links_within(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """Continuity links whose source is among *ids*."""
        if not ids:
            return []
        with _corruption_guard():
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS window_ids (id TEXT PRIMARY KEY)")
            self.conn.execute("DELETE FROM window_ids")
            self.conn.executemany("INSERT OR IGNORE INTO window_ids VALUES (?)", ((i,) for i in ids))
            return [(s, d) for s, d in self.conn.execute("SELECT src, dst FROM links WHERE src IN (SELECT id FROM window_ids)")]
