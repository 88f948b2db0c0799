"""The index's tables: their definitions, the rows read from them, and the window a read is scoped by.

Every table is derived from the entry files; :data:`INDEX_SCHEMA_VERSION`
names their layout, and an index of another version is rebuilt from the files,
keeping the vectors of unchanged text (see :mod:`journal.indexing._kept_vectors`). The
``vectors`` table holds one vector per entry and encoder identity.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from journal.indexing._proposals import PROPOSAL_DROP, PROPOSAL_TABLES

__all__ = [
    "ALL_ROWS",
    "COLUMNS",
    "FTS_COLUMNS",
    "INDEX_SCHEMA_VERSION",
    "TOMBSTONE_COLUMNS",
    "WHOLE_JOURNAL",
    "IndexRow",
    "IndexState",
    "VectorRow",
    "VectorState",
    "Window",
    "agent_text_table",
    "create_tables",
    "scoped_text_table",
    "text_table_of",
]

#: Bump when the tables change; an index of another version is rebuilt from files (its vectors kept).
#: 8: a client_key is unique per agent, ``UNIQUE (agent, client_key)`` (7 held it unique in the journal).
#: 9: each entry row holds the digest of the entry's canonical file as it was indexed (see :mod:`journal.indexing._kept_digests`).
#: 10: an erased entry's tombstone is indexed in ``tombstones`` alone (no text, no vector), so no read lists or ranks it;
#:     ``untrusted`` lists the entries whose text came from outside, which a prompt context leaves out.
#:     The time indexes end with the id, so the newest entries by (ts_utc, id) are read from an index alone, in order
#:     (see :mod:`journal.indexing._newest`).
#: 11: ``subjects`` and ``proposals`` hold the supersede proposals between an agent's entries, ``decisions`` the entries deciding
#:     them (see :mod:`journal.indexing._proposals`).
#: 12: ``said`` keeps each entry's subjects and content words for pairing, and a proposal its vectors' ``cosine``.
#: 13: no proposal rests on a subject common among the agent's entries up to the newer one, nor has a question as its newer
#:     entry (an index of 12 holds such ones); ``said`` keeps whether an entry asks.
#: 14: ``said`` keeps words and subjects folded by Unicode (compatibility forms, case, Latin diacritics), and whether an
#:     entry asks by any form of question mark, whatever follows it.
INDEX_SCHEMA_VERSION: Final = 14

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
    client_key TEXT,
    simulated INTEGER NOT NULL DEFAULT 0,
    digest BLOB NOT NULL,
    UNIQUE (agent, client_key)
);
CREATE INDEX entries_agent_ts ON entries (agent, ts_utc, id);
CREATE INDEX entries_simulated ON entries (simulated, agent);
CREATE INDEX entries_ts ON entries (ts_utc, id);
CREATE INDEX entries_client_key ON entries (client_key);
CREATE TABLE tombstones (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    ts TEXT NOT NULL,
    ts_utc TEXT NOT NULL,
    kind TEXT NOT NULL,
    agent TEXT NOT NULL,
    client_key TEXT,
    digest BLOB NOT NULL,
    UNIQUE (agent, client_key)
) WITHOUT ROWID;
CREATE TABLE untrusted (id TEXT PRIMARY KEY, agent TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE links (src TEXT NOT NULL, dst TEXT NOT NULL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
CREATE INDEX links_dst ON links (dst);
CREATE TABLE supersessions (src TEXT NOT NULL, dst TEXT NOT NULL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
CREATE INDEX supersessions_dst ON supersessions (dst);
CREATE TABLE vectors (model TEXT NOT NULL, entry INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, entry));
CREATE INDEX vectors_entry ON vectors (entry);
CREATE VIRTUAL TABLE fts USING fts5 (
    theme, voice, tags, focus, mood,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE agents (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, entries INTEGER NOT NULL DEFAULT 0, writes INTEGER NOT NULL DEFAULT 0);
"""
_DROP: Final = (
    "DROP TABLE IF EXISTS agents; DROP TABLE IF EXISTS vectors; DROP TABLE IF EXISTS fts;"
    " DROP TABLE IF EXISTS untrusted; DROP TABLE IF EXISTS tombstones; DROP TABLE IF EXISTS supersessions; DROP TABLE IF EXISTS links; DROP TABLE IF EXISTS entries; DROP TABLE IF EXISTS state;"
)

# Each agent's entries are indexed a second time in a text table of their own,
# so that a search scoped to the agent takes its word statistics (BM25's
# document frequencies and average length, the fitted common words) from that
# agent's entries alone. The table is contentless (the text stays in ``fts``
# only, and snippets come from there: snippet() weighs only the matches in its
# own row) and named after the agent's integer id, never after its text. The
# ``agents`` row counts the agent's entries and every write to its table.
_AGENT_FTS: Final = "fts_agent_{id}"
_AGENT_FTS_NAME: Final = re.compile(r"fts_agent_[0-9]+")
_AGENT_TABLE: Final = """
CREATE VIRTUAL TABLE {table} USING fts5 (
    theme, voice, tags, focus, mood,
    content = '',
    tokenize = 'porter unicode61 remove_diacritics 2'
)
"""

