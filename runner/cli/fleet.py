"""``ghostrunner fleet beat`` and ``fleet worker``, and the ``--fleet`` input of ``status``, ``history`` and ``report``.

The fleet's modules import Celery: they are imported only when a fleet
command runs, so that the runner works without the ``fleet`` extra and a
fleet command without it says how to install it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import click

from journal.frame.clikit import echo
from runner.cli.support import Settings, config_option, log_input
from runner.errors import FleetUnavailableError
from runner.run.budgets import Budgets
from runner.settings.config import RunnerConfig

__all__ = ["fleet", "fleet_option", "ledger_of", "runs_input"]


def _require_extra() -> None:
    try:
        import celery  # noqa: F401 - only to learn whether the extra is installed
        import redbeat  # noqa: F401
    except ImportError:
        raise FleetUnavailableError(
            "the fleet needs Celery, RedBeat and redis-py, which are not installed", "install them with: pip install 'ghostjournal[fleet]'"
        ) from None


def ledger_of(config: RunnerConfig) -> Callable[[RunnerConfig], Budgets]:
    """The budgets' ledger ``run`` checks: under a ``[fleet]`` table with a day's budget, the fleet's in Redis, else the host's.

    A manual run on a fleet's host spends from the same budget as the fleet's workers.
    """
    if config.fleet is None or not config.budgets.has_day_limit:
        return Budgets
    _require_extra()
    from runner.fleet.ledger import fleet_budgets

    return fleet_budgets


def fleet_option(function: Any) -> Any:
    """``--fleet``: read the fleet's runs record in Redis instead of a log."""
    return click.option(
        "--fleet",
        "from_fleet",
        is_flag=True,
        help="Read the runs the fleet's workers and beat recorded in Redis ([fleet] broker), not a log.",
    )(function)


def _record_lines(config: RunnerConfig) -> Iterator[str]:
    import redis

    from runner.fleet.app import fleet_of
    from runner.fleet.service import runs_record

    broker = fleet_of(config).broker
    record = runs_record(config)
    try:
        yield from record.lines()
    except redis.RedisError as exc:
        raise FleetUnavailableError(
            f"cannot read the fleet's runs record in Redis at {broker}: {exc}",
            "check that redis-server runs there and fleet.broker names it",
        ) from None


def runs_input(config: RunnerConfig, log_file: IO[str] | None, from_fleet: bool, command: str) -> Iterable[str]:
    """What status, history and report read: the fleet's runs record with --fleet, else the log (see log_input)."""
    if not from_fleet:
        return log_input(log_file, command)
    if log_file is not None:
        raise click.UsageError("--fleet reads the runs record in Redis: give it or --log, not both")
    _require_extra()
    from runner.fleet.app import fleet_of

    fleet_of(config)  # a configuration without [fleet] fails now, not when the generator below is first read
    return _record_lines(config)


@click.group(short_help="Run agents on several hosts (Celery and Redis).")
def fleet() -> None:
    """Run agents on several hosts from one schedule: Celery with Redis, RedBeat's beat (the fleet extra)."""


@fleet.command(short_help="Publish each due slot to its shard's queue.")
@config_option
@click.pass_obj
def beat(settings: Settings, config_path: Path | None) -> None:
    """Publish each due slot of every agent and routine to its shard's queue; one beat is active, others stand by.

    Logs JSON lines to stderr. SIGTERM stops it and frees the lock for a standby at once.

    Example: ghostrunner fleet beat --config /etc/ghostrunner/ghostrunner.toml
    """
    _require_extra()
    config = settings.config(config_path)
    from runner.fleet.service import start_beat

    sys.exit(start_beat(config, level=settings.log_level or "info"))


@fleet.command(short_help="Run the slots of one shard's agents.")
@click.option("--shard", required=True, help="The shard whose agents this worker runs (a name under [fleet.shards]).")
@click.option(
    "--concurrency", type=click.IntRange(min=1, max=1024), default=None, help="Runs at once (default: runner.max_concurrent_runs)."
)
@config_option
@click.pass_obj
def worker(settings: Settings, shard: str, concurrency: int | None, config_path: Path | None) -> None:
    """Run the slots of one shard's agents, whose journals are on this host; SIGTERM lets runs in flight finish.

    Example: ghostrunner fleet worker --shard east --config /etc/ghostrunner/ghostrunner.toml
    """
    _require_extra()
    config = settings.config(config_path)
    from runner.fleet.service import start_worker

    sys.exit(start_worker(config, shard, concurrency=concurrency, level=settings.log_level or "info"))


@fleet.command(short_help="Empty a shard's queue, recording each slot as missed.")
@click.option("--shard", required=True, help="The shard whose queue to empty (a name under [fleet.shards]).")
@config_option
@click.pass_obj
def purge(settings: Settings, shard: str, config_path: Path | None) -> None:
    """Empty a shard's queue, logging each slot it held as missed (reason purged), so status --fleet shows it.

    Unlike celery purge, which leaves no word of the slots it drops. Prints how many it dropped.

    Example: ghostrunner fleet purge --shard east --config /etc/ghostrunner/ghostrunner.toml
    """
    _require_extra()
    config = settings.config(config_path)
    from runner.fleet.service import purge_shard

    slots, other = purge_shard(config, shard, level=settings.log_level or "info")
    echo(f"purged {slots} slot(s) from shard {shard!r}, each recorded missed (reason purged); {other} other message(s) dropped")
