"""A search's answer, one entry at a time: the hit, with why it was found and how well it matched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from journal.files.entry import Entry

__all__ = ["Hit"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved entry: why it was found, how well it matched, and a snippet.

    ``reason`` is ``match`` for a text match, and for :meth:`Journal.relate`
    also ``continues`` (the entry's own continuity ref), ``continued_by`` (an
    entry that refers to it), ``supersedes`` (an entry it corrects),
    ``superseded_by`` (an entry correcting it) or ``similar``.
    ``superseded_by`` lists the entries of the same agent that correct this
    one, newest first.
    """

    entry_id: str
    score: float
    snippet: str
    entry: Entry
    reason: str = "match"
    superseded_by: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready data, with where the entry's text came from; ``superseded_by`` only when a later entry corrects this one."""
        data = {
            "entry_id": self.entry_id,
            "score": round(self.score, 6),
            "reason": self.reason,
            "origin": self.entry.origin,
            "snippet": self.snippet,
            "entry": self.entry.to_dict(),
        }
        if self.superseded_by:
            data["superseded_by"] = list(self.superseded_by)
        return data
