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
    one, newest first. ``outdated`` is the mark of an entry a later entry of
    its agent may update (a pending supersede proposal), "possibly outdated by
    <short id> (<date>)", and ``outdated_by`` lists those later entries, newest first.
    """

    entry_id: str
    score: float
    snippet: str
    entry: Entry
    reason: str = "match"
    superseded_by: tuple[str, ...] = ()
    outdated: str = ""
    outdated_by: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready data, with where the entry's text came from; ``superseded_by`` only when a later entry corrects this one,
        ``possibly_outdated`` and ``possibly_outdated_by`` only when a later one may update it."""
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
        if self.outdated:
            data["possibly_outdated"] = self.outdated
            data["possibly_outdated_by"] = list(self.outdated_by)
        return data
