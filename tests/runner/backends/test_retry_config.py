"""The retry options: their defaults, what they accept, and the one-line error for what they refuse."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.settings.config import load_config
from tests._support import write_config

OPENAI = '[agents.motoko]\nroutines = ["evening"]\nbackend = {{ type = "openai"{extra} }}\n'


def test_defaults_are_four_attempts_a_second_and_three_reruns_five_minutes_apart(tmp_path: Path) -> None:
    """Without the options: attempts 4, retry_delay 1 s per backend; slot_retries 3, slot_retry_delay 5 min."""
    config = load_config(write_config(tmp_path, OPENAI.format(extra="")))
    backend = config.agent("motoko").backend
    assert (backend.attempts, backend.retry_delay, config.slot_retries, config.slot_retry_delay) == (4, 1.0, 3, timedelta(minutes=5))


def test_options_are_read(tmp_path: Path) -> None:
    """Each option takes its documented forms: an integer, a duration as text or seconds."""
    path = write_config(tmp_path, OPENAI.format(extra=', attempts = 1, retry_delay = "2s"'), runner="slot_retries = 0\nslot_retry_delay = 90\n")
    config = load_config(path)
    backend = config.agent("motoko").backend
    assert (backend.attempts, backend.retry_delay, config.slot_retries, config.slot_retry_delay) == (1, 2.0, 0, timedelta(seconds=90))


@pytest.mark.parametrize(("extra", "runner", "key", "expected"), [
    (", attempts = 0", "", "agents.motoko.backend.attempts", "an integer from 1 to 20, got 0"),
    (", attempts = 21", "", "agents.motoko.backend.attempts", "an integer from 1 to 20, got 21"),
    (', attempts = "3"', "", "agents.motoko.backend.attempts", "an integer from 1 to 20, got '3'"),
    (', retry_delay = "2h"', "", "agents.motoko.backend.retry_delay", "a duration of at most 1h, got '2h'"),
    (', retry_delay = "soon"', "", "agents.motoko.backend.retry_delay", "a duration such as"),
    ("", "slot_retries = -1\n", "runner.slot_retries", "an integer from 0 to 100, got -1"),
    ("", 'slot_retry_delay = "0s"\n', "runner.slot_retry_delay", "a duration of at least 1s, got '0s'"),
], ids=["attempts-0", "attempts-21", "attempts-text", "delay-too-long", "delay-not-a-duration", "slot-retries-negative", "slot-delay-zero"])
def test_bad_values_name_the_key_and_what_it_takes(tmp_path: Path, extra: str, runner: str, key: str, expected: str) -> None:
    """A bad retry option is a ConfigError naming the file, the key, what it takes and what it got."""
    path = write_config(tmp_path, OPENAI.format(extra=extra), runner=runner)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}: expected {expected}")):
        load_config(path)


def test_the_simulated_backend_takes_no_retry_options(tmp_path: Path) -> None:
    """The simulated backend never fails transiently: attempts in its table is an unknown key."""
    path = write_config(tmp_path, '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\nbackend = { type = "simulated", attempts = 2 }\n')
    with pytest.raises(ConfigError, match=re.escape("agents.motoko.backend.attempts: expected one of the keys type")):
        load_config(path)
