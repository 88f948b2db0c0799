"""BM25 for a text table where a searched word is in half or more of the rows, which FTS5 weighs as nothing.

FTS5's ``bm25()`` takes a word's inverse document frequency as
``log((N - n + 0.5) / (n + 0.5))`` and floors it at 10⁻⁶ when that is not
positive: a word in half or more of the ``N`` entries searched weighs nothing.
In a large journal such a word is common and left out of the query anyway
(see :class:`journal.indexing._fts.CommonWords`); in a small journal, or in
the text table of an agent with few entries, it may be the very word the
query is about ("Kiriko Pay" in three of four entries), and the score is then
carried by whatever other word matched, so a newer entry that shares a
rarer, incidental word outranks the one the query asks for.

Such a query is scored here word by word instead: FTS5's score of one word is
its floored weight times the word's term-frequency part, so the part is
recovered exactly and weighed by ``log(1 + (N - n + 0.5) / (n + 0.5))``,
which never falls to zero and orders words by rarity as FTS5's does. Only a
table of fewer than :data:`FLOORED_BELOW` rows is scored so: in a few entries,
"half of them" is two or three, and says nothing of how common a word is; in
more, a word in half the entries is as common as a speaker's name in a
conversation, and FTS5's weight stands (rescoring LoCoMo's conversations, of
some 400 turns an agent, moved their recall a point either way, mostly down).
A query none of whose words is floored is ranked by FTS5 alone, as before.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["FLOORED_BELOW", "Floored", "floored", "floored_scores"]

#: A text table of this many rows or more is ranked by FTS5 alone (see above); below it are a journal's, or an agent's, first entries.
FLOORED_BELOW: Final = 100


# The weight FTS5 gives a word whose inverse document frequency is not positive.
_FTS5_FLOOR: Final = 1e-6


def _fts5_idf(size: int, count: int) -> float:
    ratio = (size - count + 0.5) / (count + 0.5)
    return math.log(ratio) if ratio > 1 else _FTS5_FLOOR  # a logarithm that would not be positive is floored, as FTS5 does


def _idf(size: int, count: int) -> float:
    return math.log(1 + (size - count + 0.5) / (count + 0.5))


@dataclass(frozen=True, slots=True)
class Floored:
    """The words of a query on one text table of *size* rows, and how many rows hold each, one of them in half or more."""

    terms: tuple[str, ...]
    counts: tuple[int, ...]
    size: int


def floored(conn: sqlite3.Connection, table: str, terms: Sequence[str], estimate: int) -> Floored | None:
    """*terms* with their counts in *table* when FTS5 weighs one of them as nothing, else None.

    *estimate* is at least the table's row count (its highest rowid will do): a table that large or larger is not asked.
    """
    if estimate >= FLOORED_BELOW or not terms:
        return None
    # One statement, so one snapshot: counted in statements of their own, a write landing between them could give a word
    # more rows than the table.
    words = "".join(f", (SELECT count(*) FROM {table} WHERE {table} MATCH ?)" for _ in terms)
    size, *counted = conn.execute(f"SELECT (SELECT count(*) FROM {table}){words}", [f'"{term}"' for term in terms]).fetchone()
    counts = tuple(int(count) for count in counted)
    size = int(size)
    if not any(count and _fts5_idf(size, count) <= _FTS5_FLOOR for count in counts):
        return None
    return Floored(tuple(terms), counts, size)


def floored_scores(conn: sqlite3.Connection, table: str, weights: str, query: Floored) -> dict[int, float]:
    """The BM25 score (higher is better) of every row of *table* that holds a word of *query*, each word weighed by a
    document frequency that never falls to zero."""
    scores: dict[int, float] = {}
    for term, count in zip(query.terms, query.counts, strict=True):
        if not count:
            continue
        scale = _idf(query.size, count) / _fts5_idf(query.size, count)
        for rowid, score in conn.execute(f"SELECT rowid, -bm25({table}, {weights}) FROM {table} WHERE {table} MATCH ?", (f'"{term}"',)):
            scores[rowid] = scores.get(rowid, 0.0) + float(score) * scale
    return scores
