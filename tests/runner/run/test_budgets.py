"""Budgets enforced when a run starts, against a real chat-completions server on 127.0.0.1 and real ghostrunner processes.

A slot over budget is skipped (reason budget) without a backend call, stays skipped, and status says so; the ledger in the
state directory is right across processes racing for the last room.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runner.monitor.status import EXIT_OVER_BUDGET
from runner.run.budgets import Budgets
from runner.run.simulate import simulate
from runner.schedule.catchup import plan_catchup
from runner.settings.config import load_config
from tests._chat_server import ChatServer
from tests._docs import blocks, run_block
from tests._support import SIMPLE_AGENT, entries, ghostrunner, openai_agent, write_config
from tests.runner._events import documented_events

USAGE = {"prompt_tokens": 500, "completion_tokens": 100}
PRICES = "\n[prices.tiny]\ninput = 1000.0\noutput = 1000.0\n"  # 600 tokens cost 0.6


def _config(
    tmp_path: Path, url: str, budgets: str, *, agents: tuple[str, ...] = ("motoko",), routines: tuple[str, ...] = ("evening",)
) -> Path:
    body = ""
    for agent in agents:
        body += openai_agent(url, routines=routines, timeout="100s", backend="attempts = 1\n").replace("agents.motoko", f"agents.{agent}")
    return write_config(tmp_path, body + PRICES + "\n[budgets]\n" + budgets)


def _run(
    path: Path, at: str, *, routine: str = "evening", agent: str = "motoko"
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    done = ghostrunner("run", routine, "--agent", agent, "--at", at, "--config", str(path), cwd=path.parent)
    return done, [json.loads(line) for line in done.stderr.splitlines()]


def _finished(events: list[dict[str, Any]]) -> dict[str, Any]:
    [finished] = [event for event in events if event["event"] == "run.finished"]
    return finished


def test_a_slot_over_budget_is_skipped_without_its_backend_and_stays_skipped(tmp_path: Path) -> None:
    """Once a day's tokens are used, the next slot is skipped (reason budget), the server is not called, and so is any rerun of it."""
    with ChatServer(usage=USAGE) as server:
        path = _config(tmp_path, server.url, "tokens_per_day = 1000\n", routines=("pulse-4h",))
        for at in ("2026-09-05T08:00", "2026-09-05T12:00"):
            done, events = _run(path, at, routine="pulse-4h")
            assert (done.returncode, _finished(events)["outcome"]) == (0, "appended"), done.stderr
        assert len(server.requests) == 2  # 1200 tokens recorded: the day's 1000 are used up
        done, events = _run(path, "2026-09-05T16:00", routine="pulse-4h")
        finished = _finished(events)
        assert (done.returncode, finished["outcome"], finished["reason"], finished["attempts"]) == (0, "skipped", "budget", 0)
        [over] = [event for event in events if event["event"] == "run.over_budget"]
        assert (over["budget"], over["limit"], over["used"]) == ("budgets.tokens_per_day", 1000, 1200)
        assert set(over) == documented_events()["run.over_budget"] | {"event", "level", "timestamp"}
        assert json.loads(done.stdout)["reason"] == "budget"
        # The slot stays skipped, whatever room a raised limit gives later: a rerun or catch-up never buys it back.
        path.write_text(path.read_text(encoding="utf-8").replace("tokens_per_day = 1000", "tokens_per_day = 100000"), encoding="utf-8")
        done, events = _run(path, "2026-09-05T16:00", routine="pulse-4h")
        assert (_finished(events)["reason"], [e["used"] for e in events if e["event"] == "run.over_budget"]) == ("budget", [None])
        assert len(server.requests) == 2
        # The next day has its own budget.
        done, events = _run(path, "2026-09-06T08:00", routine="pulse-4h")
        assert _finished(events)["outcome"] == "appended" and len(server.requests) == 3
    assert len(entries(tmp_path / "journal")) == 3


def test_an_agents_cost_budget_holds_that_agent_alone(tmp_path: Path) -> None:
    """budgets.agents.NAME.cost_per_day skips that agent's runs once its day's cost is used; another agent goes on."""
    with ChatServer(usage=USAGE) as server:
        path = _config(
            tmp_path, server.url, "[budgets.agents.motoko]\ncost_per_day = 0.5\n", agents=("motoko", "batou"), routines=("pulse-4h",)
        )
        assert _finished(_run(path, "2026-09-05T08:00", routine="pulse-4h")[1])["cost"] == 0.6
        assert _finished(_run(path, "2026-09-05T12:00", routine="pulse-4h")[1])["reason"] == "budget"
        assert _finished(_run(path, "2026-09-05T12:00", routine="pulse-4h", agent="batou")[1])["outcome"] == "appended"
        assert _finished(_run(path, "2026-09-06T08:00", routine="pulse-4h")[1])["outcome"] == "appended"  # a new day
    assert len(server.requests) == 3


