"""The [budgets] and [prices] tables: what loads, and each bad value refused at load in one line naming its key (exit 78)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.settings.config import Limits, Price, load_config
from tests._support import SIMPLE_AGENT, ghostrunner, openai_agent, write_config

GOOD = """
[budgets]
cost_per_day = 5
tokens_per_day = 200000
max_tokens_per_run = 4000
window = "rolling"
catchup_budget = 2
[budgets.agents.motoko]
cost_per_day = 0.5
[budgets.routines.evening]
max_tokens_per_run = 900
[prices.tiny]
input = 0.15
output = 0.6
"""


def test_budgets_and_prices_load_and_the_narrowest_max_tokens_wins(tmp_path: Path) -> None:
    """Runner-wide, agent and routine limits load as given; a routine's max_tokens_per_run beats the runner-wide one."""
    config = load_config(write_config(tmp_path, openai_agent("http://127.0.0.1:9/v1", routines=("evening", "pulse-4h")) + GOOD))
    budgets = config.budgets
    assert budgets.total == Limits(max_tokens_per_run=4000, tokens_per_day=200000, cost_per_day=5.0)
    assert budgets.agents["motoko"] == Limits(cost_per_day=0.5) and budgets.window == "rolling" and budgets.catchup_budget == 2
    assert (budgets.max_tokens_for("motoko", "evening"), budgets.max_tokens_for("motoko", "pulse-4h")) == (900, 4000)
    assert config.prices == {"tiny": Price(0.15, 0.6)} and config.price_of(config.agent("motoko")) == Price(0.15, 0.6)


@pytest.mark.parametrize(
    ("table", "key", "expected"),
    [
        ("[budgets]\ncost_per_day = -1\n", "budgets.cost_per_day", "a number of at least 0"),
        ("[budgets]\ncost_per_day = 'lots'\n", "budgets.cost_per_day", "a number of at least 0"),
        ("[budgets]\ncost_per_day = nan\n", "budgets.cost_per_day", "a number of at least 0"),
        ("[budgets]\ntokens_per_day = 1.5\n", "budgets.tokens_per_day", "a whole number of tokens"),
        ("[budgets]\nmax_tokens_per_run = 0\n", "budgets.max_tokens_per_run", "of at least 1"),
        ("[budgets.agents.motoko]\ntokens_per_day = -5\n", "budgets.agents.motoko.tokens_per_day", "a whole number of tokens"),
        ("[budgets.agents.batou]\ncost_per_day = 1\n", "budgets.agents.batou", "a configured agent"),
        ("[budgets.routines.nightly]\ncost_per_day = 1\n", "budgets.routines.nightly", "a configured routine"),
        ("[budgets]\nwindow = 'weekly'\n", "budgets.window", "one of 'calendar', 'rolling'"),
        ("[budgets]\ncatchup_budget = -1\n", "budgets.catchup_budget", "an integer of at least 0"),
        ("[budgets]\nper_hour = 1\n", "budgets.per_hour", "one of the keys"),
        ("[prices.gpt-5]\ninput = 1\noutput = 2\n", "prices.gpt-5", "a price for a model an agent's backend names ('tiny')"),
        ("[prices.tiny]\ninput = 1\n", "prices.tiny.output", "a price per million tokens"),
        ("[prices.tiny]\ninput = -1\noutput = 1\n", "prices.tiny.input", "a number of at least 0"),
    ],
    ids=lambda value: value if isinstance(value, str) and "\n" not in value and "." in value and " " not in value else None,
)
def test_a_bad_budget_or_price_is_refused_naming_its_key(tmp_path: Path, table: str, key: str, expected: str) -> None:
    """Negative, non-numeric or non-finite budgets, unknown scopes and prices of models no agent uses are refused at load."""
    path = write_config(tmp_path, openai_agent("http://127.0.0.1:9/v1") + "\n" + table)
    with pytest.raises(ConfigError, match=re.escape(key) + ".*" + re.escape(expected)):
        load_config(path)


def test_a_price_for_a_simulated_agents_model_is_refused(tmp_path: Path) -> None:
    """A simulated agent has no model to price: a price is a price of nothing, refused."""
    path = write_config(tmp_path, SIMPLE_AGENT + "\n[prices.llama3]\ninput = 1\noutput = 1\n")
    with pytest.raises(ConfigError, match=re.escape("prices.llama3") + ".*no agent has an openai or command backend"):
        load_config(path)


def test_the_cli_refuses_a_bad_budget_in_one_line_with_exit_78(tmp_path: Path) -> None:
    """ghostrunner run on a negative budget prints one line naming the key, exits 78, runs nothing."""
    path = write_config(tmp_path, SIMPLE_AGENT + "\n[budgets]\ntokens_per_day = -100\n")
    result = ghostrunner("run", "evening", "--agent", "motoko", "--config", str(path), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (78, "")
    assert result.stderr.strip().count("\n") == 0 and "budgets.tokens_per_day" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "journal").exists()
