"""Processes and signals: the ground floor the backends, a run and serve's workers stand on.

Everything here reads Linux's ``/proc`` or sets signal handlers, and knows nothing of runs,
agents or journals: finding and killing what a program left behind (its session, its process
group, whatever carries a marker variable or holds one of its pipes), also once the process
that started it died (:class:`Reaper`, in ``_reaper``), naming a signal, a process's age, and
holding SIGTERM and SIGINT across a block that must not be cut in two.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from journal.frame import STOP_SIGNALS, hold_stops, release_stops
from runner.processes._reaper import Reaper, kill_marked, pipe_inode

__all__ = [
    "DEFERRED_SIGNALS",
    "WORKER_MARKER_VARIABLE",
    "Reaper",
    "kill_marked",
    "pipe_inode",
    "process_age",
    "signal_name",
    "signals_deferred",
]

#: Set by ``serve`` in a worker's environment to its run_id: the worker's helpers inherit it, so that
#: serve can end them itself after SIGKILLing a stuck worker (which then cleans up nothing).
WORKER_MARKER_VARIABLE: Final = "GHOSTRUNNER_WORKER_RUN"
#: The signals :func:`signals_deferred` holds.
DEFERRED_SIGNALS: Final = STOP_SIGNALS


def signal_name(number: int) -> str:
    """The name of signal *number*: SIGKILL, SIGRTMIN+6 (real-time signals have no name of their own), or the number."""
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal other than SIGRTMIN/SIGRTMAX is valid but no enum member
        if signal.SIGRTMIN < number < signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return str(number)


def process_age() -> float:
    """Seconds since this process started (Linux; 0.0 where that cannot be read).

    ``serve`` starts its clock on a worker when it spawns the process, so a
    worker measures ``run_timeout`` from its own start, not from when Python
    got round to the run.
    """
    try:
        with open("/proc/self/stat", "rb") as stat_file:
            stat = stat_file.read()
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, starttime: clock ticks after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return min(max(age, 0.0), 3600.0)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGTERM and SIGINT for the block, then hand the first one to its handler.

    The handler of ``ghostrunner run`` raises SystemExit wherever the main
    thread happens to be. Inside an append that can be after the entry file
    got its name and before the run recorded the outcome, so the run would be
    logged as failed with no entry while the entry is there. The block is
    short (one journal call and two assignments), bounded by the journal's
    lock timeout. Only the main thread can set handlers; elsewhere (a
    simulation worker thread) signals do not reach the run anyway.
    """
    held = hold_stops()
    try:
        yield
    finally:
        release_stops(held)
