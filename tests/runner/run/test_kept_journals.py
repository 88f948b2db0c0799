"""Journals kept open between runs (runner.run.kept), as a fleet worker's pool process keeps them: reused, and never past what may change."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from journal import Journal
from runner import load_config, run_at
from runner.run.kept import KeptJournals
from tests._support import SIMPLE_AGENT, write_config

#: Each run's whole timeout, as a fleet worker gives it: without one, ``run_timeout`` counts from the process's start, and a
#: test worker may have lived longer than that by the time it gets here (its backend would then have no time left).
RUN_TIMEOUT = 120.0
#: pulse-4h fires at 00:00, 04:00, ...: each of these times is its own slot.
SLOTS = [datetime(2026, 9, 5, hour, 10, tzinfo=UTC) for hour in (0, 4, 8)]


def _keys(root: Path) -> list[str]:
    with Journal(root, create=False) as journal:
        return sorted(entry.client_key or "" for entry in journal.list(limit=100))


def test_runs_with_kept_journals_reuse_one_open_journal_and_each_appends_its_entry(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    journals = KeptJournals()
    outcomes = [run_at(config, "motoko", "pulse-4h", at=at, journals=journals, run_timeout=RUN_TIMEOUT).outcome for at in SLOTS]
    assert outcomes == ["appended"] * 3 and len(journals) == 1
    kept = journals.take(config.agent("motoko"))
    assert journals.take(config.agent("motoko")) is kept and kept.find_by_client_key("motoko:pulse-4h:2026-09-05T08") is not None
    assert _keys(config.agent("motoko").journal_root) == [f"motoko:pulse-4h:2026-09-05T{hour:02d}" for hour in (0, 4, 8)]
    journals.close()
    assert len(journals) == 0


@pytest.mark.parametrize("moved", ["the directory", "what is in it"])
def test_a_journal_moved_away_between_runs_gets_no_more_entries_and_the_next_run_writes_where_the_agent_is(tmp_path: Path, moved: str) -> None:
    """A restore that puts another journal in the place of the kept one: the kept handles point at the old one, which must not be written."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    root = config.agent("motoko").journal_root
    journals = KeptJournals()
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    if moved == "the directory":
        root.rename(tmp_path / "moved")
    else:
        (tmp_path / "moved").mkdir()
        for path in list(root.iterdir()):
            path.rename(tmp_path / "moved" / path.name)
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    assert _keys(tmp_path / "moved") == ["motoko:pulse-4h:2026-09-05T00"]
    assert _keys(root) == ["motoko:pulse-4h:2026-09-05T04"]
    journals.close()


