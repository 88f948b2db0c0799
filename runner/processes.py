"""Processes and signals: the ground floor the backends, a run and serve's workers stand on.

Everything here reads Linux's ``/proc`` or sets signal handlers, and knows nothing of runs,
agents or journals: finding and killing what a program left behind (its session, its process
group, whatever carries a marker variable or holds one of its pipes), naming a signal, a
process's age, and holding SIGTERM and SIGINT across a block that must not be cut in two.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from journal.frame import STOP_SIGNALS, hold_stops, release_stops

__all__ = ["DEFERRED_SIGNALS", "WORKER_MARKER_VARIABLE", "kill_marked", "pipe_inode", "process_age", "signal_name", "signals_deferred"]

#: Set by ``serve`` in a worker's environment to its run_id: the worker's helpers inherit it, so that
#: serve can end them itself after SIGKILLing a stuck worker (which then cleans up nothing).
WORKER_MARKER_VARIABLE: Final = "GHOSTRUNNER_WORKER_RUN"
#: The signals :func:`signals_deferred` holds.
DEFERRED_SIGNALS: Final = STOP_SIGNALS


def pipe_inode(fd: int) -> int | None:
    """The inode of the pipe (or file) open on *fd*, or None once it is closed."""
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


def _holds_pipe(pid: int, links: set[str]) -> bool:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{name}") in links:
                return True
    return False


def _is_gone(pid: int) -> bool:
    """Whether *pid* has died (a zombie waiting for its parent has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :][:1] in (b"Z", b"X")


def _leftovers(session: int, marker: bytes, pipes: set[int]) -> list[int]:
    """Live processes (Linux /proc) in *session* or its group, carrying *marker*, or holding one of the *pipes*."""
    me = os.getpid()
    links = {f"pipe:[{inode}]" for inode in pipes}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat_file:
                stat = stat_file.read()
            # The fields after the command's closing parenthesis: state, ppid, pgrp, session, ...
            state, _ppid, pgrp, sid = stat[stat.rindex(b")") + 2 :].split()[:4]
            if state in (b"Z", b"X"):
                continue
            if int(pgrp) == session or int(sid) == session:
                found.append(pid)
                continue
            with open(f"/proc/{pid}/environ", "rb") as environ_file:
                if marker in environ_file.read().split(b"\0"):
                    found.append(pid)
                    continue
        except (OSError, ValueError):
            continue
        if links and _holds_pipe(pid, links):
            found.append(pid)
    return found


def kill_marked(session: int, marker: bytes, pipes: set[int] | None = None) -> None:
    """SIGKILL every live process in *session* or its group, carrying *marker* (``NAME=value``), or holding one of *pipes*.

    Waits (bounded, 2 s) until they are dead, so that nothing outlives the caller's cleanup.
    """
    killed: set[int] = set()
    for _ in range(8):  # a process may fork while the table is read; read it again until nothing is left
        leftovers = [pid for pid in _leftovers(session, marker, pipes or set()) if pid not in killed]
        if not leftovers:
            break
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
    # SIGKILL takes effect asynchronously.
    gone_by = time.monotonic() + 2.0
    while killed and time.monotonic() < gone_by:
        killed = {pid for pid in killed if not _is_gone(pid)}
        if killed:
            time.sleep(0.005)


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
