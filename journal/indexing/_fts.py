"""The lexical search of the index: query words, the fitted stop list, BM25 ranking and snippets.

A query is any user text: its words are quoted, so FTS5 syntax in it is
searched as words, never parsed. A search scoped to one agent reads that
agent's own text table (see :mod:`journal.indexing._tables`), so its scores, its
common words and its candidates depend on that agent's entries alone; an
unscoped search reads the journal-wide one.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from journal.indexing._floored import Floored, floored, floored_scores
from journal.indexing._newest import newest_ranked
from journal.indexing._stopwords import STOP_WORDS
from journal.indexing._tables import COLUMNS, IndexRow, Window, scoped_text_table

__all__ = ["COMMON_WORDS", "CommonWords", "QueryWords", "SearchRow", "TextSearch", "fts_query", "query_terms"]

#: BM25 column weights, in text table column order: a theme or tag match says more than prose.
_BM25_WEIGHTS: Final = (3.0, 1.0, 2.0, 1.5, 0.5)
_WEIGHTS: Final = ", ".join(str(w) for w in _BM25_WEIGHTS)
_SNIPPET_WORDS: Final = 24
# Snippets are read in one pass over the hits' rowid range when it spans fewer rows than this per hit; a
# statement per hit otherwise (a range holding much of a word's posting list would cost more than the statements).
_SNIPPET_SPAN: Final = 512

# Words that say when, not what: a journal is all dated entries, so "what's new
# today?" or "last week" matching an entry is no sign that the entry is about
# the question. They are searched and ranked like any word, but a match on them
# alone does not keep an entry below the relevance floor (see telling()).
_TIME_WORDS: Final = frozenset(
    [
        "ago",
        "afternoon",
        "current",
        "currently",
        "daily",
        "day",
        "days",
        "earlier",
        "evening",
        "hour",
        "hours",
        "last",
        "lately",
        "later",
        "latest",
        "minute",
        "minutes",
        "month",
        "monthly",
        "months",
        "morning",
        "new",
        "newer",
        "newest",
        "next",
        "night",
        "past",
        "previous",
        "previously",
        "recent",
        "recently",
        "since",
        "soon",
        "time",
        "times",
        "today",
        "tomorrow",
        "tonight",
        "week",
        "weekend",
        "weekly",
        "weeks",
        "year",
        "yearly",
        "years",
        "yesterday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_TOKEN: Final = re.compile(r"[^\W_]+")
# An English clitic after an apostrophe ("what's", "don't", "I'll"). The index's
# tokenizer splits it off as a word of its own ("s", "t"), so searched, it would
# match every possessive and contraction in the journal; it is dropped from a
# query (with the "n" of "n't"), the word before it kept.
_CLITIC: Final = re.compile(r"([^\W_]+)(?:n['\u2019]t|['\u2019](?:s|d|ll|m|re|ve))(?![^\W_])", re.IGNORECASE)
# What is left of "won't", "can't" and "shan't" once "n't" is gone: function words, dropped whole.
_NEGATED_STEMS: Final = frozenset(["wo", "ca", "sha"])


def _without_clitic(match: re.Match[str]) -> str:
    stem = match.group(1)
    return "" if stem.lower() in _NEGATED_STEMS and match.group(0)[len(stem)] in "nN" else stem


_MAX_QUERY_TERMS: Final = 64
# A quoted word of an FTS5 expression built by _any_of (a word never holds a quote).
_QUOTED: Final = re.compile(r'"([^"]+)"')


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
    words = [w.lower() for w in _TOKEN.findall(_CLITIC.sub(_without_clitic, text))]
    meaningful = [w for w in words if w not in STOP_WORDS] or words
    return list(dict.fromkeys(meaningful))[:_MAX_QUERY_TERMS]


@dataclass(frozen=True, slots=True)
class QueryWords:
    """A query's text and its searchable words (:func:`query_terms`), parsed once for every lexical call of one search.

    A hybrid search asks the index four times for one query (the ranking, the
    partial matches, the telling words, the snippets), and a pass that meets an
    unusable file ranks again: each takes the words parsed here.
    """

    text: str
    terms: tuple[str, ...]

    @classmethod
    def of(cls, query: str | QueryWords) -> QueryWords:
        """*query*'s words: parsed from a text, or as they were."""
        return query if isinstance(query, QueryWords) else cls(query, tuple(query_terms(query)))


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


@dataclass(frozen=True, slots=True)
class SearchRow:
    """An index row that matched a text query, with its BM25 score (higher is better)."""

    row: IndexRow
    score: float
    snippet: str


