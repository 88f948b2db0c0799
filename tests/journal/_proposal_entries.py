"""Entries of a supersede proposal: an older studio entry, its update in other words, a second update, and an entry on something else."""

from __future__ import annotations

from journal import Journal
from journal.files.entry import Entry

OLD = "Signed another year on the Shibuya studio, third floor above the ramen shop; the skylight leaks when it storms."
NEW = "Moved the studio out of Shibuya: it is now a converted boat garage in Kamakura, two streets back from the beach."
AGAIN = (
    "The studio moved again: the Kamakura boat garage flooded in the typhoon, worse than the Shibuya skylight ever leaked;"
    " now I rent a room above the fish market in Zushi."
)
OTHER = "The ferry was late again and the harbor smelled of diesel; I counted gulls on the breakwater."


def add(
    journal: Journal,
    voice: str,
    ts: str,
    *,
    agent: str = "motoko",
    theme: str = "studio",
    tags: tuple[str, ...] = ("studio",),
    **extra: object,
) -> Entry:
    return journal.append({"kind": "note", "agent": agent, "theme": theme, "voice": voice, "tags": list(tags), "ts": ts, **extra})
