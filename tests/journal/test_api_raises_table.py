"""docs/python-api.md's table of what each call raises is what a caller should catch: every class it names is one a call raises."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import pytest

import journal
import journal.errors
from journal import Journal
from journal.ranking.context import MIN_CONTEXT_CHARS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _raises_rows() -> dict[str, str]:
    """The rows of the table headed ``| call | raises |``: the call column to the raises column."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index("| call | raises |") + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        call, raises = line.strip("|").split(" | ", 1)
        rows[call.strip()] = raises
    return rows


def test_every_class_the_table_names_is_exported_and_still_raised() -> None:
    """A class no call raises any more (kept only so old ``except`` clauses import) is no advice to catch it."""
    rows = _raises_rows()
    assert "`append`, `append_with_result`" in rows, sorted(rows)
    for call, raises in rows.items():
        for name in re.findall(r"`(\w+Error)`", raises):
            cls = getattr(journal.errors, name, None) or getattr(builtins, name)
            if cls.__module__ == "journal.errors":
                assert getattr(journal, name) is cls, name
                assert not (cls.__doc__ or "").startswith("Once raised"), f"{call} is documented to raise {name}, which nothing raises"


def test_the_max_chars_minimum_the_table_states_is_the_one_a_call_enforces(tmp_path: Path) -> None:
    """The stated minimum is accepted and one below it is a ValueError naming it."""
    stated = re.search(r"a `max_chars` below \*\*(\d+)\*\*", _raises_rows()["`search`, `relate`, `context`, `prompt_context`"])
    assert stated is not None and int(stated.group(1)) == MIN_CONTEXT_CHARS
    with Journal(tmp_path / "j", create=True) as j:
        assert j.prompt_context("harbor", max_chars=MIN_CONTEXT_CHARS)
        with pytest.raises(ValueError, match=f"max_chars must be at least {MIN_CONTEXT_CHARS}, got {MIN_CONTEXT_CHARS - 1}"):
            j.context("harbor", max_chars=MIN_CONTEXT_CHARS - 1)
