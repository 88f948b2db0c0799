"""Deciding a supersede proposal: the entry that accepts or rejects it, appended through the ordinary append path.

A decision is an ordinary entry of the proposal's agent, so it is kept in the
files and survives ``reindex`` like any other: its ``meta.proposal`` names the
pair and the decision (the index reads it back, see
:func:`journal.indexing._proposals.decision_of`). Accepting appends a
correction: the newer entry's text, theme, tags and focus, with
``signals.supersedes`` naming the older entry and ``continuity_refs`` the
newer one, so every read that follows corrections puts it above the older
entry. Rejecting appends a short note saying both stand; the pair is never
proposed again. Both use one client key derived from the pair, so a retry
returns the stored decision and a pair is decided once, whichever way a race
between two deciders goes.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from journal.errors import ProposalDecidedError
from journal.files.entry import Entry
from journal.indexing import decision_of

__all__ = ["decided", "decision_key", "decision_payload"]

_KEY_PREFIX: Final = "proposal-"


def decision_key(older: str, newer: str) -> str:
    """The client key of the entry deciding the proposal that *newer* updates *older*: one per pair, whichever the decision."""
    return _KEY_PREFIX + hashlib.sha256(f"{older}\0{newer}".encode()).hexdigest()[:32]


def decision_payload(decision: str, older: Entry, newer: Entry, origin: str) -> dict[str, Any]:
    """The entry recording *decision* (``accepted`` or ``rejected``) on the proposal that *newer* updates *older*."""
    meta = {"origin": origin, "proposal": {"decision": decision, "older": older.id, "newer": newer.id}}
    common = {"kind": "note", "agent": older.agent, "client_key": decision_key(older.id, newer.id), "meta": meta}
    if decision == "rejected":
        voice = f"Kept entry {older.id} ({older.ts}) as it stands: entry {newer.id} ({newer.ts}) does not update it."
        return {**common, "theme": older.theme, "voice": voice}
    signals: dict[str, Any] = {"supersedes": [older.id], "continuity_refs": [newer.id]}
    focus = (newer.signals or {}).get("focus")
    if isinstance(focus, str):
        signals["focus"] = focus
    payload = {**common, "theme": newer.theme, "tags": list(newer.tags), "voice": newer.voice, "signals": signals}
    if newer.mood is not None:
        payload["mood"] = newer.mood
    return payload


def decided(entry: Entry, decision: str, older: str, newer: str) -> Entry:
    """*entry*, the one holding the pair's decision key, when it records *decision* on that pair.

    Raises:
        ProposalDecidedError: it records the other decision (or, written by hand, none of this pair).
    """
    said = decision_of(entry)
    if said != (decision, older, newer):
        raise ProposalDecidedError(older, newer, said[0] if said is not None else "decided", entry.id)
    return entry
