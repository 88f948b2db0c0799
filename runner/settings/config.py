"""The runner's configuration: one TOML file, validated whole at load time.

Every problem is reported as a :class:`ConfigError` naming the file, the
dotted key and what was expected; nothing starts on a bad file. Relative
paths are read from the config file's directory. Without a file the
embedded defaults (``runner/data/default.toml``: the agent ``motoko`` on the
simulated backend, in the system's local time zone, journal in the user's
state directory) are used. The records
are defined in :mod:`runner.settings._model`, the check of each table and field
in :mod:`runner.settings._schema`; this module reads the document and builds the
whole.

Layout::

    [runner]
    journal_root = "./ghostjournal-data"   # "{agent}" expands to the agent's name; default: $GHOSTJOURNAL_ROOT, else the state directory's AGENT
    timezone = "Europe/Berlin"             # default UTC (the embedded defaults: the system's local zone)
    catchup_grace = "6h"       # on start, the latest missed slot this recent runs once
    misfire_grace = "10m"      # how late a cron fire may still start
    run_timeout = "5m"         # a worker running longer is killed
    shutdown_timeout = "2m"    # how long SIGTERM waits for in-flight runs
    lock_file = "ghostrunner.lock"   # one scheduler per deployment (default: beside the journal root)
    slot_lock_wait = "5s"      # how long a run waits for another run of its agent and routine, then reports busy
    workers = 4                # simulate: parallel worker processes (default: CPU count)
    catchup_max = 1            # serve, on start: at most this many missed slots per pair within catchup_grace run
    catchup_spread = "5m"      # serve, on start: the catch-up runs of all pairs spread over this interval
    max_concurrent_runs = 2    # serve: worker processes at once; more runs wait in order (default: CPU count)
    memory = "lexical"         # every agent's default: "lexical" (words) or "hybrid" (words and meaning, the nn extra)
    slot_retries = 3           # later runs of a slot that failed for a transient reason, before its routine's next fire
    slot_retry_delay = "5m"    # the wait before the first of them (doubling under serve)
    drift_threshold = "5m"     # status, report: a pair whose every run of the week started later than this drifts

    [routines.evening]         # override a built-in routine, field by field
    schedule = "30 22 * * *"

    [routines.morning]         # or add one: kind, schedule, slot, question and prompt are required
    kind = "note"
    schedule = "0 7 * * *"
    slot = "day"
    question = "what is waiting for me today?"
    prompt = "Write a short morning note."
    window = "2d"

    [agents.motoko]
    persona = "agents/motoko.toml"
    routines = ["pulse-4h", "evening", "digest", "morning"]
    backend = "simulated"      # or a table: {type = "openai", model = "llama3.2"} / {type = "command", command = [...]};
                               # openai and command take attempts = 4 and retry_delay = "1s" (retries within a run)
    memory = "hybrid"          # this agent's, instead of the [runner] default
    accept_proposals = "auto"  # accept the supersede proposals its entries make above the stricter threshold (default "never")

    [fleet]                    # optional: one schedule over several hosts (runner.settings._fleet, runner.fleet)
    broker = "redis://10.0.0.5:6379/0"
    [fleet.shards]
    east = ["motoko"]

    [backup]                   # optional: a timer for `ghostrunner backup` among the rendered units (runner.settings._backup)
    dir = "/var/backups/ghostrunner"
    keep = 7

    [budgets]                  # optional: what runs may use a day, and per run (runner.settings._budgets, runner.run.budgets)
    cost_per_day = 5.0
    [prices."llama3.2"]        # optional: per million tokens of a model an agent's backend names
    input = 0.1
    output = 0.2

A hybrid memory needs the ``nn`` extra: a run without it fails, naming the
key and the fix. Only the embedded defaults (hybrid) fall back to lexical
there, with a ``memory.fallback`` warning on each run.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Final

from journal.frame import PlaceError, journal_place
from routines import BUILTIN_ROUTINES, Routine
from runner.errors import ConfigError
from runner.settings._backup import read_backup
from runner.settings._budgets import BudgetConfig, Limits, Price, read_budgets, read_prices
from runner.settings._fleet import read_fleet
from runner.settings._gate import Gate, read_gate
from runner.settings._host import local_zone_name, state_directory
from runner.settings._lock_place import check_lock_file
from runner.settings._model import DEFAULT_DRIFT_THRESHOLD, AgentConfig, BackendSettings, BackupConfig, FleetConfig, RunnerConfig
from runner.settings._schema import DURATION_EXPECTED, FieldReader, parse_duration
from runner.settings._toml import loads_bounded, read_bounded

__all__ = [
    "CONFIG_ENVVAR",
    "DEFAULT_DRIFT_THRESHOLD",
    "DURATION_EXPECTED",
    "EMBEDDED_SOURCE",
    "AgentConfig",
    "BackendSettings",
    "BackupConfig",
    "BudgetConfig",
    "FleetConfig",
    "Gate",
    "Limits",
    "Price",
    "RunnerConfig",
    "cpu_count",
    "load_config",
    "parse_config",
    "parse_duration",
]

CONFIG_ENVVAR: Final = "GHOSTRUNNER_CONFIG"
EMBEDDED_SOURCE: Final = "<embedded defaults>"

_RUNNER_KEYS: Final = (
    "journal_root",
    "timezone",
    "catchup_grace",
    "misfire_grace",
    "run_timeout",
    "shutdown_timeout",
    "lock_file",
    "workers",
    "memory",
    "catchup_max",
    "catchup_spread",
    "max_concurrent_runs",
    "slot_lock_wait",
    "slot_retries",
    "slot_retry_delay",
    "drift_threshold",
)
#: The longest drift threshold: lateness is judged over a week.
_MAX_DRIFT_THRESHOLD: Final = timedelta(days=7)
_MAX_WORKERS: Final = 1024  # worker processes of simulate (or serve at once); more only exhausts the process table
#: The most catch-up runs of one pair on start; each is a backend call, so a large number is a burst by another name.
_MAX_CATCHUP: Final = 1000
_MAX_SLOT_RETRIES: Final = 100


def _unconfigured_root(source: str) -> str:
    """The journal root template without a configured ``journal_root``: ``$GHOSTJOURNAL_ROOT``, else the state directory's ``{agent}``.

    Raises:
        ConfigError: ``$GHOSTJOURNAL_ROOT`` is set but blank, or there is no state directory.
    """
    try:
        named = journal_place(None)
    except PlaceError as exc:  # set, but blank: a script's variable that came out empty
        raise ConfigError(source, exc.source, exc.expected, f"{exc.got!r} ({exc.fix})" if exc.fix else repr(exc.got)) from None
    return str(named.root) if named is not None else str(state_directory(source) / "{agent}")


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask, which a container or taskset narrows), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def parse_config(
    text: str, *, source: str, files_base: Path, state_base: Path, config_file: Path | None = None, default_timezone: str = "UTC"
) -> RunnerConfig:
    """Validate configuration *text*.

    Without ``runner.journal_root`` (nor an agent's own), every agent's journal
    is ``$GHOSTJOURNAL_ROOT`` when that is set, else each agent's is ``AGENT``
    in the user's state directory (see :mod:`journal.frame.roots`, the rule
    ``ghostjournal`` follows too).

    Args:
        text: the TOML document.
        source: how errors name it (the file path, or ``<embedded defaults>``).
        files_base: directory that relative persona and command paths start from.
        state_base: directory that relative journal roots and the lock file start from.
        config_file: the file it came from, if any (passed on to worker processes).
        default_timezone: the zone without ``runner.timezone``.

    Raises:
        ConfigError: the first problem found, naming file, key and expectation.
    """
    reader = FieldReader(source, files_base, state_base)
    data = loads_bounded(text, source)
    reader.table(data, "", ("runner", "routines", "agents", "fleet", "backup", "budgets", "prices"))
    runner = reader.table(data.get("runner", {}), "runner", _RUNNER_KEYS)
    tz = reader.timezone(runner.get("timezone", default_timezone))
    # Unconfigured, the rule ghostjournal follows too (journal.frame.roots): $GHOSTJOURNAL_ROOT, else each agent's in the state directory.
    root_template = reader.string(runner["journal_root"], "runner.journal_root") if "journal_root" in runner else _unconfigured_root(source)
    durations = {
        name: reader.duration(runner.get(name, default), f"runner.{name}")
        for name, default in (("catchup_grace", "6h"), ("misfire_grace", "10m"), ("run_timeout", "5m"), ("shutdown_timeout", "2m"))
    }
    for name in ("run_timeout", "shutdown_timeout"):
        if durations[name] <= timedelta(0):
            raise reader.fail(f"runner.{name}", "a positive duration", runner.get(name))
    if "slot_lock_wait" in runner:
        durations["slot_lock_wait"] = reader.duration(runner["slot_lock_wait"], "runner.slot_lock_wait")
        if durations["slot_lock_wait"] >= durations["run_timeout"]:
            raise reader.fail("runner.slot_lock_wait", "a duration shorter than runner.run_timeout", runner["slot_lock_wait"])
    workers = reader.positive_int(runner["workers"], "runner.workers", maximum=_MAX_WORKERS) if "workers" in runner else None
    catchup_max = reader.positive_int(runner.get("catchup_max", 1), "runner.catchup_max", minimum=0, maximum=_MAX_CATCHUP)
    catchup_spread = reader.duration(runner.get("catchup_spread", "5m"), "runner.catchup_spread")
    max_concurrent_runs = reader.positive_int(
        runner.get("max_concurrent_runs", cpu_count()), "runner.max_concurrent_runs", maximum=_MAX_WORKERS
    )
    slot_retries = reader.positive_int(runner.get("slot_retries", 3), "runner.slot_retries", minimum=0, maximum=_MAX_SLOT_RETRIES)
    slot_retry_delay = reader.duration(runner.get("slot_retry_delay", "5m"), "runner.slot_retry_delay")
    if slot_retry_delay < timedelta(seconds=1):
        raise reader.fail("runner.slot_retry_delay", "a duration of at least 1s", runner.get("slot_retry_delay"))
    drift_threshold = reader.duration(runner.get("drift_threshold", "5m"), "runner.drift_threshold")
    if not timedelta(seconds=1) <= drift_threshold <= _MAX_DRIFT_THRESHOLD:
        raise reader.fail("runner.drift_threshold", "a duration from 1s to 7d", runner.get("drift_threshold"))
    routines: dict[str, Routine] = dict(BUILTIN_ROUTINES)
    gates = {}
    for name, value in reader.table(data.get("routines", {}), "routines", None).items():
        routines[name] = reader.routine(name, value, tz)
        if isinstance(value, dict) and "gate" in value:
            gates[name] = read_gate(reader, value["gate"], f"routines.{name}.gate")
    agents_table = reader.table(data.get("agents", {}), "agents", None)
    if not agents_table:
        raise reader.fail("agents", "at least one [agents.NAME] table", "none")
    memory = reader.memory(runner.get("memory", "lexical"), "runner.memory")
    agents = {name: reader.agent(name, value, routines, root_template, memory) for name, value in agents_table.items()}
    secrets = tuple(sorted({agent.backend.api_key_env for agent in agents.values() if agent.backend.api_key_env}))
    agents = {
        name: replace(agent, backend=replace(agent.backend, hidden_env=secrets)) if agent.backend.type == "command" else agent
        for name, agent in agents.items()
    }
    if "lock_file" in runner:
        lock_file = reader.path(runner["lock_file"], "runner.lock_file", state=True)
    else:
        first_root = reader.path(root_template.replace("{agent}", "all"), "runner.journal_root", state=True)
        lock_file = first_root.parent / f".{first_root.name}.ghostrunner.lock"
    check_lock_file(reader, lock_file, runner.get("lock_file"), agents)
    fleet = read_fleet(reader, data["fleet"], agents, durations["run_timeout"]) if "fleet" in data else None
    backup = read_backup(reader, data["backup"], agents, tz) if "backup" in data else None
    budgets = read_budgets(reader, data["budgets"], agents, routines) if "budgets" in data else BudgetConfig()
    prices = read_prices(reader, data["prices"], agents) if "prices" in data else {}
    return RunnerConfig(
        source=source,
        timezone=tz,
        lock_file=lock_file,
        workers=workers,
        routines=routines,
        agents=agents,
        config_file=config_file,
        **durations,
        catchup_max=catchup_max,
        catchup_spread=catchup_spread,
        max_concurrent_runs=max_concurrent_runs,
        config_text=text if config_file is not None else None,
        slot_retries=slot_retries,
        slot_retry_delay=slot_retry_delay,
        fleet=fleet,
        backup=backup,
        budgets=budgets,
        prices=prices,
        gates=gates,
        drift_threshold=drift_threshold,
    )


def load_config(path: str | os.PathLike[str] | None = None, *, text: str | None = None) -> RunnerConfig:
    """Load the configuration from *path*, else ``$GHOSTRUNNER_CONFIG``, else the embedded defaults.

    With *text*, that is the file's content (as ``serve`` read it) and the file itself is not read;
    relative paths still start from the file's directory.

    Raises:
        ConfigError: unreadable or invalid file.
    """
    chosen = path if path is not None else os.environ.get(CONFIG_ENVVAR) or None
    if chosen is None:
        data_dir = resources.files("runner") / "data"
        text = (data_dir / "default.toml").read_text(encoding="utf-8")
        # The embedded defaults keep time in the system's local zone; a configuration file says its own (UTC when it does not).
        config = parse_config(
            text,
            source=EMBEDDED_SOURCE,
            files_base=Path(str(data_dir)),
            state_base=state_directory(EMBEDDED_SOURCE),
            default_timezone=local_zone_name(),
        )
        return replace(config, agents={name: replace(agent, memory_fallback=True) for name, agent in config.agents.items()})
    config_path = Path(chosen)
    if text is None:
        text = read_bounded(config_path, "configuration file")
    base = config_path.resolve().parent
    return parse_config(text, source=str(config_path), files_base=base, state_base=base, config_file=config_path.resolve())
