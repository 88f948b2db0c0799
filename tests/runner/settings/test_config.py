"""Configuration loading: defaults, examples, and errors that name file, key and expectation."""

from __future__ import annotations

import filecmp
import re
from datetime import timedelta
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.settings.config import load_config, parse_duration
from tests._support import PERSONA, REPO, SIMPLE_AGENT, ghostrunner, state_journal, write_config


def test_embedded_defaults_load_without_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With neither --config nor GHOSTRUNNER_CONFIG, the packaged defaults give motoko on the simulated backend."""
    monkeypatch.chdir(tmp_path)
    config = load_config()
    motoko = config.agent("motoko")
    assert motoko.backend.type == "simulated"
    assert motoko.persona is not None and motoko.persona.name == "motoko"
    assert motoko.journal_root == state_journal("motoko")
    assert motoko.routines == ("pulse-4h", "evening", "digest")


def test_packaged_persona_matches_the_example() -> None:
    """The persona packaged for the defaults is the same file as examples/agents/motoko.toml."""
    assert filecmp.cmp(REPO / "runner" / "data" / "motoko.toml", PERSONA, shallow=False)


def test_example_config_loads_with_a_fourth_routine() -> None:
    """examples/ghostrunner.toml is valid and adds the 'morning' routine purely by configuration."""
    config = load_config(REPO / "examples" / "ghostrunner.toml")
    assert config.routines["morning"].kind == "note"
    assert config.routines["evening"].schedule == "30 21 * * *"
    assert "morning" in config.agent("motoko").routines


def test_env_var_names_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GHOSTRUNNER_CONFIG is used when no path is given."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    monkeypatch.setenv("GHOSTRUNNER_CONFIG", str(path))
    assert load_config().config_file == path.resolve()


@pytest.mark.parametrize(
    ("runner", "body", "key", "expected"),
    [
        ("timezon = 'UTC'\n", SIMPLE_AGENT, "runner.timezon", "one of the keys"),
        ("", SIMPLE_AGENT.replace("routines =", "colour = 'red'\nroutines ="), "agents.motoko.colour", "one of the keys"),
        ("", "[routines.evening]\nschedule = '61 21 * * *'\n" + SIMPLE_AGENT, "routines.evening.schedule", "five-field cron expression"),
        ("", "[routines.evening]\nschedule = '0 21 * *'\n" + SIMPLE_AGENT, "routines.evening.schedule", "five-field cron expression"),
        ("", SIMPLE_AGENT.replace('"digest"]', '"digest", "lunch"]'), "agents.motoko.routines[3]", "a routine defined under"),
        ("", SIMPLE_AGENT + 'backend = "gpt"\n', "agents.motoko.backend", "one of simulated, openai, command"),
        ("", SIMPLE_AGENT + '[agents.motoko.backend]\ntype = "gpt"\n', "agents.motoko.backend.type", "one of simulated, openai, command"),
        ("", SIMPLE_AGENT.replace('"motoko.toml"', '"missing.toml"'), "agents.motoko.persona", "a persona TOML file"),
        ("timezone = 'Mars/Olympus'\n", SIMPLE_AGENT, "runner.timezone", "IANA time zone"),
        ("catchup_grace = 'soon'\n", SIMPLE_AGENT, "runner.catchup_grace", "a duration"),
        ("", "[routines.morning]\nkind = 'note'\nschedule = '0 7 * * *'\nslot = 'day'\nquestion = 'q'\n" + SIMPLE_AGENT, "routines.morning.prompt", "required for the new routine"),
        ("", "[routines.evening]\nkind = 'memo'\n" + SIMPLE_AGENT, "routines.evening.kind", "one of pulse, evening, note, digest"),
        ("", SIMPLE_AGENT + "[agents.motoko.backend]\ntype = 'openai'\nmodle = 'x'\n", "agents.motoko.backend.modle", "one of the keys"),
        ("", SIMPLE_AGENT + "[agents.motoko.backend]\ntype = 'command'\n", "agents.motoko.backend.command", "a non-empty list of strings"),
    ],
    ids=["unknown-runner-key", "unknown-agent-key", "bad-cron-value", "bad-cron-fields", "unknown-routine", "unknown-backend",
         "unknown-backend-type", "missing-persona", "bad-timezone", "bad-duration", "new-routine-incomplete", "bad-kind",
         "unknown-backend-option", "command-without-program"],
)
def test_config_errors_name_file_key_and_expectation(tmp_path: Path, runner: str, body: str, key: str, expected: str) -> None:
    """Each invalid configuration is refused at load time with the file, the dotted key and what was expected."""
    path = write_config(tmp_path, body, runner=runner)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}: expected") + ".*" + re.escape(expected)) as caught:
        load_config(path)
    assert caught.value.key == key
    assert caught.value.source == str(path)


def test_invalid_persona_names_the_persona_file(tmp_path: Path) -> None:
    """A persona with an unknown key is reported against the persona file and key."""
    path = write_config(tmp_path, SIMPLE_AGENT)
    persona = tmp_path / "motoko.toml"
    persona.write_text("hobbies = ['x']\n" + persona.read_text())
    with pytest.raises(ConfigError, match=re.escape(f"{persona}: hobbies: expected one of the persona keys")):
        load_config(path)


def test_toml_syntax_error_is_a_config_error(tmp_path: Path) -> None:
    """A file that is not TOML is refused with the file named."""
    path = tmp_path / "bad.toml"
    path.write_text("[runner\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: expected valid TOML")):
        load_config(path)


def test_cli_reports_a_config_error_in_one_line(tmp_path: Path) -> None:
    """The CLI prints one line naming file and key, exits 78, and shows no traceback."""
    path = write_config(tmp_path, SIMPLE_AGENT, runner="timezon = 'UTC'\n")
    result = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 78
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0
    assert "runner.timezon" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("10m", 600), ("1h30m", 5400), ("7d", 604800), ("2w", 1209600), (45, 45)])
def test_durations(text: object, seconds: int) -> None:
    """Durations are seconds or compact text like 1h30m."""
    assert parse_duration(text) == timedelta(seconds=seconds)
