"""The command backend: an external program writes the entry.

The program gets the request as one JSON object on stdin (see
``ReflectionRequest.to_dict``: among others ``reply_fields``, ``reply_schema``,
the JSON Schema of the reply, ``attempt`` and ``correction``) and must print
the entry fields as one JSON object on stdout. A non-zero exit, output that
is not such an object, more than ``MAX_REPLY_BYTES`` on stdout, or running
past the deadline fails the call.

For the run's retries: exit status 75 (EX_TEMPFAIL: "try again later", e.g.
the helper's own model server is down), death by a signal and the deadline are transient, output
that is not the JSON asked for is retried once with ``correction`` saying what
was wrong; any other non-zero exit, and a program that cannot start, are
permanent.

What a program cannot do to a run:

* hold it: the call has one wall-clock deadline (the backend's ``timeout`` or
  what ``run_timeout`` leaves, whichever is sooner); the pipes are read with
  that deadline, never waited on without one;
* outlive it: the program starts in its own session; when it exits, or at the
  deadline, everything it started is killed: its session and process group,
  and, on Linux, every process that still carries the run's marker variable
  (``GHOSTRUNNER_BACKEND_RUN``, inherited through ``setsid`` and double forks)
  or still holds one of its pipes; should the process running the call die
  first without cleaning up (SIGKILL), a reaper started beside the program
  (:class:`runner.processes.Reaper`) kills the same;
* flood it: at most ``MAX_REPLY_BYTES`` (+1) of stdout are kept, and only the
  last 64 KiB of stderr (its last line is quoted in the error).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

from runner.backends.base import MAX_REPLY_BYTES, CallBudget, ReflectionRequest, check_reply, one_line, parse_reply_json, parse_reply_text
from runner.backends.usage import split_usage
from runner.errors import BackendError, BackendReplyError, BackendUnavailableError
from runner.processes import Reaper, kill_marked, pipe_inode, signal_name
from runner.settings.config import BackendSettings

__all__ = ["MARKER_VARIABLE", "TEMPFAIL_STATUS", "CommandBackend", "ProgramRun", "reply_from_output", "run_program"]

#: Set in the program's environment to a fresh value per call; its descendants inherit it.
MARKER_VARIABLE: Final = "GHOSTRUNNER_BACKEND_RUN"
_STDERR_TAIL: Final = 64 * 1024
_CHUNK: Final = 64 * 1024
#: After the program exits and its leftovers are killed, how long the pipes may take to close.
_DRAIN_SECONDS: Final = 1.0
#: How often the program's exit is checked where no pidfd is available.
_POLL_SECONDS: Final = 0.05
#: The exit status by which a program says "try again later" (sysexits.h EX_TEMPFAIL).
TEMPFAIL_STATUS: Final = 75


def reply_from_output(stdout: bytes, program: str, backend: str = "command", request: ReflectionRequest | None = None) -> dict[str, Any]:
    """The entry fields a program printed on *stdout* (untrusted bytes).

    The program may report what it used in a ``usage`` object beside the fields
    (see :mod:`runner.backends.usage`); with *request*, that is counted on its
    meter (unknown when the program reports none or a malformed one).

    Raises:
        BackendError: naming *backend*: over the reply limits, not UTF-8, not JSON, or not a usable reply.
    """
    if len(stdout) > MAX_REPLY_BYTES:
        raise BackendReplyError(backend, f"{program!r} printed more than the limit of {MAX_REPLY_BYTES} bytes on stdout")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BackendReplyError(backend, f"{program!r} printed bytes that are not UTF-8 (at offset {exc.start})") from None
    if request is None:
        return parse_reply_text(text, backend)
    try:
        reply, usage, _ = split_usage(parse_reply_json(text, backend))
    except BackendError:
        request.report_usage(None, backend)
        raise
    request.report_usage(usage, backend)
    return check_reply(reply, backend)


class _Call:
    """One run of the program: feeds stdin, reads stdout and stderr against the deadline, and cleans up after it."""

    def __init__(self, process: subprocess.Popen[bytes], marker: str) -> None:
        self.process = process
        self.marker = f"{MARKER_VARIABLE}={marker}".encode()
        if process.stdin is None or process.stdout is None or process.stderr is None:
            raise ValueError("the program must be started with stdin, stdout and stderr as pipes")
        self.streams: Final = (process.stdin, process.stdout, process.stderr)
        self.pipes = {inode for inode in (pipe_inode(f.fileno()) for f in self.streams) if inode is not None}
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.exited = False
        self.pipes_open = True  # until stdout and stderr reached EOF: only then need their holders be looked for

    def talk(self, data: bytes, budget: CallBudget, program: str, backend: str) -> bool:
        """Exchange data with the program until it has exited and its pipes are closed, or the deadline passes.

        Returns whether the program exited (False: the deadline came first).

        Raises:
            BackendError: stdout grew past MAX_REPLY_BYTES.
        """
        process = self.process
        stdin_stream = self.streams[0]
        stdin, stdout, stderr = (stream.fileno() for stream in self.streams)
        try:
            pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            pidfd = None
        selector = selectors.DefaultSelector()
        try:
            for fd in (stdin, stdout, stderr):
                os.set_blocking(fd, False)
            selector.register(stdout, selectors.EVENT_READ)
            selector.register(stderr, selectors.EVENT_READ)
            if data:
                selector.register(stdin, selectors.EVENT_WRITE)
            else:
                stdin_stream.close()
            if pidfd is not None:
                selector.register(pidfd, selectors.EVENT_READ)
            written = 0
            drain_until: float | None = None
            open_pipes = {stdout, stderr}
            while open_pipes or not self.exited:
                wait = budget.remaining() if drain_until is None else min(budget.remaining(), drain_until - time.monotonic())
                if wait <= 0:
                    break
                events = selector.select(wait if pidfd is not None else min(wait, _POLL_SECONDS))
                for key, _mask in events:
                    fd = key.fd
                    if fd == stdin:
                        try:
                            written += os.write(stdin, data[written : written + _CHUNK])
                        except BlockingIOError:
                            continue
                        except OSError:  # it closed stdin without reading it all; its answer decides
                            written = len(data)
                        if written >= len(data):
                            selector.unregister(stdin)
                            stdin_stream.close()
                    elif fd == pidfd:
                        selector.unregister(pidfd)
                    else:
                        chunk = os.read(fd, _CHUNK)
                        if not chunk:
                            selector.unregister(fd)
                            open_pipes.discard(fd)
                            self.pipes_open = bool(open_pipes)
                        elif fd == stdout:
                            self.stdout += chunk
                            if len(self.stdout) > MAX_REPLY_BYTES:
                                raise BackendReplyError(
                                    backend, f"{program!r} printed more than the limit of {MAX_REPLY_BYTES} bytes on stdout"
                                )
                        else:
                            self.stderr += chunk
                            del self.stderr[:-_STDERR_TAIL]
                if not self.exited and process.poll() is not None:
                    self.exited = True
                    # Whatever still holds its pipes now is something it left behind: kill it, read what is left.
                    self.kill_leftovers()
                    drain_until = time.monotonic() + _DRAIN_SECONDS
            return self.exited
        finally:
            selector.close()
            if pidfd is not None:
                os.close(pidfd)

    def kill_leftovers(self) -> None:
        """SIGKILL the program's group and session and everything else it started (see the module docstring)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        kill_marked(self.process.pid, self.marker, self.pipes if self.pipes_open else set())

    def close(self) -> None:
        """Kill what is left, reap the program, close the pipes (never waiting on a pipe)."""
        self.kill_leftovers()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)  # SIGKILLed: only a process stuck in the kernel takes longer
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@dataclass(frozen=True, slots=True)
class ProgramRun:
    """How a program :func:`run_program` ran ended: whether it exited before the deadline, its status, its stdout and stderr's tail."""

    exited: bool
    returncode: int
    stdout: bytes
    stderr: bytes


