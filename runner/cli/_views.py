"""What ``ghostrunner run`` and ``simulate`` show on a terminal, made from the document their JSON output prints.

Piped (as ``serve`` reads a worker's result), or with ``--json``, they print
that document as JSON, unchanged; these views are for a person, built with
journal.cli.render so that text from a backend cannot act on the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from journal.cli.render import labelled, table
from journal.terminal import printable

__all__ = ["show_run", "show_simulation"]


def show_run(result: Mapping[str, Any], width: int) -> str:
    """One run: its outcome, slot and entry, the error of a failed run, and a dry run's would-be entry."""
    lines = [labelled([
        ("outcome", result["outcome"] + (" (dry run)" if "entry" in result else "")), ("agent", result["agent"]),
        ("routine", result["routine"]), ("slot", result["slot"]), ("scheduled", result["scheduled"]),
        ("entry_id", result.get("entry_id")), ("duration", f"{result['duration_ms']:.0f} ms"), ("error", result.get("error")),
        ("fault", result.get("fault")),
    ])]
    entry = result.get("entry")
    if isinstance(entry, Mapping):
        lines.append(labelled([("theme", entry.get("theme")), ("tags", list(entry.get("tags") or []) or None), ("mood", entry.get("mood"))]))
        lines += ["", *("  " + printable(line) for line in str(entry.get("voice", "")).splitlines())]
    return "\n".join(lines)


def show_simulation(document: Mapping[str, Any], width: int) -> str:
    """A simulation: one row per agent with its outcome counts, then the first failures."""
    outcomes = sorted({outcome for agent in document["agents"] for outcome in agent["outcomes"]})
    rows = [(agent["agent"], agent["runs"], *(agent["outcomes"].get(outcome, 0) for outcome in outcomes), f"{agent['seconds']:.1f} s")
            for agent in document["agents"]]
    lines = [f"simulated {document['start']} to {document['end']}: {document['runs']} runs", "",
             table(["agent", "runs", *outcomes, "time"], rows)]
    failures = [failure for agent in document["agents"] for failure in agent.get("failures", [])]
    if failures:
        lines += ["", "failures:", *(f"  {printable(failure)}" for failure in failures)]
    faults = [f"  {agent['agent']}: {agent['fault']}" for agent in document["agents"] if agent.get("fault")]
    if faults:
        lines += ["", "stopped: the filesystem refused the journal", *faults]
    return "\n".join(lines)
