"""Progress of slow work (loading a model, embedding entries), so that nothing slow is silent.

A step that takes *after* seconds or more (one by default) is reported; a
quicker one is not. ``GHOSTJOURNAL_PROGRESS_AFTER`` sets *after* for both
commands; ``0`` reports every step and every batch, whatever its speed,
which is what tests use instead of waiting for a slow machine.

:class:`ProgressGate` decides which ``(done, total)`` reports of an
embedding pass are shown; :class:`StderrProgress` shows them on stderr (a
bar on a terminal, plain lines otherwise: a log file or a pipe gets them
too); :func:`reporting_slow` announces a single step once it has lasted
*after* seconds, and its end. The runner turns the same decisions into log
events. Nothing here imports a third-party library.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Final

__all__ = ["PROGRESS_AFTER", "PROGRESS_ENVVAR", "ProgressGate", "StderrProgress", "about", "progress_after", "reporting_slow"]

#: Seconds a step may take before it is reported.
PROGRESS_AFTER: Final = 1.0
#: The environment variable that overrides :data:`PROGRESS_AFTER`.
PROGRESS_ENVVAR: Final = "GHOSTJOURNAL_PROGRESS_AFTER"
_BAR_WIDTH: Final = 30


def progress_after(environ: Mapping[str, str] = os.environ) -> float:
    """The seconds after which a step is reported: ``GHOSTJOURNAL_PROGRESS_AFTER``, else one.

    Raises:
        ValueError: the variable is not a number of seconds at least 0.
    """
    raw = environ.get(PROGRESS_ENVVAR, "").strip()
    if not raw:
        return PROGRESS_AFTER
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{PROGRESS_ENVVAR} must be a number of seconds, 0 or more, got {raw!r}")
    return seconds


class ProgressGate:
    """Which ``(done, total)`` reports of embedding passes to show.

    A pass begins with ``done == 0``. Nothing is shown until it has lasted
    *after* seconds; then a report at most every *after* seconds, and always
    its last (``done == total``). With *after* 0, every report is shown.
    Calling the gate returns the seconds since the pass began when the
    report is to be shown, else None.
    """

    def __init__(self, after: float = PROGRESS_AFTER, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.after = after
        self.clock = clock
        self._began: float | None = None
        self._shown: float | None = None

    def __call__(self, done: int, total: int) -> float | None:
        now = self.clock()
        if self._began is None or done == 0:
            self._began, self._shown = now, None
        elapsed = now - self._began
        if self._shown is None:
            if elapsed < self.after:
                return None
        elif done < total and now - self._shown < self.after:
            return None
        self._shown = now
        return elapsed


class StderrProgress:
    """An ``on_progress`` drawing embedding passes on *stream*: a bar on a terminal, else one plain line per report shown.

    With *note*, a pass that looks slow is first said in one line: at its
    first report of work done, the pace so far gives an estimate of the whole
    pass, and when that is *after* seconds or more, ``note(total, estimate)``
    is written once for that pass (a quick pass says nothing, as its progress
    says nothing).
    """

    def __init__(
        self,
        label: str,
        *,
        after: float = PROGRESS_AFTER,
        stream: IO[str] | None = None,
        note: Callable[[int, float], str] | None = None,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.gate = ProgressGate(after)
        self.note = note
        self._is_tty = self.stream.isatty()
        self._began = 0.0
        self._noted = True  # until a pass begins
        self._bar_open = False

    def __call__(self, done: int, total: int) -> None:
        if done == 0:
            self._began, self._noted = time.monotonic(), self.note is None
        elif not self._noted:
            self._noted = True
            estimate = (time.monotonic() - self._began) * total / done
            if self.note is not None and done < total and estimate >= self.gate.after:
                self._write(self.note(total, estimate) + "\n")
        seconds = self.gate(done, total)
        if seconds is None:
            return
        if self._is_tty:
            filled = _BAR_WIDTH * done // max(total, 1)
            end = "\n" if done >= total else ""
            self._write(f"\r{self.label} [{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] {done}/{total} {seconds:.0f}s{end}")
            self._bar_open = not end
        else:
            self._write(f"{self.label}: {done}/{total} ({seconds:.1f} s)\n")

    def _write(self, text: str) -> None:
        if self._bar_open and not text.startswith("\r"):
            text = "\n" + text  # a line of its own, never over the bar drawn so far
            self._bar_open = False
        self.stream.write(text)
        self.stream.flush()


def about(seconds: float) -> str:
    """A rough length of time, as an estimate is said: ``about 40 s``, ``about 3 min``, ``about 2 h``."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {round(seconds / 3600)} h"


@contextlib.contextmanager
def reporting_slow(after: float, on_start: Callable[[], None], on_done: Callable[[float], None]) -> Iterator[None]:
    """Around a step: call *on_start* once it has lasted *after* seconds (at once with 0), then *on_done* with its seconds.

    A step quicker than *after* reports nothing; one that raises reports no
    end. *on_start* runs on a timer thread, in a copy of the caller's context
    (so that bound log fields stay bound).
    """
    began = time.monotonic()
    lock = threading.Lock()
    state = {"started": False, "finished": False}

    def start() -> None:
        with lock:  # held while reporting, so that the end is never reported before the start
            if state["finished"]:
                return
            state["started"] = True
            on_start()

    timer: threading.Timer | None = None
    if after <= 0:
        start()
    else:
        timer = threading.Timer(after, contextvars.copy_context().run, args=(start,))
        timer.daemon = True
        timer.start()
    try:
        yield
    except BaseException:
        with lock:
            state["finished"] = True
        raise
    finally:
        if timer is not None:
            timer.cancel()
    with lock:
        state["finished"] = True
        started = state["started"]
    if started:
        on_done(time.monotonic() - began)
