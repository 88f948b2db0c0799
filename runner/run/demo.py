"""The demo: an agent lives some weeks on the virtual clock, then its journal is read back.

It is the same simulation as ``ghostrunner simulate``, followed by what an
agent's next run would see: the digest of its last week and the prompt
context for a question. Re-running it appends nothing new.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import structlog

from journal.frame import PlaceError, journal_place
from routines import digest_window
from runner.run._memory import open_journal, settle_fallbacks
from runner.settings.config import EMBEDDED_SOURCE, RunnerConfig

if TYPE_CHECKING:
    from runner.run.simulate import Progress, SimulationSummary

__all__ = ["DEMO_DAYS", "DEMO_QUESTION", "DEMO_START", "DemoReport", "run_demo"]

log = structlog.get_logger()

DEMO_QUESTION: Final = "what keeps returning?"
#: The demo's first day and length, unless told others (``examples/motoko_sim.py`` uses them too, to be its twin).
DEMO_START: Final = date(2026, 8, 3)
DEMO_DAYS: Final = 28


@dataclass(frozen=True, slots=True)
class DemoReport:
    """What the demo did and what it read back."""

    journal_root: str
    simulation: SimulationSummary
    entries: int
    last_week: dict[str, Any]
    question: str
    context: str
    agent: str = ""
    timezone: str = ""
    is_local_zone: bool = False  # the zone is the system's own (the embedded defaults), not a configured one

    def render(self) -> str:
        """The demo's text: where it wrote, what it simulated, the last week's digest, the prompt context, what to try next."""
        week = self.last_week
        zone = self.timezone + (
            " (this system's local zone; set runner.timezone in a configuration to choose another)" if self.is_local_zone else ""
        )
        novelty = week["novelty"]
        if novelty["mean"] is None:
            novelty_line = "  novelty: none recorded"
        else:
            trend = novelty["trend"] or "too few entries to tell"
            novelty_line = f"  novelty: mean {novelty['mean']}, trend {trend}"
        chains = max((len(chain) for chain in week["continuity"]["longest_chains"]), default=0)
        themes = week["themes"]
        lines = [
            f"{self.agent}'s journal: {self.journal_root}",
            f"timezone: {zone}",
            (
                f"simulated {self.simulation.runs} runs ({', '.join(f'{n} {o}' for o, n in self.simulation.outcomes.items()) or 'none'})"
                f" in {self.simulation.seconds:.1f} s; the journal holds {self.entries} entries"
            ),
            "",
            f"digest of the last week ({week['count']} entries):",
            "  themes:  " + (", ".join(f"{t['theme']} ({t['count']})" for t in themes[:5]) or "none"),
            "  moods:   " + (", ".join(f"{m['mood']} ({m['count']})" for m in week["moods"][:5]) or "none"),
            novelty_line,
            f"  continuity: {week['continuity']['links']} links; longest chain {chains} entries",
            "",
            f"prompt context for {self.question!r}:",
            self.context,
            "",
            "Explore it: " + shlex.join(["ghostjournal", *self._root_words(), "search", _search_word(themes), "--agent", self.agent]),
        ]
        return "\n".join(lines)

    def _root_words(self) -> list[str]:
        """``--root JOURNAL``, unless ghostjournal finds the journal without it (journal.frame.roots: by the agent's name, or $GHOSTJOURNAL_ROOT)."""
        try:
            found = journal_place(self.agent)
        except PlaceError:  # a blank $GHOSTJOURNAL_ROOT: ghostjournal would refuse it, so the root is named
            found = None
        return [] if found is not None and found.root == Path(self.journal_root) else ["--root", self.journal_root]


def _search_word(themes: list[dict[str, Any]]) -> str:
    """A word to search the demo's journal for: one of the last week's top theme, or a word the shipped persona uses."""
    words = [word for theme in themes[:1] for word in str(theme["theme"]).split() if len(word) > 3]
    return words[0] if words else "harbour"


def run_demo(
    config: RunnerConfig,
    agent: str,
    start: datetime,
    days: int,
    *,
    question: str = DEMO_QUESTION,
    real_backends: bool = False,
    on_progress: Progress | None = None,
) -> DemoReport:
    """Simulate *days* of *agent* from *start*, then read back its last week and a prompt context.

    Raises:
        RealBackendsRefusedError: the agent is on a real backend and *real_backends* is false; nothing was run.
        MixedJournalError: the agent's journal holds its past of the other sort; nothing was written (the check comes as it opens).
    """
    end = start + timedelta(days=days)
    from runner.run.simulate import check_backends, simulate_agent

    check_backends(config, [agent], start, end, real_backends=real_backends, command="demo")
    # Settled once: the simulation and the read-back open the journal, and each open would say it again.
    config, fallback = settle_fallbacks(config, [agent])
    if fallback is not None:
        log.warning("memory.fallback", agent=agent, memory="lexical", reason=f"{fallback.reason} for hybrid memory")
    summary = simulate_agent(config, agent, start, end, on_progress=on_progress)
    settings = config.agent(agent)
    with open_journal(settings) as journal:  # with the agent's memory: the context its next run would see
        last_week = digest_window(journal, agent=agent, since=end - timedelta(days=7), until=end).to_dict()
        entries = journal.digest(agent=agent).count
        context = journal.prompt_context(question, k=4, agent=agent, until=end, max_chars=2500)
    return DemoReport(
        str(settings.journal_root),
        summary,
        entries,
        last_week,
        question,
        context,
        agent=agent,
        timezone=config.timezone.key,
        is_local_zone=config.source == EMBEDDED_SOURCE,
    )
