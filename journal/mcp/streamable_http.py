"""``ghostjournal mcp --http HOST:PORT``: the same MCP server over Streamable HTTP, for clients that cannot start a process.

Loopback by default and careful about everything else:

- A non-loopback address is refused unless a bearer token is set (in the
  environment variable ``GHOSTJOURNAL_MCP_TOKEN``, never on the command line,
  where every user of the machine could read it in the process list).
- With a token, every request must carry ``Authorization: Bearer <token>``
  (compared in constant time), else it gets 401.
- A request with an ``Origin`` header that is not a loopback origin gets 403,
  and one whose ``Host`` is not the bound address (or a loopback name) 421: a
  web page the user visits cannot reach the journal through the browser (DNS
  rebinding), whatever address the server listens on.

The tools, scope and logs are those of :mod:`journal.mcp.server`; SIGTERM or
SIGINT ends the server after the calls in progress (uvicorn's graceful
shutdown), with exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any, Final, TextIO

from journal.api import Journal
from journal.frame import is_loopback_host
from journal.mcp._handlers import Logger, build, one_blas_thread
from journal.mcp._tools import Tools

__all__ = ["TOKEN_ENVVAR", "parse_address", "serve_http"]

TOKEN_ENVVAR: Final = "GHOSTJOURNAL_MCP_TOKEN"  # noqa: S105 - the name of the variable that holds the token, not a token
_PATH: Final = "/mcp"
_LOOPBACK_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a host and a port (0 picks a free one).

    Raises:
        ValueError: naming --http and what it takes.
    """
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http must be HOST:PORT such as 127.0.0.1:8765 (port 0 picks a free one), got {text!r}")
    return host, int(port)


class _Bearer:
    """ASGI middleware: 401 for any HTTP request without the bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"), (b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"a bearer token is required\n"})
                return
        await self._app(scope, receive, send)


def _uvicorn_server(app: Any, stopped: list[str]) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that a signal it shut down for is not raised again afterwards (that would end with -15, not 0)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig: int, frame: Any) -> None:
            stopped.append(signal.Signals(sig).name)
            super().handle_exit(sig, frame)

    # No logging configuration of uvicorn's own: its default sends the access log to stdout.
    return Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=30))


def serve_http(
    journal: Journal,
    *,
    host: str,
    port: int,
    agent: str | None = None,
    is_read_only: bool = False,
    allow_erase: bool = False,
    log_stream: TextIO | None = None,
) -> int:
    """Serve *journal* over Streamable HTTP on *host*:*port* until SIGTERM or SIGINT; return the exit code (0).

    Raises:
        ValueError: a non-loopback *host* without a token in ``GHOSTJOURNAL_MCP_TOKEN``, or an invalid *agent*.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    token = os.environ.get(TOKEN_ENVVAR) or None
    if not is_loopback_host(host) and token is None:
        raise ValueError(f"--http on {host!r}, which is not a loopback address, needs a bearer token: set {TOKEN_ENVVAR}")
    log = Logger(log_stream or sys.stderr)
    tools = Tools(journal, agent=agent, is_read_only=is_read_only, allow_erase=allow_erase)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in ("127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host)],
        allowed_origins=list(_LOOPBACK_ORIGINS),
    )
    app: Any = build(tools, log).streamable_http_app(streamable_http_path=_PATH, host=host, transport_security=security)
    if token is not None:
        app = _Bearer(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family)
    bound = listener.getsockname()[1]
    stopped: list[str] = []
    server = _uvicorn_server(app, stopped)
    shown = f"[{host}]" if ":" in host else host
    log.info(
        "mcp.started",
        pid=os.getpid(),
        root=str(journal.root),
        agent=agent,
        read_only=is_read_only,
        nn=journal.encoder is not None,
        tools=list(tools.specs),
        url=f"http://{shown}:{bound}{_PATH}",
        token=token is not None,
    )
    with listener, one_blas_thread(journal):
        asyncio.run(server.serve(sockets=[listener]))
    log.info("mcp.stopped", reason=stopped[0] if stopped else "shutdown")
    return 0
