"""One run of ``serve`` in its worker process: the argv, the process's end, and the hand-off of its result.

A worker is the same ``ghostrunner run`` command the systemd timers use,
started with this interpreter in its own session (a Ctrl-C on the terminal
reaches the scheduler, which decides, not the run) and with a run marker in
its environment, so that every helper process it starts can be found and
ended with it. It reports by printing its :class:`RunResult` as the last line
of its stdout. A worker that ends without that line (killed at
``run_timeout``, killed by a signal, crashed, or printing something that is no
result) is reported here: ``scheduler.worker_crashed``, then its one
``run.finished``, failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import datetime
from typing import Final

from runner.errors import MalformedResultError
from runner.processes import WORKER_MARKER_VARIABLE, kill_marked, signal_name
from runner.run.contract import RunIdentity, RunResult
from runner.settings.config import RunnerConfig

__all__ = ["Worker", "read_result", "worker_command"]

_KILL_GRACE_SECONDS: Final = 5.0


def worker_command(config: RunnerConfig, agent: str, routine: str, scheduled: datetime, run_id: str) -> list[str]:
    """The argv of the worker process for one run: ``ghostrunner run`` with this interpreter."""
    argv = [sys.executable, "-m", "runner", "run", routine, "--agent", agent, "--at", scheduled.isoformat(), "--run-id", run_id]
    if config.config_file is not None:
        argv += ["--config", str(config.config_file)]
        if config.config_text is not None:
            argv.append("--config-on-stdin")
    return argv


def read_result(out: bytes) -> RunResult:
    """The result a worker printed as the last line of its stdout *out*.

    Raises:
        MalformedResultError: *out* is not UTF-8, is empty, or its last line is no result.
    """
    try:
        lines = out.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise MalformedResultError("the output is not UTF-8") from None
    if not lines:
        raise MalformedResultError("the worker printed nothing")
    return RunResult.from_json_line(lines[-1])


class Worker:
    """The process of one run, started at once.

    Args:
        config: the configuration (its file is passed on to the worker).
        identity: the run; its ``run_id`` is the worker's and its run marker's.
        scheduled: the fire time the run belongs to.
        stderr: the file descriptor the worker's log lines go to (None: the scheduler's stderr).
    """

    def __init__(self, config: RunnerConfig, identity: RunIdentity, scheduled: datetime, stderr: int | None) -> None:
        self.identity = identity
        argv = worker_command(config, identity.agent, identity.routine, scheduled, identity.run_id)
        # The configuration text serve holds goes in on stdin: a file edited since serve read it (and not
        # reloaded, or refused by a reload) does not reach a run.
        self._input = config.config_text.encode("utf-8") if config.config_file is not None and config.config_text is not None else None
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if self._input is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
            env={**os.environ, WORKER_MARKER_VARIABLE: identity.run_id},
        )
        self._out = b""
        self._timeout: float | None = None  # set when the worker ran past it and was killed

    def wait(self, timeout: float) -> None:
        """Wait until the worker ends; at *timeout* seconds, kill it and wait for that."""
        try:
            self._out, _ = self._process.communicate(input=self._input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self._out, _ = self._process.communicate()
            self._timeout = timeout

    def hand_off(self, trigger: str) -> RunResult | None:
        """The result the ended worker printed; or, when there is none, None with the crash logged.

        The crash is logged as ``scheduler.worker_crashed`` (with *trigger*,
        ``cron`` or ``catchup``), then as the run's one ``run.finished``, since
        the worker cannot have written that line itself.
        """
        try:
            return read_result(self._out)
        except MalformedResultError:
            pass
        code = self._process.returncode
        if self._timeout is not None:
            error = f"the worker ran past run_timeout ({self._timeout:g} s) and was killed"
        else:
            how = f"was killed by signal {signal_name(-code)}" if code < 0 else f"exited with status {code}"
            error = f"the worker {how} before reporting a result"
        self.identity.log_worker_died(error, returncode=code, trigger=trigger)
        return None

    def kill(self) -> None:
        """SIGTERM the worker's process group, then SIGKILL it if it lingers; then end its backend helpers.

        A worker that dies by SIGTERM kills its own helpers on the way out; one that had to be
        SIGKILLed cleaned up nothing, and a ``command`` helper in its own session (perhaps ignoring
        SIGTERM) would outlive it. Every process that inherited the worker's run marker is ended here.
        """
        for sig, wait in ((signal.SIGTERM, _KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
            try:
                os.killpg(self._process.pid, sig)
            except ProcessLookupError:
                break
            if wait is None:
                break
            try:
                self._process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        kill_marked(self._process.pid, f"{WORKER_MARKER_VARIABLE}={self.identity.run_id}".encode())
