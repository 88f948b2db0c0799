"""``ghostjournal mcp`` through the SDK's own stdio client: the handshake, the tool schemas, every tool, resources, bad input, scope.

Each server here is a real subprocess; results are compared with what the
Journal API answers in this process for the same journal.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types as types
import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from journal import MAX_ENTRY_BYTES, Journal
from journal.cli.cli import cli
from journal.mcp._schemas import MAX_LIMIT, MAX_QUERY_CHARS
from tests._support import tree_digest
from tests.journal._mcp import McpServer, mcp_server

WRITES = {"journal_append", "journal_accept_proposal", "journal_reject_proposal"}
TOOLS = {"journal_search", "journal_get", "journal_list", "journal_context", "journal_digest", "journal_relate", "journal_proposals", *WRITES}


def _fill(root: Path) -> dict[str, str]:
    """Two agents in one journal; both write about the harbor. Returns ids by a short name."""
    with Journal(root) as journal:
        ids = {}
        ids["light"] = journal.append({"kind": "note", "agent": "motoko", "ts": "2026-09-01T08:00:00Z", "theme": "harbor light",
                                       "voice": "The harbor lights flickered while the ferry left.", "tags": ["harbor", "light"]}).id
        ids["tide"] = journal.append({"kind": "pulse", "agent": "motoko", "ts": "2026-09-02T08:00:00Z", "theme": "tide tables",
                                      "voice": "I kept reading the tide tables by the harbor wall.", "tags": ["harbor"],
                                      "signals": {"novelty": 0.4, "continuity_refs": [ids["light"]]}}).id
        ids["train"] = journal.append({"kind": "evening", "agent": "motoko", "ts": "2026-09-03T21:00:00Z", "theme": "night train",
                                       "voice": "The night train was late; I wrote on the platform.", "mood": "restless"}).id
        ids["batou"] = journal.append({"kind": "note", "agent": "batou", "ts": "2026-09-02T12:00:00Z", "theme": "harbor patrol",
                                       "voice": "Harbor patrol at noon: the harbor is quiet, the dog sleeps.", "tags": ["harbor"],
                                       "client_key": "batou:patrol:2026-09-02"}).id
        ids["batou2"] = journal.append({"kind": "note", "agent": "batou", "ts": "2026-09-04T12:00:00Z", "theme": "harbor light",
                                        "voice": "Someone keeps the harbor lights on all night.", "tags": ["harbor", "light"]}).id
    return ids


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("mcp") / "journal"
    return root, _fill(root)


@pytest.fixture(scope="module")
def everyone(shared: tuple[Path, dict[str, str]]) -> Iterator[McpServer]:
    with mcp_server(shared[0]) as server:
        yield server


@pytest.fixture(scope="module")
def motoko(shared: tuple[Path, dict[str, str]]) -> Iterator[McpServer]:
    """Scoped to motoko and read-only: the reads must not change the shared journal anyway."""
    with mcp_server(shared[0], "--agent", "motoko", "--read-only") as server:
        yield server


def _ids(hits: list[dict[str, Any]]) -> list[str]:
    return [hit["entry_id"] for hit in hits]


def test_initialize_says_who_it_serves(everyone: McpServer, motoko: McpServer) -> None:
    """The handshake names the server; its instructions say whose entries it serves and whether it writes."""
    assert everyone.init.server_info.name == "ghostjournal"
    assert everyone.init.capabilities.tools is not None and everyone.init.capabilities.resources is not None
    assert "serves every agent" in (everyone.init.instructions or "")
    assert "journal_context" in (everyone.init.instructions or "") and "client_key" in (everyone.init.instructions or "")
    assert "only agent 'motoko'" in (motoko.init.instructions or "") and "read-only" in (motoko.init.instructions or "")


def test_tools_and_their_schemas(everyone: McpServer, motoko: McpServer) -> None:
    """Every tool has a description, valid JSON Schemas that refuse unknown arguments, and read tools say they only read."""
    listed = {tool.name: tool for tool in everyone.tools()}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.description and len(tool.description) > 40
        for schema in (tool.input_schema, tool.output_schema):
            assert schema is not None
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and "$ref" not in json.dumps(schema)
        assert tool.input_schema["additionalProperties"] is False
        assert tool.annotations is not None and tool.annotations.read_only_hint is (tool.name not in WRITES)
    assert listed["journal_search"].input_schema["required"] == ["query"]
    assert set(listed["journal_search"].input_schema["properties"]) == {"query", "k", "kind", "since", "until", "as_of", "current_only", "floor", "rerank", "mode", "agent"}
    append = listed["journal_append"].input_schema
    assert set(append["properties"]) == {"kind", "voice", "theme", "tags", "mood", "signals", "anchors", "client_key", "meta", "agent"}
    assert set(append["required"]) == {"kind", "agent", "voice", "theme"}
    jsonschema.validate({"kind": "note", "agent": "motoko", "theme": "t", "voice": "v", "client_key": "k"}, append)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"kind": "note", "agent": "motoko", "theme": "t", "voice": "v", "ts": "2026-09-05T16:00:00Z"}, append)
    scoped = {tool.name: tool for tool in motoko.tools()}
    assert set(scoped) == TOOLS - WRITES
    for tool in scoped.values():
        assert tool.input_schema["properties"]["agent"]["const"] == "motoko"
        # Entries and digests in a result must be motoko's, or the SDK's client refuses the result (context records carry no agent).
        assert tool.output_schema is not None and ("motoko" in json.dumps(tool.output_schema)) is (tool.name != "journal_context")


def test_every_read_tool_answers_as_the_journal_does(everyone: McpServer, shared: tuple[Path, dict[str, str]]) -> None:
    """search, get, list, context, digest and relate return what the Journal API returns for the same arguments."""
    root, ids = shared
    with Journal(root) as journal:
        found = everyone.ok("journal_search", query="harbor lights", k=3)["hits"]
        assert found == [hit.to_dict() for hit in journal.search("harbor lights", k=3)]
        assert {hit["entry_id"] for hit in found} >= {ids["light"], ids["batou2"]}
        assert all(hit["snippet"] and hit["entry"]["id"] == hit["entry_id"] for hit in found)
        assert everyone.ok("journal_search", query="tide", kind="pulse", since="2026-09-02T00:00:00Z")["hits"][0]["entry_id"] == ids["tide"]
        assert everyone.ok("journal_search", query="zeppelin")["hits"] == []
        assert everyone.ok("journal_get", id=ids["tide"])["entry"] == journal.get(ids["tide"]).to_dict()
        listed = everyone.ok("journal_list", limit=2)["entries"]
        assert listed == [entry.to_dict() for entry in journal.list(limit=2)] and listed[0]["id"] == ids["batou2"]
        assert [e["id"] for e in everyone.ok("journal_list", kind="note", agent="batou")["entries"]] == [ids["batou2"], ids["batou"]]
        context = everyone.ok("journal_context", query="what about the harbor?", k=2, agent="motoko")
        expected = journal.context("what about the harbor?", k=2, agent="motoko")
        assert context == {**expected.to_dict(), "text": expected.text}
        assert everyone.call("journal_context", {"query": "what about the harbor?", "k": 2, "agent": "motoko"}).content[0] == types.TextContent(text=expected.text)
        assert everyone.ok("journal_digest", since="2026-09-01T00:00:00Z") == journal.digest(since="2026-09-01T00:00:00Z").to_dict()
        # The command line's time forms: a date is the first moment of its day in the server's zone, as a time without an offset is.
        by_date = everyone.ok("journal_list", since="2026-09-02", until="2026-09-04")["entries"]
        assert by_date == everyone.ok("journal_list", since="2026-09-02T00:00", until="2026-09-04T00:00")["entries"] != []
        assert everyone.ok("journal_list", since="-100000d", until="now") == everyone.ok("journal_list")
        related = everyone.ok("journal_relate", id=ids["light"], k=3)["hits"]
        assert related == [hit.to_dict() for hit in journal.relate(ids["light"], k=3)]
        assert related[0] == {**related[0], "entry_id": ids["tide"], "reason": "continued_by"}


def test_resources_newest_and_one_entry(everyone: McpServer, motoko: McpServer, shared: tuple[Path, dict[str, str]]) -> None:
    """The newest-entries resource and the entry template serve JSON, within the server's scope."""
    root, ids = shared
    listed = everyone.portal.call(everyone.session.list_resources).resources
    assert [str(resource.uri) for resource in listed] == ["journal://entries/newest"]
    templates = everyone.portal.call(everyone.session.list_resource_templates).resource_templates
    assert [template.uri_template for template in templates] == ["journal://entries/{id}"]

    def read(server: McpServer, uri: str) -> Any:
        contents = server.portal.call(server.session.read_resource, uri).contents
        assert len(contents) == 1 and isinstance(contents[0], types.TextResourceContents)
        assert contents[0].mime_type == "application/json"
        return json.loads(contents[0].text)

    with Journal(root) as journal:
        assert read(everyone, "journal://entries/newest") == [entry.to_dict() for entry in journal.list(limit=20)]
        assert read(motoko, "journal://entries/newest") == [entry.to_dict() for entry in journal.list(agent="motoko", limit=20)]
    assert read(everyone, f"journal://entries/{ids['batou']}")["agent"] == "batou"
    with pytest.raises(MCPError, match="no entry with id"):
        read(motoko, f"journal://entries/{ids['batou']}")
    with pytest.raises(MCPError, match="unknown resource"):
        read(everyone, "journal://elsewhere")


