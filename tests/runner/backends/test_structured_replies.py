"""Structured replies: the reply schema, and the reply format the openai backend asks a real server on 127.0.0.1 for, with its fallbacks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from journal import Journal, JournalError, validate_payload
from runner.backends import build_backend
from runner.backends._reply_format import parse_retry_after
from runner.backends.base import REPLY_FIELDS, REPLY_SCHEMA, REQUIRED_REPLY_FIELDS, check_reply
from runner.errors import BackendError
from runner.run.engine import execute_run
from runner.settings.config import load_config
from tests._chat_server import GOOD_REPLY, ChatServer
from tests._support import openai_agent, write_config


def _config(tmp_path: Path, url: str, extra: str = "") -> Any:
    return load_config(write_config(tmp_path, openai_agent(url, routines=("evening", "pulse-4h"), backend=f"retry_delay = 0.01\n{extra}\n")))


def _runs(config: Any, *routines: str) -> list[Any]:
    """Runs of *routines* in one process with one backend, as the engine makes them; their results."""
    agent = config.agent("motoko")
    backend = build_backend(agent)
    with Journal(agent.journal_root) as journal:
        return [execute_run(journal, agent=agent, routine=config.routines[name], scheduled=datetime(2026, 9, 5, 20, tzinfo=config.timezone),
                            backend=backend, tz=config.timezone) for name in routines]


def test_the_schema_is_valid_and_names_exactly_the_reply_fields() -> None:
    """REPLY_SCHEMA is a valid JSON Schema whose properties are REPLY_FIELDS and whose required fields are voice and theme."""
    jsonschema.Draft202012Validator.check_schema(REPLY_SCHEMA)
    assert list(REPLY_SCHEMA["properties"]) == list(REPLY_FIELDS)
    assert REPLY_SCHEMA["required"] == list(REQUIRED_REPLY_FIELDS) and REPLY_SCHEMA["additionalProperties"] is False


@pytest.mark.parametrize("reply", [
    GOOD_REPLY,
    {"voice": "v", "theme": "t", "signals": {"focus": "f", "novelty": 0.0, "continuity_refs": ["e-1"]}, "anchors": [{"type": "url", "ref": "x"}]},
    {"voice": "v", "theme": "t", "signals": {"supersedes": ["e-1"]}},
    {"voice": "v", "theme": "t", "anchors": [{"type": "file", "ref": "a.txt", "label": "notes"}], "tags": []},
    {"voice": "v"},
    {"voice": "v", "theme": "t", "extra": 1},
    {"voice": "v", "theme": "t", "signals": {"novelty": 2}},
    {"voice": "v", "theme": "x" * 201},
    {"voice": "v", "theme": "t", "anchors": [{"type": "url"}]},
], ids=["good", "full", "a-correction", "anchors-with-label", "no-theme", "extra-field", "novelty-out-of-range", "long-theme", "anchor-without-ref"])
def test_the_schema_never_refuses_a_reply_the_runner_accepts(reply: dict[str, Any]) -> None:
    """What the schema accepts and what check_reply plus the journal's validator accept agree on these replies: never stricter."""
    accepted = True
    try:
        validate_payload({**check_reply(reply, "test"), "kind": "note", "agent": "motoko"})
    except (BackendError, JournalError):
        accepted = False
    assert jsonschema.Draft202012Validator(REPLY_SCHEMA).is_valid(reply) is accepted


def test_a_server_with_structured_replies_gets_the_schema(tmp_path: Path) -> None:
    """By default the request asks for a json_schema reply built from the reply fields, and one request is enough."""
    with ChatServer() as server:
        [result] = _runs(_config(tmp_path, server.url), "evening")
        assert (result.outcome, result.attempts) == ("appended", 1)
        [body] = server.requests
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "journal_entry", "schema": REPLY_SCHEMA, "strict": False}}


def test_a_refused_schema_falls_back_to_json_object_then_to_the_prompt_alone(tmp_path: Path) -> None:
    """A server refusing response_format twice is asked with json_schema, then json_object, then nothing; the refusals are no attempts."""
    with ChatServer(["refuse-format", "refuse-format"]) as server:
        [result] = _runs(_config(tmp_path, server.url), "evening")
        assert (result.outcome, result.attempts) == ("appended", 1), result.error
        assert server.formats == ["json_schema", "json_object", None]
        assert server.requests[0]["messages"] == server.requests[2]["messages"]  # the same request, only the format differs


def test_what_worked_is_remembered_for_the_rest_of_the_run(tmp_path: Path) -> None:
    """After json_schema was refused, a retry (after a 503) and the backend's next call ask for json_object at once."""
    with ChatServer(["refuse-format", 503]) as server:
        first, second = _runs(_config(tmp_path, server.url), "evening", "pulse-4h")
        assert (first.outcome, first.attempts, second.outcome, second.attempts) == ("appended", 2, "appended", 1), first.error
        assert server.formats == ["json_schema", "json_object", "json_object", "json_object"]


def test_json_mode_off_asks_with_the_prompt_alone(tmp_path: Path) -> None:
    """With json_mode = false no response_format is sent at all."""
    with ChatServer() as server:
        [result] = _runs(_config(tmp_path, server.url, "json_mode = false"), "evening")
        assert result.outcome == "appended" and server.formats == [None]


def test_a_400_about_something_else_is_permanent_and_not_a_format_refusal(tmp_path: Path) -> None:
    """A 400 that does not mention the reply format fails the run for good after one request; no fallback is tried."""
    with ChatServer([400]) as server:
        [result] = _runs(_config(tmp_path, server.url), "evening")
        assert (result.outcome, result.attempts, result.permanent) == ("failed", 1, True)
        assert server.formats == ["json_schema"] and "HTTP 400" in (result.error or "")


@pytest.mark.parametrize(("value", "seconds"), [
    ("7", 7.0), (" 0 ", 0.0), ("999999", 3600.0), ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0), ("soon", None), ("-1", None), ("", None), (None, None),
])
def test_retry_after_reads_seconds_or_an_http_date(value: str | None, seconds: float | None) -> None:
    """Retry-After is delay-seconds or an HTTP date (here one minute after 'now'); an hour at most; anything else is ignored."""
    assert parse_retry_after(value, now=datetime(2015, 10, 21, 7, 27, tzinfo=UTC).timestamp()) == seconds