#: An :class:`IndexRow` of a tombstone, read from ``tombstones`` (as ``e``): an erased entry has no theme, mood, focus or tags.
TOMBSTONE_COLUMNS: Final = "e.id, e.path, e.ts, e.ts_utc, e.kind, e.agent, 'erased', NULL, NULL, NULL, '[]'"
#: The entries and the tombstones (as ``e``) by the columns both have: what a read of every entry file's row looks at.
ALL_ROWS: Final = (
    "(SELECT id, path, ts_utc, kind, agent, digest FROM entries UNION ALL SELECT id, path, ts_utc, kind, agent, digest FROM tombstones)"
)

#: The columns of every text table, in order.
FTS_COLUMNS: Final = "theme, voice, tags, focus, mood"
#: The entries columns an :class:`IndexRow` is read from (the table as ``e``).
COLUMNS: Final = "e.id, e.path, e.ts, e.ts_utc, e.kind, e.agent, e.theme, e.mood, e.focus, e.novelty, e.tags"


def create_tables(conn: sqlite3.Connection) -> None:
    """Drop every index table (each agent's text table too) and create them empty, inside an open transaction."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'").fetchall():
        if _AGENT_FTS_NAME.fullmatch(name):
            conn.execute(f"DROP TABLE {name}")
    for statement in (PROPOSAL_DROP + _DROP + _TABLES + PROPOSAL_TABLES).split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO state (key, value) VALUES ('schema_version', ?)", (str(INDEX_SCHEMA_VERSION),))


def text_table_of(agent_id: int) -> str:
    """The name of the text table of the agent whose row in ``agents`` has *agent_id*."""
    return _AGENT_FTS.format(id=int(agent_id))


def agent_text_table(conn: sqlite3.Connection, agent: str) -> str:
    """The name of *agent*'s text table, created (with the agent's id) on its first entry; inside an open transaction."""
    row = conn.execute("SELECT id FROM agents WHERE name = ?", (agent,)).fetchone()
    if row is not None:
        return text_table_of(row[0])
    agent_id = conn.execute("INSERT INTO agents (name) VALUES (?)", (agent,)).lastrowid
    table = text_table_of(agent_id or 0)
    conn.execute(_AGENT_TABLE.format(table=table))
    return table


def scoped_text_table(conn: sqlite3.Connection, agent: str | None) -> tuple[str, int, int] | None:
    """The text table a search scoped to *agent* reads, how many entries it holds, and a counter its writes bump.

    Unscoped, the journal-wide ``fts``, whose highest rowid stands for both
    (it grows with every insert). None for an agent without entries.
    """
    if agent is None:
        size = int(conn.execute("SELECT max(rowid) FROM fts").fetchone()[0] or 0)
        return "fts", size, size
    row = conn.execute("SELECT id, entries, writes FROM agents WHERE name = ?", (agent,)).fetchone()
    if row is None or not row[1]:
        return None
    return _AGENT_FTS.format(id=int(row[0])), int(row[1]), int(row[2])


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """Which entries a read looks at: one kind, one agent, a stretch of time; None means any.

    ``since`` (inclusive) and ``until`` (exclusive) are UTC keys as made by
    :func:`journal.files.entry.utc_key`.
    """

    kind: str | None = None
    agent: str | None = None
    since: str | None = None
    until: str | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        """SQL conditions on the entries table (as ``e``) that keep the window, with their parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        for condition, value in (
            ("e.kind = ?", self.kind),
            ("e.agent = ?", self.agent),
            ("e.ts_utc >= ?", self.since),
            ("e.ts_utc < ?", self.until),
        ):
            if value is not None:
                clauses.append(condition)
                params.append(value)
        return clauses, params

    def holds(self, *, kind: str | None, agent: str, ts_utc: str) -> bool:
        """Whether an entry of *kind*, *agent* and *ts_utc* lies in the window: :meth:`where`'s conditions, tested here.

        Strings compare by code point, as SQLite compares UTF-8 text; *kind* may be None (not read) when the window asks for none.
        """
        return (
            (self.kind is None or kind == self.kind)
            and (self.agent is None or agent == self.agent)
            and (self.since is None or ts_utc >= self.since)
            and (self.until is None or ts_utc < self.until)
        )


#: The window of an unscoped read.
WHOLE_JOURNAL: Final = Window()


@dataclass(frozen=True, slots=True)
class IndexState:
    """The index's bookkeeping: its table version and how far it has caught up.

    ``generation`` is the writer lock's counter at the index's last commit,
    ``counter`` that counter file's stamp then (its inode and change time);
    ``boot_id`` names the machine boot during which the index last checked
    every file (see :mod:`journal.files._lock`).
    """

    schema_version: int
    generation: int
    boot_id: str
    counter: str = ""


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
        """The row of a ``SELECT`` of :data:`COLUMNS` (further columns are ignored)."""
        entry_id, path, ts, ts_utc, kind, agent, theme, mood, focus, novelty, tags = row[:11]
        return cls(entry_id, path, ts, ts_utc, kind, agent, theme, mood, focus, novelty, tuple(json.loads(tags)))


@dataclass(frozen=True, slots=True)
class VectorState:
    """What a vector cache needs to know to stay in step with the ``vectors`` table.

    ``epoch`` changes whenever vectors are removed, or written for an entry
    below the highest one holding a vector of the same encoder (a rebuild, a
    deletion, a fill of older entries); otherwise an encoder's new vectors
    only ever appear above the entries it already has vectors for.
    ``max_vector_rowid`` is the highest entry rowid holding any encoder's vector.
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
