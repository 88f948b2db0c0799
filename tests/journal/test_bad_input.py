"""Bad input gets a clear error naming the field, and the journal's files stay as they were."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from journal import MAX_ENTRY_BYTES, EntryValidationError, Journal
from journal.cli.cli import cli
from tests._support import tree_digest

# (id, changes to a valid payload, the field the message must name)
RULES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-field", {"colour": "blue"}, "'colour'"),
    ("naive-ts", {"ts": "2026-09-05T16:00:00"}, "'ts'"),
    ("nan-novelty", {"signals": {"novelty": float("nan")}}, "'signals.novelty'"),
    ("infinity-in-meta", {"meta": {"x": [1, float("inf")]}}, "'meta.x[1]'"),
    ("nan-embedding", {"embedding": [float("nan")]}, "'embedding[0]'"),
    ("bool-schema-version", {"schema_version": True}, "'schema_version'"),
    ("float-schema-version", {"schema_version": 1.0}, "'schema_version'"),
    ("novelty-2", {"signals": {"novelty": 2}}, "'signals.novelty'"),
    ("duplicate-tags", {"tags": ["light", "light"]}, "'tags'"),
    ("empty-voice", {"voice": ""}, "'voice'"),
    ("wrong-kind", {"kind": "diary"}, "'kind'"),
    ("non-object-meta", {"meta": ["a"]}, "'meta'"),
    ("bad-continuity-ref", {"signals": {"continuity_refs": ["ok", "../../etc/passwd"]}}, "'signals.continuity_refs[1]'"),
    ("id-path", {"id": "a/../b"}, "'id'"),
    ("oversized", {"voice": "x" * MAX_ENTRY_BYTES}, "entry: expected at most"),
]


@pytest.mark.parametrize(("changes", "field"), [(c, f) for _, c, f in RULES], ids=[i for i, _, _ in RULES])
def test_api_rejects_and_writes_nothing(journal: Journal, make_payload: Callable[..., dict[str, Any]], changes: dict[str, Any], field: str) -> None:
    """Each broken rule raises EntryValidationError naming the field; no file changes."""
    journal.append(make_payload(voice="an earlier entry that must survive"))
    before = tree_digest(journal.root)
    with pytest.raises(EntryValidationError, match=field.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        journal.append(make_payload(**changes))
    assert tree_digest(journal.root) == before
    assert len(journal.list()) == 1


def _cli_append(root: Path, stdin: bytes) -> Any:
    return CliRunner().invoke(cli, ["--root", str(root), "append"], input=stdin)


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (b"\xff\xfe{}", "expected UTF-8 text"),
        (b'{"kind": "note",', "invalid JSON"),
        (b'{"kind":"note","agent":"m","theme":"t","voice":"v","signals":{"novelty":NaN}}', "NaN is not valid JSON"),
        (b'{"kind":"note","agent":"m","theme":"t","voice":"v","meta":{"x":Infinity}}', "Infinity is not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"", "got no input"),
        (json.dumps({"kind": "note", "agent": "m", "theme": "t", "voice": "v", "mood": 3}).encode(), "'mood'"),
    ],
    ids=["non-utf8", "truncated-json", "nan-literal", "infinity-literal", "array", "empty", "wrong-type"],
)
def test_cli_rejects_bad_stdin_with_one_line_and_exit_65(root: Path, stdin: bytes, message: str) -> None:
    """The CLI prints one clear line on stderr, exits 65 (invalid data) and changes nothing."""
    Journal(root).close()
    before = tree_digest(root)
    result = _cli_append(root, stdin)
    assert result.exit_code == 65, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert tree_digest(root) == before


def test_256_kilobytes_of_text_are_accepted(journal: Journal, make_payload: Callable[..., dict[str, Any]]) -> None:
    """A voice of 256 KB (multi-byte characters included) fits under the size limit and round-trips."""
    voice = ("tide ✶ " * 40000)[: 256 * 1024]
    entry = journal.append(make_payload(voice=voice))
    assert journal.get(entry.id).voice == voice
