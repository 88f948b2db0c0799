"""The demo: an agent lives some weeks on the virtual clock, then its journal is read back.

It is the same simulation as ``ghostrunner simulate``, followed by what an
agent's next run would see: the digest of its last week and the prompt
context for a question. Re-running it appends nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from routines import digest_window
from runner._memory import open_journal
from runner.config import RunnerConfig
from runner.simulate import SimulationSummary, simulate_agent

__all__ = ["DEMO_QUESTION", "DemoReport", "run_demo"]

DEMO_QUESTION: Final = "what keeps returning?"


@dataclass(frozen=True, slots=True)
class DemoReport:
    """What the demo did and what it read back."""

    journal_root: str
    simulation: SimulationSummary
    entries: int
    last_week: dict[str, Any]
    question: str
    context: str


def run_demo(config: RunnerConfig, agent: str, start: datetime, days: int, *, question: str = DEMO_QUESTION) -> DemoReport:
    """Simulate *days* of *agent* from *start*, then read back its last week and a prompt context."""
    end = start + timedelta(days=days)
    summary = simulate_agent(config, agent, start, end)
    settings = config.agent(agent)
    with open_journal(settings) as journal:  # with the agent's memory: the context its next run would see
        last_week = digest_window(journal, agent=agent, since=end - timedelta(days=7), until=end).to_dict()
        entries = journal.digest(agent=agent).count
        context = journal.prompt_context(question, k=4, agent=agent, until=end, max_chars=2500)
    return DemoReport(str(settings.journal_root), summary, entries, last_week, question, context)
