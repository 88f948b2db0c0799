"""Entry schema v1: the packaged JSON Schema and the validator in code agree."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import pytest

from journal import EntryValidationError, validate_payload

BASE: dict[str, Any] = {"kind": "pulse", "agent": "motoko", "voice": "The tide came in.", "theme": "tide"}


def _with(**changes: Any) -> dict[str, Any]:
    payload = {**BASE, **changes}
    return {k: v for k, v in payload.items() if v is not _DROP}


_DROP = object()

# (id, payload, valid?) — cases both validators can judge.
TABLE: list[tuple[str, dict[str, Any], bool]] = [
    ("minimal", _with(), True),
    ("full", _with(
        schema_version=1, id="entry_01", ts="2026-09-05T16:00:00+02:00", tags=["a", "b"], mood="calm",
        anchors=[{"type": "url", "ref": "https://example.org", "label": "x"}],
        signals={"focus": "light", "novelty": 0.5, "continuity_refs": ["e1", "e-2"]},
        embedding=[0.1, -2, 3.5], client_key="motoko:pulse-4h:2026-09-05T16",
        meta={"schema_version": 1, "source_routine": "pulse-4h", "extra": {"nested": [1, 2]}},
    ), True),
    ("ts-utc-z-fraction", _with(ts="2026-09-05T16:00:00.123456Z"), True),
    ("novelty-bounds", _with(signals={"novelty": 0}), True),
    ("novelty-one", _with(signals={"novelty": 1}), True),
    ("unknown-field", _with(colour="blue"), False),
    ("naive-ts", _with(ts="2026-09-05T16:00:00"), False),
    ("date-only-ts", _with(ts="2026-09-05"), False),
    ("space-separated-ts", _with(ts="2026-09-05 16:00:00Z"), False),
    ("month-13", _with(ts="2026-13-05T16:00:00Z"), False),
    ("bool-schema-version", _with(schema_version=True), False),
    ("schema-version-2", _with(schema_version=2), False),
    ("string-schema-version", _with(schema_version="1"), False),
    ("novelty-2", _with(signals={"novelty": 2}), False),
    ("novelty-negative", _with(signals={"novelty": -0.1}), False),
    ("novelty-string", _with(signals={"novelty": "high"}), False),
    ("duplicate-tags", _with(tags=["a", "a"]), False),
    ("empty-tag", _with(tags=[""]), False),
    ("tags-not-list", _with(tags="a,b"), False),
    ("empty-voice", _with(voice=""), False),
    ("blank-voice", _with(voice="   "), False),
    ("voice-number", _with(voice=3), False),
    ("missing-voice", _with(voice=_DROP), False),
    ("missing-theme", _with(theme=_DROP), False),
    ("missing-kind", _with(kind=_DROP), False),
    ("missing-agent", _with(agent=_DROP), False),
    ("wrong-kind", _with(kind="diary"), False),
    ("empty-agent", _with(agent=""), False),
    ("agent-with-slash", _with(agent="a/b"), False),
    ("meta-list", _with(meta=[1]), False),
    ("meta-string", _with(meta="x"), False),
    ("meta-schema-version-2", _with(meta={"schema_version": 2}), False),
    ("meta-origin-untrusted", _with(meta={"origin": "untrusted"}), True),
    ("meta-origin-unknown", _with(meta={"origin": "admin"}), False),
    ("bad-continuity-ref", _with(signals={"continuity_refs": ["../etc"]}), False),
    ("continuity-ref-number", _with(signals={"continuity_refs": [7]}), False),
    ("duplicate-continuity-ref", _with(signals={"continuity_refs": ["a", "a"]}), False),
    ("unknown-signal", _with(signals={"urgency": 1}), False),
    ("anchor-missing-ref", _with(anchors=[{"type": "url"}]), False),
    ("anchor-unknown-field", _with(anchors=[{"type": "url", "ref": "x", "fetch": True}]), False),
    ("id-with-slash", _with(id="a/b"), False),
    ("id-dotdot", _with(id=".."), False),
    ("id-glob", _with(id="a*"), False),
    ("id-too-long", _with(id="a" * 129), False),
    ("id-max-length", _with(id="a" * 128), True),
    ("embedding-empty", _with(embedding=[]), False),
    ("embedding-bool", _with(embedding=[True]), False),
    ("client-key-empty", _with(client_key=""), False),
    ("client-key-newline", _with(client_key="a\nb"), False),
    ("mood-null", _with(mood=None), False),
    ("not-an-object", ["kind", "pulse"], False),  # type: ignore[list-item]
]


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("journal").joinpath("schemas/entry-v1.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _code_accepts(payload: Any) -> bool:
    try:
        validate_payload(payload)
    except EntryValidationError:
        return False
    return True


@pytest.mark.parametrize(("payload", "valid"), [(p, v) for _, p, v in TABLE], ids=[i for i, _, _ in TABLE])
def test_schema_file_and_code_agree(schema_validator: jsonschema.Draft202012Validator, payload: Any, valid: bool) -> None:
    """Both validators give the expected verdict on every payload of the table."""
    assert schema_validator.is_valid(payload) is valid
    assert _code_accepts(payload) is valid


# Rules the JSON Schema language cannot state; the code enforces them alone.
CODE_ONLY = [
    ("float-schema-version", _with(schema_version=1.0)),  # JSON Schema counts 1.0 as the integer 1
    ("february-30", _with(ts="2026-02-30T10:00:00Z")),
    ("nan-in-meta", _with(meta={"score": float("nan")})),
    ("infinity-in-embedding", _with(embedding=[float("inf")])),
    ("oversized-entry", _with(voice="x" * (1024 * 1024 + 1))),
]


@pytest.mark.parametrize("payload", [p for _, p in CODE_ONLY], ids=[i for i, _ in CODE_ONLY])
def test_code_enforces_rules_beyond_the_schema_language(payload: dict[str, Any]) -> None:
    """The validator rejects what JSON Schema cannot express (float versions, impossible dates, NaN, size)."""
    assert not _code_accepts(payload)


def test_defaults_are_filled_without_touching_the_input() -> None:
    """Omitted id, ts, schema_version, tags and meta.schema_version are filled; ts is aware UTC."""
    payload = dict(BASE)
    data = validate_payload(payload)
    assert payload == BASE
    assert data["schema_version"] == 1 and data["tags"] == [] and data["meta"] == {"schema_version": 1}
    assert data["ts"].endswith("Z")
    assert len(data["id"]) == 36
