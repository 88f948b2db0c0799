"""Finding and killing what a program left behind, also after the process that started it died.

Linux's ``/proc`` tells which live processes belong to a program: those in its session or
process group, those carrying its marker variable (inherited through ``setsid`` and double
forks) and those holding one of its pipes. :func:`kill_marked` SIGKILLs them all.

A process that is SIGKILLed (``kill -9``, the OOM killer, Celery terminating a task's pool
process, a supervisor's last resort) runs no cleanup of its own, so a program it started in
a session of its own would live on. A :class:`Reaper` is a watcher started before the program:
a small process in a session of its own, holding the read end of a pipe whose write end only
the starting process holds. The kernel closes that end when the starting process dies, however
it dies; the watcher then kills what the program left. A call that ends normally says so on the
pipe first, and the watcher exits without killing anything.

The watcher runs this file as a script (``python -I -S``: no site, no environment, nothing
imported but the standard library), so this module imports nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Final

__all__ = ["Reaper", "kill_marked", "pipe_inode"]

#: What the starting process writes on the pipe once its own cleanup is done: the watcher has nothing to kill.
_DONE: Final = b"done"
#: The variables the watcher keeps of the starting process's environment: what the dynamic loader may need to start Python.
_KEPT_VARIABLES: Final = ("LD_LIBRARY_PATH",)
#: Watchers whose call ended before they did: reaped (never waited for) when the next watcher starts or one is released.
_unreaped: list[int] = []
_unreaped_lock = threading.Lock()


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
    A *session* of -1 names none (only the marker and the pipes count).
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


def _reap_ended() -> None:
    """Reap the watchers that have exited since their calls ended (a zombie each until then)."""
    with _unreaped_lock:  # calls on several threads (a simulation's) share the list
        for pid in list(_unreaped):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                done = pid
            if done:
                _unreaped.remove(pid)


class Reaper:
    """The watcher of one program's run: started before the program, it kills what the program left if this process dies first.

    Start it with the program's *marker* (``NAME=value``, a variable set only in the program's
    environment); :meth:`watch` tells it the program's pid (its session) and pipes once it runs;
    :meth:`release` once this process has cleaned up itself. Until then, a death of this
    process by any signal ends the program, its session and group, and whatever carries the
    marker or holds one of its pipes.

    Raises:
        OSError: the watcher could not start (no process could, or this interpreter's ``sys.executable`` is gone); its
            ``strerror`` says so.
    """

    def __init__(self, marker: bytes) -> None:
        _reap_ended()
        read, self._write = os.pipe()
        try:
            self.pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", os.path.abspath(__file__), os.fsdecode(marker)],
                {name: os.environ[name] for name in _KEPT_VARIABLES if name in os.environ},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,  # a stop sent to this process's group (a terminal's Ctrl-C, serve's kill of a worker) does not reach it
            )
        except OSError as exc:
            os.close(self._write)
            # Raised as the program's own failure to start would be, naming what could not start and why.
            raise OSError(exc.errno, f"cannot start the watcher of its processes ({sys.executable!r}): {exc.strerror or exc}") from None
        except BaseException:
            os.close(self._write)
            raise
        finally:
            os.close(read)

    def _say(self, line: bytes) -> None:
        with contextlib.suppress(OSError):  # a watcher that is gone cannot be told (and has nothing to do)
            os.write(self._write, line + b"\n")

    def watch(self, pid: int, pipes: set[int]) -> None:
        """Tell the watcher the program runs as *pid* (its own session) with these *pipes* (inodes)."""
        self._say(b" ".join(str(number).encode() for number in (pid, *sorted(pipes))))

    def release(self, *, cleaned_up: bool) -> None:
        """Let the watcher go: without killing anything when *cleaned_up* (the program and all it left are dead and
        reaped); otherwise (this process is unwinding before its own cleanup ran, or during it) after it kills what is left."""
        if cleaned_up:
            self._say(_DONE)
        os.close(self._write)
        with _unreaped_lock:
            _unreaped.append(self.pid)
        _reap_ended()


def _watch(marker: bytes) -> None:
    """The watcher's work: wait for the pipe on stdin to close, then kill what the program left, unless told it is done."""
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)  # it ends when the pipe tells it to, after its work
    for name in os.listdir("/proc/self/fd"):  # what it inherited of the starting process's descriptors: none is its to hold
        if int(name) > 2:
            with contextlib.suppress(OSError):
                os.close(int(name))
    said = b""
    while chunk := os.read(0, 4096):
        said += chunk
    lines = said.split(b"\n")
    if _DONE in lines:
        return
    session, pipes = -1, set()  # not told yet: this process died as it started the program, which carries the marker
    told = [line for line in lines if line]
    with contextlib.suppress(ValueError, IndexError):
        numbers = [int(word) for word in told[0].split()]
        session, pipes = numbers[0], set(numbers[1:])
    kill_marked(session, marker, pipes)


if __name__ == "__main__":
    _watch(os.fsencode(sys.argv[1]))
