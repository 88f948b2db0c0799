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


def conversation(turns: int, *, agent: str = "motoko", studio_at: tuple[int, ...] = ()) -> list[dict[str, object]]:
    """*turns* turns of two speakers taking turns, in order of time, each tagged with its speaker: every turn of a speaker
    is alike the ones before (the speaker's name and two harbour words) and says something new (four words of its own).

    The turns at *studio_at* are the studio entries (OLD, NEW, AGAIN in turn), tagged ``studio`` as well as with their speaker.
    """
    studio = iter((OLD, NEW, AGAIN))
    payloads: list[dict[str, object]] = []
    for n in range(turns):
        speaker = ("mika", "jun")[n % 2]
        voice = next(studio) if n in studio_at else f"{speaker} said the harbour ferry " + " ".join(f"t{n}w{k}" for k in range(4))
        payloads.append({
            "id": f"{agent}-{n:03d}", "kind": "note", "agent": agent, "theme": "harbour talk", "voice": voice,
            "tags": [speaker, "studio"] if n in studio_at else [speaker], "ts": f"2026-03-01T10:{n // 60:02d}:{n % 60:02d}Z",
        })
    return payloads
