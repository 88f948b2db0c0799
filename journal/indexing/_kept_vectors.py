"""What a rebuild of the index keeps: the vectors of entries whose text it has not changed, under every encoder.

A vector depends on the encoder's identity and the text it was embedded from,
nothing else; the entries' rowids, which key the ``vectors`` table, change
with every rebuild. So before the tables are dropped, each vector is set
aside in a temporary table with its entry's id and embedded text (theme,
tags, focus, voice), and after the entries are inserted again it goes back
to the entry of that id whose text is the same. An entry whose file was
edited meanwhile gets no vector and is embedded again by the next ranking.
The encoder records of the identities that kept vectors are kept too.

Both the vectors layout of today and the one before it (one vector per entry,
keyed by the entry's rowid, schemas 2 to 6) are read; an index of any other
layout keeps nothing, and its entries are embedded again.
"""

from __future__ import annotations

import sqlite3
from typing import Final

__all__ = ["ENCODER_PREFIX", "ENCODER_RANGE", "restore_vectors", "set_vectors_aside"]

#: The state keys recording an encoder: ``encoder:<key>`` + ``"\n"`` + ``<implementation>``.
ENCODER_PREFIX: Final = "encoder:"
#: Every state key starting with the prefix (";" follows ":").
ENCODER_RANGE: Final = (ENCODER_PREFIX, "encoder;")


def set_vectors_aside(conn: sqlite3.Connection) -> None:
    """Copy every vector and encoder record into temporary tables, before the index tables are dropped (in an open transaction)."""
    conn.execute("DROP TABLE IF EXISTS temp.kept_vectors")
    conn.execute("DROP TABLE IF EXISTS temp.kept_encoders")
    columns = {row[1] for row in conn.execute("PRAGMA main.table_info(vectors)")}
    entry = "v.entry" if "entry" in columns else "v.rowid"  # the layout before several encoders per entry
    try:
        conn.execute(
            "CREATE TEMP TABLE kept_vectors AS SELECT e.id AS id, e.theme AS theme, e.tags AS tags, e.focus AS focus, f.voice AS voice,"
            f" v.model AS model, v.vector AS vector FROM main.vectors v JOIN main.entries e ON e.rowid = {entry} JOIN main.fts f ON f.rowid = e.rowid"
        )
        conn.execute("CREATE TEMP TABLE kept_encoders AS SELECT key, value FROM main.state WHERE key >= ? AND key < ?", ENCODER_RANGE)
    except sqlite3.OperationalError:
        # No index yet, or one without these tables or columns: nothing to keep.
        conn.execute("DROP TABLE IF EXISTS temp.kept_vectors")


def restore_vectors(conn: sqlite3.Connection) -> int:
    """Give the entries just inserted the vectors set aside for their id and text; return how many (in the same transaction)."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'kept_vectors'").fetchone() is None:
        return 0
    restored = conn.execute(
        "INSERT OR IGNORE INTO main.vectors (model, entry, vector) SELECT k.model, e.rowid, k.vector"
        " FROM temp.kept_vectors k JOIN main.entries e ON e.id = k.id JOIN main.fts f ON f.rowid = e.rowid"
        " WHERE e.theme = k.theme AND e.tags = k.tags AND e.focus IS k.focus AND f.voice = k.voice"
    ).rowcount
    live = {row[0] for row in conn.execute("SELECT DISTINCT model FROM main.vectors")}
    for key, value in conn.execute("SELECT key, value FROM temp.kept_encoders").fetchall():
        if key[len(ENCODER_PREFIX) :].rsplit("\n", 1)[0] in live:
            conn.execute("INSERT OR IGNORE INTO main.state (key, value) VALUES (?, ?)", (key, value))
    conn.execute("DROP TABLE temp.kept_vectors")
    conn.execute("DROP TABLE IF EXISTS temp.kept_encoders")
    return restored
