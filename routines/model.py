"""The Routine record: what a reflective routine is, as configuration.

A routine is data, not code: its name, the entry kind it writes, its cron
schedule, how a scheduled time becomes a slot, the question it asks the
journal for context, how far back it looks, and the prompt it gives the
backend. Adding a routine is a configuration change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Final

__all__ = ["ROUTINE_FIELDS", "SLOT_GRANULARITIES", "Routine"]

#: Slot granularities a routine may use, finest first. See ``runner.cron.slots``.
SLOT_GRANULARITIES: Final = ("minute", "hour", "day", "week", "month")

#: The configurable fields of a routine, as they appear in TOML.
ROUTINE_FIELDS: Final = ("kind", "schedule", "slot", "question", "window", "prompt", "context_k", "context_chars")


@dataclass(frozen=True, slots=True)
class Routine:
    """One configured reflective routine.

    Attributes:
        name: the routine's name, part of every client_key (``agent:name:slot``).
        kind: the entry kind it appends (``pulse``, ``evening``, ``note``, ``digest``).
            A ``digest`` routine appends the journal's computed digest of its
            window instead of asking the backend.
        schedule: a five-field cron expression, read in the runner's timezone.
        slot: the granularity that turns a scheduled time into a slot.
        question: the query given to ``Journal.prompt_context``.
        window: how far before the scheduled time the context (or digest) reaches.
        prompt: the instructions given to the backend.
        context_k: how many past entries the context holds at most.
        context_chars: the context block's size limit in characters.
    """

    name: str
    kind: str
    schedule: str
    slot: str
    question: str
    window: timedelta
    prompt: str
    context_k: int = 6
    context_chars: int = 4000

    @property
    def is_digest(self) -> bool:
        """Whether this routine appends a computed digest rather than asking a backend."""
        return self.kind == "digest"

    def with_overrides(self, **changes: Any) -> Routine:
        """A copy with some fields replaced (used for configuration overrides)."""
        return replace(self, **changes)
