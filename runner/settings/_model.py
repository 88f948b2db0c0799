"""The validated configuration's records: the runner, its agents and their backends.

:func:`runner.settings.config.load_config` builds them; nothing else should.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo

from routines import Routine
from runner.errors import UnknownNameError
from runner.settings._budgets import BudgetConfig, Price
from runner.settings._gate import Gate
from runner.settings.persona import Persona

__all__ = [
    "DEFAULT_DRIFT_THRESHOLD",
    "MEMORIES",
    "OLLAMA_URL",
    "AgentConfig",
    "BackendSettings",
    "BackupConfig",
    "FleetConfig",
    "RunnerConfig",
]

OLLAMA_URL: Final = "http://127.0.0.1:11434/v1"
#: What ``memory`` may be: ``lexical`` ranks an agent's past entries by words, ``hybrid`` by words and meaning.
MEMORIES: Final = ("lexical", "hybrid")


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """How an agent's reflections are produced.

    ``simulated`` needs nothing; ``openai`` uses base_url, model, api_key_env,
    timeout, json_mode and temperature; ``command`` uses command and timeout.
    Both of those retry a transient failure within the run: at most
    ``attempts`` calls in all, the first wait ``retry_delay`` seconds, doubling
    (see :mod:`runner.run.retries`).
    """

    type: str = "simulated"
    base_url: str = OLLAMA_URL
    model: str = "llama3.2"
    api_key_env: str | None = None
    timeout: float = 120.0
    json_mode: bool = True
    temperature: float | None = None
    command: tuple[str, ...] = ()
    attempts: int = 4
    retry_delay: float = 1.0
    #: Variables removed from a command helper's environment: every configured agent's
    #: api_key_env, so that a helper never holds another agent's (or any openai) API key.
    hidden_env: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One configured agent: its persona, backend, routines, journal and memory.

    ``memory_fallback`` is set for the embedded defaults only: their hybrid
    memory falls back to lexical, with a warning, where the nn extra is not
    installed. A configuration file's hybrid memory never does.
    """

    name: str
    persona: Persona | None
    backend: BackendSettings
    routines: tuple[str, ...]
    journal_root: Path
    memory: str = "lexical"
    memory_fallback: bool = False
    #: May write into a journal holding entries of the other sort, simulated or real (see runner.run.provenance).
    mix_simulated: bool = False
    #: The redaction pass of the agent's appends (see journal.Journal's redact=): "default" or "off".
    redact: str = "default"
    #: Extra kinds of secret, each a kind and a regular expression, redacted with either mode.
    redact_patterns: tuple[tuple[str, str], ...] = ()
    #: "auto": after each entry a run appends, accept the supersede proposals it makes above the journal's stricter
    #: threshold (journal.Journal.auto_accept); "never" (the default): leave them for someone to decide.
    accept_proposals: str = "never"


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The ``[fleet]`` table: one schedule over several hosts, on Celery with Redis (see :mod:`runner.fleet`).

    Every agent is in exactly one shard; a shard's worker holds its agents'
    journals on its own disk and takes the tasks of its queue alone.
    """

    #: The Redis server (``redis://host:port/db`` or ``rediss://``) that is Celery's broker and result store,
    #: RedBeat's schedule and lock, and the record of the fleet's runs. Never holds a password.
    broker: str
    #: shard name -> the agents it holds, in the order the file lists them.
    shards: Mapping[str, tuple[str, ...]]
    #: The environment variable that holds the Redis password, if the server wants one.
    password_env: str | None = None
    #: The environment variable that holds the key the runs record's records are signed with (HMAC-SHA256), if any:
    #: with it, a record without its valid signature (forged by anyone who can write to Redis) is not read.
    record_key_env: str | None = None
    #: A task delivered but not acknowledged this long (its worker died) is delivered again: above run_timeout.
    visibility_timeout: timedelta = timedelta(minutes=15)
    #: How long the active beat's lock outlives it: a standby beat takes over within this.
    beat_lock_timeout: timedelta = timedelta(seconds=30)
    #: How long the runs record keeps what workers and beat recorded (``status --fleet``).
    keep_runs: timedelta = timedelta(days=14)

    def shard_of(self, agent: str) -> str:
        """The shard that holds *agent* (every configured agent is in one)."""
        return next(shard for shard, agents in self.shards.items() if agent in agents)

    @staticmethod
    def queue_of(shard: str) -> str:
        """The Celery queue a shard's worker takes its tasks from."""
        return f"ghostrunner.{shard}"


