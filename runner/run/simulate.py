"""A simulated agent life: every slot of the configured routines, in time order, on a virtual clock.

The same ``execute_run`` as ``ghostrunner run`` and ``serve`` is used; there
is no sleeping. An agent's runs are sequential (each builds on the last), so
parallelism is across agents: with several agents and workers, each agent's
life runs in its own worker process, opening its journal once. Re-running a
simulation finds every slot's client_key already present and appends nothing.

A simulation refuses agents on a real backend unless told ``real_backends``
(:func:`backend_calls` counts what they would cost), and refuses, before
anything is written, a journal holding the other sort of entries (see
:mod:`runner.run.provenance`).
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

import structlog

from journal import JournalError
from routines import Routine
from runner.backends import build_backend
from runner.cron.slots import cron_trigger, fire_times
from runner.errors import MixedJournalError, RealBackendsRefusedError, RunnerError
from runner.run._memory import open_journal
from runner.run.contract import RunIdentity
from runner.run.engine import RunResult, RunTerms, execute_run, open_failure
from runner.run.provenance import check_journals, describe_calls, is_simulated
from runner.settings.config import RunnerConfig

__all__ = [
    "Progress",
    "SimulationSummary",
    "backend_calls",
    "check_backends",
    "schedule_for",
    "simulate",
    "simulate_agent",
    "simulation_window",
]

log = structlog.get_logger()

#: Told ``(agent, done, total)`` as a simulation goes: runs of one agent in this process; with
#: several worker processes, ``("", agents done, agents)`` as each agent's life ends.
Progress = Callable[[str, int, int], None]


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
            "agent": self.agent,
            "start": self.start,
            "end": self.end,
            "runs": self.runs,
            "outcomes": dict(self.outcomes),
            "failures": list(self.failures),
            "seconds": self.seconds,
        } | ({"fault": self.fault} if self.fault else {})


def simulation_window(
    days: int, tz: tzinfo, start: date | datetime | None = None, *, now: datetime | None = None
) -> tuple[datetime, datetime]:
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


def backend_calls(config: RunnerConfig, agents: Iterable[str], start: datetime, end: datetime) -> dict[str, int]:
    """The most backend calls simulating *agents* from *start* to *end* would make, for each agent on a real backend.

    One per slot of a routine that is not a digest; a slot that already has its entry makes none, so a re-run makes fewer.
    """
    return {
        name: sum(1 for _, routine in schedule_for(config, name, start, end) if not routine.is_digest)
        for name in agents
        if not is_simulated(config.agent(name))
    }


def check_backends(
    config: RunnerConfig, agents: Iterable[str], start: datetime, end: datetime, *, real_backends: bool, command: str = "simulate"
) -> dict[str, int]:
    """The backend calls of :func:`backend_calls`, once they are allowed.

    Raises:
        RealBackendsRefusedError: some agent is on a real backend and *real_backends* is false.
    """
    calls = backend_calls(config, agents, start, end)
    if calls and not real_backends:
        raise RealBackendsRefusedError(command, calls, describe_calls(calls, config))
    return calls


def simulate_agent(
    config: RunnerConfig, agent: str, start: datetime, end: datetime, *, on_progress: Progress | None = None
) -> SimulationSummary:
    """Run every slot of *agent* between *start* and *end* in this process.

    Every line it logs carries ``simulated: true``: its runs happen on a virtual clock, at their
    scheduled times, which is when ``status`` and ``report`` judge them (their lines are written now).

    It checks neither backends nor journals first: :func:`simulate` and the demo do.
    A journal that cannot be opened (hybrid memory whose model cannot load, the
    filesystem refusing it) fails the agent's runs as ``run`` fails them, each
    with that error; a refusing filesystem stops it at the first, as it does
    once the journal is open.

    Raises:
        MixedJournalError: the journal holds entries of the other sort; nothing was written.
    """
    with structlog.contextvars.bound_contextvars(simulated=True):
        return _simulate_agent(config, agent, start, end, on_progress)


def _simulate_agent(config: RunnerConfig, agent: str, start: datetime, end: datetime, on_progress: Progress | None) -> SimulationSummary:
    began = time.perf_counter()
    settings = config.agent(agent)
    backend = build_backend(settings)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    fault = None
    total = sum(1 for _ in schedule_for(config, agent, start, end)) if on_progress is not None else 0
    try:
        journal = open_journal(settings)
    except MixedJournalError:
        raise  # refused before anything is written, as simulate refuses it for several agents
    except (RunnerError, JournalError, OSError) as exc:
        # Each run would fail as ``run`` fails it (hybrid memory whose model cannot load, a journal the
        # filesystem refuses): they are reported so, and the other agents' simulations stand.
        error, fault = open_failure(settings, exc)
        for scheduled, routine in schedule_for(config, agent, start, end):
            outcomes["failed"] += 1
            if len(failures) < 10:
                failures.append(f"{RunIdentity.of(agent, routine, scheduled, config.timezone).client_key}: {error}")
            if fault is not None:
                break  # as below: a refusing filesystem ends the simulation at its first run
        if on_progress is not None:
            on_progress(agent, outcomes["failed"], outcomes["failed"])
        return _summary(agent, start, end, began, outcomes, failures, fault)
    # Each run's new entry is embedded on a second core while the run stores it and the next one starts.
    with journal, journal.embedding_behind():
        for scheduled, routine in schedule_for(config, agent, start, end):
            result: RunResult = execute_run(
                journal,
                agent=settings,
                routine=routine,
                scheduled=scheduled,
                backend=backend,
                tz=config.timezone,
                run_timeout=config.run_timeout.total_seconds(),
                terms=RunTerms.of(config, settings, routine.name),
            )
            outcomes[result.outcome.value] += 1
            if on_progress is not None:
                on_progress(agent, sum(outcomes.values()), total)
            if result.error and result.outcome == "failed" and len(failures) < 10:
                failures.append(f"{result.client_key}: {result.error}")
            if result.fault is not None:
                fault = result.fault  # a full disk or a read-only journal refuses every later run the same way
                break
    return _summary(agent, start, end, began, outcomes, failures, fault)


def _summary(
    agent: str, start: datetime, end: datetime, began: float, outcomes: Counter[str], failures: list[str], fault: str | None
) -> SimulationSummary:
    seconds = round(time.perf_counter() - began, 3)
    summary = SimulationSummary(
        agent, start.isoformat(), end.isoformat(), sum(outcomes.values()), dict(sorted(outcomes.items())), failures, seconds, fault
    )
    log.info("simulate.finished", agent=agent, runs=summary.runs, outcomes=summary.outcomes, seconds=seconds)
    return summary


def _worker(args: tuple[RunnerConfig, str, datetime, datetime]) -> SimulationSummary:
    return simulate_agent(*args)


def _dies_on_sigterm() -> None:
    """A simulation worker ends at SIGTERM, as the pool that stops it expects.

    A forked worker inherits the command's handler, which unwinds a run by raising SystemExit: the
    pool's worker loop catches that as the task's result and waits for the next task, so a pool
    stopping after another worker died waited on it for good.

    The pool forks its workers with SIGTERM blocked, so that one stopped before this runs (inside
    the fork hooks of a library) is not unwound there with a traceback; it is unblocked here, after
    the default is back, and a SIGTERM that came meanwhile ends the worker now.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _repeated(names: Sequence[str]) -> str | None:
    """The first of *names* that comes again later, or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def simulate(
    config: RunnerConfig,
    agents: Sequence[str],
    start: datetime,
    end: datetime,
    *,
    workers: int | None = None,
    real_backends: bool = False,
    on_progress: Progress | None = None,
) -> list[SimulationSummary]:
    """Simulate each of *agents* from *start* to *end*, in parallel worker processes when there are several.

    Args:
        config: the runner configuration.
        agents: agent names (each must be configured).
        start: the first moment of the virtual clock (aware).
        end: the end of the virtual clock (exclusive).
        workers: worker processes; default ``config.workers`` or the CPU count; 1 runs in this process.
        real_backends: agents on an openai or command backend may be simulated (one call per slot).
        on_progress: told how far it got (see :data:`Progress`).

    Returns:
        One summary per agent, in the order given.

    Raises:
        RealBackendsRefusedError: an agent is on a real backend and *real_backends* is false; nothing was run.
        MixedJournalError: an agent's journal holds the other sort of entries; nothing was written to any journal.
        ValueError: an agent is named twice (its slots would run twice and be counted twice).
    """
    twice = _repeated(agents)
    if twice is not None:
        raise ValueError(f"agents: expected each agent once, got {twice!r} twice")
    for name in agents:
        config.agent(name)
    check_backends(config, agents, start, end, real_backends=real_backends)
    if len(set(agents)) > 1:
        # One agent's journal is checked as it opens, before its first write; with several, every
        # journal is checked first, so that a refused one leaves the others unwritten too.
        check_journals(config, agents)
    count = min(len(agents), workers or config.workers or os.cpu_count() or 1)
    if count <= 1:
        return [simulate_agent(config, name, start, end, on_progress=on_progress) for name in agents]
    # fork keeps start-up cheap: the workers inherit the imported modules and the parsed config.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context(method), initializer=_dies_on_sigterm) as pool:
            # The workers, and the pool's manager thread that forks their replacements, start with
            # SIGTERM blocked (see _dies_on_sigterm); this process takes it again once they are started.
            before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            try:
                futures = {pool.submit(_worker, (config, name, start, end)): name for name in agents}
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)
            summaries: dict[str, SimulationSummary] = {}
            for future in as_completed(futures):
                summaries[futures[future]] = future.result()
                if on_progress is not None:
                    on_progress("", len(summaries), len(agents))
            return [summaries[name] for name in agents]
    except BrokenProcessPool:
        # A worker was killed (the OOM killer, a kill -9): one line, not the pool's traceback. Its journal
        # holds complete entries only, and a re-run appends just the slots still missing. A worker the
        # broken pool no longer stops (one it forked as it broke) would go on writing its journal behind
        # the error and hold the output pipes open: every worker this process started ends here.
        for worker in multiprocessing.active_children():
            worker.kill()
            worker.join(5)
        raise RunnerError(
            "a simulation worker process died before it finished (killed?); run the same simulate again, "
            "it appends only the slots still missing"
        ) from None
