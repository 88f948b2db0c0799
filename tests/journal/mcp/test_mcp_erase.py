"""journal_erase: offered only with --allow-erase, and on a scoped server only for the served agent's own entries."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from journal import Journal
from tests._support import tree_digest
from tests.journal._mcp import mcp_server


def _two_agents(root: Path) -> tuple[str, str]:
    with Journal(root) as journal:
        own = journal.append({"kind": "note", "agent": "motoko", "theme": "keys", "voice": "the token is ghp_notreallyatoken"}).id
        other = journal.append({"kind": "note", "agent": "batou", "theme": "patrol", "voice": "Harbor patrol at noon."}).id
    return own, other


def test_erase_is_offered_only_when_the_server_allows_it(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    own, _ = _two_agents(root)
    with mcp_server(root, "--agent", "motoko") as server, pytest.raises(MCPError, match="journal_erase"):
        server.call("journal_erase", {"ids": [own], "reason": "leaked"})
    with Journal(root) as journal:
        assert journal.get(own).erased is None


def test_a_scoped_server_erases_its_agent_s_entries_and_reads_another_s_id_as_unknown(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    own, other = _two_agents(root)
    with mcp_server(root, "--agent", "motoko", "--allow-erase") as server:
        before = tree_digest(root / "entries")
        refused = server.error("journal_erase", ids=[other], reason="not mine")
        assert f"no entry with id {other!r}" in refused
        assert tree_digest(root / "entries") == before
        done = server.ok("journal_erase", ids=[own], reason="a token was written into it")
        assert done == {"erased": [own], "already_erased": [], "by": "mcp:motoko"}
        assert server.ok("journal_get", id=own)["entry"]["meta"]["erased"]["reason"] == "a token was written into it"
    with Journal(root) as journal:
        assert journal.get(other).erased is None
