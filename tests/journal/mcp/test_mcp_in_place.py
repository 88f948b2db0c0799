"""``ghostjournal mcp`` over a journal moved away or replaced while it runs: the next call uses the journal now at the path.

Every change is a real one on the file system, made between two calls of one
connected client (the SDK's own, over stdio and over Streamable HTTP).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from journal import Journal
from tests.journal._mcp import http_server, mcp_server

OLD = {"kind": "note", "theme": "harbor", "voice": "The harbor crane was repainted orange.", "client_key": "crane"}
GONE = {"kind": "note", "theme": "lighthouse", "voice": "The lighthouse keeper retired in spring.", "client_key": "keeper"}
NEW = {"kind": "note", "theme": "ferry", "voice": "The night ferry now leaves at eleven.", "client_key": "ferry"}


def _backup(root: Path, out: Path) -> None:
    """``ghostjournal backup``, as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "journal.cli.cli", "--root", str(root), "backup", "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _directory_restored(root: Path, backup: Path) -> Path:
    """The journal moved away and its backup put in its place; where the old one went."""
    lost = root.with_name("lost")
    root.rename(lost)
    shutil.copytree(backup, root)
    return lost


def _entries_restored(root: Path, backup: Path) -> Path:
    """entries/ replaced by the backup's (a restore of the entry files alone); where the old entries/ went."""
    shutil.copytree(backup / "entries", root / "entries.restored")
    (root / "entries").rename(root / "entries.old")
    (root / "entries.restored").rename(root / "entries")
    return root / "entries.old"


CHANGES: dict[str, Callable[[Path, Path], Path]] = {"the directory restored": _directory_restored, "entries/ restored": _entries_restored}


def _keys(root: Path) -> set[str | None]:
    with Journal(root, create=False) as journal:
        return {entry.client_key for entry in journal.list()}


def _files_holding(directory: Path, text: str) -> list[Path]:
    return [path for path in directory.rglob("*.json") if text in path.read_text(encoding="utf-8", errors="replace")]


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_after_a_restore_under_a_stdio_server_its_append_and_search_use_the_journal_at_the_path(tmp_path: Path, change: str) -> None:
    """The append after the restore is stored in the restored journal, not the old files; searches answer from it alone."""
    root, backup = tmp_path / "journal", tmp_path / "backup"
    with Journal(root) as journal:
        journal.append({**OLD, "agent": "motoko"})
    _backup(root, backup)
    with mcp_server(root, "--agent", "motoko") as server:
        gone = server.ok("journal_append", **GONE)["entry"]["id"]
        assert [hit["entry_id"] for hit in server.ok("journal_search", query="lighthouse keeper")["hits"]] == [gone]
        old_place = CHANGES[change](root, backup)
        new = server.ok("journal_append", **NEW)["entry"]["id"]
        assert [hit["entry_id"] for hit in server.ok("journal_search", query="night ferry")["hits"]] == [new]
        assert server.ok("journal_search", query="lighthouse keeper")["hits"] == []  # the restore does not hold it
        assert [entry["id"] for entry in server.ok("journal_list")["entries"]] == [new, server.ok("journal_search", query="crane")["hits"][0]["entry_id"]]
        assert server.wait_for_event("mcp.reopened")["root"] == str(root)
    assert _keys(root) == {"crane", "ferry"}
    assert _files_holding(old_place, "night ferry") == []


def test_a_path_left_without_a_journal_makes_each_call_an_error_until_one_is_back(tmp_path: Path) -> None:
    """Moved away with nothing in its place: each call is an error result naming the path, nothing is written anywhere, and the
    server answers again once the journal is moved back."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        journal.append({**OLD, "agent": "motoko"})
    with mcp_server(root, "--agent", "motoko") as server:
        assert len(server.ok("journal_search", query="crane")["hits"]) == 1
        root.rename(tmp_path / "away")
        for tool, arguments in (("journal_append", NEW), ("journal_search", {"query": "crane"})):
            message = server.error(tool, **arguments)
            assert message.startswith(f"{tool}: no journal at {str(root)!r} (the journal this server opened was moved away or replaced since)")
        assert not root.exists()
        assert _files_holding(tmp_path / "away", "night ferry") == []
        (tmp_path / "away").rename(root)
        new = server.ok("journal_append", **NEW)["entry"]["id"]
        assert [hit["entry_id"] for hit in server.ok("journal_search", query="night ferry")["hits"]] == [new]
    assert _keys(root) == {"crane", "ferry"}


async def _calls_around(url: str, between: Callable[[], Any]) -> tuple[list[str], str]:
    """Over one HTTP session: an append and its search, *between*, then an append and a search: the two searches' hit ids, and the
    second append's id."""
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        await session.initialize()
        await session.list_tools()

        async def ok(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        await ok("journal_append", GONE)
        before = [hit["entry_id"] for hit in (await ok("journal_search", {"query": "lighthouse keeper"}))["hits"]]
        assert len(before) == 1
        between()
        new = (await ok("journal_append", NEW))["entry"]["id"]
        found = [hit["entry_id"] for hit in (await ok("journal_search", {"query": "night ferry"}))["hits"]]
        assert found == [new]
        stale = [hit["entry_id"] for hit in (await ok("journal_search", {"query": "lighthouse keeper"}))["hits"]]
        return stale, new


def test_after_a_restore_under_an_http_server_its_append_and_search_use_the_journal_at_the_path(tmp_path: Path) -> None:
    root, backup = tmp_path / "journal", tmp_path / "backup"
    with Journal(root) as journal:
        journal.append({**OLD, "agent": "motoko"})
    _backup(root, backup)
    with http_server(root, tmp_path, "--agent", "motoko") as (_process, url, errlog):
        stale, _new = anyio.run(_calls_around, url, lambda: _directory_restored(root, backup))
        assert stale == []
        assert '"event": "mcp.reopened"' in errlog.read_text()
    assert _keys(root) == {"crane", "ferry"}
    assert _files_holding(tmp_path / "lost", "night ferry") == []
