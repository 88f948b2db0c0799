"""Text a reply quotes from outside, kept apart from the agent's own words.

A backend's reply may carry ``quoted``: words it took from a web page, a
message or a document, given as they were. They are stored as an entry of
their own, a ``note`` of origin ``untrusted`` (which a prompt context leaves
out unless asked), under the slot's key with ``:quoted`` appended, and the
agent's entry continues it. The agent's reflection keeps its origin
``agent``, so what it concluded stays in its later prompts while the text
that could carry instructions does not. ``quoted_from_outside: true`` instead
marks the whole entry untrusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["QUOTED_KEY_SUFFIX", "RUN_MARKS", "continuing", "quoted_payload"]

#: The reply's fields that are the run's marks, not an entry's fields.
RUN_MARKS: Final = frozenset({"quoted_from_outside", "quoted", "proposals"})
#: Appended to the slot's client key for the entry of the quoted text.
QUOTED_KEY_SUFFIX: Final = ":quoted"


def quoted_payload(fields: Mapping[str, Any], agent: str, ts: str, key: str) -> dict[str, Any]:
    """The entry of the reply's ``quoted`` text (without ``meta``, which the run adds): a note on the reply's theme, at the slot's time.

    Always a ``note``: the quote is no reflection of the routine's kind.
    """
    return {
        "kind": "note",
        "agent": agent,
        "ts": ts,
        "theme": fields["theme"],
        "voice": fields["quoted"],
        "client_key": key + QUOTED_KEY_SUFFIX,
    }


def continuing(payload: Mapping[str, Any], source_id: str) -> dict[str, Any]:
    """*payload* with *source_id* first among the entries it continues."""
    signals = dict(payload.get("signals") or {})
    refs = [ref for ref in signals.get("continuity_refs", []) if ref != source_id]
    signals["continuity_refs"] = [source_id, *refs]
    return {**payload, "signals": signals}
