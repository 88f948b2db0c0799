"""``ghostjournal mcp --http``: Streamable HTTP on loopback through the SDK's own client; token, Origin and Host refused; SIGTERM.

Only loopback is ever bound here; a non-loopback address is tested only for
being refused without a token, before anything is bound.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from journal import Journal
from journal.cli.cli import cli
from tests.journal._mcp import http_server, server_events

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
TOKEN = "s3cret-token"  # noqa: S105 - a made-up token for a server that lives for one test
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def _session_calls(url: str, headers: dict[str, str] | None = None) -> tuple[str, list[str], dict[str, Any]]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        init = await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("journal_search", {"query": "harbor"})
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return init.instructions or "", tools, result.structured_content


def test_loopback_http_serves_the_same_scoped_tools_and_refuses_foreign_origins(tmp_path: Path) -> None:
    """On 127.0.0.1 the SDK's HTTP client gets the scoped tools; a foreign Origin gets 403, a foreign Host 421; SIGTERM exits 0."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        mine = journal.append({"kind": "note", "agent": "motoko", "theme": "harbor", "voice": "The harbor at dawn."}).id
        journal.append({"kind": "note", "agent": "batou", "theme": "harbor", "voice": "The harbor at noon."})
    with http_server(root, tmp_path, "--agent", "motoko", "--read-only") as (process, url, errlog):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        instructions, tools, found = anyio.run(_session_calls, url)
        assert "only agent 'motoko'" in instructions and "journal_append" not in tools
        assert [hit["entry_id"] for hit in found["hits"]] == [mine]
        evil = httpx2.post(url, json=INITIALIZE, headers={**JSON_HEADERS, "origin": "http://evil.example"}, timeout=30)
        assert evil.status_code == 403
        rebound = httpx2.post(url, json=INITIALIZE, headers={**JSON_HEADERS, "host": "evil.example:80"}, timeout=30)
        assert rebound.status_code == 421
        local = httpx2.post(url, json=INITIALIZE, headers={**JSON_HEADERS, "origin": "http://localhost:3000"}, timeout=30)
        assert local.status_code == 200, local.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert server_events(errlog)[-1] == {**server_events(errlog)[-1], "event": "mcp.stopped", "reason": "SIGTERM"}
        assert process.stdout is not None and process.stdout.read() == ""
        assert "Traceback" not in errlog.read_text()


def test_a_token_is_required_when_set(tmp_path: Path) -> None:
    """With GHOSTJOURNAL_MCP_TOKEN set, a request without it (or with another) gets 401; the SDK client with it is served."""
    root = tmp_path / "journal"
    Journal(root).close()
    with http_server(root, tmp_path, token=TOKEN) as (_process, url, _errlog):
        assert httpx2.post(url, json=INITIALIZE, headers=JSON_HEADERS, timeout=30).status_code == 401
        wrong = httpx2.post(url, json=INITIALIZE, headers={**JSON_HEADERS, "authorization": "Bearer guess"}, timeout=30)
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        _instructions, tools, found = anyio.run(_session_calls, url, {"authorization": f"Bearer {TOKEN}"})
        assert "journal_append" in tools and found == {"hits": []}


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "[::]:8765", "192.0.2.1:8765"])
def test_a_non_loopback_address_without_a_token_is_refused_before_binding(tmp_path: Path, address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-loopback --http without GHOSTJOURNAL_MCP_TOKEN is a usage error (exit 2) naming the variable; nothing listens."""
    monkeypatch.delenv("GHOSTJOURNAL_MCP_TOKEN", raising=False)
    Journal(tmp_path / "journal").close()
    result = CliRunner().invoke(cli, ["--root", str(tmp_path / "journal"), "mcp", "--http", address])
    assert result.exit_code == 2, result.output
    assert "not a loopback address, needs a bearer token: set GHOSTJOURNAL_MCP_TOKEN" in result.stderr
    bad = CliRunner().invoke(cli, ["--root", str(tmp_path / "journal"), "mcp", "--http", "8765"])
    assert bad.exit_code == 2 and "--http must be HOST:PORT" in bad.stderr
