"""The run engine: one entry per slot, digests, dry runs, context use and a fourth routine from config."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from journal import Journal
from runner.backends import ReflectionRequest, build_backend
from runner.run.engine import execute_run
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, write_config

FOURTH = """
[routines.morning]
kind = "note"
schedule = "0 7 * * *"
slot = "day"
question = "what is waiting for me today?"
prompt = "Write a short morning note."
window = "2d"

[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening", "digest", "morning"]
"""


def _run(config: Any, journal: Journal, routine: str, scheduled: datetime, **kwargs: Any) -> Any:
    agent = config.agent("motoko")
    routine_config = config.routine_for(agent, routine)
    backend = kwargs.pop("backend", None) or build_backend(agent)
    return execute_run(journal, agent=agent, routine=routine_config, scheduled=scheduled, backend=backend, tz=config.timezone, **kwargs)


def test_fourth_routine_added_by_configuration_runs(tmp_path: Path) -> None:
    """A routine defined only in TOML runs and appends an entry with its kind, slot and source routine."""
    config = load_config(write_config(tmp_path, FOURTH))
    with Journal(config.agent("motoko").journal_root) as journal:
        result = _run(config, journal, "morning", datetime(2026, 9, 5, 7, tzinfo=config.timezone))
        assert result.outcome == "appended", result.error
        entry = journal.get(result.entry_id)
    assert entry.kind == "note"
    assert entry.client_key == "motoko:morning:2026-09-05"
    assert entry.meta["source_routine"] == "morning"
    assert entry.ts == "2026-09-05T07:00:00+00:00"


def test_same_slot_twice_is_appended_then_duplicate(tmp_path: Path) -> None:
    """Running one slot twice appends once and reports the same entry as duplicate, logging one run.finished each."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    scheduled = datetime(2026, 9, 5, 16, tzinfo=config.timezone)
    with Journal(config.agent("motoko").journal_root) as journal, capture_logs() as logs:
        first = _run(config, journal, "pulse-4h", scheduled)
        second = _run(config, journal, "pulse-4h", scheduled)
        assert [first.outcome, second.outcome] == ["appended", "duplicate"]
        assert first.entry_id == second.entry_id
        assert len(journal.list(agent="motoko")) == 1
    finished = [log for log in logs if log["event"] == "run.finished"]
    assert [log["outcome"] for log in finished] == ["appended", "duplicate"]
    assert set(finished[0]) >= {"run_id", "agent", "routine", "slot", "client_key", "entry_id", "outcome", "duration_ms", "error"}


def test_digest_routine_appends_a_summarizing_digest_entry(tmp_path: Path) -> None:
    """The digest routine stores the computed digest of its window as a kind=digest entry whose voice summarizes it."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    tz = config.timezone
    with Journal(config.agent("motoko").journal_root) as journal:
        for hour in range(0, 24 * 3, 4):
            _run(config, journal, "pulse-4h", datetime(2026, 9, 3, tzinfo=tz) + timedelta(hours=hour))
        result = _run(config, journal, "digest", datetime(2026, 9, 6, 22, tzinfo=tz))
        assert result.outcome == "appended", result.error
        entry = journal.get(result.entry_id)
    assert entry.kind == "digest" and entry.client_key == "motoko:digest:2026-W36"
    assert entry.voice.startswith("Digest of 2026-W36: 18 entries")
    assert entry.meta["digest"]["count"] == 18
    assert entry.meta["digest"]["themes"][0]["theme"] in entry.voice


def test_empty_digest_window_is_skipped(tmp_path: Path) -> None:
    """A digest with nothing in its window appends nothing and reports skipped."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    with Journal(config.agent("motoko").journal_root) as journal:
        result = _run(config, journal, "digest", datetime(2026, 9, 6, 22, tzinfo=config.timezone))
        assert (result.outcome, result.entry_id) == ("skipped", None)
        assert journal.list() == []


def test_dry_run_validates_and_appends_nothing(tmp_path: Path) -> None:
    """A dry run returns the would-be entry, outcome skipped, and leaves the journal empty."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    with Journal(config.agent("motoko").journal_root) as journal:
        result = _run(config, journal, "evening", datetime(2026, 9, 5, 21, tzinfo=config.timezone), dry_run=True)
        assert result.outcome == "skipped"
        assert result.entry is not None and result.entry["client_key"] == "motoko:evening:2026-09-05"
        assert journal.list() == []


class _Recorder:
    """A backend that records its request, and cites and corrects one shown id plus one invented id."""

    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[ReflectionRequest] = []

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        self.requests.append(request)
        shown = [record.id for record in request.context.records]
        return {"voice": "v", "theme": "t", "signals": {"continuity_refs": [*shown[:1], "invented-id"], "supersedes": ["invented-id", *shown[:1]]}}


def test_context_is_agent_scoped_windowed_and_refs_are_checked(tmp_path: Path) -> None:
    """The backend sees only the agent's own past entries before the scheduled time; invented refs and corrections are dropped."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    tz = config.timezone
    with Journal(config.agent("motoko").journal_root) as journal:
        journal.append({"kind": "note", "agent": "batou", "theme": "t", "voice": "batou's own note", "ts": "2026-09-05T10:00:00Z"})
        journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "earlier", "ts": "2026-09-05T10:00:00Z"})
        journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "later", "ts": "2026-09-05T18:00:00Z"})
        recorder = _Recorder()
        result = _run(config, journal, "pulse-4h", datetime(2026, 9, 5, 16, tzinfo=tz), backend=recorder)
        records = recorder.requests[0].context.records
        assert [r.voice for r in records] == ["earlier"]
        assert journal.get(result.entry_id).continuity_refs == (records[0].id,)
        assert journal.get(result.entry_id).supersedes == (records[0].id,)
