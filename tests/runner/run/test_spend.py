"""What each run cost: tokens and cost in run.finished, from a real chat-completions server on 127.0.0.1, a command program and
the simulated backend, and what history, status and report show of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._chat_server import ChatServer
from tests._support import SIMPLE_AGENT, entries, ghostrunner, openai_agent, script, write_config

PRICES = "\n[prices.tiny]\ninput = 2.0\noutput = 8.0\n"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}


def _finished(stderr: str) -> list[dict[str, Any]]:
    return [event for event in map(json.loads, stderr.splitlines()) if event.get("event") == "run.finished"]


def _run(path: Path, at: str = "2026-09-05T21:00", routine: str = "evening") -> tuple[Any, dict[str, Any], dict[str, Any]]:
    done = ghostrunner("run", routine, "--agent", "motoko", "--at", at, "--config", str(path), cwd=path.parent)
    [finished] = _finished(done.stderr)
    return done, finished, json.loads(done.stdout.splitlines()[-1])


def test_a_run_records_the_servers_usage_and_its_price(tmp_path: Path) -> None:
    """run.finished and the result line carry the server's prompt and completion tokens, and their price for the agent's model."""
    with ChatServer(usage=USAGE) as server:
        path = write_config(tmp_path, openai_agent(server.url, backend="attempts = 1\n") + PRICES)
        done, finished, result = _run(path)
    assert done.returncode == 0, done.stderr
    assert finished["tokens"] == result["tokens"] == {"in": 1200, "out": 300}
    assert finished["cost"] == result["cost"] == pytest.approx((1200 * 2.0 + 300 * 8.0) / 1e6)
    assert "max_tokens" not in server.requests[0]  # no max_tokens_per_run configured: no limit asked for


def test_retries_within_a_run_add_up(tmp_path: Path) -> None:
    """An unusable reply and the corrected one both used tokens: the run's tokens are their sum."""
    with ChatServer(["broken"], usage=USAGE) as server:
        path = write_config(tmp_path, openai_agent(server.url, backend="attempts = 2\nretry_delay = 0\n") + PRICES)
        done, finished, _ = _run(path)
    assert (done.returncode, finished["outcome"], finished["attempts"]) == (0, "appended", 2), done.stderr
    assert finished["tokens"] == {"in": 2400, "out": 600}
    assert finished["cost"] == pytest.approx(2 * (1200 * 2.0 + 300 * 8.0) / 1e6)


@pytest.mark.parametrize(
    "usage",
    [None, {"prompt_tokens": "many", "completion_tokens": 3}, {"prompt_tokens": -1, "completion_tokens": 3}, ["not", "an", "object"]],
    ids=["none", "text", "negative", "list"],
)
def test_a_server_without_usable_usage_leaves_the_tokens_unknown(tmp_path: Path, usage: Any) -> None:
    """No usage or a malformed one: the entry is appended and the run says its tokens and cost are unknown (null), never zero."""
    with ChatServer(usage=usage) as server:
        path = write_config(tmp_path, openai_agent(server.url, backend="attempts = 1\n") + PRICES)
        done, finished, result = _run(path)
    assert (done.returncode, finished["outcome"]) == (0, "appended"), done.stderr
    assert (finished["tokens"], finished["cost"]) == (None, None)
    assert "tokens" not in result and "cost" not in result


def test_a_reply_over_max_tokens_per_run_fails_for_good_and_appends_nothing(tmp_path: Path) -> None:
    """max_tokens_per_run is asked of the server; a completion longer than it fails the run, permanently (exit 78), tokens recorded."""
    with ChatServer(usage={"prompt_tokens": 10, "completion_tokens": 301}) as server:
        body = openai_agent(server.url, backend="attempts = 3\nretry_delay = 0\n") + "\n[budgets]\nmax_tokens_per_run = 300\n"
        path = write_config(tmp_path, body)
        done, finished, _ = _run(path)
    assert server.requests[0]["max_tokens"] == 300 and len(server.requests) == 1  # not retried: the server would ignore it again
    assert (done.returncode, finished["outcome"]) == (78, "failed")
    assert "used 301 completion tokens, more than max_tokens_per_run 300" in finished["error"]
    assert finished["tokens"] == {"in": 10, "out": 301}
    assert entries(tmp_path / "journal") == []


