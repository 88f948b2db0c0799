"""An agent's ``redact`` and ``redact_patterns``: checked at load time, and the journal its runs open redacts so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.run import open_journal
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, write_config


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
