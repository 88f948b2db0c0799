"""One rule for where a journal is, followed by both commands: real ghostrunner and ghostjournal processes, real XDG directories in tmp.

The rule (journal.frame.roots): a root given outright (--root, a configured journal_root), else
$GHOSTJOURNAL_ROOT, else the agent's own journal in the state directory.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from journal import Journal
from tests._support import PERSONA, ghostrunner

TWO_AGENTS = f"""
[runner]
timezone = "UTC"

[agents.motoko]
persona = "{PERSONA}"
routines = ["pulse-4h", "evening"]

[agents.batou]
persona = "{PERSONA}"
routines = ["evening"]
"""


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A home, a state home, a working directory and a configuration without journal_root, each a real directory of its own."""
    dirs = {name: tmp_path / name for name in ("home", "state", "work", "etc")}
    for directory in dirs.values():
        directory.mkdir()
    (dirs["etc"] / "ghostrunner.toml").write_text(TWO_AGENTS, encoding="utf-8")
    return dirs


def _env(place: dict[str, Path], **more: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("GHOSTJOURNAL_ROOT", "GHOSTRUNNER_CONFIG", "STATE_DIRECTORY")}
    return {**env, "HOME": str(place["home"]), "XDG_STATE_HOME": str(place["state"]), **more}


def _simulate(place: dict[str, Path], agent: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        [shutil.which("ghostrunner") or "ghostrunner", "simulate", "--agent", agent, "--days", "2", "--start", "2026-08-01",
         "--config", str(place["etc"] / "ghostrunner.toml")],
        check=False, cwd=place["work"], env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _ghostjournal(place: dict[str, Path], env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("ghostjournal") or "ghostjournal", *args], check=False, cwd=place["work"], env=env,
                          capture_output=True, text=True, timeout=60)


