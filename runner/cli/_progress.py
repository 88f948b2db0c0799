"""A simulation's progress on a terminal: one line on stderr, redrawn in place, never written to a pipe or a file."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO, Final

__all__ = ["TerminalProgress"]

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
