"""The built-in routines: pulse-4h, evening and digest.

Each can be overridden field by field in the configuration, and new routines
are added there too; nothing in the runner names these three.
"""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType
from typing import Final

from routines.model import Routine

__all__ = ["BUILTIN_ROUTINES", "DIGEST", "EVENING", "PULSE_4H"]

PULSE_4H: Final = Routine(
    name="pulse-4h",
    kind="pulse",
    schedule="0 */4 * * *",
    slot="hour",
    question="what have I been paying attention to in the last hours?",
    window=timedelta(days=2),
    prompt=(
        "Write a short pulse: two or three sentences on what has your attention right now. "
        "If a past entry in the context is still alive for you, build on it and cite its id "
        "in signals.continuity_refs."
    ),
    context_k=6,
    context_chars=3000,
)

EVENING: Final = Routine(
    name="evening",
    kind="evening",
    schedule="0 21 * * *",
    slot="day",
    question="what mattered today, and what keeps returning?",
    window=timedelta(days=7),
    prompt=(
        "Write the evening reflection: what the day held, what keeps returning from earlier "
        "entries, and one intention for tomorrow. Cite the ids of past entries you build on "
        "in signals.continuity_refs."
    ),
    context_k=8,
    context_chars=5000,
)

DIGEST: Final = Routine(
    name="digest",
    kind="digest",
    schedule="0 22 * * 0",
    slot="week",
    question="what themes recurred this week?",
    window=timedelta(days=7),
    prompt="Summarize the week's entries.",
    context_k=8,
    context_chars=5000,
)

#: Built-in routines by name (read-only).
BUILTIN_ROUTINES: Final = MappingProxyType({r.name: r for r in (PULSE_4H, EVENING, DIGEST)})