def _agents_listed(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [item.get("entry", item)["agent"] for item in json.loads(result.stdout)]


def test_ghostjournal_finds_by_the_agents_name_the_journal_ghostrunner_wrote(place: dict[str, Path]) -> None:
    """Without --root, `--agent motoko` (after or before the command) opens the journal ghostrunner keeps in $XDG_STATE_HOME; the working directory stays empty."""
    env = _env(place)
    _simulate(place, "motoko", env)
    written = place["state"] / "ghostjournal" / "motoko"
    with Journal(written, create=False) as journal:
        expected = len(journal.list(limit=1000))
    assert expected == 14  # two days of six pulses and an evening
    assert _agents_listed(_ghostjournal(place, env, "list", "--agent", "motoko", "--limit", "1000")) == ["motoko"] * expected
    assert _agents_listed(_ghostjournal(place, env, "--agent", "motoko", "list", "--limit", "1000")) == ["motoko"] * expected
    digest = _ghostjournal(place, env, "digest", "--agent", "motoko")
    assert digest.returncode == 0 and json.loads(digest.stdout)["count"] == expected, digest.stderr
    assert list(place["work"].iterdir()) == []


def test_a_missing_agent_journal_is_one_line_naming_where_it_was_looked_for(place: dict[str, Path]) -> None:
    """batou has no journal yet: exit 3 and one line naming batou's path and the variable that chose it, never motoko's journal; nothing is created."""
    env = _env(place)
    _simulate(place, "motoko", env)
    result = _ghostjournal(place, env, "search", "rain", "--agent", "batou")
    wanted = place["state"] / "ghostjournal" / "batou"
    assert result.returncode == 3 and result.stdout == "", result.stderr
    assert result.stderr == (
        f"ghostjournal: error: no journal at {str(wanted)!r} (the journal of agent 'batou' in $XDG_STATE_HOME/ghostjournal); "
        f"pass --root PATH for another journal, or create this one with: {shlex.join(['ghostjournal', '--root', str(wanted), 'init'])}\n"
    )
    assert not wanted.exists()


@pytest.mark.parametrize("args", [
    ("list", "--agent", "../ghostjournal/motoko"),
    ("list", "--agent", "batou/../motoko"),
    ("list", "--agent", ".."),
    ("--agent", "motoko", "list", "--agent", "batou"),
], ids=["climbing", "through-another", "dot-dot", "two-agents"])
def test_an_agent_never_opens_another_agents_journal(place: dict[str, Path], args: tuple[str, ...]) -> None:
    """A name that is no agent's, or two agents at once, is a usage error in one line, and no entry of motoko is printed."""
    env = _env(place)
    _simulate(place, "motoko", env)
    result = _ghostjournal(place, env, *args)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("ghostjournal: error: ") and "--agent" in result.stderr


def test_a_link_in_the_state_directory_does_not_lead_one_agent_into_anothers_journal(place: dict[str, Path]) -> None:
    """batou's place linked to motoko's journal is refused as a link, in one line, and none of motoko's entries is shown."""
    env = _env(place)
    _simulate(place, "motoko", env)
    (place["state"] / "ghostjournal" / "batou").symlink_to(place["state"] / "ghostjournal" / "motoko")
    result = _ghostjournal(place, env, "--agent", "batou", "list")
    assert result.returncode != 0 and result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert "symlink" in result.stderr and "batou" in result.stderr


def test_ghostjournal_root_is_where_both_commands_write_and_read(place: dict[str, Path]) -> None:
    """With $GHOSTJOURNAL_ROOT (relative: to the working directory) and no journal_root, ghostrunner writes every agent there and ghostjournal reads each agent's own."""
    env = _env(place, GHOSTJOURNAL_ROOT="shared")
    _simulate(place, "motoko", env)
    _simulate(place, "batou", env)
    shared = place["work"] / "shared"
    with Journal(shared, create=False) as journal:
        assert sorted({entry.agent for entry in journal.list(limit=1000)}) == ["batou", "motoko"]
    assert not (place["state"] / "ghostjournal" / "motoko").exists() and not (place["state"] / "ghostjournal" / "batou").exists()
    assert _agents_listed(_ghostjournal(place, env, "list", "--agent", "batou", "--limit", "1000")) == ["batou", "batou"]
    assert set(_agents_listed(_ghostjournal(place, env, "--agent", "motoko", "list", "--limit", "1000"))) == {"motoko"}


def test_a_configured_journal_root_stays_authoritative_for_ghostrunner(place: dict[str, Path]) -> None:
    """A journal_root in the configuration wins over $GHOSTJOURNAL_ROOT: the runner writes there, and the variable's directory is never made."""
    config = place["etc"] / "ghostrunner.toml"
    configured = place["etc"] / "journals" / "{agent}"
    config.write_text(TWO_AGENTS.replace('timezone = "UTC"', f'timezone = "UTC"\njournal_root = "{configured}"'), encoding="utf-8")
    env = _env(place, GHOSTJOURNAL_ROOT=str(place["work"] / "shared"))
    _simulate(place, "motoko", env)
    with Journal(place["etc"] / "journals" / "motoko", create=False) as journal:
        assert len(journal.list(limit=1000)) == 14
    assert list(place["work"].iterdir()) == [] and not (place["state"] / "ghostjournal").exists()


def test_a_blank_ghostjournal_root_is_refused_by_ghostrunner_before_it_writes(place: dict[str, Path]) -> None:
    """GHOSTJOURNAL_ROOT=" " (a script's variable that came out empty) is exit 78 in one line naming it, never the state directory."""
    env = _env(place, GHOSTJOURNAL_ROOT=" ")
    result = ghostrunner("simulate", "--agent", "motoko", "--days", "1", "--start", "2026-08-01", "--config", str(place["etc"] / "ghostrunner.toml"),
                         cwd=place["work"], env=env)
    assert result.returncode == 78 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "$GHOSTJOURNAL_ROOT: expected a journal directory, got ' '" in result.stderr
    assert list(place["work"].iterdir()) == [] and list(place["state"].iterdir()) == []


def test_the_demo_explores_its_journal_with_a_short_command_that_works(place: dict[str, Path]) -> None:
    """`ghostrunner demo` ends with `ghostjournal search WORD --agent motoko` (no --root), and that very command finds the demo's entries."""
    env = _env(place)
    demo = subprocess.run([shutil.which("ghostrunner") or "ghostrunner", "demo", "--days", "7"], check=False, cwd=place["work"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    last = demo.stdout.splitlines()[-1]
    assert last.startswith("Explore it: ghostjournal search ") and last.endswith(" --agent motoko") and "--root" not in last
    argv = shlex.split(last.removeprefix("Explore it: "))
    found = _ghostjournal(place, env, *argv[1:])
    assert set(_agents_listed(found)) == {"motoko"} and json.loads(found.stdout), "the demo's own word finds its entries"
