"""A learned reranker over the best candidates of the fused ranking, shipped as a small JSON file of weights.

After the arms, their fusion and the neighbours' stage have ranked the
candidates, a logistic model over cheap features (:data:`FEATURES`: each arm's
score and rank, the fused score before and after the neighbours' stage, the
fused scores of the entries next to it, whether it holds every searched word,
how recent it is, how many links it has, the share of the searched words
it holds, the best lexical score among its neighbours, whether it opens a
thread, how close in time its best neighbour is) reorders the best :data:`DEPTH`. Only
index rows are read, never an entry's text; the weights are one line of
numbers per mode.

The weights ship in ``reranker.json`` beside this module, with the name of
the script that trained them (``bench/train_reranker.py``) and the data it
was trained on. The file says whether the journal uses it by default: the
training script turns it on only when the model beat the neighbours' stage
on conversations it was not trained on. A file that is missing, unreadable,
of another format or version, or whose numbers do not fit :data:`FEATURES`
is not used: ranking falls back to the fused ranking with its neighbours and
says so once on the ``journal`` logger.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.ranking.neighbours import NEIGHBOURS

if TYPE_CHECKING:
    from journal.indexing import QueryWords
    from journal.indexing.index import Index, Window

__all__ = [
    "DEPTH",
    "FEATURES",
    "FORMAT",
    "MODES",
    "SHIPPED",
    "VERSION",
    "Reranker",
    "candidate_features",
    "load_reranker",
    "parse_reranker",
]

log = logging.getLogger("journal")

FORMAT: Final = "ghostjournal-reranker"
#: The version of the file's layout and of :data:`FEATURES`; a file of another version is not used.
VERSION: Final = 2
#: How many of the best candidates the model reorders; the rest keep their place after them.
DEPTH: Final = 50
#: The features, in the order of each mode's weights. Shares are a score over the list's best; ranks are 1 / (1 + rank).
FEATURES: Final = (
    "base_share",  # fused (lexical alone in lexical mode), before the neighbours' stage
    "base_rank",
    "lifted_share",  # after the neighbours' stage
    "lifted_rank",
    "lexical_share",  # BM25
    "lexical_rank",
    "cosine",  # hybrid only; 0 in lexical mode
    "cosine_rank",
    "continues_share",  # best base share among the entries it continues
    "continued_share",  # ... among those that continue it
    "adjacent_share",  # ... among its agent's entries just before and after it
    "every_word",  # 1 when the words found it and it holds every searched word
    "recency",  # 1 for the newest candidate, 0 for the oldest
    "links",  # continuity links, up to 3, over 3
    "coverage",  # the share of the searched words it holds
    "near_lexical",  # best lexical share among its neighbours (links both ways, and just before and after it)
    "opens_thread",  # 1 when it continues no earlier entry (a session's first turn, a journal's new thread)
    "near_closeness",  # 1 / (1 + minutes) to its best neighbour by base share; 0 with no neighbour
)
MODES: Final = ("lexical", "hybrid")
#: The shipped weights.
SHIPPED: Final = Path(__file__).with_name("reranker.json")

_warned: set[str] = set()

Ranked = Sequence[tuple[str, float]]


@dataclass(frozen=True, slots=True)
class Reranker:
    """One weight per feature and mode; *enabled* is the file's own default; *source* is where it was read."""

    weights: Mapping[str, tuple[float, ...]]
    enabled: bool
    source: str

    def order(self, mode: str, ids: Sequence[str], rows: Sequence[Sequence[float]]) -> list[str]:
        """*ids* best-first by the model's score of their *rows*; ties keep the order of *ids*."""
        weights = self.weights[mode]
        scores = [sum(w * x for w, x in zip(weights, row, strict=True)) for row in rows]
        return [ids[n] for n in sorted(range(len(ids)), key=lambda n: -scores[n])]

    def rerank(
        self, index: Index, query: QueryWords, window: Window, mode: str, *, base: Ranked, lifted: Ranked, lexical: Ranked, semantic: Ranked
    ) -> list[tuple[str, float]]:
        """*lifted* with its best :data:`DEPTH` in the model's order, each keeping its own score; the rest after them."""
        if mode not in self.weights or not lifted:
            return list(lifted)
        ids, rows = candidate_features(index, query, window, base=base, lifted=lifted, lexical=lexical, semantic=semantic)
        scores = dict(lifted)
        return [(entry_id, scores[entry_id]) for entry_id in self.order(mode, ids, rows)] + list(lifted[len(ids) :])


def _shares(ranked: Ranked) -> dict[str, float]:
    top = max((score for _, score in ranked), default=0.0)
    return {entry_id: (score / top if top > 0 else 0.0) for entry_id, score in ranked}


def _ranks(ranked: Ranked) -> dict[str, float]:
    return {entry_id: 1.0 / (1 + rank) for rank, (entry_id, _) in enumerate(ranked)}


