"""Hostile argument values over MCP: every tool call is a result or one error line naming the argument.

A real ``ghostjournal mcp`` server is driven by the MCP SDK's own client; each
read tool gets values of every JSON type where its schema wants another
(null, booleans, integral and fractional floats, integers far past any limit,
strings), and never answers with a traceback, a protocol error, or a message
that says a value's type twice ("got null null").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mcp.types as types
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from journal import Journal
from tests.attack.hostile import hostile_text
from tests.journal._mcp import McpServer, mcp_server

#: The read tools, each with its required arguments and the optional ones a value is drawn for.
TOOLS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "journal_search": ({"query": "harbor"}, ("query", "k", "kind", "agent", "since", "until", "mode", "floor", "rerank", "as_of")),
    "journal_list": ({}, ("limit", "kind", "agent", "since", "until", "current_only", "as_of")),
    "journal_context": ({"query": "harbor"}, ("query", "k", "max_chars", "agent")),
    "journal_digest": ({}, ("since", "until", "agent")),
    "journal_get": ({"id": "x"}, ("id",)),
}

VALUES = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**30), 10**30),
    st.integers(-3, 3).map(float), st.sampled_from([0, 1, 2, 20, 100, 101, 500, 501, 600, 599, 1.0, 600.0, 1.5, 1e300, -0.0]),
    hostile_text(max_size=30).map(lambda text: "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)),  # JSON text cannot carry a lone surrogate
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    root = tmp_path_factory.mktemp("mcp-arguments") / "journal"
    with Journal(root) as journal:
        journal.append({"kind": "note", "agent": "motoko", "theme": "harbor", "voice": "The harbor lights flickered."})
    with mcp_server(root) as running:
        yield running


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tool=st.sampled_from(sorted(TOOLS)), data=st.data())
@example(tool="journal_search", data=None)
def test_any_argument_value_is_a_result_or_one_line_naming_the_argument(server: McpServer, tool: str, data: st.DataObject | None) -> None:
    """A value of any JSON type in any argument: a result, or an error result whose one line names that argument."""
    required, names = TOOLS[tool]
    if data is None:  # null where an integer goes: the message said "got null null"
        name, value = "k", None
    else:
        name, value = data.draw(st.sampled_from(names)), data.draw(VALUES)
    result = server.call(tool, {**required, name: value})
    assert isinstance(result, types.CallToolResult)
    if result.is_error:
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        text = block.text
        assert text.startswith(f"{tool}: ") and "\n" not in text and "Traceback" not in text, text
        assert name in text or tool == "journal_get", text  # an unknown id is named by its value
        assert "null null" not in text, text
    else:
        assert isinstance(result.structured_content, dict)
    assert "Traceback" not in server.stderr()
