"""The ``[budgets]`` and ``[prices]`` tables: what runs may use, and what a model's tokens cost.

Its records are part of :class:`runner.settings._model.RunnerConfig`, which
imports them from here; so the readers take the agents as plain mappings of
``AgentConfig``, never importing that module back.

Layout::

    [prices."gpt-4o-mini"]        # per million tokens, in any one currency
    input = 0.15
    output = 0.60

    [budgets]                     # the runner-wide total, every agent and routine together
    cost_per_day = 5.0
    tokens_per_day = 2000000
    max_tokens_per_run = 4000     # every run's, unless its agent or routine says otherwise
    window = "calendar"           # "calendar": the day in runner.timezone; "rolling": the last 24 hours
    catchup_budget = 4            # serve, on start: at most this many catch-up runs, all pairs together

    [budgets.agents.motoko]       # one agent's runs
    cost_per_day = 1.0

    [budgets.routines.pulse-4h]   # one routine's runs, every agent's
    tokens_per_day = 20000

A price is for a model some agent's ``openai`` or ``command`` backend names
(``backend.model``); a price for any other model is refused, since it would
price nothing. A budget is a number at least 0 (``cost_per_day`` any number,
the token counts whole numbers); anything else is refused at load, naming the
key (exit 78).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["BUDGET_WINDOWS", "BudgetConfig", "Limits", "Price", "read_budgets", "read_prices"]

#: What ``budgets.window`` may be.
BUDGET_WINDOWS: Final = ("calendar", "rolling")
_LIMIT_KEYS: Final = ("max_tokens_per_run", "tokens_per_day", "cost_per_day")
_BUDGET_KEYS: Final = (*_LIMIT_KEYS, "window", "catchup_budget", "agents", "routines")
_PRICE_KEYS: Final = ("input", "output")
#: The largest token count a budget may name: far beyond any model, small enough to stay exact in a float.
_MAX_TOKENS: Final = 10**12


@dataclass(frozen=True, slots=True)
class Price:
    """What a model's tokens cost, per million: ``input`` (the prompt's) and ``output`` (the completion's)."""

    input: float
    output: float

    def of(self, tokens_in: int, tokens_out: int) -> float:
        """The cost of *tokens_in* prompt and *tokens_out* completion tokens."""
        return (tokens_in * self.input + tokens_out * self.output) / 1_000_000


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of one scope (the runner, an agent or a routine); None: no limit of that sort."""

    max_tokens_per_run: int | None = None
    tokens_per_day: int | None = None
    cost_per_day: float | None = None

    @property
    def has_day_limit(self) -> bool:
        """Whether it limits a day's tokens or cost."""
        return self.tokens_per_day is not None or self.cost_per_day is not None


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """Every budget of the configuration (see the module); empty when it has no ``[budgets]`` table."""

    total: Limits = Limits()
    agents: Mapping[str, Limits] = field(default_factory=dict)
    routines: Mapping[str, Limits] = field(default_factory=dict)
    window: str = "calendar"
    #: serve, on start: the most catch-up runs of all pairs together (None: only catchup_max per pair bounds them).
    catchup_budget: int | None = None

    @property
    def has_day_limit(self) -> bool:
        """Whether any scope limits a day's tokens or cost (only then is the ledger consulted before a run)."""
        return any(limits.has_day_limit for limits in (self.total, *self.agents.values(), *self.routines.values()))

    def max_tokens_for(self, agent: str, routine: str) -> int | None:
        """The ``max_tokens_per_run`` of *agent*'s *routine*: the routine's, else the agent's, else the runner-wide one."""
        for limits in (self.routines.get(routine), self.agents.get(agent), self.total):
            if limits is not None and limits.max_tokens_per_run is not None:
                return limits.max_tokens_per_run
        return None


def _number(reader: Any, value: object, key: str, *, whole: bool) -> Any:
    if whole:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKENS:
            raise reader.fail(key, f"a whole number of tokens from 0 to {_MAX_TOKENS}", value)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise reader.fail(key, "a number of at least 0", value)
    return float(value)


def _limits(reader: Any, value: object, key: str, allowed: tuple[str, ...]) -> Limits:
    data = reader.table(value, key, allowed)
    found: dict[str, Any] = {}
    for name in _LIMIT_KEYS:
        if name in data:
            found[name] = _number(reader, data[name], f"{key}.{name}", whole=name != "cost_per_day")
    if found.get("max_tokens_per_run") == 0:
        raise reader.fail(f"{key}.max_tokens_per_run", "a whole number of tokens of at least 1", 0)
    return Limits(**found)


def read_budgets(reader: Any, value: object, agents: Mapping[str, Any], routines: Mapping[str, object]) -> BudgetConfig:
    """The ``[budgets]`` table *value*, its agents and routines among those configured.

    Raises:
        ConfigError: the first bad key or value, named.
    """
    data = reader.table(value, "budgets", _BUDGET_KEYS)
    total = _limits(reader, {name: data[name] for name in _LIMIT_KEYS if name in data}, "budgets", _LIMIT_KEYS)
    scoped: dict[str, dict[str, Limits]] = {"agents": {}, "routines": {}}
    for scope, known in (("agents", agents), ("routines", routines)):
        for name, table in reader.table(data.get(scope, {}), f"budgets.{scope}", None).items():
            if name not in known:
                what = "a configured agent" if scope == "agents" else "a configured routine"
                raise reader.fail(f"budgets.{scope}.{name}", f"{what} ({', '.join(sorted(known))})", name)
            scoped[scope][name] = _limits(reader, table, f"budgets.{scope}.{name}", _LIMIT_KEYS)
    window = data.get("window", "calendar")
    if window not in BUDGET_WINDOWS:
        raise reader.fail("budgets.window", "one of " + ", ".join(repr(name) for name in BUDGET_WINDOWS), window)
    catchup_budget = reader.positive_int(data["catchup_budget"], "budgets.catchup_budget", minimum=0) if "catchup_budget" in data else None
    return BudgetConfig(total, scoped["agents"], scoped["routines"], window, catchup_budget)


def read_prices(reader: Any, value: object, agents: Mapping[str, Any]) -> dict[str, Price]:
    """The ``[prices]`` table *value*: model name -> its price, each model one an agent's backend names.

    Raises:
        ConfigError: the first bad key or value, or a price for a model no agent uses, named.
    """
    models = sorted({agent.backend.model for agent in agents.values() if agent.backend.type in ("openai", "command")})
    prices = {}
    for model, table in reader.table(value, "prices", None).items():
        key = f"prices.{model}"
        if model not in models:
            shown = ", ".join(repr(name) for name in models) if models else "none: no agent has an openai or command backend"
            raise reader.fail(key, f"a price for a model an agent's backend names ({shown})", model)
        data = reader.table(table, key, _PRICE_KEYS)
        for name in _PRICE_KEYS:
            if name not in data:
                raise reader.fail(f"{key}.{name}", "a price per million tokens (a number of at least 0)", "nothing")
        prices[model] = Price(*(_number(reader, data[name], f"{key}.{name}", whole=False) for name in _PRICE_KEYS))
    return prices