def test_unknown_usage_counts_as_max_tokens_per_run(tmp_path: Path) -> None:
    """A server that does not say what it used: the run counts as max_tokens_per_run tokens in the ledger, never as none."""
    with ChatServer(usage=None) as server:
        path = _config(tmp_path, server.url, "tokens_per_day = 1000\nmax_tokens_per_run = 600\n", routines=("pulse-4h",))
        assert _finished(_run(path, "2026-09-05T08:00", routine="pulse-4h")[1])["tokens"] is None
        assert _finished(_run(path, "2026-09-05T12:00", routine="pulse-4h")[1])["outcome"] == "appended"  # 600 < 1000
        assert _finished(_run(path, "2026-09-05T16:00", routine="pulse-4h")[1])["reason"] == "budget"  # 1200 >= 1000
    assert len(server.requests) == 2
    assert Budgets(load_config(path)).used() == (1200.0, 1.2)


def test_status_shows_a_pair_over_budget_as_its_own_state_and_exits_7(tmp_path: Path) -> None:
    """A pair whose latest run was skipped for budget is over_budget: never all well, never failed; exit 7."""
    with ChatServer(usage=USAGE) as server:
        path = _config(tmp_path, server.url, "tokens_per_day = 100\n", routines=("pulse-4h",))
        lines = []
        for at in ("2026-09-05T08:00", "2026-09-05T12:00"):
            lines += [line for line in _run(path, at, routine="pulse-4h")[0].stderr.splitlines() if '"run.' in line]
    assert [json.loads(line).get("reason") for line in lines if '"run.finished"' in line] == [None, "budget"]
    log = tmp_path / "runs.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status = ghostrunner("status", "--config", str(path), "--log", str(log), "--text")
    assert status.returncode == EXIT_OVER_BUDGET == 7, status.stdout + status.stderr
    assert "OVER_BUDGET" in status.stdout and "all well" not in status.stdout and "failed" not in status.stdout.split("status:")[-1]
    assert status.stdout.rstrip().endswith("(exit 7)")


