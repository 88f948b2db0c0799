"""A real chat-completions server on 127.0.0.1 whose answers a test sets, and the run configuration that asks it.

The attack tests on backends (``test_backends.py``) use them;
the ``servers`` fixture of this folder's conftest starts these on demand.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runner.monitor.logs import configure_logging
from tests._support import openai_agent, write_config

__all__ = ["AT", "GOOD", "KEY", "Answer", "HostileServer", "envelope", "json_logging", "openai_config"]

GOOD = {"voice": "The harbour lights again.", "theme": "the city at night"}
KEY = "sk-attack-0123456789abcdef"
AT = "2026-09-05T21:00"


def envelope(content: Any) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


Answer = Callable[["HostileServer", BaseHTTPRequestHandler], None]


class HostileServer:
    """A real HTTP server on 127.0.0.1 whose answer the test sets; it records every request it gets."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda server, handler: server.respond(handler, envelope(json.dumps(GOOD))))
        self.requests: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.answered = threading.Event()  # set when an answer has ended (sent, or cut off by the client)
        self.sent = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

            do_GET = do_POST  # noqa: N815 - the name http.server looks up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        self.requests.append({"method": handler.command, "path": handler.path, "headers": dict(handler.headers), "body": body})
        handler.close_connection = True
        try:
            self.answer(self, handler)
        except OSError:  # the client hung up: what a client that gives up does
            pass
        finally:
            self.answered.set()

    def write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        self.sent += len(data)

    def respond(self, handler: BaseHTTPRequestHandler, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.write(handler, head.encode() + b"\r\n" + body)

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_config(tmp_path: Path, url: str, *, timeout: str = "1s", runner: str = "", key_env: bool = True) -> Path:
    # Each test here is about one call's failure; retries are tests/runner/backends/test_retries.py's.
    backend = "attempts = 1\n" + ('api_key_env = "GHOSTRUNNER_ATTACK_KEY"\n' if key_env else "")
    return write_config(tmp_path, openai_agent(url, model="attack-model", timeout=timeout, backend=backend), runner=runner)


def json_logging(json_lines: bool = True) -> io.StringIO:
    buffer = io.StringIO()
    configure_logging(stream=buffer, json=json_lines)
    return buffer