def candidate_features(
    index: Index, query: QueryWords, window: Window, *, base: Ranked, lifted: Ranked, lexical: Ranked, semantic: Ranked
) -> tuple[list[str], list[list[float]]]:
    """The ids of the best :data:`DEPTH` of *lifted* and each one's features, in :data:`FEATURES` order.

    *base* is the ranking before the neighbours' stage, *lifted* after it; *lexical*
    and *semantic* are the arms' ``(id, score)`` lists (*semantic* empty in lexical mode).
    """
    ids = [entry_id for entry_id, _ in lifted[:DEPTH]]
    base_share, base_rank, lifted_share, lifted_rank = _shares(base), _ranks(base), _shares(lifted), _ranks(lifted)
    lexical_share, lexical_rank, cosine, cosine_rank = _shares(lexical), _ranks(lexical), dict(semantic), _ranks(semantic)
    near = index.neighbours(ids, within_seconds=NEIGHBOURS.window_seconds, window=window)
    around = {entry_id: near.linked.get(entry_id, set()) | near.adjacent.get(entry_id, set()) for entry_id in ids}
    times = {row.id: row.ts_utc for row in index.rows(window, ids=sorted(set(ids).union(*around.values())))}
    matched = [entry_id for entry_id in ids if entry_id in lexical_share]
    coverage = index.coverage(query, matched, window) if matched else {}
    newest = sorted(ids, key=lambda entry_id: (times.get(entry_id, ""), entry_id), reverse=True)
    recency = {entry_id: 1.0 - n / max(1, len(ids) - 1) for n, entry_id in enumerate(newest)}
    rows = []
    for entry_id in ids:
        own, linked = times.get(entry_id, ""), near.linked.get(entry_id, set())
        best = max(around[entry_id], key=lambda other: (base_share.get(other, 0.0), other), default=None)
        rows.append(
            [
                base_share.get(entry_id, 0.0),
                base_rank.get(entry_id, 0.0),
                lifted_share.get(entry_id, 0.0),
                lifted_rank.get(entry_id, 0.0),
                lexical_share.get(entry_id, 0.0),
                lexical_rank.get(entry_id, 0.0),
                cosine.get(entry_id, 0.0),
                cosine_rank.get(entry_id, 0.0),
                max((base_share.get(other, 0.0) for other in linked if times.get(other, "") < own), default=0.0),
                max((base_share.get(other, 0.0) for other in linked if times.get(other, "") > own), default=0.0),
                max((base_share.get(other, 0.0) for other in near.adjacent.get(entry_id, ())), default=0.0),
                1.0 if coverage.get(entry_id, 0.0) == 1.0 else 0.0,
                recency[entry_id],
                min(len(linked), 3) / 3,
                coverage.get(entry_id, 0.0),
                max((lexical_share.get(other, 0.0) for other in around[entry_id]), default=0.0),
                0.0 if any(times.get(other, "") < own for other in linked) else 1.0,
                0.0 if best is None else 1.0 / (1.0 + _minutes(own, times.get(best, ""))),
            ]
        )
    return ids, rows


def _minutes(one: str, other: str) -> float:
    """The minutes between two ``ts_utc`` values (a long way apart when either is unknown)."""
    try:
        return abs((datetime.fromisoformat(one) - datetime.fromisoformat(other)).total_seconds()) / 60
    except ValueError:
        return math.inf


def parse_reranker(data: Any, source: str) -> Reranker:
    """The reranker *data* (a reranker file's parsed JSON) describes; ValueError naming the field and what was expected."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"format is {_show(data, 'format')}, expected {FORMAT!r}")
    if data.get("version") != VERSION:
        raise ValueError(f"version is {_show(data, 'version')}, expected {VERSION}")
    if data.get("features") != list(FEATURES):
        raise ValueError(f"features are {_show(data, 'features')}, expected the {len(FEATURES)} of version {VERSION}")
    if not isinstance(data.get("enabled"), bool):
        raise ValueError(f"enabled is {_show(data, 'enabled')}, expected true or false")  # noqa: TRY004 - every defect of the file is one ValueError, reported by load_reranker
    weights = data.get("weights")
    if not isinstance(weights, dict) or set(weights) != set(MODES):
        raise ValueError(f"weights are {_show(data, 'weights')}, expected one list per mode: {', '.join(MODES)}")
    for mode, values in weights.items():
        if (
            not isinstance(values, list)
            or len(values) != len(FEATURES)
            or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
        ):
            raise ValueError(f"weights.{mode} is {str(values)[:80]}, expected {len(FEATURES)} finite numbers")
    return Reranker({mode: tuple(float(v) for v in values) for mode, values in weights.items()}, data["enabled"], source)


def _show(data: Any, key: str) -> str:
    return repr(data.get(key))[:80] if isinstance(data, dict) else f"absent (the file holds a {type(data).__name__}, not an object)"


def load_reranker(path: str | os.PathLike[str] = SHIPPED, *, chosen: bool = False) -> Reranker | None:
    """The reranker of the file at *path* when ranking should use it, else None.

    The shipped file is used when it says ``"enabled": true``; a file the caller
    *chosen* is used whatever it says. A file that cannot be used (missing,
    unreadable, not JSON, another format or version, weights that do not fit)
    gives None and one warning per path on the ``journal`` logger: ranking
    falls back to the fused ranking with its neighbours.
    """
    try:
        reranker = parse_reranker(json.loads(Path(path).read_text(encoding="utf-8")), str(path))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if str(path) not in _warned:
            _warned.add(str(path))
            log.warning("reranker weights %s are not used (%s): ranking falls back to the fused ranking with its neighbours", path, exc)
        return None
    return reranker if reranker.enabled or chosen else None
