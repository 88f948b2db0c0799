"""A chat-completions server on 127.0.0.1 that answers from a script, one step per request, and records every request body.

Steps: ``"good"`` (a valid entry), ``"broken"`` (content that is not JSON),
``"hang"`` (no answer until the server closes, or 10 s),
``"reset"`` (the connection is reset without an answer), ``"refuse-format"``
(HTTP 400 naming response_format, as a server without structured replies
answers), an HTTP status as an int (``503``, ``401``), or ``(429, "2")``: a
status with its Retry-After header, or a :class:`Reply` (HTTP 200 with that
content). Once the script is used up every request gets *default*
(``"good"`` unless given). With *usage*, every HTTP 200 answer carries it as
its ``usage`` object (any JSON: a malformed one too). A *gated* server holds each request, after
recording it and setting ``arrived``, until the test sets ``release``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["GOOD_REPLY", "ChatServer", "Reply", "Step"]

GOOD_REPLY = {"voice": "The harbour lights again.", "theme": "the city at night", "tags": ["night"], "mood": "calm"}


@dataclass(frozen=True)
class Reply:
    """A step answering HTTP 200 with *content* as the assistant message."""

    content: str


Step = str | int | tuple[int, str] | Reply


class ChatServer:
    """The server; use as a context manager. ``requests``, ``paths`` and ``headers`` hold each request's JSON body, path and headers, in order."""

    def __init__(self, script: Sequence[Step] = (), *, default: Step = "good", gated: bool = False, usage: Any = None) -> None:
        self.script: list[Step] = list(script)
        self.usage = usage
        self.default = default
        self.gated = gated
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.paths.append(self.path)
                    server.headers.append(dict(self.headers))
                    step: Step = server.script.pop(0) if server.script else server.default
                server.arrived.set()
                if server.gated:
                    server.release.wait(60)
                if step == "hang":
                    server.closing.wait()  # for good, until the server closes: only a timeout ends the call
                    return
                server.answer(self, step, server.usage)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def formats(self) -> list[str | None]:
        """The ``response_format`` type of each request (None: none was asked for)."""
        return [(body.get("response_format") or {}).get("type") for body in self.requests]

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, step: Step, usage: Any = None) -> None:
        if step == "reset":
            # SO_LINGER with a zero timeout makes close() send RST: the client reads "connection reset".
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
            handler.close_connection = True
            return
        if step == "refuse-format":
            step = 400
            payload = b'{"error": {"message": "response_format is not supported by this server"}}'
        elif isinstance(step, Reply | str):
            content = (
                step.content
                if isinstance(step, Reply)
                else json.dumps(GOOD_REPLY)
                if step == "good"
                else "Sure! Here is your entry: {voice: nope"
            )
            answer: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": content}}]}
            if usage is not None:
                answer["usage"] = usage
            payload = json.dumps(answer).encode()
            step = 200
        else:
            payload = b'{"error": {"message": "not now"}}'
        status, retry_after = step if isinstance(step, tuple) else (step, None)
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        if retry_after is not None:
            handler.send_header("Retry-After", retry_after)
        handler.end_headers()
        handler.wfile.write(payload)
