"""An append never stores a link that no read can follow, so a journal written only by appends always verifies clean.

Entry files are immutable: a ``continuity_refs`` or ``supersedes`` id that
names no entry, another agent's entry or the entry itself would be a
``dangling_link`` or ``foreign_link`` that ``verify`` reports for good, and
every backup that verifies would fail on it. Append refuses each one with
the field named, writes nothing, and tells another agent's id from a missing
one by nothing. An import stores through the same append, so it stores
only what this accepts (see test_import_trust.py); the runner keeps only
ids its reply was shown (tests/runner/backends).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.errors import EntryValidationError
from tests._support import entry_files

START = datetime(2026, 9, 1, tzinfo=UTC)
FIELDS = ("continuity_refs", "supersedes")


def _payload(agent: str, hours: int, **signals: list[str]) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": "note", "agent": agent, "theme": "tide", "voice": f"The tide at hour {hours}.",
                               "ts": (START + timedelta(hours=hours)).isoformat()}
    if signals:
        payload["signals"] = signals
    return payload


@pytest.mark.parametrize("field", FIELDS)
def test_a_link_to_a_missing_foreign_or_own_id_is_refused_by_field_and_nothing_is_written(journal: Journal, root: Path, field: str) -> None:
    mine = journal.append(_payload("motoko", 0))
    theirs = journal.append(_payload("batou", 1))
    before = entry_files(root)
    refused = {
        "missing": {field: ["no-such-entry"]},
        "foreign": {field: [theirs.id]},
        "second": {field: [mine.id, theirs.id]},
    }
    messages = {}
    for name, signals in refused.items():
        with pytest.raises(EntryValidationError) as caught:
            journal.append(_payload("motoko", 5, **signals))
        messages[name] = str(caught.value)
        assert caught.value.field == f"signals.{field}[{1 if name == 'second' else 0}]"
    with pytest.raises(EntryValidationError, match="not the entry's own id") as own:
        journal.append({**_payload("motoko", 5, **{field: ["self-linking"]}), "id": "self-linking"})
    assert own.value.field == f"signals.{field}[0]"
    assert entry_files(root) == before
    assert len(journal.list(limit=10)) == 2
    # Another agent's id reads exactly like an id that does not exist: an append cannot probe for them.
    assert messages["foreign"].replace(theirs.id, "X") == messages["missing"].replace("no-such-entry", "X")
    assert journal.append(_payload("motoko", 6, **{field: [mine.id]})).signals == {field: [mine.id]}


@pytest.mark.parametrize("field", FIELDS)
def test_the_cli_refuses_a_link_that_names_no_entry_with_exit_65_and_one_line(root: Path, field: str) -> None:
    Journal(root).close()
    payload = json.dumps(_payload("motoko", 0, **{field: ["missing"]}))
    result = subprocess.run(["ghostjournal", "--root", str(root), "append"], input=payload, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 65, result.stderr
    assert f"signals.{field}[0]" in result.stderr and '"missing", which is none' in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert entry_files(root) == {}


@st.composite
def _appends(draw: st.DrawFn) -> list[tuple[str, str, dict[str, list[str]]]]:
    """Appends of two agents, each with an id of its own and links drawn from every id so far, some never written, its own."""
    count = draw(st.integers(1, 14))
    plan = []
    for n in range(count):
        agent = draw(st.sampled_from(["alice", "bob"]))
        candidates = [f"e{m}" for m in range(n)] + ["never-written", f"e{n}", f"e{n + 1}"]
        signals = {field: refs for field in FIELDS if (refs := draw(st.lists(st.sampled_from(candidates), max_size=3, unique=True)))}
        plan.append((f"e{n}", agent, signals))
    return plan


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=_appends())
def test_whatever_appends_store_the_journal_verifies_clean(plan: list[tuple[str, str, dict[str, list[str]]]]) -> None:
    """Each append is stored exactly when every link names an earlier entry of its own agent; else refused by field. Then verify is clean."""
    with tempfile.TemporaryDirectory() as tmp, Journal(Path(tmp) / "j") as journal:
        stored: dict[str, str] = {}
        for hours, (entry_id, agent, signals) in enumerate(plan):
            payload = {**_payload(agent, hours), "id": entry_id, **({"signals": signals} if signals else {})}
            followable = all(stored.get(ref) == agent for refs in signals.values() for ref in refs)
            if followable:
                journal.append(payload)
                stored[entry_id] = agent
            else:
                with pytest.raises(EntryValidationError) as caught:
                    journal.append(payload)
                assert caught.value.field.startswith(("signals.continuity_refs[", "signals.supersedes["))
        report = journal.verify()
        assert not report.problems, report.to_dict()
        assert {entry.id for entry in journal.list(limit=100)} == set(stored)
