"""Corrections: what an entry's ``signals.supersedes`` means to the reads.

An entry is never changed or deleted; a later entry of the same agent can
say it corrects earlier ones. Reads then show the correction first: a ranked
list puts every superseded entry right after the entry that superseded it,
bringing that entry in when the ranking did not find it (an agent asking
about a fact must see its current version). ``current_only`` leaves
superseded entries out; ``as_of`` answers from the journal as it stood at a
time, so only supersessions declared by then count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from journal.ranking.hit import Hit

__all__ = ["order_corrections"]


def order_corrections(
    hits: Sequence[Hit],
    superseders: Callable[[Sequence[str]], Mapping[str, Sequence[str]]],
    bring: Callable[[str, Hit], Hit | None],
) -> list[Hit]:
    """*hits* with each superseded entry moved right after its superseders, which are brought in if missing.

    *superseders* maps ids to the ids superseding them (newest first);
    *bring* makes the hit of a missing superseder, given the hit it corrects,
    or None when it is out of the read's scope. Hits carry ``superseded_by``. Chains are followed; a cycle, which only
    hand-placed files can make, is cut where it closes.
    """
    present: dict[str, Hit] = {hit.entry_id: hit for hit in hits}
    known: dict[str, Sequence[str]] = dict(superseders(list(present)))
    ordered: list[Hit] = []
    placed: set[str] = set()

    def place(hit: Hit, path: frozenset[str]) -> None:
        if hit.entry_id in placed or hit.entry_id in path:
            return
        above = known.get(hit.entry_id, ())
        for newer_id in above:
            newer = present.get(newer_id)
            if newer is None:
                newer = bring(newer_id, hit)
                if newer is None:
                    continue
                present[newer_id] = newer
                known.update(superseders([newer_id]))
            place(newer, path | {hit.entry_id})
        placed.add(hit.entry_id)
        ordered.append(dataclasses.replace(hit, superseded_by=tuple(above)) if above else hit)

    for hit in hits:
        place(hit, frozenset())
    return ordered
