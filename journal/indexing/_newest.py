"""The newest matches of a query whose every word is common, found by reading the entries newest first.

Such a query ranks only its newest matches (see :class:`journal.indexing._fts.CommonWords`):
newest by the entries' own time, then id, never by rowid, since rowids follow
the order of the appends, which a rebuild from the files does not keep.
Asking the text table for every match and sorting them by time would decode
the posting lists of words found in most of the journal, only to keep the
newest few. Instead the entries are read newest first from their time index
(which ends with the id, so the read is of the index alone and in order), a
batch at a time, and the text table is asked which of them match within the
batch's rowid range: FTS5 reads a rowid range without decoding the rest. The
words being common, the first batch is mostly matches, and it is scored as it
is matched (see :class:`_Scorer`).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Collection
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
    columns: str = COLUMNS,
    sole: bool = False,
) -> list[tuple[Any, ...]]:
    """The best *k* by BM25 of the newest *candidates* rows of *table* matching *match*, as rows of *columns*, score and rowid.

    *clauses* and *params* keep the window (conditions on ``entries`` as ``e``).
    Equal scores go to the newer entry, then to the greater id, as the full ranking orders them.
    *sole*: the window leaves out no row of *table* but by time (no kind, nothing excluded), so the newest entries are
    most likely the table's greatest rowids, one apart or not (an agent's table holds its entries alone).
    """
    scorer = _Scorer(conn, table, match, weights, sole)
    picked = _newest_matches(conn, scorer, clauses, params, candidates)
    if not picked:
        return []
    rank = scorer.scores(picked)
    # picked is newest first and the sort is stable, so ties go to the newer entry, then the id. (heapq.nsmallest gives
    # the same, but walks its thousand candidates in Python: a full sort in C costs a fraction of it.)
    best = sorted(picked, key=rank.__getitem__)[:k]
    rows = {
        row[-1]: row
        for row in conn.execute(f"SELECT {columns}, e.rowid FROM entries e WHERE e.rowid IN ({','.join('?' * len(best))})", best)
    }
    return [(*rows[rowid][:-1], -rank[rowid], rowid) for rowid in best]


class _Scorer:
    """Which rows of a rowid range match, and their BM25 scores.

    Each BM25 statement first counts, over the whole table, the rows holding
    each query word (its IDF): for common words that costs more than scoring a
    thousand rows. So the first range asked is matched and scored in one
    statement (in time order, down to as many matches as are wanted), and a
    later one only matched; the rows picked that the first left unscored
    are scored together at the end. A row's score does not
    depend on the range it is read in: BM25 takes its statistics from the whole table.
    """

    def __init__(self, conn: sqlite3.Connection, table: str, match: str, weights: str, sole: bool = False) -> None:
        self._conn, self._table, self._match, self._weights, self._sole = conn, table, match, weights, sole
        self._scored: dict[int, float] = {}
        self._ranges = 0

    def _read(self, low: int | None, high: int, *, scored: bool, newest: int | None = None) -> dict[int, float]:
        table = self._table
        score = f"bm25({table}, {self._weights})" if scored else "0.0"
        sql = f"SELECT rowid, {score} FROM {table} WHERE {table} MATCH ? AND rowid <= ?" + ("" if low is None else " AND rowid >= ?")
        args: list[Any] = [self._match, high, *(() if low is None else (low,))]
        if newest is not None:
            # FTS5 reads rowids in descending order itself, so the read stops at the limit: no row after it is scored.
            return dict(self._conn.execute(f"{sql} ORDER BY rowid DESC LIMIT ?", [*args, newest]))
        return dict(self._conn.execute(sql, args))

    def matching(self, rowids: list[int], wanted: int) -> Collection[int]:
        """Those of *rowids* (newest first) that match, or at least their newest *wanted* (scored, when they are the first asked)."""
        self._ranges += 1
        if self._ranges == 1:
            # Rowids one apart, in time order, as a journal appended in time order or rebuilt has them: the range
            # holds no other entry and its newest matches are its greatest rowids, so no more than those are scored.
            # Where the range holds fewer, the read goes on below it until it has them: the entries below were most
            # likely appended in time order too, so they are the next batches' picks, and scoring them in this one
            # statement spares a second one and its count of every row holding each word. (They are not this
            # batch's matches: the caller keeps only the batch's rowids.)
            in_order = rowids == list(range(rowids[0], rowids[0] - len(rowids), -1))
            if not in_order and self._sole and all(newer > older for newer, older in itertools.pairwise(rowids)):
                # Rowids falling in time order, not one apart (an agent's table: the other agents' entries lie between):
                # the newest matches are the greatest rowids too, unless a row of the table between them is no entry of
                # the range (one of the same agent out of time order). Read so, the newest are found as above while the
                # read holds no such row; else the range is scored whole.
                read = self._read(None, rowids[0], scored=True, newest=wanted)
                if len(read) < wanted or not any(rowid >= rowids[-1] for rowid in read.keys() - set(rowids)):
                    self._scored = read
                    return read.keys()
            self._scored = self._read(None if in_order else min(rowids), max(rowids), scored=True, newest=wanted if in_order else None)
            return self._scored.keys()
        return self._read(min(rowids), max(rowids), scored=False).keys()

    def scores(self, picked: list[int]) -> dict[int, float]:
        """The BM25 score (lower is better) of each of *picked*, all matches."""
        # One range read scored every match it found: only picks from later ranges can lack a score.
        if self._ranges > 1 and (missing := [rowid for rowid in picked if rowid not in self._scored]):
            self._scored.update(self._read(min(missing), max(missing), scored=True))
        return self._scored


def _newest_matches(conn: sqlite3.Connection, scorer: _Scorer, clauses: list[str], params: list[Any], candidates: int) -> list[int]:
    """The rowids of the newest *candidates* matches in the window, newest first."""
    picked: list[int] = []
    # The first batch has room for a few entries that do not match; the later ones are sized by the share that did.
    batch = candidates + candidates // 4 + 8
    after: tuple[str, str] | None = None
    while len(picked) < candidates:
        where, args = list(clauses), list(params)
        if after is not None:
            # The plain bound lets SQLite range over the time index; the row value keeps ties on ts_utc exact.
            where += ["e.ts_utc <= ?", "(e.ts_utc, e.id) < (?, ?)"]
            args += [after[0], *after]
        condition = f"WHERE {' AND '.join(where)}" if where else ""
        # The time index ends with the id: without a kind, the batch is read from the index alone, in order.
        sql = f"SELECT e.rowid FROM entries e {condition} ORDER BY e.ts_utc DESC, e.id DESC LIMIT ?"
        rowids = [row[0] for row in conn.execute(sql, [*args, batch])]
        if not rowids:
            break
        # Which of them match: FTS5 reads the rowid range alone (without a score after the first, decoding no positions).
        matching = scorer.matching(rowids, candidates - len(picked))
        found = [rowid for rowid in rowids if rowid in matching]
        picked += found[: candidates - len(picked)]
        if len(rowids) < batch:
            break
        after = conn.execute("SELECT ts_utc, id FROM entries WHERE rowid = ?", (rowids[-1],)).fetchone()
        # As many more as the matches still missing need at the share of matches seen so far, with room to spare.
        batch = min(2 * batch, -(-2 * (candidates - len(picked)) * len(rowids) // len(found))) if found else 2 * batch
    return picked