def test_scope_keeps_reads_to_one_agent(motoko: McpServer, shared: tuple[Path, dict[str, str]]) -> None:
    """Scoped to motoko, no read shows batou's entries, ids, scores or snippets, and naming batou is refused."""
    root, ids = shared
    with Journal(root) as journal:
        hits = motoko.ok("journal_search", query="harbor light", k=10)["hits"]
        assert hits == [hit.to_dict() for hit in journal.search("harbor light", k=10, agent="motoko")]
        assert {hit["entry"]["agent"] for hit in hits} == {"motoko"} and ids["batou2"] not in _ids(hits)
        assert {e["agent"] for e in motoko.ok("journal_list", limit=100)["entries"]} == {"motoko"}
        assert motoko.ok("journal_digest")["count"] == 3
        records = motoko.ok("journal_context", query="harbor patrol dog", k=5)["records"]
        assert {r["id"] for r in records} <= {ids["light"], ids["tide"], ids["train"]}
        assert set(_ids(motoko.ok("journal_relate", id=ids["light"], k=10)["hits"])) <= {ids["tide"], ids["train"]}
    # Another agent's id reads exactly like an id that does not exist.
    assert motoko.error("journal_get", id=ids["batou"]) == f"journal_get: no entry with id {ids['batou']!r}"
    assert motoko.error("journal_get", id="nothere") == "journal_get: no entry with id 'nothere'"
    assert motoko.error("journal_relate", id=ids["batou"]) == f"journal_relate: no entry with id {ids['batou']!r}"
    for tool, arguments in [("journal_search", {"query": "harbor"}), ("journal_list", {}), ("journal_digest", {}),
                            ("journal_context", {"query": "harbor"}), ("journal_get", {"id": ids["batou"]})]:
        text = motoko.error(tool, **arguments, agent="batou")
        assert text.startswith(f"{tool}: agent must be 'motoko'") and "'batou'" not in text.split("got")[0]
    assert motoko.ok("journal_list", agent="motoko")["entries"]


