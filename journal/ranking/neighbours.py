"""Neighbour-aware ranking: an entry's score raised by the best score among its neighbours.

In a conversation the turn that answers a question sits next to a turn that
matches the question's words; in an agent's journal a reflection continues
the one before it. So after the arms (and their fusion) have scored the
candidates, each entry also earns ``weight`` times the best score of its
neighbours among the ``sources`` best candidates: the entries it continues
and those that continue it (``signals.continuity_refs``, both ways), and the
entries of its agent written just before and after it within
``window_seconds``. A neighbour the arms did not return joins the
candidates with that lift alone. An entry with no neighbour keeps its score.

Only the journal's own fields are read (links and times), never an entry's
text. The numbers are in :data:`NEIGHBOURS`; the figures that chose them are
in docs/retrieval.md (``bench/bench_retrieval.py locomo``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from journal.indexing.index import Index, Window

__all__ = ["NEIGHBOURS", "NeighbourParams", "lift", "with_neighbours"]


@dataclass(frozen=True, slots=True)
class NeighbourParams:
    """How much neighbours count.

    Attributes:
        weight: the share of its best neighbour's score an entry earns (0 turns the stage off).
        sources: how many of the best candidates lend their score to their neighbours.
        window_seconds: how close in time two entries of one agent must be to neighbour each other.
    """

    weight: float = 0.6
    sources: int = 50
    window_seconds: float = 900.0

    def __post_init__(self) -> None:
        if self.weight < 0 or self.sources < 1 or self.window_seconds < 0:
            raise ValueError(f"neighbour weight and window must be >= 0 and sources >= 1, got {self!r}")


#: The parameters the journal ranks with.
NEIGHBOURS: Final = NeighbourParams()


def lift(
    ranked: Sequence[tuple[str, float]],
    linked: Mapping[str, Collection[str]],
    params: NeighbourParams = NEIGHBOURS,
    *,
    adjacent: Mapping[str, Collection[str]] | None = None,
    exclude: Collection[str] = (),
    times: Mapping[str, str] | None = None,
) -> list[tuple[str, float]]:
    """*ranked* (best-first ``(id, score)``) with each entry's score raised by ``weight`` times its best neighbour's.

    *linked* and *adjacent* map a source to its neighbours by continuity and
    by time. A linked neighbour not in *ranked* (and not in *exclude*) joins
    with its lift alone; an adjacent one only lifts an entry *ranked* holds.
    Ties keep the order of *ranked*, new entries after those it held, the
    newer first by *times* (``ts_utc`` by id), then by id: ids are random, so
    an order by id alone would differ between two journals of the same appends.
    """
    own = dict(ranked)
    best: dict[str, float] = {}
    adjacent = adjacent or {}
    for source, score in ranked[: params.sources]:
        links, beside = linked.get(source), adjacent.get(source)
        if score <= 0 or not (links or beside):  # most candidates have no neighbour
            continue
        near = [*(links or ()), *(other for other in beside or () if other in own)]
        for other in near:
            if other not in exclude and score > best.get(other, 0.0):
                best[other] = score
    if not best or params.weight == 0:
        return list(ranked)
    # The entries joining come after those ranked at an equal score, the newer first, then by id.
    joining = sorted(best.keys() - own.keys())
    stamps = times or {}
    joining.sort(key=lambda entry_id: stamps.get(entry_id, ""), reverse=True)  # a stable sort: equal times keep the id order
    lifted = [(entry_id, score + params.weight * best.get(entry_id, 0.0)) for entry_id, score in ranked]
    lifted += [(entry_id, params.weight * best[entry_id]) for entry_id in joining]
    # Stable, reverse included: equal scores keep the order just built, those ranked first in their order, then those joining.
    lifted.sort(key=itemgetter(1), reverse=True)
    return lifted


def with_neighbours(
    index: Index,
    ranked: Sequence[tuple[str, float]],
    window: Window,
    params: NeighbourParams = NEIGHBOURS,
    *,
    exclude: Collection[str] = (),
    places: Mapping[str, tuple[str, str]] | None = None,
) -> list[tuple[str, float]]:
    """:func:`lift` with the neighbours in *window* of the best ``sources`` candidates read from *index*.

    *places*: each candidate's agent and ``ts_utc``, when the ranking read them (:meth:`Index.ranked_placed`).
    """
    sources = [entry_id for entry_id, score in ranked[: params.sources] if score > 0]
    if not sources or params.weight == 0:
        return list(ranked)
    # Only a neighbour in time that is itself ranked is lifted: the others are not asked for.
    near = index.neighbours(
        sources, within_seconds=params.window_seconds, window=window, among={entry_id for entry_id, _ in ranked}, places=places
    )
    # The read of the neighbours brought their times: those joining the candidates are ordered by them.
    return lift(ranked, near.linked, params, adjacent=near.adjacent, exclude=exclude, times=near.times)