class TextSearch:
    """Runs text queries on one index connection, keeping the query plans it fitted.

    A plan is the FTS5 expression for a query's words in one text table, and
    whether only the newest matches are ranked (see :class:`CommonWords`).
    Hybrid search and its snippets share one. Call :meth:`forget` when the
    connection goes to another database.
    """

    def __init__(self) -> None:
        self._plans: dict[tuple[str, tuple[str, ...], int, int, CommonWords], tuple[str, bool, Floored | None]] = {}
        # Whether a word is common, by table, word, size, writes and threshold: common words recur from query to query.
        self._common: dict[tuple[str, str, int, int, int], bool] = {}

    def forget(self) -> None:
        """Drop every cached plan."""
        self._plans.clear()
        self._common.clear()

    def search(
        self,
        conn: sqlite3.Connection,
        query: QueryWords,
        *,
        k: int,
        window: Window,
        exclude: Sequence[str],
        with_snippets: bool,
    ) -> list[SearchRow]:
        """The best *k* rows in *window* for *query*, by BM25; see :meth:`journal.indexing.index.Index.search`."""
        found = self._ranked(conn, query, k=k, window=window, exclude=exclude)
        if not found:
            return []
        texts = _snippets_of(conn, found[1], [r[12] for r in found[0]]) if with_snippets else {}
        return [SearchRow(IndexRow.from_sql(r[:11]), float(r[11]), texts.get(r[12], "")) for r in found[0]]

    def ranked(
        self, conn: sqlite3.Connection, query: QueryWords, *, k: int, window: Window, exclude: Sequence[str]
    ) -> list[tuple[str, float]]:
        """The ids and scores of :meth:`search`'s rows, in its order, without reading the rows."""
        found = self._ranked(conn, query, k=k, window=window, exclude=exclude, columns="e.id")
        return [(r[0], float(r[1])) for r in found[0]] if found else []

    def ranked_placed(
        self, conn: sqlite3.Connection, query: QueryWords, *, k: int, window: Window, exclude: Sequence[str]
    ) -> tuple[list[tuple[str, float]], dict[str, tuple[str, str]]]:
        """:meth:`ranked`, and each ranked entry's agent and ``ts_utc``, read by the same statement."""
        found = self._ranked(conn, query, k=k, window=window, exclude=exclude, columns="e.id, e.agent, e.ts_utc")
        if not found:
            return [], {}
        return [(r[0], float(r[3])) for r in found[0]], {r[0]: (r[1], r[2]) for r in found[0]}

    def _ranked(
        self, conn: sqlite3.Connection, query: QueryWords, *, k: int, window: Window, exclude: Sequence[str], columns: str = COLUMNS
    ) -> tuple[list[tuple[Any, ...]], str] | None:
        """The best *k* rows as SQL rows of *columns* (of ``entries e``), score and rowid, and the FTS5 expression that found them."""
        terms = list(query.terms)
        if not terms or k <= 0:
            return None
        plan = self._plan(conn, terms, window.agent)
        if plan is None:
            return None
        table, match, newest_only, floor = plan
        clauses, params = window.where()
        if exclude:
            clauses.append(f"e.id NOT IN ({','.join('?' * len(exclude))})")
            params.extend(exclude)
        if floor is not None:
            ranked = _floored_ranked(conn, table, floor, clauses, params, k, columns)
        elif newest_only:
            sole = window.kind is None and not exclude  # the text table holds the window's agent alone, if it has one
            ranked = newest_ranked(
                conn, table, match, clauses, params, k, candidates=COMMON_WORDS.candidates, weights=_WEIGHTS, columns=columns, sole=sole
            )
        else:
            where = " AND ".join([f"{table} MATCH ?", *clauses])
            matches = f"SELECT {table}.rowid AS rid, bm25({table}, {_WEIGHTS}) AS rank FROM {table} JOIN entries e ON e.rowid = {table}.rowid WHERE {where}"
            # Ties go to the newer entry, then to the id, so equal scores come out in one order.
            sql = f"SELECT {columns}, -h.rank, h.rid FROM ({matches}) h JOIN entries e ON e.rowid = h.rid ORDER BY h.rank, e.ts_utc DESC, e.id DESC LIMIT ?"
            ranked = conn.execute(sql, [match, *params, k]).fetchall()
        return ranked, match

    def snippets(self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window) -> dict[str, str]:
        """Snippets of *query*, with the words a search in *window* keeps, in the given entries (those it matches)."""
        terms = list(query.terms)
        plan = self._plan(conn, terms, window.agent) if terms and entry_ids else None
        if plan is None:
            return {}
        rowids = conn.execute(f"SELECT id, rowid FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})", list(entry_ids)).fetchall()
        texts = _snippets_of(conn, plan[1], [rowid for _, rowid in rowids])
        return {entry_id: texts[rowid] for entry_id, rowid in rowids if texts.get(rowid)}

    def partial(self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window) -> set[str]:
        """Those of *entry_ids* that lack one or more of the words a search of *query* in *window* matches on.

        One lookup per searched word, restricted to the given entries' rows
        (the fusion asks only when BM25 matched few entries).
        """
        held = self._held(conn, query, entry_ids, window)
        return {entry_id for entry_id, count in held[0].items() if count < held[1]} if held else set()

    def coverage(self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window) -> dict[str, float]:
        """The share of the words a search of *query* in *window* matches on that each of *entry_ids* holds (0 for none): :meth:`partial`'s lookups, counted."""
        held = self._held(conn, query, entry_ids, window)
        if not held:
            return dict.fromkeys(entry_ids, 0.0)
        counts, searched = held
        return {entry_id: counts.get(entry_id, 0) / searched for entry_id in entry_ids}

    def _held(
        self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window
    ) -> tuple[dict[str, int], int] | None:
        """How many of the words a search of *query* in *window* matches on each of *entry_ids* in the index holds, and how many it matches on."""
        terms = list(query.terms)
        plan = self._plan(conn, terms, window.agent) if terms and entry_ids else None
        if plan is None:
            return None
        table, match, _, _ = plan
        rowids = dict(
            conn.execute(f"SELECT rowid, id FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})", list(entry_ids)).fetchall()
        )
        marks = ",".join("?" * len(rowids))
        searched = _QUOTED.findall(match)
        held = dict.fromkeys(rowids.values(), 0)
        for term in searched:
            for (rowid,) in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid IN ({marks})", [f'"{term}"', *rowids]):
                held[rowids[rowid]] += 1
        return (held, len(searched)) if searched else None

    def bm25(self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window) -> dict[str, float]:
        """The BM25 score :meth:`search` in *window* gives each of *entry_ids* that *query* matches, whether or not it ranks among the best."""
        terms = list(query.terms)
        plan = self._plan(conn, terms, window.agent) if terms and entry_ids else None
        if plan is None:
            return {}
        table, match, _, floor = plan
        if floor is not None:
            rowids = dict(
                conn.execute(f"SELECT rowid, id FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})", list(entry_ids)).fetchall()
            )
            scores = floored_scores(conn, table, _WEIGHTS, floor)
            return {entry_id: scores[rowid] for rowid, entry_id in rowids.items() if rowid in scores}
        found = conn.execute(
            f"SELECT e.id, -bm25({table}, {_WEIGHTS}) FROM {table} JOIN entries e ON e.rowid = {table}.rowid"
            f" WHERE {table} MATCH ? AND e.id IN ({','.join('?' * len(entry_ids))})",
            [match, *entry_ids],
        )
        return {entry_id: float(score) for entry_id, score in found}

    def telling(self, conn: sqlite3.Connection, query: QueryWords, entry_ids: Sequence[str], window: Window) -> set[str]:
        """Those of *entry_ids* (hits of a search of *query* in *window*) that hold a searched word saying what the query is about.

        Such a word is neither a function word, a time word ("new", "today",
        "last week") nor common in the entries searched (see :class:`CommonWords`):
        a hit that matched only those is no lexical evidence of relevance.
        """
        terms = list(query.terms)
        plan = self._plan(conn, terms, window.agent) if terms and entry_ids else None
        if plan is None or plan[2]:  # a plan of the newest matches only: every searched word is common
            return set()
        table, match, _, _ = plan
        searched = _QUOTED.findall(match)
        telling = [term for term in searched if term not in STOP_WORDS and term not in _TIME_WORDS]
        if len(telling) == len(searched):
            return set(entry_ids)
        if not telling:
            return set()
        rowids = dict(
            conn.execute(f"SELECT rowid, id FROM entries WHERE id IN ({','.join('?' * len(entry_ids))})", list(entry_ids)).fetchall()
        )
        holding = conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid IN ({','.join('?' * len(rowids))})", [_any_of(telling), *rowids]
        )
        return {rowids[row[0]] for row in holding}

    def _plan(self, conn: sqlite3.Connection, terms: list[str], agent: str | None) -> tuple[str, str, bool, Floored | None] | None:
        """The text table to search, the FTS5 expression for *terms* there, whether to rank only the newest matches, and
        the searched words with their counts when FTS5 would weigh one as nothing (see :mod:`journal.indexing._floored`)."""
        scoped = scoped_text_table(conn, agent)
        if scoped is None:
            return None
        table, size, writes = scoped
        common = COMMON_WORDS
        key = (table, tuple(terms), size, writes, common)
        if key not in self._plans:
            if len(self._plans) >= 64:
                self._plans.clear()
            match, newest = self._plan_for(conn, table, terms, size, writes, common)
            self._plans[key] = (match, newest, None if newest else floored(conn, table, _QUOTED.findall(match), size))
        return (table, *self._plans[key])

    def _plan_for(
        self, conn: sqlite3.Connection, table: str, terms: list[str], size: int, writes: int, common: CommonWords
    ) -> tuple[str, bool]:
        threshold = max(common.min_docs, int(size * common.share))
        if size < threshold:
            return _any_of(terms), False
        if len(self._common) >= 1024:
            self._common.clear()
        rare = []
        for term in terms:
            key = (table, term, size, writes, threshold)
            if key not in self._common:
                self._common[key] = _is_common(conn, table, term, threshold)
            if not self._common[key]:
                rare.append(term)
        return _plan_of(terms, rare)


