"""The event table of docs/monitoring.md as tests read it: each event's documented fields, and those every line has."""

from __future__ import annotations

import re

from tests._docs import page_text

__all__ = ["ALWAYS", "SIMULATED", "documented_events"]

ALWAYS = {"event", "level", "timestamp"}
#: The field every line of a simulation has besides (docs/monitoring.md says so above the table).
SIMULATED = "simulated"


def documented_events() -> dict[str, set[str]]:
    """Event name -> documented fields, from the event table of docs/monitoring.md."""
    section = page_text("docs/monitoring.md")
    rows = re.findall(r"^\| `([a-z_]+\.[a-z_.]+)` \| [^|]+ \| (.+) \|$", section, flags=re.MULTILINE)
    return {event: set(re.findall(r"`([a-z_]+)`", fields)) for event, fields in rows}