def run_program(
    argv: list[str], data: bytes, budget: CallBudget, *, name: str, hidden_env: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> ProgramRun:
    """Run *argv* with *data* on stdin as a command backend runs its program (see the module): its own session,
    the deadline of *budget*, everything it started killed when it exits or at the deadline, and none of the
    variables *hidden_env* names in its environment (*env* adds to it).

    Raises:
        OSError: the program could not start.
        BackendReplyError: naming *name*: it printed more than MAX_REPLY_BYTES on stdout.
    """
    marker = uuid.uuid4().hex
    # Started first, so that no moment of the program's life is unwatched: should this process die without
    # cleaning up (SIGKILL, a pool process Celery terminates), the reaper kills what the program left.
    reaper = Reaper(f"{MARKER_VARIABLE}={marker}".encode())
    cleaned_up = False  # until call.close() has run: a signal's SystemExit before then leaves the program to the reaper
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**{key: value for key, value in os.environ.items() if key not in hidden_env}, **(env or {}), MARKER_VARIABLE: marker},
        )
        call = _Call(process, marker)
        reaper.watch(process.pid, call.pipes)
        try:
            exited = call.talk(data, budget, argv[0], name)
        finally:
            call.close()
            cleaned_up = True
    finally:
        reaper.release(cleaned_up=cleaned_up)
    return ProgramRun(exited, process.returncode if exited else -9, bytes(call.stdout), bytes(call.stderr))


class CommandBackend:
    """Runs a configured program per reflection."""

    name = "command"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        """Run the program with the request on stdin and parse its stdout.

        Raises:
            BackendTimeoutError: the program ran past the deadline (it and all it started are killed).
            BackendUnavailableError: it exited with status 75 (try again later), or a signal killed it.
            BackendReplyError: it printed no usable JSON.
            BackendError: it could not start, or exited non-zero otherwise.
        """
        budget = CallBudget.of(self.settings.timeout, request)
        argv = list(self.settings.command)
        program = argv[0]
        try:
            ran = run_program(
                argv, json.dumps(request.to_dict()).encode("utf-8"), budget, name=self.name, hidden_env=self.settings.hidden_env
            )
        except OSError as exc:
            raise BackendError(self.name, f"cannot start {program!r}: {exc.strerror or exc}") from None
        if not ran.exited:
            raise budget.expired(self.name)
        code = ran.returncode
        if code != 0:
            lines = [line for line in ran.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
            tail = one_line(lines[-1]) if lines else "no message on stderr"
            how = f"signal {signal_name(-code)}" if code < 0 else f"status {code}"
            if code == TEMPFAIL_STATUS or code < 0:  # "try again later", or killed (the OOM killer, a restart of its host)
                later = " (try again later)" if code == TEMPFAIL_STATUS else ""
                raise BackendUnavailableError(self.name, f"{program!r} exited with {how}{later}: {tail}")
            raise BackendError(self.name, f"{program!r} exited with {how}: {tail}")
        return reply_from_output(ran.stdout, program, self.name, request)
