"""Ranking: search, relate and the prompt context's picks, by words, by meaning, or both fused.

The ranking runs over index rows and vectors; it never opens an entry file.
Each ranked row is handed to a :class:`~journal.sync._reading.Reader`, which
turns it into the entry its file holds, or skips it; a skipped row is left
out and the ranking runs again without it until *k* entries are found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Final

from journal.errors import SemanticUnavailableError
from journal.files.entry import Entry, check_text_arguments, show_value
from journal.indexing import QueryWords, Scope, bound, cutoff, positive
from journal.indexing.index import Index, IndexRow, Window
from journal.ranking._corrections import order_corrections
from journal.ranking._proposed import OutdatedMark, mark_hits, outdated_marks
from journal.ranking.context import PromptContext, build_prompt_context
from journal.ranking.fusion import FUSION, fuse, needs_partial
from journal.ranking.hit import Hit
from journal.ranking.neighbours import NEIGHBOURS, with_neighbours
from journal.ranking.reranker import Reranker
from journal.sync import Reader

if TYPE_CHECKING:
    from journal.encoding.semantic import SemanticIndex, Vector

__all__ = ["DEFAULT_CONTEXT_CHARS", "MAX_K", "MODES", "Ranker"]

DEFAULT_CONTEXT_CHARS: Final = 6000
#: Largest ``k`` of search, relate and prompt_context: ranking holds k candidates per arm in memory.
MAX_K: Final = 10_000
#: Ranking modes: ``auto`` is ``hybrid`` with NN on and ``lexical`` without.
MODES: Final = ("auto", "lexical", "semantic", "hybrid")
_SNIPPET_WORDS: Final = 24
#: How relate orders an entry's explicit links: what it corrects and what corrects it, then continuity, newest first within each.
_LINK_ORDER: Final = ("supersedes", "superseded_by", "continues", "continued_by")


def _preview(text: str) -> str:
    """The first words of *text*, as a snippet for an entry found by meaning alone."""
    words = text.split()
    return " ".join(words[:_SNIPPET_WORDS]) + ("…" if len(words) > _SNIPPET_WORDS else "")


@dataclass(frozen=True, slots=True)
class _Ranking:
    """The hits of one ranking, and the score it gave each candidate it weighed, kept or not (below the floor, past *k*).

    *mode* is the resolved mode, *vector* the query's embedding (None for ``lexical``):
    what scoring an entry the ranking did not weigh needs (see :meth:`Ranker._score`).
    """

    hits: list[Hit]
    mode: str
    vector: Vector | None = None
    scores: dict[str, float] = field(default_factory=dict)


class Ranker:
    """Ranks the rows of *index* (and with NN on, the vectors of *semantic*); *reader* turns rows into entries.

    *reranker*, when given, reorders the best candidates after the neighbours' stage (see :mod:`journal.ranking.reranker`).
    """

    def __init__(self, index: Index, semantic: SemanticIndex | None, reader: Reader, reranker: Reranker | None = None) -> None:
        self._index = index
        self._semantic = semantic
        self._reader = reader
        self.reranker = reranker

    def _resolve_mode(self, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {show_value(mode)}")
        if mode == "auto":
            return "lexical" if self._semantic is None else "hybrid"
        if mode != "lexical" and self._semantic is None:
            raise SemanticUnavailableError(
                f"mode {mode!r} needs entry vectors and this journal was opened without NN",
                "open it with Journal(root, enable_nn=True) or pass --nn",
            )
        return mode

    def _floor(self, floor: bool) -> float | None:
        """The cosine an entry found by meaning alone must reach: the encoder's calibrated floor, or None (no floor).

        ``floor=False`` without NN is refused: ranking by words alone has no floor, so
        lifting it would change nothing while the caller expects more hits.
        """
        if self._semantic is None:
            if not floor:
                raise SemanticUnavailableError(
                    "floor=False (--no-floor; floor: false over MCP) lifts the relevance floor of ranking by meaning,"
                    " and this journal was opened without NN, whose ranking by words has no floor",
                    "open it with Journal(root, enable_nn=True) or pass --nn, or leave the floor as it is",
                )
            return None
        return self._semantic.relevance_floor if floor else None

    def _rank(
        self,
        query: QueryWords,
        *,
        k: int,
        mode: str,
        scope: Scope,
        exclude: Sequence[str] = (),
        vector: Vector | None = None,
        floor: float | None = None,
        stages: bool = False,
        snippets: bool = True,
    ) -> _Ranking:
        """The best *k* entries for *query* by one arm or by both fused (see :mod:`journal.ranking.fusion`).

        *vector* replaces the query's embedding (``relate`` passes the entry's own). With a
        *floor*, an entry whose cosine is below it is left out unless the words matched it
        by a word that says what the query is about (see :meth:`Index.telling_matches`). With
        *stages*, lexical and hybrid rankings go on through the neighbours' stage
        (see :mod:`journal.ranking.neighbours`) and, when the ranker has one, the learned reranker.
        Without *snippets*, hits carry no snippet (the prompt context shows whole entries, never snippets).
        """
        mode = self._resolve_mode(mode)
        bad: set[str] = set()
        while True:
            known = len(bad)
            ranking = self._rank_once(
                query,
                k=k,
                mode=mode,
                exclude=[*exclude, *bad],
                vector=vector,
                bad=bad,
                scope=scope,
                floor=floor,
                stages=stages,
                snippets=snippets,
            )
            if len(ranking.hits) >= k or len(bad) == known:
                return ranking

    def _score(self, ranking: _Ranking, entry_id: str, query: QueryWords, window: Window) -> float:
        """*entry_id*'s own score in *ranking*, also when the ranking did not weigh it.

        Hybrid: an entry neither arm returned gets 0 from each. Semantic: its
        cosine with the query. Lexical: its BM25 score, 0 when no searched word matches it.
        """
        if entry_id in ranking.scores or ranking.mode == "hybrid":
            return ranking.scores.get(entry_id, 0.0)
        if ranking.mode == "semantic":
            stored = None if self._semantic is None else self._semantic.vector_of(entry_id)
            return 0.0 if stored is None or ranking.vector is None else float(stored @ ranking.vector)
        return self._index.bm25(query, [entry_id], window).get(entry_id, 0.0)

    def _corrected(self, ranking: _Ranking, query: QueryWords, scope: Scope) -> list[Hit]:
        """The hits of *ranking* with each superseded entry right after what superseded it (see :mod:`journal.ranking._corrections`).

        A correction brought in carries its own score for *query*, never the score of the entry it corrects.
        """

        def superseders(ids: Sequence[str]) -> dict[str, list[str]]:
            return self._index.superseders(ids, before=scope.as_of)

        def bring(entry_id: str, corrected: Hit) -> Hit | None:
            rows = self._index.rows(scope.window, ids=[entry_id])
            entry = self._reader.usable(rows[0], set(), scope) if rows else None
            if entry is None:
                return None
            return Hit(entry_id, self._score(ranking, entry_id, query, scope.window), _preview(entry.voice), entry, corrected.reason)

        return order_corrections(ranking.hits, superseders, bring)

    def _hidden(self, scope: Scope) -> set[str]:
        """The entries ``current_only`` leaves out of *scope*: those superseded (within its ``as_of``); none without it."""
        return set(self._index.superseded_in(scope.window, before=scope.as_of)) if scope.current_only else set()

    def _found(
        self,
        query: QueryWords,
        *,
        k: int,
        mode: str,
        scope: Scope,
        floor: float | None,
        hidden: set[str],
        exclude: Sequence[str] = (),
        stages: bool = True,
        snippets: bool = True,
    ) -> list[Hit]:
        """The best *k* hits of search and prompt context, corrections in place.

        With ``current_only``, superseded entries are ranked too, so that one the
        query found (by its old words, or above the floor) still brings in its
        correction; then they are left out, and the ranking goes deeper while
        they kept it from *k* hits. *hidden* is :meth:`_hidden` of *scope*, which
        the prompt context's recent fill leaves out too. *exclude* is never ranked (the prompt context's untrusted entries).
        """
        if not scope.current_only:
            return self._corrected(
                self._rank(query, k=k, mode=mode, scope=scope, floor=floor, exclude=exclude, stages=stages, snippets=snippets), query, scope
            )[:k]
        depth = k
        while True:
            ranking = self._rank(query, k=depth, mode=mode, scope=scope, floor=floor, exclude=exclude, stages=stages, snippets=snippets)
            current = [hit for hit in self._corrected(ranking, query, scope) if hit.entry_id not in hidden]
            if len(current) >= k or len(ranking.hits) < depth:
                return current[:k]
            # Fewer than k of the ranked entries are current: rank as many more as were left out.
            depth = k + sum(1 for hit in ranking.hits if hit.entry_id in hidden)

    def _rank_once(
        self,
        query: QueryWords,
        *,
        k: int,
        mode: str,
        exclude: Sequence[str],
        vector: Vector | None,
        bad: set[str],
        scope: Scope,
        floor: float | None,
        stages: bool,
        snippets: bool,
    ) -> _Ranking:
        """One ranking pass of :meth:`_rank`; entries whose files are unusable or out of *scope* are skipped and added to *bad*."""
        usable = self._reader.usable
        window = scope.window
        if mode == "lexical" and not stages:
            found = self._index.search(query, k=k, window=window, exclude=exclude, with_snippets=snippets)
            lexical_hits = [Hit(r.row.id, r.score, r.snippet, entry) for r in found if (entry := usable(r.row, bad, scope)) is not None]
            return _Ranking(lexical_hits, mode, scores={r.row.id: r.score for r in found})
        if mode == "lexical":
            # The neighbours' stage needs the scores of its sources, more than k when k is small.
            # Only ids and scores: the rows of the few hits kept are read after the stage.
            words, places = self._index.ranked_placed(query, k=max(k, NEIGHBOURS.sources), window=window, exclude=exclude)
            ranked = with_neighbours(self._index, words, window, exclude=exclude, places=places)
            if self.reranker is not None:
                ranked = self.reranker.rerank(self._index, query, window, mode, base=words, lifted=ranked, lexical=words, semantic=[])
            return self._hits(
                query,
                ranked,
                k=k,
                mode=mode,
                matched={entry_id for entry_id, _ in words} if snippets else set(),
                scores={},
                bad=bad,
                scope=scope,
            )
        assert self._semantic is not None  # noqa: S101 - narrows the type: _resolve_mode allows only "lexical" without it
        depth = max(k, FUSION.depth) if mode == "hybrid" else k
        lexical = self._index.search(query, k=depth, window=window, exclude=exclude, with_snippets=False) if mode == "hybrid" else []
        if vector is None:
            vector = self._semantic.query_vector(query.text)
        semantic = self._semantic.rank(vector, depth, window, exclude=exclude)
        matched = {r.row.id for r in lexical}
        if mode == "semantic":
            ranked = semantic[:k]
        else:
            lexical_ranked = [(r.row.id, r.score) for r in lexical]
            partial = (
                self._index.partial_matches(query, [i for i, _ in lexical_ranked], window)
                if needs_partial(len(lexical), len(semantic))
                else set()
            )
            ranked = fuse(lexical_ranked, semantic, partial=partial)
        scores = dict(ranked)
        if floor is not None:
            cosines = dict(semantic)
            # A match on time words or common words alone ("what's new today?") is no evidence: the floor decides.
            telling = self._index.telling_matches(query, [r.row.id for r in lexical], window) if lexical else set()
            ranked = [(entry_id, score) for entry_id, score in ranked if entry_id in telling or cosines.get(entry_id, -1.0) >= floor]
        if stages and mode == "hybrid":
            base, ranked = ranked, with_neighbours(self._index, ranked, window, exclude=exclude)
            if self.reranker is not None:
                lexical_ranked = [(r.row.id, r.score) for r in lexical]
                ranked = self.reranker.rerank(
                    self._index, query, window, mode, base=base, lifted=ranked, lexical=lexical_ranked, semantic=semantic
                )
        return self._hits(
            query, ranked, k=k, mode=mode, matched=matched if snippets else set(), scores=scores, bad=bad, scope=scope, vector=vector
        )

    def _hits(
        self,
        query: QueryWords,
        ranked: list[tuple[str, float]],
        *,
        k: int,
        mode: str,
        matched: set[str],
        scores: dict[str, float],
        bad: set[str],
        scope: Scope,
        vector: Vector | None = None,
    ) -> _Ranking:
        """The ranking of the best *k* of *ranked* whose files are usable; *matched* are those the words found (they get snippets)."""
        usable = self._reader.usable
        window = scope.window
        scores = scores | dict(ranked)
        ranked = ranked[:k]
        rows = {row.id: row for row in self._index.rows(window, ids=[entry_id for entry_id, _ in ranked])} if ranked else {}
        snippets = self._index.snippets(query, [entry_id for entry_id, _ in ranked if entry_id in matched], window)
        hits = []
        for entry_id, score in ranked:
            if entry_id in rows and (entry := usable(rows[entry_id], bad, scope)) is not None:
                hits.append(Hit(entry_id, score, snippets.get(entry_id) or _preview(entry.voice), entry))
        return _Ranking(hits, mode, vector, scores)

    def search(
        self,
        query: str,
        *,
        k: int,
        kind: str | None,
        agent: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        mode: str,
        as_of: datetime | str | None = None,
        current_only: bool = False,
        floor: bool = True,
        rerank: bool = True,
    ) -> list[Hit]:
        """See :meth:`journal.Journal.search`."""
        check_text_arguments(kind=kind, agent=agent)
        positive(k, "k", MAX_K)
        scope = Scope(
            agent=agent, kind=kind, since=bound(since, "since"), until=bound(until, "until"), as_of=cutoff(as_of), current_only=current_only
        )
        found = self._found(
            QueryWords.of(query), k=k, mode=mode, scope=scope, floor=self._floor(floor), hidden=self._hidden(scope), stages=rerank
        )
        return mark_hits(self._index, found, agent=agent, before=scope.as_of)

    def relate(self, entry_id: str, *, k: int, agent: str | None) -> list[Hit]:
        """See :meth:`journal.Journal.relate`."""
        check_text_arguments(agent=agent)
        positive(k, "k", MAX_K)
        # With agent= given, another agent's id is refused exactly like a missing
        # one: its hidden text must not rank anything, nor its links show.
        source = self._reader.get(entry_id, agent)
        scope = Scope(agent=agent)
        wanted: dict[str, str] = {}
        for ref in source.supersedes:  # the file decides what the entry corrects and continues
            wanted.setdefault(ref, "supersedes")
        for ref in self._index.superseders([entry_id]).get(entry_id, ()):
            wanted.setdefault(ref, "superseded_by")
        for ref in source.continuity_refs:
            wanted.setdefault(ref, "continues")
        for ref in self._index.links_to(entry_id):
            wanted.setdefault(ref, "continued_by")
        linked: dict[str, tuple[str, Entry]] = {}
        for row in self._index.rows(Window(agent=agent), ids=list(wanted)):
            entry = self._reader.usable(row, set(), scope)
            reason = wanted[row.id]
            if entry is None or (row.agent != source.agent and reason in ("supersedes", "superseded_by")):
                continue
            if (reason == "continued_by" and entry_id not in entry.continuity_refs) or (
                reason == "superseded_by" and entry_id not in entry.supersedes
            ):
                continue
            linked[row.id] = (reason, entry)
        # Only links in scope count towards how many similar entries are fetched.
        query = QueryWords.of(" ".join((source.theme, *source.tags, (source.signals or {}).get("focus", ""), source.voice)))
        vector = None if self._semantic is None else self._semantic.entry_vector(source)
        ranking = self._rank(query, k=k + len(linked), mode="auto", scope=scope, exclude=[entry_id], vector=vector)
        similar = {hit.entry_id: hit for hit in ranking.hits}
        hits = []
        for linked_id, (reason, entry) in linked.items():
            scored = similar.get(linked_id)
            # A link the ranking did not keep still shows how similar it is (its own score, not 0).
            score = scored.score if scored else self._score(ranking, linked_id, query, scope.window)
            hits.append(Hit(linked_id, score, scored.snippet if scored else "", entry, reason))
        hits.sort(key=lambda hit: _LINK_ORDER.index(hit.reason))
        for found in ranking.hits:
            if len(hits) >= k:
                break
            if found.entry_id not in linked:
                hits.append(Hit(found.entry_id, found.score, found.snippet, found.entry, "similar"))
        return hits[:k]

    def context(
        self,
        query: str,
        *,
        k: int,
        agent: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        max_chars: int,
        as_of: datetime | str | None = None,
        current_only: bool = False,
        floor: bool = True,
        include_untrusted: bool = False,
        rerank: bool = True,
    ) -> PromptContext:
        """See :meth:`journal.Journal.context`."""
        check_text_arguments(agent=agent)
        positive(k, "k", MAX_K)
        scope = Scope(agent=agent, since=bound(since, "since"), until=bound(until, "until"), as_of=cutoff(as_of), current_only=current_only)
        # Text taken from outside is never ranked into the block, nor filled in as recent, unless asked for.
        untrusted = set() if include_untrusted else self._index.untrusted_ids(agent)
        hidden = self._hidden(scope) | untrusted
        found = self._found(
            QueryWords.of(query),
            k=k,
            mode="auto",
            scope=scope,
            floor=self._floor(floor),
            hidden=hidden,
            exclude=sorted(untrusted),
            stages=rerank,
            snippets=False,
        )
        picks = [(hit.entry, "match") for hit in found if include_untrusted or hit.entry.origin != "untrusted"]
        if len(picks) < k:
            seen = {entry.id for entry, _ in picks}

            def fetch(extra: int) -> list[IndexRow]:
                rows = self._index.rows(scope.window, limit=k + len(seen) + extra)
                return [row for row in rows if row.id not in seen]

            recent = self._reader.usable_rows(
                lambda extra: [row for row in fetch(extra + len(hidden)) if row.id not in hidden], k - len(picks), scope
            )
            picks += [(entry, "recent") for entry in recent]
        # The matches already carry their correctors; only the recent fill is asked for its own.
        corrected = {hit.entry_id: list(hit.superseded_by) for hit in found if hit.superseded_by}
        corrected.update(self._index.superseders([entry.id for entry, why in picks if why == "recent"], before=scope.as_of))
        marks = outdated_marks(self._index, [entry.id for entry, _ in picks], agent=agent, before=scope.as_of)
        return build_prompt_context(
            query,
            picks,
            max_chars=max_chars,
            superseded_by=corrected,
            outdated={key: mark.text for key, mark in marks.items()},
            later=self._newer_of(picks, marks, scope, hidden),
        )

    def _newer_of(
        self, picks: Sequence[tuple[Entry, str]], marks: Mapping[str, OutdatedMark], scope: Scope, hidden: set[str]
    ) -> list[tuple[Callable[[], Entry | None], str]]:
        """The newest entry each marked pick's mark names, not picked already: shown after every pick, while the block has room.

        Each comes as a loader: the block is mostly full before them, and an entry it has no room for need not be read.
        """
        seen = {entry.id for entry, _ in picks}
        wanted = [mark.newer[0] for entry, _ in picks if (mark := marks.get(entry.id)) is not None]
        wanted = [entry_id for entry_id in dict.fromkeys(wanted) if entry_id not in seen and entry_id not in hidden]
        if not wanted:
            return []
        rows = {row.id: row for row in self._index.rows(scope.window, ids=wanted)}

        def loader(row: IndexRow) -> Callable[[], Entry | None]:
            return lambda: self._reader.usable(row, set(), scope)

        return [(loader(rows[entry_id]), "newer") for entry_id in wanted if entry_id in rows]
