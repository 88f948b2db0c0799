"""A real redis-server for the fleet's tests: Debian's, on a free loopback port, in a directory of the test's own.

Under CI a missing redis-server fails the test (``.ci/run`` installs it);
elsewhere it skips, naming the package.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

__all__ = ["RedisServer"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process; ``url`` reaches it. *durable*: AOF with fsync on every write, so a restart keeps all.

    *password*: the server wants it (``requirepass``); ``url`` holds none, ``client()`` sends it. ``DEBUG SLEEP``
    is allowed from loopback, so that a test can make a Redis that stalls.
    """

    def __init__(self, directory: Path, *, durable: bool = False, password: str | None = None) -> None:
        program = shutil.which("redis-server")
        if program is None:
            if os.environ.get("CI"):
                pytest.fail("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.program = program
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.durable = durable
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, decode_responses=True, socket_timeout=10)

    def start(self) -> None:
        secret = ["--requirepass", self.password] if self.password is not None else []
        persistence = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""] if self.durable else ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            [self.program, "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode", "yes", "--dir", str(self.directory),
             "--daemonize", "no", "--loglevel", "warning", "--enable-debug-command", "local", *persistence, *secret],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        self.process = None
