"""A real ``ghostjournal mcp`` subprocess driven by the MCP SDK's own stdio client, callable from plain (sync) tests.

The client runs on an event loop in a blocking portal's thread; a test calls the
session through the portal. The server is started by ``sh``, which writes the
server's exit status to stderr when it ends, so a test can read how it ended
although the SDK owns the child process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp.client.stdio
import mcp.types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests._support import reap

__all__ = ["EXIT_MARK", "McpServer", "holding_write_lock", "http_server", "mcp_server", "server_events"]

#: What the wrapping shell writes to stderr, followed by the server's exit status.
EXIT_MARK = "ghostjournal-mcp-exit="

# The SDK's client gives a server 2 s from closing its stdin before it signals the server's process group, the wrapping
# shell too (whose exit mark is then never written). On a machine running many tests at once a clean exit can take
# longer than that; a client this patient still fails a server that does not end by itself on EOF.
mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = 60.0


class McpServer:
    """One connected server: call its tools, read its log (stderr), its pid and how it ended."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, errlog: Path, init: types.InitializeResult) -> None:
        self.portal = portal
        self.session = session
        self.errlog = errlog
        self.init = init
        self.pid: int = self.wait_for_event("mcp.started")["pid"]
        self.signalled = False

    def terminate(self) -> None:
        """Send the server SIGTERM."""
        self.signalled = True
        os.kill(self.pid, signal.SIGTERM)

    def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = self.portal.call(self.session.call_tool, tool, arguments)
        assert isinstance(result, types.CallToolResult)
        return result

    def call_soon(self, tool: str, arguments: dict[str, Any]) -> Future[Any]:
        """Start a call and return at once: its future holds the result (or the error) when it ends."""
        return self.portal.start_task_soon(self.session.call_tool, tool, arguments)

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """Call *tool*; it must succeed; return its structured result (which the SDK checked against the output schema)."""
        result = self.call(tool, arguments)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    def error(self, tool: str, **arguments: Any) -> str:
        """Call *tool*; it must return an error result; return its text."""
        result = self.call(tool, arguments)
        assert result.is_error, result.structured_content
        assert result.structured_content is None
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        return block.text

    def tools(self) -> list[types.Tool]:
        return self.portal.call(self.session.list_tools).tools

    def stderr(self) -> str:
        return self.errlog.read_text("utf-8", errors="replace")

    def events(self) -> list[dict[str, Any]]:
        """The server's JSON log lines so far (lines that are not JSON, such as the shell's exit mark, are left out)."""
        found = []
        for line in self.stderr().splitlines():
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
        return found

    def wait_for_event(self, name: str, timeout: float = 60, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events():
                if event.get("event") == name and all(event.get(k) == v for k, v in fields.items()):
                    return event
            if time.monotonic() > deadline:
                raise AssertionError(f"no {name} event within {timeout} s; stderr:\n{self.stderr()[-3000:]}")
            time.sleep(0.01)

    def exit_status(self, timeout: float = 120) -> int:
        """The server's exit status, once the shell reported it (a long wait: an exit that comes is slow on a loaded machine)."""
        deadline = time.monotonic() + timeout
        while EXIT_MARK not in (text := self.stderr()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not exit within {timeout} s; stderr:\n{text[-3000:]}")
            time.sleep(0.01)
        return int(text.split(EXIT_MARK)[1].split()[0])


@contextlib.asynccontextmanager
async def _connect(args: list[str], errlog: Any) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    command = shutil.which("ghostjournal") or "ghostjournal"
    params = StdioServerParameters(
        command="sh", args=["-c", f'"$@"; echo "{EXIT_MARK}$?" >&2', "sh", command, *args], env=dict(os.environ),
    )
    async with stdio_client(params, errlog=errlog) as (read_stream, write_stream), ClientSession(read_stream, write_stream) as session:
        init = await session.initialize()
        await session.list_tools()  # the SDK checks each structured result against the output schema listed here
        yield session, init


@contextlib.contextmanager
def mcp_server(root: Path, *args: str, nn: bool = False, errlog: Path | None = None) -> Iterator[McpServer]:
    """``ghostjournal --root ROOT [--nn] mcp ARGS...`` connected and initialized; on exit stdin is closed (the SDK's shutdown).

    The server must then end by itself, on that EOF, with status 0; a server that
    needed the SDK's SIGTERM or SIGKILL fails the test.
    """
    errlog = errlog or root.parent / f"mcp-{os.urandom(4).hex()}.stderr"
    argv = ["--root", str(root), *(["--nn"] if nn else []), "mcp", *args]
    with errlog.open("w", encoding="utf-8") as stream, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_connect(argv, stream)) as (session, init):
            server = McpServer(portal, session, errlog, init)
            yield server
        if server.signalled:
            return  # the test ended the server itself and checked how
        assert server.exit_status() == 0, server.stderr()[-3000:]
        assert server.events()[-1] == {**server.events()[-1], "event": "mcp.stopped", "reason": "eof"}, server.stderr()[-3000:]
        assert "Traceback" not in server.stderr()


@contextlib.contextmanager
def holding_write_lock(root: Path) -> Iterator[None]:
    """Hold the journal's writer lock (the OS lock every append takes) from this process."""
    fd = os.open(root / ".write.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def server_events(errlog: Path) -> list[dict[str, Any]]:
    """The JSON log lines a server wrote to *errlog*."""
    return [json.loads(line) for line in errlog.read_text().splitlines() if line.startswith("{")]


@contextmanager
def http_server(root: Path, tmp_path: Path, *args: str, token: str | None = None) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """A real ``ghostjournal mcp --http`` on a free loopback port: its process, its URL and its stderr log, reaped at exit."""
    errlog = tmp_path / "http.stderr"
    env = {"GHOSTJOURNAL_MCP_TOKEN": token} if token else {}
    with errlog.open("w") as stream:
        process = subprocess.Popen(
            [shutil.which("ghostjournal") or "ghostjournal", "--root", str(root), "mcp", *args, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stream, text=True, env={**os.environ, **env},
        )
    try:
        deadline = time.monotonic() + 60
        while not (started := [e for e in server_events(errlog) if e.get("event") == "mcp.started"]):
            assert process.poll() is None and time.monotonic() < deadline, errlog.read_text()
            time.sleep(0.02)
        yield process, started[0]["url"], errlog
    finally:
        reap(process)
