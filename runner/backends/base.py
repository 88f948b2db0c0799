"""What every backend receives and must return.

A backend turns a :class:`ReflectionRequest` (the routine's instructions, the
agent's persona and the journal's prompt-context block) into the fields of
one entry. The runner, not the backend, sets kind, agent, ts, client_key and
meta, and validates the whole entry before appending it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from runner.errors import BackendError
from runner.persona import Persona

__all__ = ["REPLY_FIELDS", "REQUIRED_REPLY_FIELDS", "Backend", "ReflectionRequest", "check_reply", "context_records", "parse_reply_text"]

#: The fields a backend may return, with what each holds (shown to models too).
REPLY_FIELDS: Final = {
    "voice": "required: the reflection itself, first person prose",
    "theme": "required: a short theme label (under 200 characters)",
    "tags": "optional: a list of short unique strings",
    "mood": "optional: one short word or phrase",
    "signals": "optional: {focus: short label, novelty: number 0..1, continuity_refs: [ids of past entries from the context that this builds on]}",
    "anchors": "optional: a list of {type, ref, label?} external references",
}
REQUIRED_REPLY_FIELDS: Final = ("voice", "theme")


@dataclass(frozen=True, slots=True)
class ReflectionRequest:
    """Everything a backend may use to write one entry."""

    agent: str
    routine: str
    kind: str
    slot: str
    client_key: str
    scheduled: str
    question: str
    instructions: str
    context: str
    persona: Persona | None

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready data (what the command backend reads on stdin)."""
        return {
            "agent": self.agent,
            "routine": self.routine,
            "kind": self.kind,
            "slot": self.slot,
            "client_key": self.client_key,
            "scheduled": self.scheduled,
            "question": self.question,
            "instructions": self.instructions,
            "persona": self.persona.to_dict() if self.persona else None,
            "context": self.context,
            "reply_fields": dict(REPLY_FIELDS),
        }


class Backend(Protocol):
    """Produces the fields of one entry for a request."""

    name: str

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        """Return the entry fields (at least voice and theme).

        Raises:
            BackendError: the backend failed or replied with something unusable.
        """
        ...


def check_reply(reply: object, backend: str) -> dict[str, Any]:
    """Check a reply's shape: a JSON object with voice and theme and only known fields.

    The full entry rules are checked later by the journal's validator.

    Raises:
        BackendError: naming the missing or unexpected field.
    """
    if not isinstance(reply, Mapping):
        raise BackendError(backend, f"the reply must be a JSON object with {', '.join(REPLY_FIELDS)}; got {type(reply).__name__}")
    for key in reply:
        if key not in REPLY_FIELDS:
            raise BackendError(backend, f"the reply has an unexpected field {key!r}; allowed: {', '.join(REPLY_FIELDS)}")
    for key in REQUIRED_REPLY_FIELDS:
        value = reply.get(key)
        if not isinstance(value, str) or not value.strip():
            raise BackendError(backend, f"the reply lacks the field {key!r} (a non-empty string)")
    return dict(reply)


def parse_reply_text(text: str, backend: str) -> dict[str, Any]:
    """Parse a reply's JSON text (a Markdown code fence around it is tolerated) and check it.

    Raises:
        BackendError: not JSON, or not a usable reply.
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        reply = json.loads(body)
    except ValueError as exc:
        shown = text.strip()[:80]
        raise BackendError(backend, f"the reply is not valid JSON ({exc}); it began {shown!r}") from None
    return check_reply(reply, backend)


def context_records(context: str) -> list[dict[str, Any]]:
    """The entry records of a prompt-context block (one JSON object per line), oldest first."""
    records = []
    for line in context.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str) and isinstance(record.get("theme"), str):
            records.append(record)
    return records