def _floored_ranked(
    conn: sqlite3.Connection, table: str, floor: Floored, clauses: list[str], params: list[Any], k: int, columns: str
) -> list[tuple[Any, ...]]:
    """The best *k* rows in the window (*clauses*, *params*) by :func:`floored_scores`, as rows of *columns*, score and rowid.

    Ties go to the newer entry, then to the id, as FTS5's ranking orders them.
    """
    scores = floored_scores(conn, table, _WEIGHTS, floor)
    if not scores:
        return []
    where = " AND ".join([f"e.rowid IN ({','.join('?' * len(scores))})", *clauses])
    rows = conn.execute(f"SELECT {columns}, e.rowid, e.ts_utc FROM entries e WHERE {where}", [*scores, *params]).fetchall()
    # Stable sorts, the last key first: the score, then the newer entry, then the greater id.
    rows.sort(key=lambda row: (row[-1], row[0]), reverse=True)
    rows.sort(key=lambda row: -scores[row[-2]])
    return [(*row[:-2], scores[row[-2]], row[-2]) for row in rows[:k]]


def _plan_of(terms: list[str], rare: list[str]) -> tuple[str, bool]:
    """The FTS5 expression for a query of *terms* whose *rare* ones are not common, and whether to rank only the newest matches."""
    if not rare:
        return _any_of(terms), True
    # Scoring a common word would cost a pass over its whole posting list
    # (BM25's document frequency) for a term whose weight is small anyway.
    return _any_of(rare), False