@dataclass(frozen=True, slots=True)
class BackupConfig:
    """The ``[backup]`` table: ``ghostrunner backup`` on a timer of its own (see :mod:`runner.settings._backup`)."""

    #: Where each run makes its new dated backup directory (``ghostrunner backup --into``).
    dir: Path
    #: When the timer fires: a five-field cron expression in ``runner.timezone``, like a routine's.
    schedule: str = "30 3 * * *"
    #: After a clean backup, the newest this many clean backups stay and older ones are removed; None keeps them all.
    keep: int | None = None


#: ``runner.drift_threshold`` unless the configuration says (:mod:`runner.monitor.lateness`).
DEFAULT_DRIFT_THRESHOLD: Final = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    """The whole validated configuration."""

    source: str
    timezone: ZoneInfo
    catchup_grace: timedelta
    misfire_grace: timedelta
    run_timeout: timedelta
    shutdown_timeout: timedelta
    lock_file: Path
    workers: int | None
    routines: Mapping[str, Routine]
    agents: Mapping[str, AgentConfig]
    config_file: Path | None = field(default=None)
    #: How long a run waits for another run of its (agent, routine) to release the slot lock, then reports busy:
    #: long enough for a run that finds the slot's entry, or a quick local model, to finish; short against
    #: run_timeout and any schedule's interval.
    slot_lock_wait: timedelta = field(default=timedelta(seconds=5))
    #: serve: how many of the latest missed slots of one pair within catchup_grace run on start (0: none, all recorded missed).
    catchup_max: int = 1
    #: serve: the catch-up runs of all pairs start spread evenly over this interval, not all at once.
    catchup_spread: timedelta = timedelta(minutes=5)
    #: serve: worker processes running at once; more runs wait in order.
    max_concurrent_runs: int = 1
    #: The text of config_file as it was read: serve hands it to its workers, so that they run the
    #: configuration serve holds, not a later edit of the file that serve has not (or could not) reload.
    config_text: str | None = field(default=None, repr=False)
    #: Later runs of a slot whose run failed for a transient reason, at most, before the routine's next fire.
    slot_retries: int = 3
    #: The wait before the first of them; under serve each next wait doubles.
    slot_retry_delay: timedelta = timedelta(minutes=5)
    #: The ``[fleet]`` table, when the configuration has one.
    fleet: FleetConfig | None = None
    #: The ``[backup]`` table, when the configuration has one: render then writes the backup timer.
    backup: BackupConfig | None = None
    #: The ``[budgets]`` table: what runs may use (empty without one).
    budgets: BudgetConfig = field(default_factory=BudgetConfig)
    #: The ``[prices]`` table: model -> what its tokens cost.
    prices: Mapping[str, Price] = field(default_factory=dict)
    #: routine name -> its ``gate`` (:mod:`runner.settings._gate`), for the routines that have one.
    gates: Mapping[str, Gate] = field(default_factory=dict)
    #: status and report flag a pair drifting when even its least late run of the week started more than this late.
    drift_threshold: timedelta = DEFAULT_DRIFT_THRESHOLD

    def price_of(self, agent: AgentConfig) -> Price | None:
        """What *agent*'s model's tokens cost, where a price is configured for it (a simulated agent has none)."""
        return self.prices.get(agent.backend.model) if agent.backend.type in ("openai", "command") else None

    def with_journal_root(self, root: str | os.PathLike[str]) -> RunnerConfig:
        """A copy whose agents all keep their journal under *root* (``{agent}`` expands to the agent's name)."""
        template = str(root)
        agents = {name: replace(agent, journal_root=Path(template.replace("{agent}", name))) for name, agent in self.agents.items()}
        return replace(self, agents=agents)

    def journals(self) -> dict[str, Path]:
        """Every agent's journal root, keyed by how a message names it ("the journal of agent 'motoko'"): where no output may land."""
        return {f"the journal of agent {name!r}": agent.journal_root for name, agent in sorted(self.agents.items())}

    def agent(self, name: str) -> AgentConfig:
        """The agent called *name*.

        Raises:
            UnknownNameError: no such agent is configured.
        """
        if name not in self.agents:
            raise UnknownNameError("agent", name, sorted(self.agents))
        return self.agents[name]

    def routine_for(self, agent: AgentConfig, name: str) -> Routine:
        """The routine *name*, which *agent* must run.

        Raises:
            UnknownNameError: the routine is not configured for that agent.
        """
        if name not in agent.routines:
            raise UnknownNameError("routine", name, list(agent.routines), scope=f"for agent {agent.name!r}")
        return self.routines[name]