def test_read_only_offers_no_append(motoko: McpServer, shared: tuple[Path, dict[str, str]]) -> None:
    """--read-only lists no journal_append, and calling it anyway is a protocol error that writes nothing."""
    before = tree_digest(shared[0] / "entries")
    with pytest.raises(MCPError, match="unknown tool 'journal_append'; this server is read-only"):
        motoko.call("journal_append", {"kind": "note", "theme": "t", "voice": "v"})
    assert tree_digest(shared[0] / "entries") == before
    assert motoko.ok("journal_list", limit=1)["entries"]


def test_appends_are_stored_as_the_served_agent(tmp_path: Path) -> None:
    """Scoped to motoko, an append is stored as motoko, one naming batou is refused, and batou's client_key is his alone."""
    root = tmp_path / "journal"
    ids = _fill(root)
    with mcp_server(root, "--agent", "motoko") as server:
        stored = server.ok("journal_append", kind="note", theme="ferry", voice="Took the late ferry.", client_key="motoko:ferry:1")
        assert stored["outcome"] == "appended" and stored["duplicate"] is False and stored["entry"]["agent"] == "motoko"
        again = server.ok("journal_append", kind="note", theme="other", voice="A retry with other words.", client_key="motoko:ferry:1")
        assert again == {"outcome": "duplicate", "duplicate": True, "entry": stored["entry"]}
        before = tree_digest(root / "entries")
        refused = server.error("journal_append", kind="note", agent="batou", theme="t", voice="Pretending to be batou.")
        assert refused.startswith("journal_append: agent must be 'motoko'")
        assert tree_digest(root / "entries") == before
        # A key is unique per agent: batou's key in motoko's append is motoko's own key, and batou's entry is not touched or shown.
        own = server.ok("journal_append", kind="note", theme="t", voice="v", client_key="batou:patrol:2026-09-02")
        assert own["outcome"] == "appended" and own["entry"]["agent"] == "motoko" and "dog" not in str(own) and ids["batou"] not in str(own)
    with Journal(root) as journal:
        assert journal.get(stored["entry"]["id"]).to_dict() == stored["entry"]
        assert [e.id for e in journal.list(agent="batou")] == [ids["batou2"], ids["batou"]]


