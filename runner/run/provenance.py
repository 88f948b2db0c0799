"""Simulation that cannot touch real work by accident.

Two guards:

* **Real backends cost real calls.** ``simulate`` and ``demo`` run every slot
  of a virtual life; an agent on the ``openai`` or ``command`` backend would
  ask its model once per slot (digests ask none). They refuse such agents
  (``RealBackendsRefusedError``, exit 2) unless told ``real_backends``,
  and ``runner.run.simulate.backend_calls`` says how many calls it would be.
* **An agent's past is simulated or real, not both.** An agent on the
  simulated backend writes entries marked ``meta.simulated: true``; every
  other agent writes unmarked ones. When the journal already holds entries
  *of that agent* of the other sort, the agent may not write there
  (``MixedJournalError``, exit 4) unless it allows it
  (``agents.NAME.mix_simulated = true``, or ``--mix-simulated``). The check
  is per agent because every read a run makes is: a simulated agent beside
  real ones in a shared journal never enters their prompt contexts, while a
  real agent given the journal a demo filled under its name would recall the
  simulation as its own past. The index answers in one lookup
  (``Journal.has_entries``), so every run checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from journal import Journal
from journal.errors import JournalError
from runner.errors import MixedJournalError
from runner.settings import AgentConfig, RunnerConfig

__all__ = [
    "allow_mixing",
    "check_journal",
    "check_journals",
    "describe_calls",
    "is_simulated",
]


def is_simulated(agent: AgentConfig) -> bool:
    """Whether *agent*'s entries are simulated (its backend is ``simulated``), and so marked ``meta.simulated: true``."""
    return agent.backend.type == "simulated"


def describe_calls(calls: Mapping[str, int], config: RunnerConfig) -> str:
    """``56 (batou: 28 on openai llama3.2, togusa: 28 on command)``: the calls of *calls*, per agent."""

    def backend(name: str) -> str:
        settings = config.agent(name).backend
        return f"{settings.type} {settings.model}" if settings.type == "openai" else settings.type

    return f"{sum(calls.values())} (" + ", ".join(f"{name}: {count} on {backend(name)}" for name, count in calls.items()) + ")"


def check_journal(journal: Journal, agent: AgentConfig) -> None:
    """Refuse *agent* writing into *journal* when that would mix its simulated and real entries (see the module).

    Raises:
        MixedJournalError: the journal holds entries of the agent of the other sort, and the agent does not allow mixing.
    """
    if agent.mix_simulated:
        return
    simulated = is_simulated(agent)
    if journal.has_entries(simulated=not simulated, agent=agent.name):
        raise MixedJournalError(agent.name, agent.journal_root, simulated)


def check_journals(config: RunnerConfig, agents: Iterable[str]) -> None:
    """:func:`check_journal` for each of *agents* whose journal exists, before anything is written to any of them.

    A journal that does not exist yet is created by the first write, empty, so it mixes nothing. Each is
    opened as the simulation will open it, for writing: one it could not write fails here, as it would there.
    """
    for name in agents:
        agent = config.agent(name)
        try:
            journal = Journal(agent.journal_root, create=False, writable=True)
        except (JournalError, OSError):
            # None yet (the first write makes it, empty, mixing nothing), or one that cannot be opened (corrupt, unreadable,
            # a file in its place): that is the agent's alone, whose simulation reports each of its runs failed with the error.
            continue
        with journal:
            check_journal(journal, agent)


def allow_mixing(config: RunnerConfig) -> RunnerConfig:
    """A copy of *config* whose agents all may write into a journal of the other sort (``--mix-simulated``)."""
    return replace(config, agents={name: replace(agent, mix_simulated=True) for name, agent in config.agents.items()})
