"""A simulated agent life: recurring themes, continuity chains, idempotent re-runs, parallel agents."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from journal import Journal
from runner.run.simulate import schedule_for, simulate, simulation_window
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, entries, ghostrunner, write_config
from tests.runner._no_nn import without_nn


def test_ninety_days_yield_recurring_themes_and_continuity_chains(tmp_path: Path) -> None:
    """90 simulated days give a digest with recurring themes, long continuity chains and varying novelty; a re-run appends nothing."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    start = datetime(2026, 6, 1, tzinfo=config.timezone)
    end = start + timedelta(days=90)
    first = simulate(config, ["motoko"], start, end)[0]
    assert first.outcomes == {"appended": 90 * 6 + 90 + 12}  # pulses, evenings, the digests of 12 Sundays
    with Journal(config.agent("motoko").journal_root) as journal:
        digest = journal.digest(agent="motoko", since=start, until=end)
        weekly = journal.list(kind="digest", agent="motoko")
    themes = {item["theme"]: item["count"] for item in digest.themes}
    persona_themes = [interest.theme for interest in config.agent("motoko").persona.interests]
    assert sum(1 for theme in persona_themes if themes.get(theme, 0) >= 20) >= 5  # themes recur, not noise
    assert digest.continuity["links"] > 400
    assert max(len(chain) for chain in digest.continuity["longest_chains"]) >= 5
    weekly_means = [week["mean"] for week in digest.novelty["weekly"]]
    assert max(weekly_means) - min(weekly_means) > 0.05  # novelty varies
    assert all("Recurring themes:" in entry.voice for entry in weekly)
    # the leading theme drifts over the weeks instead of staying fixed
    assert len({entry.signals["focus"] for entry in weekly}) >= 3

    again = simulate(config, ["motoko"], start, end)[0]
    assert again.outcomes == {"duplicate": first.outcomes["appended"]}
    assert len(entries(config.agent("motoko").journal_root)) == first.outcomes["appended"]


def test_simulation_is_deterministic(tmp_path: Path) -> None:
    """Two journals simulated over the same days hold the same voices."""
    voices = []
    for name in ("a", "b"):
        config = load_config(write_config(tmp_path / name, SIMPLE_AGENT))
        start = datetime(2026, 6, 1, tzinfo=config.timezone)
        simulate(config, ["motoko"], start, start + timedelta(days=5))
        voices.append([e.voice for e in entries(config.agent("motoko").journal_root)])
    assert voices[0] == voices[1] and len(voices[0]) == 5 * 7


def test_schedule_is_in_time_order_across_routines(tmp_path: Path) -> None:
    """The virtual clock visits every routine's slots in time order."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    start = datetime(2026, 9, 6, tzinfo=config.timezone)
    plan = [(moment, routine.name) for moment, routine in schedule_for(config, "motoko", start, start + timedelta(days=1))]
    assert [name for _, name in plan] == ["pulse-4h"] * 6 + ["evening", "digest"]
    assert [moment for moment, _ in plan] == sorted(moment for moment, _ in plan)


def test_cli_simulates_several_agents_in_parallel_workers(tmp_path: Path) -> None:
    """`ghostrunner simulate` runs agents with their own journals in worker processes and prints a JSON summary."""
    body = "".join(
        f'[agents.{name}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening"]\njournal_root = "./journals/{{agent}}"\n'
        for name in ("motoko", "batou", "togusa")
    )
    path = write_config(tmp_path, body)
    result = ghostrunner("simulate", "--days", "3", "--start", "2026-09-01", "--workers", "2", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["outcomes"] == {"appended": 3 * 3 * 7}
    assert [agent["agent"] for agent in summary["agents"]] == ["batou", "motoko", "togusa"]
    for name in ("motoko", "batou", "togusa"):
        assert len(entries(tmp_path / "journals" / name, name)) == 21


def test_simulation_window_counts_local_days_from_a_day_a_time_or_today() -> None:
    """A day starts at its local midnight, a time at itself, no start at midnight DAYS days ago; DAYS are local days across DST."""
    berlin = ZoneInfo("Europe/Berlin")
    start, end = simulation_window(2, berlin, date(2026, 3, 28))
    assert (start.isoformat(), end.isoformat()) == ("2026-03-28T00:00:00+01:00", "2026-03-30T00:00:00+02:00")
    assert (end.astimezone(UTC) - start.astimezone(UTC)).total_seconds() == 47 * 3600  # the spring-forward day has 23 hours
    moment = datetime(2026, 3, 28, 5, 30, tzinfo=UTC)
    assert simulation_window(1, berlin, moment)[0].isoformat() == "2026-03-28T06:30:00+01:00"
    now = datetime(2026, 9, 5, 23, 30, tzinfo=UTC)  # already 6 September in Berlin
    assert simulation_window(7, berlin, now=now)[0].isoformat() == "2026-08-30T00:00:00+02:00"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_agent_whose_hybrid_memory_cannot_load_fails_its_runs_and_the_summary_still_comes(tmp_path: Path, workers: str) -> None:
    """One hybrid agent whose model cannot load (no nn extra): its runs are failed with the reason, the other agent's stand, the summary is printed."""
    body = "".join(
        f'[agents.{name}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening"]\njournal_root = "./journals/{{agent}}"\nmemory = "{memory}"\n'
        for name, memory in (("motoko", "lexical"), ("batou", "hybrid"))
    )
    path = write_config(tmp_path, body)
    # motoko first: in one process its runs are written before batou's journal is opened.
    result = without_nn("simulate", "--agent", "motoko", "--agent", "batou", "--days", "2", "--start", "2026-09-01", "--workers", workers,
                         "--config", str(path), "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads(result.stdout)
    assert summary["outcomes"] == {"appended": 2 * 7, "failed": 2 * 7}
    motoko, batou = summary["agents"]
    assert (motoko["agent"], motoko["outcomes"], motoko["failures"]) == ("motoko", {"appended": 14}, [])
    assert (batou["agent"], batou["runs"], batou["outcomes"]) == ("batou", 14, {"failed": 14})
    assert len(batou["failures"]) == 10 and batou["failures"][0].startswith("batou:pulse-4h:2026-09-01T00: ")
    assert 'memory = "hybrid" (agents.batou.memory' in batou["failures"][0] and "ghostjournal[nn]" in batou["failures"][0]
    assert len(entries(tmp_path / "journals" / "motoko", "motoko")) == 14
    assert not (tmp_path / "journals" / "batou").exists()