def test_the_tools_take_whole_ids_only_not_the_start_a_terminal_table_shows(tmp_path: Path) -> None:
    """The command line takes an id's unique start; the server keeps its exact contract: a start is no entry's id."""
    root = tmp_path / "journal"
    ids = _fill(root)
    start = ids["tide"][:8]
    assert json.loads(CliRunner().invoke(cli, ["--root", str(root), "get", start]).output)["id"] == ids["tide"]
    with mcp_server(root) as server:
        assert server.error("journal_get", id=start) == f"journal_get: no entry with id {start!r}"
        assert server.error("journal_relate", id=start).startswith(f"journal_relate: no entry with id {start!r}")
        assert server.ok("journal_get", id=ids["tide"])["entry"]["id"] == ids["tide"]


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    root = tmp_path_factory.mktemp("mcp-bad") / "journal"
    with Journal(root) as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "harbor", "voice": "an earlier entry that must survive"})
    with mcp_server(root) as server:
        yield server


VALID = {"kind": "note", "agent": "motoko", "theme": "harbor light", "voice": "The harbor lights flickered.", "tags": ["harbor"]}

# (id, changes to a valid append (None removes the field), what the message must say)
APPEND_RULES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-field", {"colour": "blue"}, "unknown argument 'colour'"),
    ("ts-not-offered", {"ts": "2026-09-05T16:00:00"}, "unknown argument 'ts'"),
    # The SDK's client sends NaN as null (pydantic's JSON); the literal NaN is in test_mcp_wire.
    ("nan-novelty", {"signals": {"novelty": math.nan}}, "entry field 'signals.novelty'"),
    ("novelty-2", {"signals": {"novelty": 2}}, "entry field 'signals.novelty'"),
    ("wrong-type-mood", {"mood": 3}, "entry field 'mood'"),
    ("wrong-type-tags", {"tags": "harbor"}, "entry field 'tags'"),
    ("duplicate-tags", {"tags": ["a", "a"]}, "entry field 'tags'"),
    ("wrong-kind", {"kind": "diary"}, "entry field 'kind'"),
    ("empty-voice", {"voice": ""}, "entry field 'voice'"),
    ("missing-theme", {"theme": None}, "theme is required"),
    ("missing-agent", {"agent": None}, "agent is required"),  # this server serves every agent: an append names its own
    ("bad-continuity-ref", {"signals": {"continuity_refs": ["../../etc/passwd"]}}, "entry field 'signals.continuity_refs[0]'"),
    ("non-object-meta", {"meta": ["a"]}, "entry field 'meta'"),
    ("oversized", {"voice": "x" * MAX_ENTRY_BYTES}, "entry: expected at most"),
]


@pytest.mark.parametrize(("changes", "message"), [(c, m) for _, c, m in APPEND_RULES], ids=[i for i, _, _ in APPEND_RULES])
def test_bad_append_is_an_error_result_and_writes_nothing(writer: McpServer, changes: dict[str, Any], message: str) -> None:
    """Each broken rule is an isError result naming the argument; nothing is written and the server answers the next call."""
    root = Path(writer.wait_for_event("mcp.started")["root"])
    before = tree_digest(root)
    arguments = {key: value for key, value in {**VALID, **changes}.items() if value is not None}
    assert message in writer.error("journal_append", **arguments)
    assert tree_digest(root) == before
    assert len(writer.ok("journal_list")["entries"]) == 1