@pytest.mark.parametrize("held", [".write.lock", "entries/.generation"])
def test_a_journal_whose_lock_or_write_counter_was_replaced_is_opened_anew(tmp_path: Path, held: str) -> None:
    """A restore that copies files in (a copy, then a rename over the old one) leaves the directories as they were: a journal kept
    over the old lock file would lock a file no other writer opens, so it is given up and the next run opens the journal anew."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT))
    agent = config.agent("motoko")
    journals = KeptJournals()
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    kept = journals.take(agent)
    assert journals.take(agent) is kept
    path = agent.journal_root / held
    copy = path.with_name(path.name + ".restored")
    shutil.copy2(path, copy)
    copy.rename(path)
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    again = journals.take(agent)
    assert again is not kept and journals.take(agent) is again  # the new one is kept from its run on
    journals.close()
    assert _keys(agent.journal_root) == ["motoko:pulse-4h:2026-09-05T00", "motoko:pulse-4h:2026-09-05T04"]


def test_a_failed_run_closes_its_journal_and_the_next_run_opens_it_anew(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    backend = f'{{ type = "command", command = {json.dumps([sys.executable, "-c", f"print(open({str(answer)!r}).read())"])}, attempts = 1 }}'
    config = load_config(write_config(tmp_path, f'[agents.motoko]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\nbackend = {backend}\n'))
    journals = KeptJournals()
    answer.write_text(json.dumps({"voice": "A first note.", "theme": "kept"}), encoding="utf-8")
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    assert len(journals) == 1
    answer.unlink()
    failed = run_at(config, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT)
    assert failed.outcome == "failed" and len(journals) == 0
    answer.write_text(json.dumps({"voice": "A second note.", "theme": "kept"}), encoding="utf-8")
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[2], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    assert len(journals) == 1
    journals.close()
    assert _keys(config.agent("motoko").journal_root) == ["motoko:pulse-4h:2026-09-05T00", "motoko:pulse-4h:2026-09-05T08"]


def test_past_the_most_kept_a_run_opens_and_closes_its_journal_as_before(tmp_path: Path) -> None:
    agents = "".join(f'[agents.{name}]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\n' for name in ("motoko", "batou"))
    path = write_config(tmp_path, agents)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"./journal/{agent}"'), encoding="utf-8")
    config = load_config(path)
    journals = KeptJournals(most=1)
    outcomes = [run_at(config, name, "pulse-4h", at=at, journals=journals, run_timeout=RUN_TIMEOUT).outcome for at in SLOTS[:2] for name in ("motoko", "batou")]
    assert outcomes == ["appended"] * 4 and len(journals) == 1
    assert journals.take(config.agent("motoko")) is journals.take(config.agent("motoko"))  # the first one run is the one kept
    journals.close()
    for name in ("motoko", "batou"):
        assert _keys(config.agent(name).journal_root) == [f"{name}:pulse-4h:2026-09-05T00", f"{name}:pulse-4h:2026-09-05T04"]


def _run_in_child(config_path: str, journals: KeptJournals, outcomes: multiprocessing.Queue[str]) -> None:
    config = load_config(Path(config_path))
    outcomes.put(run_at(config, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT).outcome)


def test_a_forked_child_opens_its_own_journal_rather_than_the_one_its_parent_kept(tmp_path: Path) -> None:
    """A pool process forked after its parent kept a journal: the parent's connection and lock are not the child's to use."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    config = load_config(path)
    journals = KeptJournals()
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    context = multiprocessing.get_context("fork")
    outcomes: multiprocessing.Queue[str] = context.Queue()
    child = context.Process(target=_run_in_child, args=(str(path), journals, outcomes))
    child.start()
    outcome = outcomes.get(timeout=60)
    child.join(60)
    assert (outcome, child.exitcode) == ("appended", 0)
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[2], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"  # the parent's is still good
    journals.close()
    assert _keys(config.agent("motoko").journal_root) == [f"motoko:pulse-4h:2026-09-05T{hour:02d}" for hour in (0, 4, 8)]


def test_a_journal_with_hybrid_memory_is_opened_for_each_run_as_before(tmp_path: Path) -> None:
    """A hybrid journal holds a model of its own: kept for each agent of a shard, that would be a model per agent."""
    config = load_config(write_config(tmp_path, SIMPLE_AGENT + 'memory = "hybrid"\n'))
    journals = KeptJournals()
    with capture_logs() as logs:
        outcomes = [run_at(config, "motoko", "pulse-4h", at=at, journals=journals, run_timeout=RUN_TIMEOUT).outcome for at in SLOTS[:2]]
    assert outcomes == ["appended"] * 2 and len(journals) == 0
    assert [line["memory"] for line in logs if line["event"] == "run.started"] == ["hybrid"] * 2


