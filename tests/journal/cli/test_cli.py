"""The ghostjournal command: JSON on stdout, one-line errors with documented exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from journal import Journal
from journal.cli.cli import cli

ENTRY = {"kind": "note", "agent": "motoko", "theme": "harbor", "voice": "Fog over the harbor again.", "tags": ["fog"]}


def run(root: Path | None, *args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Result:  # noqa: A002 - named like CliRunner.invoke's input
    prefix = ["--root", str(root)] if root is not None else []
    return CliRunner().invoke(cli, [*prefix, *args], input=input, env=env)


def ok(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_full_round_trip(root: Path) -> None:
    """init, append, get, list, search, relate, digest, prompt-context and reindex all print JSON."""
    created = ok(run(root, "init"))
    assert created["journal_id"] and created["root"] == str(root)
    first = ok(run(root, "append", input=json.dumps({**ENTRY, "client_key": "c1"})))
    assert first["outcome"] == "appended"
    again = ok(run(root, "append", input=json.dumps({**ENTRY, "client_key": "c1", "voice": "other"})))
    assert again == {"outcome": "duplicate", "entry": first["entry"]}
    entry_id = first["entry"]["id"]
    assert ok(run(root, "get", entry_id)) == first["entry"]
    assert [e["id"] for e in ok(run(root, "list", "--agent", "motoko", "--kind", "note"))] == [entry_id]
    hits = ok(run(root, "search", "harbor fog", "-k", "3"))
    assert hits[0]["entry_id"] == entry_id and hits[0]["score"] > 0 and hits[0]["snippet"]
    assert ok(run(root, "relate", entry_id)) == []
    assert ok(run(root, "digest", "--agent", "motoko"))["count"] == 1
    context = ok(run(root, "prompt-context", "fog", "--agent", "motoko"))
    assert entry_id in context["context"]
    raw = run(root, "prompt-context", "fog", "--raw")
    assert raw.exit_code == 0 and raw.stdout.startswith("<past_journal_entries")
    assert ok(run(root, "reindex")) == {"indexed": 1, "skipped": []}


def test_root_from_environment(root: Path) -> None:
    """GHOSTJOURNAL_ROOT stands in for --root."""
    ok(run(None, "init", env={"GHOSTJOURNAL_ROOT": str(root)}))
    assert ok(run(None, "list", env={"GHOSTJOURNAL_ROOT": str(root)})) == []


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["list"], 3, "no journal at"),
        (["get", "missing-id"], 3, "no entry with id 'missing-id'"),
        (["get", "../../etc/passwd"], 65, "invalid entry id"),
        (["list", "--since", "last tuesday"], 2, "Invalid value for '--since': expected a date (2026-01-01), a time without an offset"),
        (["list", "--until", "0001-01-01T00:00:00+01:00"], 2, "Invalid value for '--until': expected a time within years 1-9999 in UTC"),
        (["search", "x", "-k", "0"], 2, "0 is not in the range"),
        (["--nn", "--model", "./no-such-model", "list"], 1, "embedding model './no-such-model' was not found offline"),
        (["download-model", "--model", "./not a hub id"], 1, "downloading './not a hub id' failed"),
        (["search", "x", "--mode", "semantic"], 1, "needs entry vectors and this journal was opened without NN; open it with"),
        (["search", "x", "--no-floor"], 1, "--no-floor; floor: false over MCP) lifts the relevance floor of ranking by meaning, and this journal"),
        (["prompt-context", "x", "--no-floor"], 1, "opened without NN, whose ranking by words has no floor; open it with"),
    ],
    ids=[
        "missing-root", "unknown-id", "path-id", "unreadable-since", "until-before-year-1", "bad-k", "nn-missing-model", "download-fails",
        "semantic-without-nn", "no-floor-without-nn", "context-no-floor-without-nn",
    ],
)
def test_user_errors_exit_with_documented_codes(tmp_path: Path, args: list[str], code: int, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each user mistake prints one line on stderr, no traceback, and exits with its code."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no test reaches for the network
    root = tmp_path / "j"
    if args[0] != "list" or len(args) > 1:
        ok(run(root, "init"))
    result = run(root, *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_no_root_at_all_is_a_usage_error() -> None:
    """Without --root, GHOSTJOURNAL_ROOT or --agent the command says how to give one."""
    result = run(None, "list")
    assert result.exit_code == 2
    assert "--root PATH, set GHOSTJOURNAL_ROOT, or name an agent with --agent" in result.stderr


def test_duplicate_id_exits_4(root: Path) -> None:
    """A duplicate supplied id is a conflict (exit 4)."""
    ok(run(root, "init"))
    ok(run(root, "append", input=json.dumps({**ENTRY, "id": "fixed"})))
    result = run(root, "append", input=json.dumps({**ENTRY, "id": "fixed"}))
    assert result.exit_code == 4 and "already exists" in result.stderr


def test_installed_command_runs_as_a_real_process(root: Path) -> None:
    """The console script works end to end in its own process, reading stdin and writing stdout."""
    env = {**os.environ, "GHOSTJOURNAL_ROOT": str(root)}
    command = [sys.executable, "-m", "journal.cli.cli"]
    subprocess.run([*command, "init"], env=env, check=True, capture_output=True)
    appended = subprocess.run([*command, "append"], input=json.dumps(ENTRY).encode(), env=env, check=True, capture_output=True)
    entry_id = json.loads(appended.stdout)["entry"]["id"]
    bad = subprocess.run([*command, "append"], check=False, input=b"\xff", env=env, capture_output=True)
    assert bad.returncode == 65
    assert bad.stderr.decode().strip() == "ghostjournal: error: entry: expected UTF-8 text, got an invalid byte at offset 0"
    listed = subprocess.run([*command, "list"], env=env, check=True, capture_output=True)
    assert [e["id"] for e in json.loads(listed.stdout)] == [entry_id]


def test_nn_search_reindex_and_prompt_context_from_the_command_line(root: Path) -> None:
    """With --nn, search finds by meaning, reindex re-embeds, and the output stays plain JSON on stdout."""
    ok(run(root, "init"))
    ok(run(root, "--nn", "append", input='{"kind":"note","agent":"motoko","theme":"pets","voice":"I adopted a puppy last week."}'))
    ok(run(root, "append", input='{"kind":"note","agent":"motoko","theme":"money","voice":"Paid the quarterly taxes."}'))
    hits = ok(run(root, "--nn", "search", "new canine companion", "-k", "1"))
    assert hits[0]["entry"]["theme"] == "pets"
    assert ok(run(root, "--nn", "reindex"))["indexed"] == 2
    assert ok(run(root, "search", "new canine companion")) == []


def test_no_rerank_ranks_by_the_words_alone(root: Path) -> None:
    """A note continuing the one the words match comes in with it; --no-rerank (search and prompt-context) leaves it out."""
    with Journal(root) as journal:
        asked = journal.append({"kind": "note", "agent": "motoko", "ts": "2026-09-01T08:00:00Z", "theme": "bakery",
                                "voice": "Batou asked which bakery I would recommend."}).id
        answer = journal.append({"kind": "note", "agent": "motoko", "ts": "2026-09-03T08:00:00Z", "theme": "reply",
                                 "voice": "The one past the ferry terminal, with the blue awning.", "signals": {"continuity_refs": [asked]}}).id
    found = run(root, "search", "which bakery", "--agent", "motoko")
    plain = run(root, "search", "which bakery", "--agent", "motoko", "--no-rerank")
    assert found.exit_code == plain.exit_code == 0, found.output + plain.output
    assert [hit["entry_id"] for hit in json.loads(found.output)] == [asked, answer]
    assert [hit["entry_id"] for hit in json.loads(plain.output)] == [asked]
    for flag, matched in (("--rerank", 2), ("--no-rerank", 1)):  # with --no-rerank the answer is only the recent fill
        block = run(root, "prompt-context", "which bakery", "--agent", "motoko", "-k", "2", flag, "--raw")
        assert block.exit_code == 0 and f'"matched":{matched},' in block.output.replace(" ", ""), block.output


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("init", "The journal is every agent's."),
        ("embed", "Every agent's entries that lack a vector are embedded."),
        ("reindex", "The index is rebuilt from every agent's entry files."),
        ("backup", "The copy holds every agent's entries, so with --root or $GHOSTJOURNAL_ROOT it is refused."),
        ("download-model", "--agent (as --root) only names the journal --to must not lie in."),
        ("append", "Store the entry as this agent's: a payload without 'agent' gets it, one naming another agent is refused."),
    ],
)
def test_the_agent_help_of_a_command_that_keeps_to_no_agent_says_what_agent_does_there(command: str, says: str) -> None:
    """On a command that acts on the whole journal (or writes one entry), --agent's help says what it does there,
    never the reads' "this agent's entries alone"."""
    shown = subprocess.run(["ghostjournal", command, "--help"], capture_output=True, text=True, check=False, timeout=60)
    assert shown.returncode == 0, shown.stderr
    found = re.search(r"^\s+--agent TEXT\s+(.*?)(?=^\s+-)", shown.stdout, re.MULTILINE | re.DOTALL)
    assert found is not None, shown.stdout
    agent_help = " ".join(found.group(1).split())
    assert says in agent_help and "entries alone" not in agent_help, agent_help


def test_agent_after_a_whole_journal_command_still_picks_that_agents_journal(tmp_path: Path) -> None:
    """init, reindex and embed with --agent after the command (and no root) act on that agent's journal in the state directory;
    a blank --agent is refused naming it."""
    env = {key: value for key, value in os.environ.items() if key not in ("GHOSTJOURNAL_ROOT", "STATE_DIRECTORY")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    for command in ("init", "reindex", "embed"):
        done = subprocess.run(["ghostjournal", command, "--agent", "bob", "--json"], capture_output=True, text=True, check=False, env=env, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
    assert (tmp_path / "state" / "ghostjournal" / "bob" / "manifest.json").is_file()
    blank = subprocess.run(["ghostjournal", "init", "--agent", " "], capture_output=True, text=True, check=False, env=env, timeout=60)
    assert blank.returncode == 2 and "--agent" in blank.stderr and "got ' '" in blank.stderr, blank.stderr
    assert sorted(path.name for path in (tmp_path / "state" / "ghostjournal").iterdir()) == ["bob"]
