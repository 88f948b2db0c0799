"""The command backend: an external program writes the entry.

The program gets the request as one JSON object on stdin (see
``ReflectionRequest.to_dict``) and must print the entry fields as one JSON
object on stdout. A non-zero exit, output that is not such an object, or
running past the timeout fails the run; on timeout the program's whole
process group is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any

from runner.backends.base import ReflectionRequest, parse_reply_text
from runner.config import BackendSettings
from runner.errors import BackendError, BackendTimeoutError

__all__ = ["CommandBackend"]


class CommandBackend:
    """Runs a configured program per reflection."""

    name = "command"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        """Run the program with the request on stdin and parse its stdout.

        Raises:
            BackendTimeoutError: the program ran past the timeout (it is killed).
            BackendError: it could not start, exited non-zero, or printed no usable JSON.
        """
        argv = list(self.settings.command)
        try:
            process = subprocess.Popen(  # noqa: S603 (the operator's configured program, no shell)
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except OSError as exc:
            raise BackendError(self.name, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        try:
            stdout, stderr = process.communicate(json.dumps(request.to_dict()).encode("utf-8"), timeout=self.settings.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.communicate()
            raise BackendTimeoutError(self.name, self.settings.timeout) from None
        except BaseException:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            raise
        if process.returncode != 0:
            tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message on stderr"]
            how = f"signal {-process.returncode}" if process.returncode < 0 else f"status {process.returncode}"
            raise BackendError(self.name, f"{argv[0]!r} exited with {how}: {tail[0][:200]}")
        try:
            text = stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise BackendError(self.name, f"{argv[0]!r} printed bytes that are not UTF-8") from None
        return parse_reply_text(text, self.name)
