"""A simulated agent life: every slot of the configured routines, in time order, on a virtual clock.

The same ``execute_run`` as ``ghostrunner run`` and ``serve`` is used; there
is no sleeping. An agent's runs are sequential (each builds on the last), so
parallelism is across agents: with several agents and workers, each agent's
life runs in its own worker process, opening its journal once. Re-running a
simulation finds every slot's client_key already present and appends nothing.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import structlog

from routines import Routine
from runner._memory import open_journal
from runner.backends import build_backend
from runner.config import RunnerConfig
from runner.engine import RunResult, execute_run
from runner.errors import RunnerError
from runner.slots import cron_trigger, fire_times

__all__ = ["SimulationSummary", "schedule_for", "simulate", "simulate_agent", "simulation_window"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class SimulationSummary:
    """What simulating one agent did."""

    agent: str
    start: str
    end: str
    runs: int
    outcomes: dict[str, int]
    failures: list[str]
    seconds: float
    fault: str | None = None  # the errno name when the filesystem refused the journal (the simulation stopped there)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "agent": self.agent, "start": self.start, "end": self.end, "runs": self.runs,
            "outcomes": dict(self.outcomes), "failures": list(self.failures), "seconds": self.seconds,
        } | ({"fault": self.fault} if self.fault else {})


def simulation_window(days: int, tz: tzinfo, start: date | datetime | None = None, *, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The ``[start, end)`` of a simulation of *days* days in *tz*.

    Days are *tz*'s local days, 23 or 25 hours across a DST change.

    Args:
        days: how many days.
        tz: the configured timezone.
        start: a day (the simulation starts at its midnight in *tz*), an aware time (it starts
            then), or None: the midnight *days* days before today.
        now: the time "today" is taken from (default now).
    """
    if isinstance(start, datetime):
        first = start.astimezone(tz)
    else:
        day = start if start is not None else (now or datetime.now(tz)).astimezone(tz).date() - timedelta(days=days)
        first = datetime(day.year, day.month, day.day, tzinfo=tz)
    return first, first + timedelta(days=days)


def schedule_for(config: RunnerConfig, agent: str, start: datetime, end: datetime) -> Iterator[tuple[datetime, Routine]]:
    """Every (scheduled time, routine) of *agent* in ``[start, end)``, in time order.

    Routines due at the same moment run in the agent's configured order.
    """
    settings = config.agent(agent)
    streams = []
    for order, name in enumerate(settings.routines):
        routine = config.routines[name]
        trigger = cron_trigger(routine.schedule, config.timezone)
        streams.append(_tagged(fire_times(trigger, start, end, granularity=routine.slot), order, routine))
    for moment, _, routine in heapq.merge(*streams, key=lambda item: (item[0].astimezone(UTC), item[1])):  # instants, not wall clocks
        yield moment, routine


def _tagged(times: Iterator[datetime], order: int, routine: Routine) -> Iterator[tuple[datetime, int, Routine]]:
    for moment in times:
        yield moment, order, routine


def simulate_agent(config: RunnerConfig, agent: str, start: datetime, end: datetime) -> SimulationSummary:
    """Run every slot of *agent* between *start* and *end* in this process."""
    began = time.perf_counter()
    settings = config.agent(agent)
    backend = build_backend(settings)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    fault = None
    with open_journal(settings) as journal:
        for scheduled, routine in schedule_for(config, agent, start, end):
            result: RunResult = execute_run(journal, agent=settings, routine=routine, scheduled=scheduled, backend=backend, tz=config.timezone,
                                            run_timeout=config.run_timeout.total_seconds())
            outcomes[result.outcome.value] += 1
            if result.error and result.outcome == "failed" and len(failures) < 10:
                failures.append(f"{result.client_key}: {result.error}")
            if result.fault is not None:
                fault = result.fault  # a full disk or a read-only journal refuses every later run the same way
                break
    seconds = round(time.perf_counter() - began, 3)
    summary = SimulationSummary(agent, start.isoformat(), end.isoformat(), sum(outcomes.values()), dict(sorted(outcomes.items())), failures, seconds, fault)
    log.info("simulate.finished", agent=agent, runs=summary.runs, outcomes=summary.outcomes, seconds=seconds)
    return summary


def _worker(args: tuple[RunnerConfig, str, datetime, datetime]) -> SimulationSummary:
    return simulate_agent(*args)


def simulate(config: RunnerConfig, agents: Sequence[str], start: datetime, end: datetime, *, workers: int | None = None) -> list[SimulationSummary]:
    """Simulate each of *agents* from *start* to *end*, in parallel worker processes when there are several.

    Args:
        config: the runner configuration.
        agents: agent names (each must be configured).
        start: the first moment of the virtual clock (aware).
        end: the end of the virtual clock (exclusive).
        workers: worker processes; default ``config.workers`` or the CPU count; 1 runs in this process.

    Returns:
        One summary per agent, in the order given.
    """
    for name in agents:
        config.agent(name)
    count = min(len(agents), workers or config.workers or os.cpu_count() or 1)
    if count <= 1:
        return [simulate_agent(config, name, start, end) for name in agents]
    # fork keeps start-up cheap: the workers inherit the imported modules and the parsed config.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context(method)) as pool:
            return list(pool.map(_worker, [(config, name, start, end) for name in agents]))
    except BrokenProcessPool:
        # A worker was killed (the OOM killer, a kill -9): one line, not the pool's traceback. Its journal
        # holds complete entries only, and a re-run appends just the slots still missing.
        raise RunnerError("a simulation worker process died before it finished (killed?); run the same simulate again, "
                          "it appends only the slots still missing") from None
