"""``ghostjournal mcp``: the journal as a stdio MCP server, on the official MCP Python SDK (the ``mcp`` extra).

The server is one long-lived process over one open :class:`~journal.Journal`, so an
encoder loaded with ``--nn`` stays warm, and the journal's own bookkeeping shows it
what other processes (the runner, the CLI, another server) appended since the last
call. Each tool call runs in a worker thread; the journal serializes them.

The protocol owns stdout; the server's logs are JSON lines on stderr:

=====================  ======================================================
mcp.started            pid, root, agent, read_only, nn, tools
mcp.tool.started       call, tool
mcp.tool.finished      call, tool, outcome (ok | error), duration_ms, error
mcp.reopened           root, journal_id (the journal at the path, opened anew: see journal.mcp._tools)
mcp.stopping           reason (SIGTERM | SIGINT)
mcp.stopped            reason (eof | SIGTERM | SIGINT | transport), error
=====================  ======================================================

It runs until stdin closes or it gets SIGTERM (or SIGINT). A call in progress then
runs to its end (an append is stored completely or not at all), its answer is
dropped, and the process exits 0. A transport that breaks (stdout closed under a
write) ends it with exit code 74.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any, Final, TextIO, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server

from journal.api import Journal
from journal.mcp._handlers import Logger, build, one_blas_thread
from journal.mcp._tools import Tools

__all__ = ["EXIT_TRANSPORT", "build_server", "serve"]

#: Exit code when the transport broke (EX_IOERR, as for any other I/O error of the command).
EXIT_TRANSPORT: Final = 74


def build_server(
    journal: Journal, *, agent: str | None = None, is_read_only: bool = False, allow_erase: bool = False, log_stream: TextIO | None = None
) -> Server[Any]:
    """The MCP server over *journal*: its tools, resources and instructions, scoped to *agent* (None: every agent).

    Raises:
        ValueError: *agent* is not a valid agent name.
    """
    return build(Tools(journal, agent=agent, is_read_only=is_read_only, allow_erase=allow_erase), Logger(log_stream or sys.stderr))


class _StdinLines:
    """The lines of fd 0, read by a daemon thread, as an async iterator that a cancellation can leave.

    The SDK's own reader blocks a worker thread in ``readline`` that no
    cancellation can interrupt, so after SIGTERM the process would wait for
    the client's next line. A daemon thread reading with ``os.read`` (no
    buffered reader whose lock could be held at exit) lets the process end.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._send, self._receive = anyio.create_memory_object_stream[str](0)
        self._thread = threading.Thread(target=self._pump, args=(anyio.lowlevel.current_token(),), name="mcp-stdin", daemon=True)
        self._thread.start()

    def _pump(self, token: anyio.lowlevel.EventLoopToken) -> None:
        send: MemoryObjectSendStream[str] = self._send
        pending = bytearray()
        try:
            while chunk := os.read(self._fd, 1 << 16):
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line = bytes(pending[: end + 1])
                    del pending[: end + 1]
                    anyio.from_thread.run(send.send, line.decode("utf-8", "replace"), token=token)
            if pending.strip():
                anyio.from_thread.run(send.send, pending.decode("utf-8", "replace") + "\n", token=token)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.RunFinishedError):
            return  # the loop is gone (SIGTERM) or stdin broke: nobody is left to read these lines
        with contextlib.suppress(anyio.RunFinishedError):
            anyio.from_thread.run_sync(send.close, token=token)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._receive:
            async for line in self._receive:
                yield line


async def _stop_on_signal(scope: anyio.CancelScope, stopped: list[str], log: Logger, *, task_status: TaskStatus[None]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            stopped.append(signal.Signals(signum).name)
            log.info("mcp.stopping", reason=stopped[0])
            scope.cancel()
            return


async def _serve(tools: Tools, log: Logger) -> str:
    stopped: list[str] = []
    async with anyio.create_task_group() as group:
        await group.start(_stop_on_signal, group.cancel_scope, stopped, log)
        # The SDK only iterates the stdin it is given; _StdinLines is that, not a file.
        stdin = cast(anyio.AsyncFile[str], _StdinLines())
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            log.info(
                "mcp.started",
                pid=os.getpid(),
                root=str(tools.journal.root),
                agent=tools.agent,
                read_only=tools.is_read_only,
                nn=tools.journal.encoder is not None,
                tools=list(tools.specs),
            )
            server = build(tools, log)
            await server.run(read_stream, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()
    return stopped[0] if stopped else "eof"


def serve(
    journal: Journal, *, agent: str | None = None, is_read_only: bool = False, allow_erase: bool = False, log_stream: TextIO | None = None
) -> int:
    """Serve *journal* over stdio until stdin closes or SIGTERM/SIGINT arrives; return the exit code (0, or 74 for a broken transport).

    Raises:
        ValueError: *agent* is not a valid agent name.
    """
    stream = log_stream or sys.stderr
    log = Logger(stream)
    tools = Tools(journal, agent=agent, is_read_only=is_read_only, allow_erase=allow_erase)
    broken: list[BaseException] = []
    try:
        with one_blas_thread(journal):
            reason = anyio.run(_serve, tools, log)
    except* OSError as group:  # stdout closed under a write: the client is gone
        broken.extend(group.exceptions)
    if broken:
        error = broken[0]
        while isinstance(error, BaseExceptionGroup):  # the transport's task groups nest theirs
            error = error.exceptions[0]
        log.failure("mcp.stopped", reason="transport", error=str(error))
        return EXIT_TRANSPORT
    log.info("mcp.stopped", reason=reason)
    return 0
