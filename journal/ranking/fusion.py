"""Fusing the lexical (BM25) and semantic (cosine) rankings into one.

Every tunable number of hybrid ranking lives in :data:`FUSION`; the figures
that chose them are in docs/retrieval.md (``bench/bench_retrieval.py``).

The default, evidence fusion, scores each candidate by how far it rises above
what its arm gives an unrelated entry, the arm's *floor*: the score of the
arm's ``floor_rank``-th candidate (or 0 for BM25 when fewer entries matched).
Each arm's rise is then put on a 0..1 scale that keeps the arm's confidence:

- BM25 has no ceiling, so a rise is divided by the arm's best score. When the
  best barely beats the floor (every hit matched only a common word such as
  "new"), the whole list is worth little, instead of its best getting full
  weight as with min-max scaling.
- A cosine's ceiling is 1, so a rise is divided by the way from the floor to 1.

When BM25 matched fewer entries than its floor rank, the entries it left out
score 0, but the floor is not always 0: if some hits hold only part of the
searched words (*partial*), the lowest of those scores is the floor. In a small
journal a word that occurs once gets a high BM25 weight, so an entry sharing
just that word with the question ("adopted" in "the animal that adopted me")
would otherwise get the lexical arm's full weight and outrank the cosine arm's
clear first; a hit holding every searched word still rises from 0.

An entry an arm did not return is below that arm's floor and gets 0 from it.
The weighted sum ranks; ties go to the better semantic rank, then the better
lexical rank. Min-max fusion (the former default) and reciprocal rank fusion
are kept for comparison (``method="minmax"`` or ``"rrf"``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["FUSION", "METHODS", "FusionParams", "fuse", "needs_partial"]

#: The fusion methods :class:`FusionParams` accepts.
METHODS: Final = ("evidence", "minmax", "rrf")


@dataclass(frozen=True, slots=True)
class FusionParams:
    """How two rankings become one.

    Attributes:
        method: ``"evidence"`` (see the module), ``"minmax"`` (each arm scaled
            to 0..1 over its list) or ``"rrf"`` (rank r from 1 earns ``weight / (rrf_k + r)``).
        lexical_weight: the weight of the BM25 arm.
        semantic_weight: the weight of the cosine arm.
        lexical_floor_rank: ``"evidence"``: the rank whose BM25 score is the lexical floor.
        semantic_floor_rank: ``"evidence"``: the rank whose cosine is the semantic floor.
        rrf_k: ``"rrf"``: larger flattens the top ranks.
        depth: how many candidates each arm contributes (the ranking asks for at
            least this many, more when more hits are asked for). ``"minmax"``
            and ``"rrf"`` use only the first ``depth`` of each list.
    """

    method: str = "evidence"
    lexical_weight: float = 0.5
    semantic_weight: float = 0.5
    lexical_floor_rank: int = 20
    semantic_floor_rank: int = 50
    rrf_k: float = 5.0
    depth: int = 50

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"fusion method must be one of {', '.join(map(repr, METHODS))}, got {self.method!r}")
        if (
            min(self.lexical_weight, self.semantic_weight, self.rrf_k) < 0
            or min(self.depth, self.lexical_floor_rank, self.semantic_floor_rank) < 1
        ):
            raise ValueError(f"fusion weights and rrf_k must be >= 0, depth and floor ranks >= 1, got {self!r}")


#: The parameters the journal ranks with.
FUSION: Final = FusionParams()


def _floor(ranked: Sequence[tuple[str, float]], rank: int, window: int, partial: Collection[str] = ()) -> float:
    """The score of the *rank*-th candidate, counting a window smaller than *rank* as its last entry.

    When the list stops before that rank although the window holds more
    entries, the entries it left out score at most 0 (no BM25 match), and
    the floor is the lowest score of a *partial* hit, or 0 without one.
    """
    if not ranked:
        return 0.0
    position = min(rank, window)
    if len(ranked) >= position:
        return ranked[position - 1][1]
    partial_scores = [score for entry_id, score in ranked if entry_id in partial]
    return min(0.0, ranked[-1][1]) if not partial_scores else min(partial_scores)


def _evidence(
    lexical: Sequence[tuple[str, float]],
    semantic: Sequence[tuple[str, float]],
    params: FusionParams,
    partial: Collection[str],
) -> tuple[dict[str, float], dict[str, float]]:
    # Every entry of the window has a cosine, so the longer list bounds the window's size.
    window = max(len(lexical), len(semantic))
    lex_floor = _floor(lexical, params.lexical_floor_rank, window, partial)
    best = lexical[0][1] if lexical else 0.0
    lex = {entry_id: max(0.0, score - lex_floor) / best if best > 0 else 0.0 for entry_id, score in lexical}
    sem_floor = _floor(semantic, params.semantic_floor_rank, window)
    room = 1.0 - sem_floor
    sem = {entry_id: max(0.0, score - sem_floor) / room if room > 0 else 0.0 for entry_id, score in semantic}
    return lex, sem


def needs_partial(lexical_hits: int, semantic_hits: int, params: FusionParams = FUSION) -> bool:
    """Whether :func:`fuse` would read *partial* for lists of these lengths: the lexical one stops before its floor rank."""
    return params.method == "evidence" and 0 < lexical_hits < min(params.lexical_floor_rank, max(lexical_hits, semantic_hits))


def _minmax(ranked: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Scores scaled to 0..1 over the list; a list of equal scores is all 1."""
    if not ranked:
        return {}
    values = [score for _, score in ranked]
    low, high = min(values), max(values)
    span = high - low
    return {entry_id: (score - low) / span if span > 0 else 1.0 for entry_id, score in ranked}


def _rrf(ranked: Sequence[tuple[str, float]], k: float) -> dict[str, float]:
    return {entry_id: 1.0 / (k + rank) for rank, (entry_id, _) in enumerate(ranked, start=1)}


def fuse(
    lexical: Sequence[tuple[str, float]],
    semantic: Sequence[tuple[str, float]],
    params: FusionParams = FUSION,
    *,
    partial: Collection[str] = (),
) -> list[tuple[str, float]]:
    """Fuse two best-first ``(id, score)`` lists (BM25 and cosine, higher is better) into one.

    *partial*: ids of lexical hits that hold only some of the words searched
    (see the module; only ``"evidence"`` uses them, and only when the lexical
    list is shorter than its floor rank: :func:`needs_partial` tells).

    Returns ``(id, fused_score)`` for every id in either list, best first;
    ties go to the better semantic rank, then the better lexical rank, so the
    order is deterministic.
    """
    if params.method == "evidence":
        lex, sem = _evidence(lexical, semantic, params, partial)
    else:
        lexical, semantic = lexical[: params.depth], semantic[: params.depth]
        if params.method == "rrf":
            lex, sem = _rrf(lexical, params.rrf_k), _rrf(semantic, params.rrf_k)
        else:
            lex, sem = _minmax(lexical), _minmax(semantic)
    lex_rank = {entry_id: rank for rank, (entry_id, _) in enumerate(lexical)}
    sem_rank = {entry_id: rank for rank, (entry_id, _) in enumerate(semantic)}
    fused = {
        entry_id: params.lexical_weight * lex.get(entry_id, 0.0) + params.semantic_weight * sem.get(entry_id, 0.0)
        for entry_id in lex.keys() | sem.keys()
    }
    far = len(lexical) + len(semantic)
    return sorted(fused.items(), key=lambda item: (-item[1], sem_rank.get(item[0], far), lex_rank.get(item[0], far)))
