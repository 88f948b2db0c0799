"""A few days of runs as log lines, for the tests that read runs back (``status``, ``history``, ``report``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FLEET", "NOW", "finished_line", "log_line", "run_log"]

FLEET = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening"]

[agents.batou]
persona = "motoko.toml"
routines = ["evening"]
"""


NOW = "2026-09-03T23:00:00+00:00"
def run_log() -> list[str]:
    """Three days of evenings and one day of pulses: one slot of every state, and a journald record around one line."""
    return [
        log_line("scheduler.started", "2026-09-01T00:00:00Z", agents=["motoko", "batou"]),
        finished_line("motoko", "evening", "2026-09-01", "2026-09-01T21:00:00+00:00", "appended", "2026-09-01T21:00:03Z"),
        finished_line("motoko", "evening", "2026-09-02", "2026-09-02T21:00:00+00:00", "failed", "2026-09-02T21:00:09Z",
                  error="openai backend: HTTP 503 from the model server", attempts=3, duration_ms=9000.0),
        finished_line("motoko", "evening", "2026-09-02", "2026-09-02T21:00:00+00:00", "appended", "2026-09-02T21:06:00Z"),
        finished_line("motoko", "evening", "2026-09-03", "2026-09-03T21:00:00+00:00", "failed", "2026-09-03T21:00:05Z",
                  error="openai backend: HTTP 500", attempts=2),
        finished_line("batou", "evening", "2026-09-01", "2026-09-01T21:00:00+00:00", "appended", "2026-09-02T03:00:00Z"),  # six hours late
        finished_line("batou", "evening", "2026-09-02", "2026-09-02T21:00:00+00:00", "skipped", "2026-09-02T21:00:01Z", reason="paused"),
        log_line("scheduler.missed", "2026-09-03T22:00:00Z", agent="batou", routine="evening", slot="2026-09-03",
              scheduled="2026-09-03T21:00:00+00:00", reason="downtime"),
        finished_line("motoko", "pulse-4h", "2026-09-03T00", "2026-09-03T00:00:00+00:00", "appended", "2026-09-03T00:00:02Z"),
        finished_line("motoko", "pulse-4h", "2026-09-03T04", "2026-09-03T04:00:00+00:00", "duplicate", "2026-09-03T04:00:02Z"),
        finished_line("motoko", "pulse-4h", "2026-09-03T08", "2026-09-03T08:00:00+00:00", "busy", "2026-09-03T08:00:06Z", reason="slot_locked"),
        # 12:00 has no line at all: absent
        json.dumps({"MESSAGE": finished_line("motoko", "pulse-4h", "2026-09-03T16", "2026-09-03T16:00:00+00:00", "appended", "2026-09-03T16:00:02Z"),
                    "_SYSTEMD_UNIT": "ghostrunner.service"}),
        finished_line("motoko", "pulse-4h", "2026-09-03T20", "2026-09-03T20:00:00+00:00", "appended", "2026-09-03T20:00:02Z"),
        "not json at all",
    ]


def log_line(event: str, timestamp: str, **fields: Any) -> str:
    return json.dumps({"event": event, "level": "info", "timestamp": timestamp, **fields})


def finished_line(agent: str, routine: str, slot: str, scheduled: str, outcome: str, finished: str, **fields: Any) -> str:
    return log_line("run.finished", finished, run_id=f"run-{agent}-{slot}-{finished[11:19]}", agent=agent, routine=routine, slot=slot,
                 client_key=f"{agent}:{routine}:{slot}", scheduled=scheduled, outcome=outcome, dry_run=False, duration_ms=fields.pop("duration_ms", 1200.0),
                 entry_id=fields.pop("entry_id", None if outcome in {"failed", "busy", "skipped"} else f"entry-{slot}"), error=fields.pop("error", None),
                 **fields)
