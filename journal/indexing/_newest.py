"""The newest matches of a query whose every word is common, found by reading the entries newest first.

Such a query ranks only its newest matches (see :class:`journal.indexing._fts.CommonWords`):
newest by the entries' own time, then id, never by rowid, since rowids follow
the order of the appends, which a rebuild from the files does not keep.
Asking the text table for every match and sorting them by time would decode
the posting lists of words found in most of the journal, only to keep the
newest few. Instead the entries are read newest first through their time
index, a batch at a time, and the text table is asked only for its matches
(with their BM25 scores) within the rowid range of each batch: FTS5 reads a
rowid range without decoding the rest. The words being common, a batch of the
newest entries is mostly matches, so one or two batches find them all.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from journal.indexing._tables import COLUMNS

__all__ = ["newest_ranked"]


def newest_ranked(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    clauses: list[str],
    params: list[Any],
    k: int,
    *,
    candidates: int,
    weights: str,
) -> list[tuple[Any, ...]]:
    """The best *k* by BM25 of the newest *candidates* rows of *table* matching *match*, as rows of :data:`COLUMNS`, score and rowid.

    *clauses* and *params* keep the window (conditions on ``entries`` as ``e``).
    Equal scores go to the newer entry, then to the greater id, as the full ranking orders them.
    """
    picked = _newest_matches(conn, table, match, clauses, params, candidates, weights)
    if not picked:
        return []
    # picked is newest first, so a stable sort by score leaves ties to the newer entry, then the id.
    best = sorted(picked, key=lambda rowid: picked[rowid])[:k]
    rows = {
        row[-1]: row
        for row in conn.execute(f"SELECT {COLUMNS}, e.rowid FROM entries e WHERE e.rowid IN ({','.join('?' * len(best))})", best)
    }
    return [(*rows[rowid][:-1], -picked[rowid], rowid) for rowid in best]


def _newest_matches(
    conn: sqlite3.Connection, table: str, match: str, clauses: list[str], params: list[Any], candidates: int, weights: str
) -> dict[int, float]:
    """The rowids of the newest *candidates* matches in the window, newest first, each with its BM25 rank (lower is better)."""
    picked: dict[int, float] = {}
    scores: dict[int, float] = {}
    batch = candidates
    after: tuple[str, str] | None = None
    while len(picked) < candidates:
        where, args = list(clauses), list(params)
        if after is not None:
            # The plain bound lets SQLite range over the time index; the row value keeps ties on ts_utc exact.
            where += ["e.ts_utc <= ?", "(e.ts_utc, e.id) < (?, ?)"]
            args += [after[0], *after]
        condition = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT e.rowid, e.ts_utc, e.id FROM entries e {condition} ORDER BY e.ts_utc DESC, e.id DESC LIMIT ?"
        rows = conn.execute(sql, [*args, batch]).fetchall()
        if not rows:
            break
        rowids = [row[0] for row in rows]
        # BM25 takes its statistics from the whole table, so a score read within a range is the score of the full ranking.
        scores.update(
            conn.execute(
                f"SELECT rowid, bm25({table}, {weights}) FROM {table} WHERE {table} MATCH ? AND rowid BETWEEN ? AND ?",
                [match, min(rowids), max(rowids)],
            )
        )
        found = [rowid for rowid in rowids if rowid in scores]
        for rowid in found[: candidates - len(picked)]:
            picked[rowid] = scores[rowid]
        if len(rows) < batch:
            break
        after = rows[-1][1], rows[-1][2]
        # Read as many more as the matches still missing need at the share of matches seen so far, with room to spare.
        batch = min(2 * batch, -(-2 * (candidates - len(picked)) * len(rows) // len(found))) if found else 2 * batch
    return picked
