"""Run a command with its stdout on a real pseudo-terminal, as a person at a terminal would see it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import tempfile
import termios
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TerminalResult", "in_terminal"]


@dataclass(frozen=True)
class TerminalResult:
    returncode: int
    stdout: str  # what the terminal received, its \r\n turned back into \n
    stderr: str


def in_terminal(argv: list[str], *, columns: int = 100, env: dict[str, str] | None = None, cwd: Path | None = None,
                timeout: float = 60, stderr_too: bool = False) -> TerminalResult:
    """Run *argv* with stdout on a pseudo-terminal *columns* wide, stdin empty and stderr captured (or, *stderr_too*, on the terminal
    as well, as in a shell: then both are in ``stdout``)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {key: value for key, value in (env if env is not None else os.environ).items() if key not in {"COLUMNS", "LINES"}}
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave if stderr_too else errors, env=environment, cwd=cwd)
        os.close(slave)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    break
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other side has closed it
                    break
                if not data:
                    break
                chunks.append(data)
            returncode = process.wait(timeout=max(deadline - time.monotonic(), 1))
        finally:
            os.close(master)
            if process.poll() is None:
                process.kill()
                process.wait()
        errors.seek(0)
        stderr = errors.read().decode("utf-8", "replace")
    return TerminalResult(returncode, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n"), stderr)
