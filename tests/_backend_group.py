"""A command backend that starts a child of its own and then never ends, and the check that nothing of it outlives its run.

The program (:data:`LINGERING`) reads its request, forks a child that stays in its process group
(or, if asked, escapes to a session of its own with an empty environment, holding only its stdout),
writes both pids to a file the test names (renamed into place, so it is read whole), touches
``started-<slot>`` beside it as the fleet tests' held backend does (and, if asked, SIGSTOPs the
process running the call, which then can neither cut the call off nor clean up), and then both sleep for good:
nothing of it ends unless the run that started it ends it. :func:`assert_group_ends` polls
``/proc`` until neither process nor anything else in the program's group or session is alive,
with a deadline (no fixed sleep), and kills what is left when it fails, so that a failing test
leaks nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

from tests._support import script, wait_for_path

__all__ = ["LINGERING", "assert_group_ends", "lingering_program", "live_group", "started_pids"]

#: The program's code; its argv adds the directory its files go to.
LINGERING = """
    import json, os, pathlib, shutil, signal, sys, time
    request = json.load(sys.stdin)
    here = pathlib.Path(sys.argv[1])
    child = os.fork()
    if child == 0:
        if "escape" in sys.argv[2:]:  # a session of its own, and an empty environment (no marker): only its stdout ties it to the run
            os.setsid()
            os.execve(shutil.which("sleep"), ["sleep", "infinity"], {})
        while True:
            time.sleep(3600)
    (here / "pids.tmp").write_text(json.dumps([os.getpid(), child]))
    os.rename(here / "pids.tmp", here / "pids.json")
    (here / ("started-" + request["slot"].replace(":", "-"))).touch()
    if "stop" in sys.argv[2:]:  # asked to leave the run stuck: its process can neither end the call nor clean up
        os.kill(os.getppid(), signal.SIGSTOP)
    while True:
        time.sleep(3600)
"""


def lingering_program(directory: Path, *, stop_the_run: bool = False, escape: bool = False) -> list[str]:
    """The argv of :data:`LINGERING`, writing its files to *directory*; with *stop_the_run*, it SIGSTOPs the process that
    started it; with *escape*, its child leaves for a session of its own and an empty environment."""
    flags = ["stop"] * stop_the_run + ["escape"] * escape
    return [*script(directory, "lingering.py", LINGERING), str(directory), *flags]


def started_pids(directory: Path, timeout: float = 120) -> list[int]:
    """The program's pid and its child's, once it has written them (it runs by then)."""
    wait_for_path(directory / "pids.json", timeout=timeout)
    pids: list[int] = json.loads((directory / "pids.json").read_text(encoding="utf-8"))
    return pids


def _alive(pid: int) -> bool:
    """Whether *pid* is a live process (a zombie waiting for its reaper is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


def live_group(pids: list[int]) -> list[int]:
    """Live processes among *pids*, or in the process group or session of the first (the program's own)."""
    found = {pid for pid in pids if _alive(pid)}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            stat = Path(f"/proc/{name}/stat").read_bytes()
            state, _ppid, pgrp, sid = stat[stat.rindex(b")") + 2 :].split()[:4]
            if state not in (b"Z", b"X") and pids[0] in (int(pgrp), int(sid)):
                found.add(int(name))
    return sorted(found)


def assert_group_ends(pids: list[int], within: float = 60) -> None:
    """Wait until nothing of the program (*pids*, its group, its session) is alive; fail naming what is, after killing it."""
    deadline = time.monotonic() + within
    left = live_group(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = live_group(pids)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"the backend's processes {left} outlived the run that started them"
