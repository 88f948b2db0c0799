"""What ``ghostrunner run`` and ``simulate`` show on a terminal: results made from the document their JSON output prints, and progress;
and how ``status`` and ``history`` name what they read.

Piped (as ``serve`` reads a worker's result), or with ``--json``, they print
that document as JSON, unchanged; these views are for a person, built with
journal.frame.render so that text from a backend cannot act on the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import IO, Any, Final

from journal.frame import counted, labelled, printable, table

__all__ = ["TerminalProgress", "input_line", "reach_back_hint", "show_run", "show_simulation"]


def input_line(counts: Mapping[str, Any], *, from_fleet: bool) -> str:
    """What status or history read, in the words of its source: the log's lines, or the fleet's runs record (whose every record is a
    run: it has no foreign lines)."""
    span = f"; from {counts['first']} to {counts['last']}" if counts.get("first") else ""
    runs = counted(counts["runs"], "run")
    if from_fleet:
        return f"input: the fleet's runs record, {runs}, {counted(counts['malformed'], 'malformed record')}{span}"
    return (
        f"input: {counted(counts['lines'], 'log line')}, {counted(counts['events'], 'runner event')} ({runs}), "
        f"{counts['malformed']} malformed, {counts['foreign']} foreign{span}"
    )


def reach_back_hint(*, from_fleet: bool) -> str:
    """How to let status judge a slot older than what it read."""
    if from_fleet:
        return "the runs record keeps fleet.keep_runs of runs; a slot older than that cannot be judged"
    return "read further back: journalctl --since, or an older log file"


def show_run(result: Mapping[str, Any], width: int) -> str:
    """One run: its outcome, slot and entry, the error of a failed run, and a dry run's would-be entry."""
    lines = [
        labelled(
            [
                ("outcome", result["outcome"] + (" (dry run)" if "entry" in result else "")),
                ("reason", result.get("reason")),
                ("agent", result["agent"]),
                ("routine", result["routine"]),
                ("slot", result["slot"]),
                ("scheduled", result["scheduled"]),
                ("entry_id", result.get("entry_id")),
                ("duration", f"{result['duration_ms']:.0f} ms"),
                ("error", result.get("error")),
                ("fault", result.get("fault")),
            ]
        )
    ]
    entry = result.get("entry")
    if isinstance(entry, Mapping):
        lines.append(
            labelled([("theme", entry.get("theme")), ("tags", list(entry.get("tags") or []) or None), ("mood", entry.get("mood"))])
        )
        lines += ["", *("  " + printable(line) for line in str(entry.get("voice", "")).splitlines())]
    return "\n".join(lines)


def show_simulation(document: Mapping[str, Any], width: int) -> str:
    """A simulation: one row per agent with its outcome counts, then the first failures."""
    outcomes = sorted({outcome for agent in document["agents"] for outcome in agent["outcomes"]})
    rows = [
        (agent["agent"], agent["runs"], *(agent["outcomes"].get(outcome, 0) for outcome in outcomes), f"{agent['seconds']:.1f} s")
        for agent in document["agents"]
    ]
    lines = [
        f"simulated {document['start']} to {document['end']}: {document['runs']} runs",
        "",
        table(["agent", "runs", *outcomes, "time"], rows),
    ]
    failures = [failure for agent in document["agents"] for failure in agent.get("failures", [])]
    if failures:
        lines += ["", "failures:", *(f"  {printable(failure)}" for failure in failures)]
    faults = [f"  {agent['agent']}: {agent['fault']}" for agent in document["agents"] if agent.get("fault")]
    if faults:
        lines += ["", "stopped: the filesystem refused the journal", *faults]
    return "\n".join(lines)


#: Seconds between redraws: often enough to look alive, rarely enough to cost nothing next to the runs.
_EVERY: Final = 0.1


class TerminalProgress:
    """The ``on_progress`` of a simulation, drawing ``simulate: motoko 120/812 runs (14%)`` on *stream* when it is a terminal.

    On anything else (a pipe, a file, a journal's socket) it writes nothing,
    so logs and captured output hold no carriage returns. :meth:`close` ends
    the line once something was drawn.
    """

    def __init__(self, stream: IO[str], *, label: str = "simulate", clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.label = label
        self.clock = clock
        self.is_active = _is_terminal(stream)
        self._drawn_at: float | None = None

    def __call__(self, agent: str, done: int, total: int) -> None:
        if not self.is_active:
            return
        now = self.clock()
        if done < total and self._drawn_at is not None and now - self._drawn_at < _EVERY:
            return
        self._drawn_at = now
        what = f"{agent} {done}/{total} runs" if agent else f"{done}/{total} agents done"
        percent = f" ({done * 100 // total}%)" if total else ""
        try:
            self.stream.write(f"\r\x1b[K{self.label}: {what}{percent}")
            self.stream.flush()
        except OSError:
            self.is_active = False  # the terminal went away; the simulation goes on

    def close(self) -> None:
        """End the progress line (its last state stays on screen), so that what follows starts on a line of its own."""
        if self.is_active and self._drawn_at is not None:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except OSError:
                pass
        self._drawn_at = None


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed stream
        return False