def test_processes_racing_for_the_last_room_overspend_by_at_most_one_run(tmp_path: Path) -> None:
    """Four real runs started at once with room for one: exactly one reaches the server, the others are skipped for budget.

    The server holds the request it gets until every other run has ended, so that all four check the ledger while the
    first is still going: without the estimate of a going run in the ledger, each would see the same room.
    """
    agents = ("a1", "a2", "a3", "a4")
    with ChatServer(usage=USAGE, gated=True) as server:
        path = _config(tmp_path, server.url, "tokens_per_day = 1000\n", agents=("motoko", *agents))
        server.release.set()
        assert _finished(_run(path, "2026-09-05T21:00")[1])["tokens"] == {"in": 500, "out": 100}  # 600 of the day's 1000 used
        server.release.clear()
        command = [shutil.which("ghostrunner") or "ghostrunner"]
        processes = [
            subprocess.Popen(
                [*command, "run", "evening", "--agent", agent, "--at", "2026-09-05T21:00", "--config", str(path)],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
            for agent in agents
        ]
        try:
            deadline = time.monotonic() + 120
            while sum(process.poll() is not None for process in processes) < len(agents) - 1 and time.monotonic() < deadline:
                time.sleep(0.05)  # polling for the three skipped runs to end; what is asserted is counted, not timed
            server.release.set()
            outputs = [process.communicate(timeout=120) for process in processes]
        finally:
            server.release.set()
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    results = [json.loads(stdout.splitlines()[-1]) for stdout, _ in outputs]
    assert all(result["outcome"] != "failed" for result in results), [result.get("error") for result in results]
    assert sorted((result["outcome"], result.get("reason")) for result in results) == [("appended", None)] + [("skipped", "budget")] * 3
    assert len(server.requests) == 2  # the first run's and the one racer's: no skipped slot reached the server
    used, _ = Budgets(load_config(path)).used()
    assert used == 1200.0  # over the 1000 by one run's 600 at most


def test_the_docs_budgets_block_runs_as_written(tmp_path: Path) -> None:
    """docs/runner.md, Budgets: its two runs append, then skip for budget, and its configuration block loads with these budgets."""
    [toml] = [block for block in blocks("docs/runner.md") if block.language == "toml" and "[budgets]" in block.text]
    # Its [prices] and [budgets] tables, under an agent of this test's (the page's own block loads in tests/test_docs.py).
    tables = toml.text.split("[prices.", 1)[1]
    config = load_config(write_config(tmp_path / "check", openai_agent("http://127.0.0.1:9/v1", model="llama3.2") + "\n[prices." + tables))
    assert (config.budgets.total.cost_per_day, config.budgets.agents["motoko"].cost_per_day, config.budgets.catchup_budget) == (2.0, 0.5, 3)
    write_config(
        tmp_path,
        SIMPLE_AGENT.replace('["pulse-4h", "evening", "digest"]', '["pulse-4h"]') + "\n[budgets]\ntokens_per_day = 100\n",
        name="budget.toml",
    )
    appended, skipped = (json.loads(output) for output in run_block("Budgets", tmp_path, lines=2, page="docs/runner.md"))
    assert (appended["outcome"], appended["tokens"]["in"] > 0) == ("appended", True)
    assert (skipped["outcome"], skipped["reason"]) == ("skipped", "budget")


def test_catchup_budget_bounds_the_catchup_of_all_pairs_together(tmp_path: Path) -> None:
    """Five slots would be caught up (catchup_max 2 per pair); catchup_budget 2 runs the two newest, the rest are recorded missed."""
    body = SIMPLE_AGENT + '\n[agents.batou]\npersona = "motoko.toml"\nroutines = ["pulse-4h"]\n[budgets]\ncatchup_budget = 2\n'
    config = load_config(write_config(tmp_path, body, runner='catchup_grace = "1d"\ncatchup_max = 2\n'))
    simulate(config, ["motoko"], datetime(2026, 8, 20, tzinfo=UTC), datetime(2026, 8, 30, tzinfo=UTC))
    plan = plan_catchup(config, datetime(2026, 9, 9, 13, 30, tzinfo=UTC))
    assert sorted((run.agent, run.routine, run.slot) for run in plan.runs) == [
        ("batou", "pulse-4h", "2026-09-09T12"),
        ("motoko", "pulse-4h", "2026-09-09T12"),
    ]
    cut = sorted((m.agent, m.routine, m.slot) for m in plan.missed if m.reason == "catchup_budget")
    assert cut == [("batou", "pulse-4h", "2026-09-09T08"), ("motoko", "evening", "2026-09-08"), ("motoko", "pulse-4h", "2026-09-09T08")]


def test_a_dry_run_pays_like_a_run_and_is_refused_like_one_but_never_skips_its_slot(tmp_path: Path) -> None:
    """A dry run asks the model, so the ledger and status count what it used; over budget it asks nothing, and the slot stays free.

    A day's room for one run: a dry run takes it (the server is asked, its 600 tokens are in the ledger and in status's
    today), the next dry run is refused (reason budget, the server not asked), and once the limit is raised the slot's
    own run is let through: a refused dry run is no run of its slot.
    """
    with ChatServer(usage=USAGE) as server:
        path = _config(tmp_path, server.url, "tokens_per_day = 500\n", routines=("pulse-4h",))
        lines = []
        for expected_requests in (1, 1):
            done = ghostrunner("run", "pulse-4h", "--agent", "motoko", "--at", "2026-09-05T08:00", "--config", str(path), "--dry-run")
            assert done.returncode == 0, done.stderr
            assert len(server.requests) == expected_requests
            lines += [line for line in done.stderr.splitlines() if '"run.finished"' in line]
        first, second = (json.loads(line) for line in lines)
        assert (first["dry_run"], first["outcome"], first["reason"], first["tokens"]) == (True, "skipped", None, {"in": 500, "out": 100})
        assert (second["dry_run"], second["outcome"], second["reason"], second["attempts"]) == (True, "skipped", "budget", 0)
        assert Budgets(load_config(path)).used() == (600.0, 0.6)
        log = tmp_path / "runs.log"
        # Judged on the schedule's clock: each line's timestamp becomes its run's scheduled time.
        lines = [json.dumps({**event, "timestamp": event["scheduled"].replace("+00:00", "Z")}) for event in (first, second)]
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        status = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", "2026-09-05T09:00Z", "--json")
        [pair] = json.loads(status.stdout)["pairs"]
        assert pair["spend"]["today"]["tokens"] == {"in": 500, "out": 100} and pair["spend"]["today"]["cost"] == pytest.approx(0.6)
        path.write_text(path.read_text(encoding="utf-8").replace("tokens_per_day = 500", "tokens_per_day = 5000"), encoding="utf-8")
        done, events = _run(path, "2026-09-05T08:00", routine="pulse-4h")
        assert (_finished(events)["outcome"], len(server.requests)) == ("appended", 2), done.stderr


def test_a_routines_budget_holds_that_routine_across_agents_and_no_other(tmp_path: Path) -> None:
    """budgets.routines.NAME counts every agent's runs of it: motoko's pulse uses the day, batou's pulse is skipped, evenings go on."""
    with ChatServer(usage=USAGE) as server:
        budget = "[budgets.routines.pulse-4h]\ntokens_per_day = 500\n"
        path = _config(tmp_path, server.url, budget, agents=("motoko", "batou"), routines=("pulse-4h", "evening"))
        assert _finished(_run(path, "2026-09-05T08:00", routine="pulse-4h")[1])["outcome"] == "appended"
        over = _run(path, "2026-09-05T12:00", routine="pulse-4h", agent="batou")[1]
        assert (_finished(over)["reason"], [e["budget"] for e in over if e["event"] == "run.over_budget"]) == (
            "budget",
            ["budgets.routines.pulse-4h.tokens_per_day"],
        )
        assert _finished(_run(path, "2026-09-05T21:00", routine="evening", agent="batou")[1])["outcome"] == "appended"
        assert _finished(_run(path, "2026-09-05T21:00", routine="evening")[1])["outcome"] == "appended"
    assert len(server.requests) == 3


def test_the_window_is_runner_timezones_day_or_the_24_hours_before(tmp_path: Path) -> None:
    """Room for one run a day in New York: calendar counts by the local day (not UTC's), rolling by the 24 hours up to the slot.

    16:00 local uses the day; 20:00 local is the next day in UTC but the same local day: skipped. 00:00 local is a new
    calendar day (run), but within 24 hours of 16:00 (skipped when rolling); 20:00 that day is in the calendar day 00:00
    used (skipped), but the 24 hours before it hold no run when rolling (run).
    """
    slots = ("2026-09-05T16:00", "2026-09-05T20:00", "2026-09-06T00:00", "2026-09-06T20:00")
    expected = {
        "calendar": ["appended", "budget", "appended", "budget"],
        "rolling": ["appended", "budget", "budget", "appended"],
    }
    with ChatServer(usage=USAGE) as server:
        for window, outcomes in expected.items():
            body = openai_agent(server.url, routines=("pulse-4h",), timeout="100s", backend="attempts = 1\n")
            budgets = f'\n[budgets]\ntokens_per_day = 500\nwindow = "{window}"\n'
            path = write_config(tmp_path / window, body + budgets, runner='timezone = "America/New_York"\n')
            seen = []
            for at in slots:
                finished = _finished(_run(path, at, routine="pulse-4h")[1])
                seen.append(finished["reason"] or finished["outcome"])
            assert seen == outcomes, window


def test_catchup_neither_reruns_nor_reports_a_slot_skipped_for_budget(tmp_path: Path) -> None:
    """A slot the budget skipped has no entry but was not missed: catch-up leaves it alone, and its place goes to a slot that was.

    motoko's 12:00 pulse was skipped for motoko's budget; batou's 12:00 pulse never ran (serve was down). With room for
    one catch-up run of all pairs, batou's slot is the one run, and motoko's is neither run nor recorded as missed.
    """
    with ChatServer(usage=USAGE) as server:
        budgets = "catchup_budget = 1\n[budgets.agents.motoko]\ntokens_per_day = 500\n"
        path = _config(tmp_path, server.url, budgets, agents=("motoko", "batou"), routines=("pulse-4h",))
        for agent in ("motoko", "batou"):
            assert _finished(_run(path, "2026-09-05T08:00", routine="pulse-4h", agent=agent)[1])["outcome"] == "appended"
        assert _finished(_run(path, "2026-09-05T12:00", routine="pulse-4h")[1])["reason"] == "budget"
    plan = plan_catchup(load_config(path), datetime(2026, 9, 5, 13, tzinfo=UTC))
    assert [(run.agent, run.slot) for run in plan.runs] == [("batou", "2026-09-05T12")]
    assert [(missed.agent, missed.slot) for missed in plan.missed] == []
