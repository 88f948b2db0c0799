"""run_at, what `ghostrunner run` does: the slot of the latest scheduled time at or before a time, with the agent's backend."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from journal import Journal
from runner import RunResult, UnknownNameError, load_config, run_at
from tests._support import SIMPLE_AGENT, write_config


def test_a_time_between_fire_times_runs_the_slot_of_the_latest_one(tmp_path: Path) -> None:
    """At 23:10 the evening routine (21:00) runs today's slot, with the agent's backend, and appends its entry."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    reported: list[RunResult] = []
    result = run_at(config, "motoko", "evening", at=datetime(2026, 9, 5, 23, 10, tzinfo=UTC), on_result=reported.append)
    assert (result.outcome, result.slot, result.scheduled) == ("appended", "2026-09-05", "2026-09-05T21:00:00+00:00"), result.error
    assert reported == [result]
    with Journal(config.agent("motoko").journal_root) as journal:
        entry = journal.get(result.entry_id or "")
    assert (entry.kind, entry.meta["backend"]) == ("evening", "simulated")


def test_a_time_before_the_days_fire_time_runs_the_previous_slot(tmp_path: Path) -> None:
    """At 20:59 the evening slot is yesterday's; a dry run of it appends nothing."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    result = run_at(config, "motoko", "evening", at=datetime(2026, 9, 5, 20, 59, tzinfo=UTC), dry_run=True)
    assert (result.outcome, result.slot, result.entry_id) == ("skipped", "2026-09-04", None)
    assert result.entry is not None and result.entry["client_key"] == "motoko:evening:2026-09-04"


def test_a_digest_routine_runs_without_a_backend(tmp_path: Path) -> None:
    """The digest routine summarizes the journal (no backend is built for it): an empty window is skipped, with a null error (nothing failed)."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    result = run_at(config, "motoko", "digest", at=datetime(2026, 9, 6, 23, tzinfo=UTC))
    assert (result.outcome, result.error, result.entry_id) == ("skipped", None, None)


def test_an_unknown_agent_or_routine_is_refused_before_any_run(tmp_path: Path) -> None:
    """An agent or routine the configuration does not define raises UnknownNameError naming it, and creates no journal."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    with pytest.raises(UnknownNameError, match="no agent 'batou' in the configuration; configured: motoko"):
        run_at(config, "batou", "evening")
    with pytest.raises(UnknownNameError, match="'morning'"):
        run_at(config, "motoko", "morning")
    assert not (tmp_path / "journal").exists()