def test_a_command_program_may_report_its_usage_beside_the_fields(tmp_path: Path) -> None:
    """A usage object beside the entry fields is counted and priced, and never reaches the entry; the program is told max_tokens."""
    helper = script(
        tmp_path,
        "helper.py",
        """
        import json, sys
        request = json.load(sys.stdin)
        print(json.dumps({"voice": "Counted.", "theme": "cost", "usage": {"prompt_tokens": 50, "completion_tokens": request["max_tokens"]}}))
    """,
    )
    body = (
        f"""
        [agents.motoko]
        persona = "motoko.toml"
        routines = ["evening"]
        backend = {{type = "command", command = {json.dumps(helper)}, model = "tiny"}}
        [budgets]
        max_tokens_per_run = 40
    """
        + PRICES
    )
    path = write_config(tmp_path, body)
    done, finished, _ = _run(path)
    assert (done.returncode, finished["outcome"]) == (0, "appended"), done.stderr
    assert finished["tokens"] == {"in": 50, "out": 40}
    assert finished["cost"] == pytest.approx((50 * 2.0 + 40 * 8.0) / 1e6)
    [entry] = entries(tmp_path / "journal")
    assert "usage" not in entry.to_dict() and entry.voice == "Counted."


def test_the_simulated_backend_reports_the_same_estimate_for_the_same_run(tmp_path: Path) -> None:
    """Two journals, one slot: the simulated backend's estimate is deterministic, and it has no price."""
    seen = []
    for name in ("a", "b"):
        path = write_config(tmp_path / name, SIMPLE_AGENT)
        done, finished, _ = _run(path)
        assert done.returncode == 0, done.stderr
        seen.append(finished)
    assert seen[0]["tokens"] == seen[1]["tokens"] and seen[0]["tokens"]["in"] > 0 and seen[0]["tokens"]["out"] > 0
    assert seen[0]["cost"] is None


def test_history_status_and_report_show_what_the_runs_used(tmp_path: Path) -> None:
    """Per slot (history), per pair for the last run, today and the last 7 days (status --json and its table), and in the report."""
    with ChatServer(usage=USAGE) as server:
        path = write_config(tmp_path, openai_agent(server.url, backend="attempts = 1\n") + PRICES)
        log = tmp_path / "runs.log"
        lines = []
        for at in ("2026-08-20T21:00", "2026-09-01T21:00", "2026-09-04T21:00", "2026-09-05T21:00"):
            done, _, _ = _run(path, at)
            assert done.returncode == 0, done.stderr
            lines += [line for line in done.stderr.splitlines() if '"run.finished"' in line]
    # The lines are judged on their scheduled clock: rewrite each timestamp to its run's scheduled time.
    rewritten = []
    for line in lines:
        event = json.loads(line)
        event["timestamp"] = event["scheduled"].replace("+00:00", "Z")
        rewritten.append(json.dumps(event))
    log.write_text("\n".join(rewritten) + "\n", encoding="utf-8")
    one = (1200 * 2.0 + 300 * 8.0) / 1e6
    history = json.loads(ghostrunner("history", "--config", str(path), "--log", str(log), "--json").stdout)
    assert [slot["spend"]["tokens"] for slot in history] == [{"in": 1200, "out": 300}] * 4
    status = ghostrunner("status", "--config", str(path), "--log", str(log), "--now", "2026-09-05T23:00Z", "--json")
    [pair] = json.loads(status.stdout)["pairs"]
    spend = pair["spend"]
    assert spend["last_run"] == {"runs": 1, "tokens": {"in": 1200, "out": 300}, "cost": pytest.approx(one), "unknown": 0}
    assert spend["today"]["runs"] == 1 and spend["last_7_days"]["runs"] == 3  # 2026-08-20 is out of the week
    assert spend["last_7_days"]["tokens"] == {"in": 3600, "out": 900} and spend["last_7_days"]["cost"] == pytest.approx(3 * one)
    report = tmp_path / "runs.html"
    made = ghostrunner("report", "--config", str(path), "--log", str(log), "--now", "2026-09-05T23:00Z", "--out", str(report))
    assert made.returncode == 0, made.stderr
    page = report.read_text(encoding="utf-8")
    assert "spent in 7 days" in page and "4.5k tok 0.0144" in page and "1200 in, 300 out" in page
