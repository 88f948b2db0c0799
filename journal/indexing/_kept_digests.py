"""What a rebuild of the index keeps besides vectors: the digest each entry was indexed with.

Each entry row records the SHA-256 of its entry's canonical file as it was
first indexed (by its append, an import, or the catch-up that found a file
published by an interrupted append). ``verify`` compares it with the file
now, which is how an edit of any field is found, the fields the index holds
no row for (``meta``, ``anchors``, the other signals) too.

A rebuild made to repair or migrate the index keeps each id's recorded
digest, so an edit made before it is still found afterwards. An explicit
reindex takes the files as they are, and records their digests anew: an edit
made before it is adopted, and nothing can tell it afterwards. So can nothing
when the index was lost (a corrupt file is removed before its rebuild) or
made by a version that recorded no digest (layouts before 9).
"""

from __future__ import annotations

import contextlib
import sqlite3

__all__ = ["restore_digests", "set_digests_aside"]


def set_digests_aside(conn: sqlite3.Connection) -> None:
    """Copy each entry's id and recorded digest into a temporary table, before the index tables are dropped (in an open transaction)."""
    conn.execute("DROP TABLE IF EXISTS temp.kept_digests")
    try:
        conn.execute("CREATE TEMP TABLE kept_digests (id TEXT PRIMARY KEY, digest BLOB NOT NULL) WITHOUT ROWID")
        conn.execute("INSERT INTO temp.kept_digests SELECT id, digest FROM main.entries")
    except sqlite3.OperationalError:
        # No index yet, or one of a layout without digests: nothing recorded to keep.
        conn.execute("DROP TABLE IF EXISTS temp.kept_digests")
        return
    with contextlib.suppress(sqlite3.OperationalError):  # a layout before tombstones (10) has none to keep
        conn.execute("INSERT OR IGNORE INTO temp.kept_digests SELECT id, digest FROM main.tombstones")


def restore_digests(conn: sqlite3.Connection) -> int:
    """Give the entries just inserted the digests set aside for their ids; return how many differ from their files' (same transaction)."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'kept_digests'").fetchone() is None:
        return 0
    changed = conn.execute(
        "UPDATE main.entries SET digest = k.digest FROM temp.kept_digests k WHERE k.id = main.entries.id AND k.digest != main.entries.digest"
    ).rowcount
    changed += conn.execute(
        "UPDATE main.tombstones SET digest = k.digest FROM temp.kept_digests k WHERE k.id = main.tombstones.id AND k.digest != main.tombstones.digest"
    ).rowcount
    conn.execute("DROP TABLE temp.kept_digests")
    return changed
