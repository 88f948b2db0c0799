"""The digest routine's hooks: compute the digest of a window, and turn it into the fields of a digest entry.

A digest summarises the window's entries that are not digests themselves:
the previous week's digest lies exactly on the window's inclusive start, and
counting it would make every digest partly a digest of digests.

The voice is a plain-language summary of the digest; the digest itself is
kept whole in ``meta.digest`` so the entry can be read by machines too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from journal import Digest, Journal

__all__ = ["DIGEST_KINDS", "digest_entry_fields", "digest_window"]

#: Entry kinds a digest never summarises: its own kind.
DIGEST_KINDS: Final = ("digest",)


def digest_window(journal: Journal, *, agent: str, since: datetime, until: datetime) -> Digest:
    """The digest of *agent*'s entries in ``[since, until)``, digest entries left out."""
    return journal.digest(agent=agent, since=since, until=until, exclude_kinds=DIGEST_KINDS)


def _names(items: list[dict[str, Any]], label: str, n: int) -> list[str]:
    return [f"{item[label]} ({item['count']})" for item in items[:n]]


def digest_entry_fields(digest: Digest, *, slot: str) -> dict[str, Any]:
    """The voice, theme, tags, signals and meta of a digest entry summarizing *digest*.

    Args:
        digest: the computed digest of the routine's window (``count`` > 0).
        slot: the routine's slot, named in the voice (e.g. ``2026-W36``).

    Returns:
        Entry fields (without kind, agent, ts, client_key) ready to append.
    """
    themes = digest.themes
    recurring = [t for t in themes if t["count"] > 1]
    parts = [f"Digest of {slot}: {digest.count} entries ({', '.join(f'{n} {k}' for k, n in digest.kinds.items())})."]
    if recurring:
        parts.append("Recurring themes: " + ", ".join(_names(recurring, "theme", 5)) + ".")
    elif themes:
        parts.append("Themes: " + ", ".join(_names(themes, "theme", 5)) + "; none recurred.")
    if digest.focus:
        parts.append("Focus kept returning to " + ", ".join(_names(digest.focus, "focus", 3)) + ".")
    if digest.moods:
        parts.append("Moods: " + ", ".join(_names(digest.moods, "mood", 3)) + ".")
    novelty = digest.novelty
    if novelty.get("mean") is not None:
        trend = novelty.get("trend") or "steady"
        parts.append(f"Novelty averaged {novelty['mean']:.2f} and was {trend}.")
    continuity = digest.continuity
    chains = continuity.get("longest_chains") or []
    if continuity.get("links"):
        longest = max((len(chain) for chain in chains), default=0)
        parts.append(f"{continuity['links']} continuity links; the longest chain runs {longest} entries.")
    top_theme = themes[0]["theme"] if themes else "the week"
    most_referenced = [item["entry_id"] for item in continuity.get("most_referenced", [])[:3]]
    signals: dict[str, Any] = {"focus": top_theme}
    if novelty.get("mean") is not None:
        signals["novelty"] = float(novelty["mean"])
    if most_referenced:
        signals["continuity_refs"] = most_referenced
    tags = ["digest", *[t["tag"] for t in digest.tags[:4] if t["tag"] != "digest"]]
    return {
        "voice": " ".join(parts),
        "theme": f"digest: {top_theme}"[:200],
        "tags": list(dict.fromkeys(tags)),
        "signals": signals,
        "meta": {"digest": digest.to_dict()},
    }
