"""The derived SQLite index: entry metadata, text, continuity links, vectors, state.

Everything here can be rebuilt from the entry files. :class:`Index` is the
one door to it: the connection and transactions come from
:mod:`journal.indexing._sqlite`, the tables from :mod:`journal.indexing._tables`, lexical search
from :mod:`journal.indexing._fts`. The index never reads entry files: the facade hands
it :class:`Entry` objects.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from journal.files import Owner
from journal.files.entry import Entry, utc_key
from journal.indexing._fts import QueryWords, SearchRow, TextSearch, fts_query, query_terms
from journal.indexing._kept_digests import restore_digests, set_digests_aside
from journal.indexing._kept_vectors import ENCODER_PREFIX, ENCODER_RANGE, restore_vectors, set_vectors_aside
from journal.indexing._neighbours import Neighbours, neighbours
from journal.indexing._proposals import (
    SUPERSESSIONS_FOLLOWED,
    Proposal,
    forget_proposals,
    pending_for,
    proposals_of,
    propose,
    propose_again,
    propose_again_after,
    propose_all,
    propose_group,
)
from journal.indexing._sqlite import Database, IndexCorruptError, corruption_guard
from journal.indexing._tables import (
    COLUMNS,
    FTS_COLUMNS,
    INDEX_SCHEMA_VERSION,
    TOMBSTONE_COLUMNS,
    WHOLE_JOURNAL,
    IndexRow,
    IndexState,
    VectorRow,
    VectorState,
    Window,
    agent_text_table,
    create_tables,
)

__all__ = [
    "INDEX_SCHEMA_VERSION",
    "WHOLE_JOURNAL",
    "Index",
    "IndexCorruptError",
    "IndexRow",
    "IndexState",
    "Neighbours",
    "Proposal",
    "QueryWords",
    "SearchRow",
    "VectorRow",
    "VectorState",
    "Window",
    "fts_query",
    "query_terms",
]

_IDS_PER_QUERY: Final = 1000
_ABOVE_EVERY_ID_CHARACTER: Final = "\x7f"  # DEL sorts after every character an entry id may hold (see ENTRY_ID_PATTERN)


class Index(Database):
    """The index database: one connection to ``index/journal.sqlite3``, or to a private in-memory copy (see :class:`Database`)."""

    def __init__(self, path: Path, *, owner: Owner = None, in_memory: bool = False) -> None:
        super().__init__(path, owner=owner, in_memory=in_memory)
        self._text = TextSearch()

    def connection_changed(self) -> None:
        self._text.forget()

    def state(self) -> IndexState | None:
        """Return the index's bookkeeping, or None if the tables are not built yet."""
        with corruption_guard():
            try:
                rows = dict(self.conn.execute("SELECT key, value FROM state").fetchall())
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return None
                raise
        if "schema_version" not in rows or "generation" not in rows:
            return None
        return IndexState(int(rows["schema_version"]), int(rows["generation"]), rows.get("boot_id", ""), rows.get("counter", ""))

    # -- writing -------------------------------------------------------------------

    def set_generation(self, conn: sqlite3.Connection, generation: int, counter: str, boot_id: str | None = None) -> None:
        """Record the write generation and the counter file's stamp (and, after a full check, the boot) the index has caught up with."""
        conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('generation', ?)", (str(generation),))
        conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('counter', ?)", (counter,))
        if boot_id is not None:
            conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('boot_id', ?)", (boot_id,))

    def insert_entry(self, conn: sqlite3.Connection, entry: Entry, rel_path: str, rowid: int | None = None, *, pair: bool = True) -> None:
        """Add one entry's rows (metadata, text, links) inside an open transaction; under *rowid*, if given, else the next.

        Without *pair*, its supersede proposals wait for a pass over every entry (a rebuild's, see :func:`propose_all`).

        A tombstone gets one row of ``tombstones`` and nothing else: no text, no vector, no link, so no read lists or ranks it.
        """
        if entry.erased is not None:
            conn.execute(_INSERT_TOMBSTONE, _tombstone_row(entry, rel_path))
            return
        cursor = conn.execute(_INSERT_ENTRY, _entry_row(entry, rel_path, rowid))
        text = _text_row(cursor.lastrowid, entry)
        conn.execute(f"INSERT INTO fts (rowid, {FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", text)
        conn.execute(f"INSERT INTO {agent_text_table(conn, entry.agent)} (rowid, {FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", text)
        conn.execute("UPDATE agents SET entries = entries + 1, writes = writes + 1 WHERE name = ?", (entry.agent,))
        if entry.origin == "untrusted":
            conn.execute("INSERT INTO untrusted (id, agent) VALUES (?, ?)", (entry.id, entry.agent))
        conn.executemany("INSERT OR IGNORE INTO links (src, dst) VALUES (?, ?)", ((entry.id, ref) for ref in entry.continuity_refs))
        conn.executemany("INSERT OR IGNORE INTO supersessions (src, dst) VALUES (?, ?)", ((entry.id, ref) for ref in entry.supersedes))
        propose(conn, entry, pair=pair)

    def insert_entries(self, conn: sqlite3.Connection, entries: Sequence[tuple[Entry, str]]) -> None:
        """Add the rows of *entries* (each with its path) inside an open transaction, as :meth:`insert_entry` for each in turn would.

        One statement a table for them all: each entry takes the rowid an insert of its own would give it
        (one above the highest), and its supersede proposals are those its own insert would have made (see
        :func:`propose_group`).
        """
        conn.executemany(_INSERT_TOMBSTONE, [_tombstone_row(entry, path) for entry, path in entries if entry.erased is not None])
        live = [(entry, path) for entry, path in entries if entry.erased is None]
        if not live:
            return
        top = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM entries").fetchone()[0])
        conn.executemany(_INSERT_ENTRY, [_entry_row(entry, path, top + n) for n, (entry, path) in enumerate(live, 1)])
        texts = [_text_row(top + n, entry) for n, (entry, _) in enumerate(live, 1)]
        conn.executemany(f"INSERT INTO fts (rowid, {FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", texts)
        by_agent: dict[str, list[tuple[Any, ...]]] = {}  # in order of each agent's first entry: a new agent's table is made then
        for (entry, _), text in zip(live, texts, strict=True):
            by_agent.setdefault(entry.agent, []).append(text)
        for agent, rows in by_agent.items():
            conn.executemany(f"INSERT INTO {agent_text_table(conn, agent)} (rowid, {FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
            conn.execute("UPDATE agents SET entries = entries + ?, writes = writes + ? WHERE name = ?", (len(rows), len(rows), agent))
        conn.executemany(
            "INSERT INTO untrusted (id, agent) VALUES (?, ?)", [(entry.id, entry.agent) for entry, _ in live if entry.origin == "untrusted"]
        )
        conn.executemany(
            "INSERT OR IGNORE INTO links (src, dst) VALUES (?, ?)", [(entry.id, ref) for entry, _ in live for ref in entry.continuity_refs]
        )
        conn.executemany(
            "INSERT OR IGNORE INTO supersessions (src, dst) VALUES (?, ?)",
            [(entry.id, ref) for entry, _ in live for ref in entry.supersedes],
        )
        propose_group(conn, [entry for entry, _ in live])

    def delete_entry(self, conn: sqlite3.Connection, entry_id: str) -> None:
        """Remove one entry's rows (or its tombstone's) inside an open transaction."""
        conn.execute("DELETE FROM tombstones WHERE id = ?", (entry_id,))
        conn.execute("DELETE FROM untrusted WHERE id = ?", (entry_id,))
        touched = forget_proposals(conn, entry_id)
        row = conn.execute("SELECT rowid, agent FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            return
        # A contentless table forgets a row only when told the very text it was given.
        text = conn.execute(f"SELECT rowid, {FTS_COLUMNS} FROM fts WHERE rowid = ?", (row[0],)).fetchone()
        if text is not None:
            table = agent_text_table(conn, row[1])
            conn.execute(f"INSERT INTO {table} ({table}, rowid, {FTS_COLUMNS}) VALUES ('delete', ?, ?, ?, ?, ?, ?)", text)
            conn.execute("UPDATE agents SET entries = entries - 1, writes = writes + 1 WHERE name = ?", (row[1],))
        conn.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM entries WHERE rowid = ?", (row[0],))
        if conn.execute("DELETE FROM vectors WHERE entry = ?", (row[0],)).rowcount:
            self.bump_vectors_epoch(conn)
        conn.execute("DELETE FROM links WHERE src = ?", (entry_id,))
        conn.execute("DELETE FROM supersessions WHERE src = ?", (entry_id,))
        propose_again_after(conn, touched)  # the entries after it propose what a rebuild without it makes

    def rebuild(
        self,
        entries: Iterable[tuple[Entry, str]],
        generation: int,
        counter: str,
        boot_id: str,
        *,
        keep_vectors: bool = True,
        keep_digests: bool = True,
        rowids: Mapping[str, int] | None = None,
    ) -> int:
        """Replace every table with rows for *entries*, in one transaction.

        With *keep_vectors*, every encoder's vectors of the entries whose text
        is unchanged are kept (see :mod:`journal.indexing._kept_vectors`); without, the
        index holds no vector afterwards. With *keep_digests*, each entry
        keeps the digest it was first indexed with (see :mod:`journal.indexing._kept_digests`);
        without, the files' digests are recorded as they are now. *rowids*
        gives entries (by id) the rowids they are to have (a check's rebuild
        takes those of the index it compares with). Readers keep their old
        snapshot until the commit, then see the new one.
        """
        count = 0
        with self.transaction() as conn:
            if keep_digests:
                set_digests_aside(conn)
            if keep_vectors:
                set_vectors_aside(conn)
            create_tables(conn)
            self.bump_vectors_epoch(conn)
            self.set_generation(conn, generation, counter, boot_id)
            for entry, rel_path in entries:
                self.insert_entry(conn, entry, rel_path, None if rowids is None else rowids.get(entry.id), pair=False)
                count += 1
            if keep_vectors:
                restore_vectors(conn)
            propose_all(conn)  # after the vectors: they pair entries by meaning too
            if keep_digests:
                restore_digests(conn)
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
        """Store the vector of an entry inserted in the same open transaction, and pair the entry by meaning too."""
        conn.execute(
            "INSERT OR REPLACE INTO vectors (model, entry, vector) SELECT ?, rowid, ? FROM entries WHERE id = ?", (model, vector, entry_id)
        )
        propose_again(conn, [entry_id])

    def store_vectors(self, model: str, rows: Sequence[tuple[int, str, bytes]], described: dict[str, Any] | None = None) -> None:
        """Store ``(rowid, entry_id, vector)`` rows in one transaction; rows whose entry changed meanwhile are dropped.

        *described* (the encoder's identity, see :meth:`record_encoder`) is recorded in the same transaction.
        """
        with self.transaction() as conn:
            if described is not None:
                self.record_encoder(conn, described)
            # Another encoder's vectors are no concern of this one's cache: only a write below this model's top is.
            top = conn.execute("SELECT max(entry) FROM vectors WHERE model = ?", (model,)).fetchone()[0] or 0
            conn.executemany(
                "INSERT OR REPLACE INTO vectors (model, entry, vector) SELECT ?, rowid, ? FROM entries WHERE rowid = ? AND id = ?",
                ((model, vector, rowid, entry_id) for rowid, entry_id, vector in rows),
            )
            propose_again(conn, [entry_id for _, entry_id, _ in rows])
            if any(rowid <= top for rowid, _, _ in rows):
                self.bump_vectors_epoch(conn)

    def vector_state(self) -> VectorState:
        """The vectors table's epoch and high-water marks."""
        with corruption_guard():
            row = self.conn.execute(
                "SELECT (SELECT value FROM state WHERE key = 'vectors_epoch'), (SELECT max(rowid) FROM entries), (SELECT max(entry) FROM vectors)"
            ).fetchone()
        return VectorState(row[0] or "", row[1] or 0, row[2] or 0)

    def count_missing_vectors(self, model: str) -> int:
        """How many entries have no vector from *model*."""
        with corruption_guard():
            return int(
                self.conn.execute(
                    "SELECT count(*) FROM entries e LEFT JOIN vectors v ON v.model = ? AND v.entry = e.rowid WHERE v.entry IS NULL",
                    (model,),
                ).fetchone()[0]
            )

    def missing_vectors(self, model: str, *, after: int = 0) -> list[int]:
        """The rowids above *after* of the entries lacking a *model* vector, in order: one pass over the entries."""
        with corruption_guard():
            return [
                r[0]
                for r in self.conn.execute(
                    "SELECT e.rowid FROM entries e LEFT JOIN vectors v ON v.model = ? AND v.entry = e.rowid"
                    " WHERE e.rowid > ? AND v.entry IS NULL ORDER BY e.rowid",
                    (model, after),
                )
            ]

    def texts_of(self, rowids: Sequence[int]) -> list[tuple[int, str, str, tuple[str, ...], str | None, str]]:
        """``(rowid, id, theme, tags, focus, voice)`` of the entries at *rowids* still indexed, by rowid."""
        rows = []
        with corruption_guard():
            for start in range(0, len(rowids), _IDS_PER_QUERY):  # SQLite takes at most 32,766 parameters per statement
                part = rowids[start : start + _IDS_PER_QUERY]
                rows += self.conn.execute(
                    "SELECT e.rowid, e.id, e.theme, e.tags, e.focus, f.voice FROM entries e JOIN fts f ON f.rowid = e.rowid"
                    f" WHERE e.rowid IN ({','.join('?' * len(part))}) ORDER BY e.rowid",
                    list(part),
                ).fetchall()
        return [(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5]) for r in rows]

    # Each encoder that stored vectors is described in the state table, one row per
    # implementation of its key: 'encoder:<key>' + '\n' + '<implementation>' -> JSON.
    @staticmethod
    def record_encoder(conn: sqlite3.Connection, described: dict[str, Any]) -> None:
        """Record (once) that the encoder *described* (``EncoderIdentity.to_dict()``) stores vectors, inside an open transaction."""
        name = f"{ENCODER_PREFIX}{described['key']}\n{described.get('implementation', '')}"
        conn.execute("INSERT OR IGNORE INTO state (key, value) VALUES (?, ?)", (name, json.dumps(described, sort_keys=True)))

    def encoders(self) -> list[dict[str, Any]]:
        """Every encoder identity whose vectors the index holds, with ``vectors`` (how many) and ``implementations``.

        A key no record describes (vectors stored before identities were
        recorded) is listed with its key alone.
        """
        with corruption_guard():
            counts = dict(self.conn.execute("SELECT model, count(*) FROM vectors GROUP BY model").fetchall())
            records = self.conn.execute("SELECT value FROM state WHERE key >= ? AND key < ? ORDER BY key", ENCODER_RANGE).fetchall()
        found: dict[str, dict[str, Any]] = {}
        for (value,) in records:
            described = json.loads(value)
            key = described.pop("key")
            implementation = described.pop("implementation", "")
            if key in counts:
                entry = found.setdefault(key, {"key": key, **described, "implementations": [], "vectors": counts[key]})
                entry["implementations"].append(implementation)
        for key, count in counts.items():
            found.setdefault(key, {"key": key, "implementations": [], "vectors": count})
        return sorted(found.values(), key=lambda item: -item["vectors"])

    def prune_encoders(self) -> None:
        """Forget the records of encoders none of whose vectors remain."""
        with self.transaction() as conn:
            live = {row[0] for row in conn.execute("SELECT DISTINCT model FROM vectors")}
            for (name,) in conn.execute("SELECT key FROM state WHERE key >= ? AND key < ?", ENCODER_RANGE).fetchall():
                if name[len(ENCODER_PREFIX) :].rsplit("\n", 1)[0] not in live:
                    conn.execute("DELETE FROM state WHERE key = ?", (name,))

    def vectors_after(self, model: str, after_rowid: int) -> list[VectorRow]:
        """Every *model* vector above *after_rowid*, with its entry's filter fields, by rowid."""
        with corruption_guard():
            return [
                VectorRow(*r)
                for r in self.conn.execute(
                    "SELECT v.entry, e.id, e.agent, e.kind, e.ts_utc, v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry"
                    " WHERE v.model = ? AND v.entry > ? ORDER BY v.entry",
                    (model, after_rowid),
                )
            ]

    def vector_of(self, entry_id: str, model: str) -> bytes | None:
        """The stored *model* vector of one entry."""
        with corruption_guard():
            row = self.conn.execute(
                "SELECT v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry WHERE e.id = ? AND v.model = ?", (entry_id, model)
            ).fetchone()
        return row[0] if row else None

    # -- reading -------------------------------------------------------------------

    def find_id(self, entry_id: str) -> str | None:
        """The path of the entry with *entry_id*, if indexed."""
        with corruption_guard():
            row = self.conn.execute(
                "SELECT path FROM entries WHERE id = ? UNION ALL SELECT path FROM tombstones WHERE id = ?", (entry_id, entry_id)
            ).fetchone()
        return row[0] if row else None

    def find_client_key(self, client_key: str, agent: str) -> str | None:
        """The path of *agent*'s entry appended with *client_key*, if indexed (a key is unique per agent)."""
        found = self.client_key_entry(client_key, agent)
        return found[1] if found else None

    def client_key_entry(self, client_key: str, agent: str) -> tuple[str, str] | None:
        """``(id, path)`` of *agent*'s entry appended with *client_key* (or its tombstone: an erased slot stays taken), if indexed."""
        with corruption_guard():
            row = self.conn.execute(
                "SELECT id, path FROM entries WHERE agent = ? AND client_key = ? UNION ALL SELECT id, path FROM tombstones WHERE agent = ? AND client_key = ?",
                (agent, client_key, agent, client_key),
            ).fetchone()
        return (row[0], row[1]) if row else None

    def agents_of(self, entry_ids: Iterable[str]) -> dict[str, str | None]:
        """For each of *entry_ids* indexed (as an entry or a tombstone), its agent: the answers of :meth:`find_id` and :meth:`row_for`
        for a whole group at once; None for an id held twice under two agents (which only those reads can answer)."""
        found: dict[str, str | None] = {}
        ids = sorted(set(entry_ids))
        for start in range(0, len(ids), _IDS_PER_QUERY // 2):  # each id is bound twice
            part = ids[start : start + _IDS_PER_QUERY // 2]
            marks = ",".join("?" * len(part))
            sql = f"SELECT id, agent FROM entries WHERE id IN ({marks}) UNION ALL SELECT id, agent FROM tombstones WHERE id IN ({marks})"
            with corruption_guard():
                for entry_id, agent in self.conn.execute(sql, part + part):
                    found[entry_id] = agent if found.get(entry_id, agent) == agent else None
        return found

    def held_client_keys(self, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which ``(agent, client_key)`` pairs of *keys* an entry or a tombstone holds: :meth:`client_key_entry`'s question for a whole group."""
        held: set[tuple[str, str]] = set()
        by_agent: dict[str, list[str]] = {}
        for agent, client_key in sorted(set(keys)):
            by_agent.setdefault(agent, []).append(client_key)
        for agent, client_keys in by_agent.items():
            for start in range(0, len(client_keys), _IDS_PER_QUERY // 2):  # each key is bound twice
                part = client_keys[start : start + _IDS_PER_QUERY // 2]
                marks = ",".join("?" * len(part))
                sql = (
                    f"SELECT client_key FROM entries WHERE agent = ? AND client_key IN ({marks})"
                    f" UNION ALL SELECT client_key FROM tombstones WHERE agent = ? AND client_key IN ({marks})"
                )
                with corruption_guard():
                    held.update((agent, row[0]) for row in self.conn.execute(sql, [agent, *part, agent, *part]))
        return held

    def row_for(self, *, entry_id: str | None = None, client_key: str | None = None, agent: str | None = None) -> IndexRow | None:
        """The index row of the entry with *entry_id*, or the one appended with *client_key*.

        A client_key is unique per agent: with *agent*, that agent's entry of the key; without, the
        earliest (by time, then id) of the entries of any agent holding it. An erased entry's row is its
        tombstone's (theme ``erased``, no tags): its file holds the tombstone.
        """
        params: list[str | None]
        if entry_id is not None:
            where, params = "e.id = ?", [entry_id]
        elif agent is not None:
            where, params = "e.agent = ? AND e.client_key = ?", [agent, client_key]
        else:
            where, params = "e.client_key = ?", [client_key]
        query = f"SELECT {COLUMNS} FROM entries e WHERE {where} UNION ALL SELECT {TOMBSTONE_COLUMNS} FROM tombstones e WHERE {where} ORDER BY 4, 1 LIMIT 1"
        with corruption_guard():
            row = self.conn.execute(query, params + params).fetchone()
        return IndexRow.from_sql(row) if row else None

    def is_tombstone(self, entry_id: str) -> bool:
        """Whether *entry_id* is indexed as an erased entry's tombstone."""
        with corruption_guard():
            return self.conn.execute("SELECT 1 FROM tombstones WHERE id = ?", (entry_id,)).fetchone() is not None

    def untrusted_ids(self, agent: str | None) -> set[str]:
        """The ids of the entries (of *agent*, when given) whose text came from outside (``meta.origin`` ``untrusted``)."""
        sql = "SELECT id FROM untrusted" + (" WHERE agent = ?" if agent is not None else "")
        with corruption_guard():
            return {row[0] for row in self.conn.execute(sql, [] if agent is None else [agent])}

    def ids_of_agent(self, agent: str) -> list[str]:
        """The ids of *agent*'s entries (not its tombstones), in order of time then id."""
        with corruption_guard():
            return [row[0] for row in self.conn.execute("SELECT id FROM entries WHERE agent = ? ORDER BY ts_utc, id", (agent,))]

    def secure_delete(self) -> None:
        """From now on, this connection overwrites what it deletes (SQLite's ``secure_delete``): for an erase, before its transaction."""
        with corruption_guard():
            self.conn.execute("PRAGMA secure_delete = ON")

    def scrub(self) -> None:
        """Leave no byte of removed rows in the database file or its WAL: merge the text tables, checkpoint, VACUUM, checkpoint.

        Run after an erase's transaction, which ran with ``secure_delete`` on. A full-text table keeps a
        deleted row's words in its older segments until they are merged ('optimize'); the VACUUM then
        rewrites the file from its live pages, and each checkpoint copies the WAL into the file and truncates it.

        Raises:
            sqlite3.Error: the VACUUM could not finish (a full disk): the rows are removed, the file may still hold their pages.
        """
        with corruption_guard():
            conn = self.conn
            conn.execute("PRAGMA secure_delete = ON")
            with self.transaction() as tx:
                tables = [
                    "fts",
                    *(
                        row[0]
                        for row in tx.execute(
                            "SELECT name FROM sqlite_master WHERE name GLOB 'fts_agent_[0-9]*' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
                        )
                    ),
                ]
                for table in tables:
                    tx.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy is not None and busy[0]:
                raise sqlite3.OperationalError(
                    "the index's WAL could not be checkpointed: a reader holds it; run the erase again once it is done"
                )

    def ids_starting(self, prefix: str, agent: str | None, *, limit: int) -> tuple[list[str], int]:
        """Up to *limit* ids (in order) of the entries whose id starts with *prefix*, of *agent* alone when given, and how many there are.

        An id is letters, digits, '_' and '-', all below DEL, so the ids starting with *prefix* are exactly those
        from *prefix* up to *prefix* followed by DEL: one range of the id's own index.
        """
        scoped = "" if agent is None else " AND +agent = ?"  # + keeps SQLite on the id's index, never the agent's
        params: list[str] = [prefix, prefix + _ABOVE_EVERY_ID_CHARACTER, *([] if agent is None else [agent])]
        with corruption_guard():
            found = [
                row[0]
                for row in self.conn.execute(
                    f"SELECT id FROM entries WHERE id >= ? AND id < ?{scoped} ORDER BY id LIMIT ?", [*params, limit]
                )
            ]
            if len(found) < limit:
                return found, len(found)
            count = self.conn.execute(f"SELECT count(*) FROM entries WHERE id >= ? AND id < ?{scoped}", params).fetchone()[0]
        return found, int(count)

    def neighbour_ids(self, entry_ids: Sequence[str], agent: str | None) -> dict[str, tuple[str | None, str | None]]:
        """The ids just before and just after each of *entry_ids* in id order (of *agent*'s entries alone when given): the two that share most of its start.

        One read for all of them: a table of short ids names a screenful at once.
        """
        scoped = "" if agent is None else " AND +agent = ?"  # + keeps SQLite on the id's index, never the agent's
        extra = [] if agent is None else [agent]
        found: dict[str, tuple[str | None, str | None]] = {}
        with corruption_guard():
            for start in range(0, len(entry_ids), _IDS_PER_QUERY):
                part = list(entry_ids[start : start + _IDS_PER_QUERY])
                sql = (
                    f"WITH asked(id) AS (VALUES {','.join(['(?)'] * len(part))}) SELECT a.id,"
                    f" (SELECT e.id FROM entries e WHERE e.id < a.id{scoped} ORDER BY e.id DESC LIMIT 1),"
                    f" (SELECT e.id FROM entries e WHERE e.id > a.id{scoped} ORDER BY e.id LIMIT 1) FROM asked a"
                )
                found.update((entry_id, (before, after)) for entry_id, before, after in self.conn.execute(sql, [*part, *extra, *extra]))
        return found

    def rowids_of(self, ids: Sequence[str]) -> dict[str, int]:
        """The rowid of each entry of *ids* still indexed."""
        found: dict[str, int] = {}
        with corruption_guard():
            for start in range(0, len(ids), _IDS_PER_QUERY):
                part = list(ids[start : start + _IDS_PER_QUERY])
                found.update(self.conn.execute(f"SELECT id, rowid FROM entries WHERE id IN ({','.join('?' * len(part))})", part).fetchall())
        return found

    def paths(self) -> dict[str, str]:
        """Map every indexed path to its entry id."""
        with corruption_guard():
            return dict(self.conn.execute("SELECT path, id FROM entries UNION ALL SELECT path, id FROM tombstones").fetchall())

    def count(self) -> int:
        with corruption_guard():
            return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def has_entries(self, *, simulated: bool, agent: str | None = None) -> bool:
        """Whether any row (of *agent*, if given) is marked simulated (or, with ``simulated=False``, is not); one index lookup."""
        sql = "SELECT 1 FROM entries WHERE simulated = ?" + (" AND agent = ?" if agent is not None else "") + " LIMIT 1"
        with corruption_guard():
            return self.conn.execute(sql, (int(simulated), *((agent,) if agent is not None else ()))).fetchone() is not None

    def rows(
        self,
        window: Window = WHOLE_JOURNAL,
        *,
        limit: int | None = None,
        ids: Sequence[str] | None = None,
        oldest_first: bool = False,
    ) -> list[IndexRow]:
        """Index rows in *window* (among *ids*, if given), newest first unless *oldest_first*."""
        clauses, params = window.where()
        if ids is not None:
            # Looked up by id: the unary + keeps SQLite off the window's own index, which it took for the order it gives (a
            # read of a hit's row scoped to an agent walked every entry of the agent's time index).
            clauses = [f"+{clause}" for clause in clauses]
            clauses.append(f"e.id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        order = "ASC" if oldest_first else "DESC"
        sql = f"SELECT {COLUMNS} FROM entries e {where} ORDER BY e.ts_utc {order}, e.id {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with corruption_guard():
            return [IndexRow.from_sql(r) for r in self.conn.execute(sql, params)]

    def search(
        self,
        query: str | QueryWords,
        *,
        k: int,
        window: Window = WHOLE_JOURNAL,
        exclude: Sequence[str] = (),
        with_snippets: bool = True,
    ) -> list[SearchRow]:
        """Rank the entries in *window* for *query* by BM25 (any text is accepted, or its words parsed once by :class:`QueryWords`).

        With ``window.agent``, the word statistics are that agent's own. Without
        *with_snippets* the rows carry empty snippets; :meth:`snippets` makes
        them later for the few rows that are kept.
        """
        with corruption_guard():
            return self._text.search(self.conn, QueryWords.of(query), k=k, window=window, exclude=exclude, with_snippets=with_snippets)

    def ranked(
        self, query: str | QueryWords, *, k: int, window: Window = WHOLE_JOURNAL, exclude: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        """The ids and scores of :meth:`search`'s hits, in its order, without their rows (a ranking that keeps only a few reads those later)."""
        with corruption_guard():
            return self._text.ranked(self.conn, QueryWords.of(query), k=k, window=window, exclude=exclude)

    def ranked_placed(
        self, query: str | QueryWords, *, k: int, window: Window = WHOLE_JOURNAL, exclude: Sequence[str] = ()
    ) -> tuple[list[tuple[str, float]], dict[str, tuple[str, str]]]:
        """:meth:`ranked`, and the agent and ``ts_utc`` of each entry it ranks (what the neighbours' stage places them by)."""
        with corruption_guard():
            return self._text.ranked_placed(self.conn, QueryWords.of(query), k=k, window=window, exclude=exclude)

    def snippets(self, query: str | QueryWords, entry_ids: Sequence[str], window: Window = WHOLE_JOURNAL) -> dict[str, str]:
        """Snippets of *query* in the given entries (those it matches), with the query words a search in *window* keeps."""
        with corruption_guard():
            return self._text.snippets(self.conn, QueryWords.of(query), entry_ids, window)

    def partial_matches(self, query: str | QueryWords, entry_ids: Sequence[str], window: Window = WHOLE_JOURNAL) -> set[str]:
        """Those of *entry_ids* that lack one or more of the words a search of *query* in *window* matches on."""
        with corruption_guard():
            return self._text.partial(self.conn, QueryWords.of(query), entry_ids, window)

    def coverage(self, query: str | QueryWords, entry_ids: Sequence[str], window: Window = WHOLE_JOURNAL) -> dict[str, float]:
        """The share of the words a search of *query* in *window* matches on that each of *entry_ids* holds."""
        with corruption_guard():
            return self._text.coverage(self.conn, QueryWords.of(query), entry_ids, window)

    def bm25(self, query: str | QueryWords, entry_ids: Sequence[str], window: Window = WHOLE_JOURNAL) -> dict[str, float]:
        """The BM25 score (higher is better) a search of *query* in *window* gives each of *entry_ids* it matches."""
        with corruption_guard():
            return self._text.bm25(self.conn, QueryWords.of(query), entry_ids, window)

    def telling_matches(self, query: str | QueryWords, entry_ids: Sequence[str], window: Window = WHOLE_JOURNAL) -> set[str]:
        """Those of *entry_ids* (hits of a search of *query*) that matched a word saying what *query* is about, not just when or a common word."""
        with corruption_guard():
            return self._text.telling(self.conn, QueryWords.of(query), entry_ids, window)

    def links_to(self, entry_id: str) -> list[str]:
        with corruption_guard():
            return [r[0] for r in self.conn.execute("SELECT src FROM links WHERE dst = ? ORDER BY src", (entry_id,))]

    def neighbours(
        self,
        ids: Sequence[str],
        *,
        within_seconds: float,
        window: Window = WHOLE_JOURNAL,
        among: Collection[str] | None = None,
        places: Mapping[str, tuple[str, str]] | None = None,
    ) -> Neighbours:
        """Each of *ids*' neighbours in its agent's journal that lie in *window*, time neighbours only in *among* if given (see :mod:`journal.indexing._neighbours`).

        *places*: the agent and ``ts_utc`` of each of *ids* and *among*, when already read (:meth:`ranked_placed`).
        """
        with corruption_guard():
            return neighbours(self.conn, ids, within_seconds, window, among, places)

    def links_within(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """Continuity links whose source is among *ids*."""
        return self._pairs_among(ids, "SELECT src, dst FROM links WHERE src IN (SELECT id FROM window_ids)")

    def _pairs_among(self, ids: Sequence[str], sql: str) -> list[tuple[str, str]]:
        """The ``(src, dst)`` rows of *sql*, which reads *ids* from the temporary table ``window_ids``.

        A window's ids can outnumber SQLite's bound parameters, so they go
        through a table rather than an ``IN (?, ...)`` list.
        """
        if not ids:
            return []
        with corruption_guard():
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS window_ids (id TEXT PRIMARY KEY)")
            self.conn.execute("DELETE FROM window_ids")
            self.conn.executemany("INSERT OR IGNORE INTO window_ids VALUES (?)", ((i,) for i in ids))
            return [(src, dst) for src, dst in self.conn.execute(sql)]

    # -- corrections -----------------------------------------------------------------

    def pending_proposals(self, ids: Sequence[str], *, before: str | None = None) -> dict[str, list[Proposal]]:
        """For each of *ids* that a later entry of its agent may update, the pending proposals, newest proposer first (written before *before*)."""
        with corruption_guard():
            return pending_for(self.conn, ids, before=before)

    def proposals(self, agent: str | None = None, newer: str | None = None) -> list[Proposal]:
        """Every pending supersede proposal (of *agent*, and made by the entry *newer*, when given), oldest proposer first."""
        with corruption_guard():
            return proposals_of(self.conn, agent, newer)

    def superseders(self, ids: Sequence[str], *, before: str | None = None) -> dict[str, list[str]]:
        """For each of *ids* that is superseded, the entries superseding it (a correction an accepted proposal appended: its newer entry's), newest first.

        Only a superseding entry of the superseded entry's own agent counts
        (an append refuses any other; a hand-placed file can still name one),
        and with *before* (a UTC key) only one written before it.
        """
        if not ids:
            return {}
        cutoff = "" if before is None else " AND x.ts_utc < ?"
        sql = (
            f"SELECT s.dst, s.src FROM {SUPERSESSIONS_FOLLOWED} s JOIN entries x ON x.id = s.src JOIN entries d ON d.id = s.dst"
            f" WHERE s.dst IN ({','.join('?' * len(ids))}) AND x.agent = d.agent{cutoff} ORDER BY x.ts_utc DESC, x.id DESC"
        )
        found: dict[str, list[str]] = {}
        with corruption_guard():
            for dst, src in self.conn.execute(sql, [*ids, *([] if before is None else [before])]):
                found.setdefault(dst, []).append(src)
        return found

    def superseded_in(self, window: Window, *, before: str | None = None) -> list[str]:
        """Ids of the entries in *window* that another entry of their agent supersedes (written before *before*, if given)."""
        clauses, params = window.where()
        clauses.append("x.agent = e.agent")
        if before is not None:
            clauses.append("x.ts_utc < ?")
            params.append(before)
        sql = f"SELECT DISTINCT e.id FROM {SUPERSESSIONS_FOLLOWED} s JOIN entries e ON e.id = s.dst JOIN entries x ON x.id = s.src WHERE {' AND '.join(clauses)}"
        with corruption_guard():
            return [r[0] for r in self.conn.execute(sql, params)]

    def corrections_within(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """Supersession pairs ``(src, dst)`` whose source is among *ids* and whose target is an entry of the same agent."""
        return self._pairs_among(
            ids,
            "SELECT s.src, s.dst FROM supersessions s JOIN entries x ON x.id = s.src JOIN entries d ON d.id = s.dst"
            " WHERE s.src IN (SELECT id FROM window_ids) AND x.agent = d.agent",
        )


_INSERT_TOMBSTONE: Final = "INSERT INTO tombstones (id, path, ts, ts_utc, kind, agent, client_key, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_ENTRY: Final = (
    "INSERT INTO entries (rowid, id, path, ts, ts_utc, kind, agent, theme, mood, focus, novelty, tags, client_key, simulated, digest)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _tombstone_row(entry: Entry, rel_path: str) -> tuple[Any, ...]:
    return (entry.id, rel_path, entry.ts, utc_key(entry.timestamp), entry.kind, entry.agent, entry.client_key, entry.digest())


def _entry_row(entry: Entry, rel_path: str, rowid: int | None) -> tuple[Any, ...]:
    """The row of ``entries`` for *entry* (under *rowid*; None: the next)."""
    signals = entry.signals or {}
    return (
        rowid,
        entry.id,
        rel_path,
        entry.ts,
        utc_key(entry.timestamp),
        entry.kind,
        entry.agent,
        entry.theme,
        entry.mood,
        signals.get("focus"),
        signals.get("novelty"),
        json.dumps(list(entry.tags)),
        entry.client_key,
        int(entry.is_simulated),
        entry.digest(),
    )


def _text_row(rowid: int | None, entry: Entry) -> tuple[Any, ...]:
    """The row of the text tables for *entry*, under *rowid* (its row of ``entries``)."""
    return (rowid, entry.theme, entry.voice, " ".join(entry.tags), (entry.signals or {}).get("focus") or "", entry.mood or "")