def _is_common(conn: sqlite3.Connection, table: str, term: str, threshold: int) -> bool:
    """True if *term* is in at least *threshold* rows of *table* (counting stops there)."""
    found = conn.execute(
        f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)", (f'"{term}"', threshold)
    ).fetchone()[0]
    return int(found) >= threshold


def _snippets_of(conn: sqlite3.Connection, match: str, rowids: list[int]) -> dict[int, str]:
    """The snippet of each of *rowids* that *match* matches, from the journal-wide table (the only one holding the text).

    Each full-text statement pays to open the words' posting lists in every
    segment of the table, which a statement per row pays again each time; so
    rows close together (the hits of a common-word query lie among the newest
    entries) are read in one pass over their rowid range. The ``+`` keeps the
    rowid list a filter, so the range is what the table reads and only the
    rows asked are given a snippet.
    """
    if len(rowids) < 2 or max(rowids) - min(rowids) >= _SNIPPET_SPAN * len(rowids):
        return {rowid: _snippet(conn, match, rowid) for rowid in rowids}
    found = conn.execute(
        f"SELECT rowid, snippet(fts, -1, '', '', '…', {_SNIPPET_WORDS}) FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?"
        f" AND +rowid IN ({','.join('?' * len(rowids))})",
        [match, min(rowids), max(rowids), *rowids],
    )
    return dict(found.fetchall())


def _snippet(conn: sqlite3.Connection, match: str, rowid: int) -> str:
    """The snippet of one row, from the journal-wide table (the only one holding the text)."""
    found = conn.execute(
        f"SELECT snippet(fts, -1, '', '', '…', {_SNIPPET_WORDS}) FROM fts WHERE fts MATCH ? AND rowid = ?", (match, rowid)
    ).fetchone()
    return found[0] if found else ""
