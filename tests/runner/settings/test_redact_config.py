"""An agent's ``redact`` and ``redact_patterns``: checked at load time, and the journal its runs open redacts so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.run import open_journal
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, entries, ghostrunner, script, write_config


def test_an_agent_s_runs_redact_as_its_configuration_says(tmp_path: Path) -> None:
    default = load_config(write_config(tmp_path / "a", SIMPLE_AGENT)).agents["motoko"]
    with open_journal(default) as journal:
        assert journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "AKIAIOSFODNN7EXAMPLE ok"}).voice == (
            "[redacted:aws-access-key] ok"
        )
    body = SIMPLE_AGENT + "redact = \"off\"\n[agents.motoko.redact_patterns]\nticket = 'TCK-\\d+'\n"
    agent = load_config(write_config(tmp_path / "b", body)).agents["motoko"]
    assert (agent.redact, agent.redact_patterns) == ("off", (("ticket", r"TCK-\d+"),))
    with open_journal(agent) as journal:
        stored = journal.append({"kind": "note", "agent": "motoko", "theme": "t", "voice": "TCK-12 and AKIAIOSFODNN7EXAMPLE"})
        assert stored.voice == "[redacted:ticket] and AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        ('redact = "on"\n', "agents.motoko.redact", "one of 'default', 'off'"),
        ("redact_patterns = 'x'\n", "agents.motoko.redact_patterns", "a table of kinds"),
        ("[agents.motoko.redact_patterns]\nticket = '('\n", "agents.motoko.redact_patterns.ticket", "does not compile"),
        ("[agents.motoko.redact_patterns]\nBad_Kind = 'x'\n", "agents.motoko.redact_patterns.Bad_Kind", "lowercase"),
    ],
)
def test_a_bad_redaction_setting_is_refused_naming_its_key(tmp_path: Path, extra: str, key: str, expected: str) -> None:
    path = write_config(tmp_path, SIMPLE_AGENT + extra)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}: expected") + ".*" + re.escape(expected)):
        load_config(path)


def test_a_reply_its_redaction_lengthens_is_stored_and_its_dry_run_shows_it_redacted(tmp_path: Path) -> None:
    """A valid reply whose theme the markers make longer than 200 characters, and whose two secret tags become one marker:
    the run appends it (redaction never turns a reply the run accepted into an entry the journal refuses), and its dry run
    shows the entry as the run stores it, never the secrets."""
    theme = " ".join(["xoxb-1234567890"] * 12)  # 191 characters as written, 275 with its markers
    reply = {"voice": "The deploy went out.", "theme": theme, "tags": ["xoxb-1111111111", "xoxb-2222222222"]}
    argv = script(tmp_path, "agent.py", f"import sys\nsys.stdin.read()\nprint({json.dumps(json.dumps(reply))})\n")
    body = f'[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\nbackend = {{ type = "command", command = {json.dumps(argv)} }}\n'
    config = write_config(tmp_path, body)
    dry = ghostrunner("--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    shown = json.loads(dry.stdout)["entry"]
    assert "xoxb" not in json.dumps(shown) and "xoxb" not in dry.stderr
    done = ghostrunner("--config", str(config), "run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["outcome"] == "appended"
    [stored] = entries(tmp_path / "journal")
    assert stored.theme == shown["theme"] and stored.theme.endswith("[redacted:slack-token]\u2026") and len(stored.theme) <= 200
    assert list(stored.tags) == shown["tags"] == ["[redacted:slack-token]"]