def test_journals_opened_ahead_are_kept_for_their_runs_and_those_that_cannot_be_are_left_to_their_runs(tmp_path: Path) -> None:
    """What a starting pool process opens ahead: each lexical journal it can open, while its time lasts; the rest open at their runs."""
    agents = "".join(f'[agents.{name}]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\n' for name in ("motoko", "batou", "aramaki"))
    path = write_config(tmp_path, agents + '[agents.togusa]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\nmemory = "hybrid"\n')
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"./journal/{agent}"'), encoding="utf-8")
    config = load_config(path)
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "batou").write_text("not a journal\n", encoding="utf-8")
    everyone = [config.agent(name) for name in ("motoko", "batou", "aramaki", "togusa")]
    assert KeptJournals().open_ahead(everyone, until=time.monotonic()) == 0  # no time left: none
    journals = KeptJournals()
    assert journals.open_ahead(everyone, until=time.monotonic() + 60) == 2 and len(journals) == 2
    ahead = journals.take(config.agent("motoko"))
    assert run_at(config, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    assert journals.take(config.agent("motoko")) is ahead
    assert run_at(config, "batou", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "failed"
    journals.close()


def test_a_run_given_another_memory_opens_the_journal_with_it_rather_than_taking_the_kept_one(tmp_path: Path) -> None:
    """The same pool process, the agent's memory changed from lexical to hybrid between two runs: the second run ranks by meaning."""
    journals = KeptJournals()
    lexical = load_config(write_config(tmp_path, SIMPLE_AGENT))
    hybrid = load_config(write_config(tmp_path, SIMPLE_AGENT + 'memory = "hybrid"\n'))
    with capture_logs() as logs:
        outcomes = [run_at(config, "motoko", "pulse-4h", at=at, journals=journals, run_timeout=RUN_TIMEOUT).outcome
                    for config, at in ((lexical, SLOTS[0]), (hybrid, SLOTS[1]), (lexical, SLOTS[2]))]
    assert outcomes == ["appended"] * 3
    assert [line["memory"] for line in logs if line["event"] == "run.started"] == ["lexical", "hybrid", "lexical"]
    assert len(journals) == 1 and journals.take(lexical.agent("motoko")).encoder is None
    journals.close()


def test_a_run_given_another_redaction_stores_its_entry_as_that_one_says(tmp_path: Path) -> None:
    leaked = "ghp_Zq8Lw2Rt6Yp1Xc4Vb7Nm0Ks3Df5Gh9Jj2Aa"
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"voice": f"Deployed with {leaked} today.", "theme": "kept"}), encoding="utf-8")
    backend = f'{{ type = "command", command = {json.dumps([sys.executable, "-c", f"print(open({str(answer)!r}).read())"])}, attempts = 1 }}'
    agent = f'[agents.motoko]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\nbackend = {backend}\n'
    journals = KeptJournals()
    redacting = load_config(write_config(tmp_path, agent))
    assert run_at(redacting, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    verbatim = load_config(write_config(tmp_path, agent + 'redact = "off"\n'))
    assert run_at(verbatim, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    journals.close()
    with Journal(redacting.agent("motoko").journal_root, create=False) as journal:
        voices = [journal.find_by_client_key(f"motoko:pulse-4h:2026-09-05T{hour}", agent="motoko") for hour in ("00", "04")]
    assert [leaked in entry.voice for entry in voices if entry is not None] == [False, True]


def test_a_run_given_another_journal_path_uses_the_journal_there(tmp_path: Path) -> None:
    """The journal moved, and the configuration with it, between two runs: the run's journal is the one at the path it was given."""
    journals = KeptJournals()
    before = load_config(write_config(tmp_path, SIMPLE_AGENT))
    assert run_at(before, "motoko", "pulse-4h", at=SLOTS[0], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    before.agent("motoko").journal_root.rename(tmp_path / "moved")
    after = load_config(write_config(tmp_path, SIMPLE_AGENT + 'journal_root = "./moved"\n'))
    assert run_at(after, "motoko", "pulse-4h", at=SLOTS[1], journals=journals, run_timeout=RUN_TIMEOUT).outcome == "appended"
    assert journals.take(after.agent("motoko")).root == after.agent("motoko").journal_root
    journals.close()
    assert not before.agent("motoko").journal_root.exists()
    assert _keys(tmp_path / "moved") == ["motoko:pulse-4h:2026-09-05T00", "motoko:pulse-4h:2026-09-05T04"]