SEARCH_RULES: list[tuple[str, dict[str, Any], str]] = [
    ("impossible-since", {"since": "2026-02-30"}, "since: expected a date (2026-01-01), a time without an offset"),
    ("bad-until", {"until": "yesterday"}, "until: expected a date (2026-01-01)"),
    ("since-number", {"since": 1757088000}, "since must be a string, got a number"),
    ("unknown-argument", {"colour": "blue"}, "unknown argument 'colour'; journal_search takes query, k"),
    ("missing-query", {"query": None}, "query is required"),
    ("query-number", {"query": 5}, "query must be a string, got a number 5"),
    ("oversized-query", {"query": "tide " * (MAX_QUERY_CHARS // 5 + 1)}, f"query must be at most {MAX_QUERY_CHARS:,} characters"),
    ("k-string", {"k": "five"}, 'k must be an integer, got a string "five"'),
    ("k-bool", {"k": True}, "k must be an integer, got a boolean true"),
    ("k-float", {"k": 2.5}, "k must be an integer, got a number 2.5"),
    ("k-nan", {"k": math.nan}, "k must be an integer, got null"),
    ("k-zero", {"k": 0}, "k must be an integer from 1 to 100, got 0"),
    ("k-huge", {"k": 10**30}, "k must be an integer from 1 to 100"),
    ("wrong-kind", {"kind": "diary"}, "kind must be one of 'pulse', 'evening', 'note', 'digest', got \"diary\""),
    ("bad-mode", {"mode": "fuzzy"}, "mode must be one of 'auto', 'lexical', 'semantic', 'hybrid'"),
    ("semantic-without-nn", {"mode": "semantic"}, "semantic search is not available"),
    ("agent-number", {"agent": 7}, "agent must be a string, got a number 7"),
    ("current-only-string", {"current_only": "yes"}, 'current_only must be true or false, got a string "yes"'),
    ("floor-string", {"floor": "false"}, 'floor must be true or false, got a string "false"'),
    ("floor-number", {"floor": 0}, "floor must be true or false, got a number 0"),
    ("no-floor-without-nn", {"floor": False}, "floor=False (--no-floor; floor: false over MCP) lifts the relevance floor of ranking by meaning"),
    ("bad-as-of", {"as_of": "2026-09-05 at four"}, "as_of: expected a date (2026-01-01)"),
    ("rerank-string", {"rerank": "no"}, 'rerank must be true or false, got a string "no"'),
]


def test_rerank_false_ranks_without_the_neighbours(everyone: McpServer, shared: tuple[Path, dict[str, str]]) -> None:
    """The tide pulse continues the harbor-light note: a search for the note's own words brings it in, unless rerank is false."""
    ids = shared[1]
    for tool, key in (("journal_search", "hits"), ("journal_context", "records")):
        found = everyone.ok(tool, query="flickered ferry", agent="motoko", k=2)[key]
        plain = everyone.ok(tool, query="flickered ferry", agent="motoko", k=2, rerank=False)[key]
        if tool == "journal_search":
            assert (_ids(found), _ids(plain)) == ([ids["light"], ids["tide"]], [ids["light"]])
        else:  # the context fills up with recent entries; only the matches differ
            assert [(r["id"], r["found_by"]) for r in found if r["found_by"] == "match"] == [(ids["light"], "match"), (ids["tide"], "match")]
            assert [r["id"] for r in plain if r["found_by"] == "match"] == [ids["light"]]


@pytest.mark.parametrize(("changes", "message"), [(c, m) for _, c, m in SEARCH_RULES], ids=[i for i, _, _ in SEARCH_RULES])
def test_bad_search_is_an_error_result_naming_the_argument(writer: McpServer, changes: dict[str, Any], message: str) -> None:
    """A bad search argument is an isError result that names it; the next search is answered."""
    arguments = {key: value for key, value in {"query": "harbor", **changes}.items() if value is not None}
    text = writer.error("journal_search", **arguments)
    assert text.startswith("journal_search: ") and message in text
    assert len(writer.ok("journal_search", query="harbor")["hits"]) == 1


def test_an_integral_number_is_an_integer_and_null_is_named_once(writer: McpServer) -> None:
    """JSON Schema counts 1.0 an integer, so it is one; 1.5 and null are refused naming the argument, null said once (not "null null")."""
    assert len(writer.ok("journal_search", query="harbor", k=1.0)["hits"]) == 1
    assert len(writer.ok("journal_list", limit=20.0)["entries"]) == 1
    assert writer.ok("journal_context", query="harbor", k=2.0, max_chars=600.0)["records"]
    assert writer.error("journal_search", query="harbor", k=1.5) == "journal_search: k must be an integer, got a number 1.5"
    assert writer.error("journal_search", query="harbor", k=None) == "journal_search: k must be an integer, got null"
    assert writer.error("journal_list", limit=0.0) == f"journal_list: limit must be an integer from 1 to {MAX_LIMIT:,}, got 0"
    for tool, arguments in [("journal_search", {"query": None}), ("journal_list", {"current_only": None}), ("journal_get", {"id": None})]:
        text = writer.error(tool, **arguments)
        assert text.endswith("got null") and "null null" not in text, text


def test_cli_refuses_a_missing_journal_and_a_bad_agent(tmp_path: Path) -> None:
    """No journal at the root exits 3 and a malformed --agent exits 2, one line on stderr, nothing on stdout, no server."""
    missing = CliRunner().invoke(cli, ["--root", str(tmp_path / "none"), "mcp"])
    assert missing.exit_code == 3 and "no journal at" in missing.stderr and missing.stdout == ""
    Journal(tmp_path / "journal").close()
    bad = CliRunner().invoke(cli, ["--root", str(tmp_path / "journal"), "mcp", "--agent", "../etc"])
    assert bad.exit_code == 2 and "--agent must be 1-64 letters" in bad.stderr and bad.stdout == ""


def test_the_sdk_is_imported_only_by_the_mcp_command(tmp_path: Path) -> None:
    """Other commands never import the SDK; without it, `mcp` is one line naming the extra, exit 1."""
    root = tmp_path / "journal"
    Journal(root).close()
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from journal.cli.cli import cli\n"
        f"result = CliRunner().invoke(cli, ['--root', {str(root)!r}, 'search', 'harbor'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(sorted(m for m in ('mcp', 'starlette', 'pydantic', 'anyio') if m in sys.modules))\n"
        "sys.modules['mcp'] = None  # as if the extra were not installed\n"
        f"result = CliRunner().invoke(cli, ['--root', {str(root)!r}, 'mcp'])\n"
        "print(result.exit_code, result.stderr.strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1].startswith("1 ghostjournal: error: the MCP server needs the 'mcp' extra") and out[1].endswith("pip install 'ghostjournal[mcp]'")


def test_corrections_reach_the_tools(tmp_path: Path) -> None:
    """An append that supersedes an entry reorders search, and as_of and current_only work as in the library."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        old = journal.append({"kind": "note", "agent": "motoko", "theme": "wifi", "voice": "The wifi password is tern-42.", "ts": "2026-03-01T09:00:00Z"})
    with mcp_server(root, "--agent", "motoko") as server:
        new = server.ok("journal_append", kind="note", theme="wifi", voice="The wifi password is heron-77 now.",
                        signals={"supersedes": [old.id]}, client_key="motoko:wifi:2026-05")["entry"]
        hits = server.ok("journal_search", query="tern")["hits"]
        assert _ids(hits) == [new["id"], old.id] and hits[1]["superseded_by"] == [new["id"]]
        assert _ids(server.ok("journal_search", query="wifi password", current_only=True)["hits"]) == [new["id"]]
        assert [e["id"] for e in server.ok("journal_list", as_of="2026-04-01T00:00:00Z")["entries"]] == [old.id]
        assert server.ok("journal_digest")["corrections"] == {"entries": 1, "superseded": 1}
        assert "signals.supersedes[0]" in server.error("journal_append", kind="note", theme="t", voice="v", signals={"supersedes": ["nope"]})
        assert "signals.continuity_refs[0]" in server.error("journal_append", kind="note", theme="t", voice="v", signals={"continuity_refs": ["nope"]})
