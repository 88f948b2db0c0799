"""Fusing the lexical (BM25) and semantic (cosine) rankings into one.

Every tunable number of hybrid ranking lives in :data:`FUSION`; the figures
that chose them are in the README (``bench/bench_retrieval.py``). The default
is relative score fusion: each arm's scores over its top ``depth`` candidates
are scaled to 0..1 (min-max) and added with weights; an entry an arm did not
return gets 0 from it. Reciprocal rank fusion is kept as the alternative
(``method="rrf"``). On the LoCoMo dev split, min-max fusion with a 0.6/0.4
lexical/semantic split reached recall@10 0.724 against 0.710 for the best
RRF (k=5) and 0.595 for textbook RRF (k=60, equal weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["FUSION", "FusionParams", "fuse"]


@dataclass(frozen=True, slots=True)
class FusionParams:
    """How two rankings become one.

    Attributes:
        method: ``"minmax"`` (relative score fusion) or ``"rrf"``
            (reciprocal rank fusion: rank r from 1 earns ``weight / (rrf_k + r)``).
        lexical_weight: the weight of the BM25 arm.
        semantic_weight: the weight of the cosine arm.
        rrf_k: the RRF constant (used by ``"rrf"`` only); larger flattens the top ranks.
        depth: how many candidates each arm contributes (at least the number of hits asked for).
    """

    method: str = "minmax"
    lexical_weight: float = 0.6
    semantic_weight: float = 0.4
    rrf_k: float = 5.0
    depth: int = 50

    def __post_init__(self) -> None:
        if self.method not in ("minmax", "rrf"):
            raise ValueError(f"fusion method must be 'minmax' or 'rrf', got {self.method!r}")
        if min(self.lexical_weight, self.semantic_weight, self.rrf_k) < 0 or self.depth < 1:
            raise ValueError(f"fusion weights and rrf_k must be >= 0 and depth >= 1, got {self!r}")


#: The parameters the journal ranks with.
FUSION: Final = FusionParams()


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


def fuse(lexical: Sequence[tuple[str, float]], semantic: Sequence[tuple[str, float]], params: FusionParams = FUSION) -> list[tuple[str, float]]:
    """Fuse two best-first ``(id, score)`` lists (higher score is better) into one.

    Only the first ``params.depth`` of each list count. Returns ``(id,
    fused_score)`` pairs, best first; ties go to the better semantic rank,
    then the better lexical rank, so the order is deterministic.
    """
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
