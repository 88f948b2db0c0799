"""An agent's journal opened with the memory its configuration asks for, and never silent while it loads.

``lexical`` opens the journal as it is; ``hybrid`` opens it with NN, so
that every ``prompt_context`` ranks by words and meaning and every append
stores its entry's vector. Loading the model or embedding a backlog (the
entries a run's first ranking finds without a vector from the model) that
takes over a second (``GHOSTJOURNAL_PROGRESS_AFTER``) is reported as log
events: ``memory.model_loading`` once the load has taken that long and
``memory.model_loaded`` at its end, ``memory.embedding`` while a pass goes.
A slow start under a timer is never silent.

Where the embedded defaults' hybrid memory cannot run, each run says so in
one short ``memory.fallback`` line; the commands that run many slots in one
process (``demo``, ``simulate``) settle it once before their first run
(:func:`settle_fallbacks`) and say it once, never on their progress line nor
again for each journal they open.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

import structlog

from journal import (
    PROGRESS_ENVVAR,
    Journal,
    ModelNotFoundError,
    ProgressGate,
    SemanticUnavailableError,
    progress_after,
    reporting_slow,
)
from runner.errors import ConfigError, RunnerError
from runner.run.provenance import check_journal
from runner.settings import AgentConfig, RunnerConfig

__all__ = [
    "PROGRESS_AFTER",
    "EmbeddingProgress",
    "Fallback",
    "MemoryUnavailableError",
    "fallback_reason",
    "memory_in_use",
    "open_journal",
    "settle_fallbacks",
]

#: Seconds a model load or an embedding pass may take before it reports progress.
PROGRESS_AFTER: Final = 1.0  # journal.progress.PROGRESS_AFTER: the runner's default is the journal commands'

log = structlog.get_logger()


class MemoryUnavailableError(RunnerError):
    """An agent's configured hybrid memory cannot run here: the nn extra or the model is missing.

    Attributes:
        agent: the agent whose memory it is.
        reason: what the journal said is missing.
        fix: what the journal said provides it.
    """

    def __init__(self, agent: str, reason: str, fix: str) -> None:
        self.agent = agent
        self.reason = reason
        self.fix = fix
        super().__init__(
            f'agent {agent!r} has memory = "hybrid" (agents.{agent}.memory, or runner.memory when the agent sets none), '
            f'which cannot run here: {reason}; {fix}, or set memory = "lexical"'
        )


class EmbeddingProgress:
    """The ``on_progress`` of a journal's embedding passes: ``memory.embedding`` events once a pass has taken *after* seconds.

    After that, one event at most every *after* seconds, and always the
    pass's last (``done == total``); a quicker pass logs nothing (see
    :class:`journal.ProgressGate`).
    """

    def __init__(self, agent: str, *, after: float = PROGRESS_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        self.agent = agent
        self.gate = ProgressGate(after, clock=clock)

    def __call__(self, done: int, total: int) -> None:
        seconds = self.gate(done, total)
        if seconds is not None:
            log.info("memory.embedding", agent=self.agent, done=done, total=total, seconds=round(seconds, 3))


def memory_in_use(journal: Journal) -> str:
    """``hybrid`` when *journal* was opened with NN, else ``lexical``: what a run's context ranks by."""
    return "lexical" if journal.encoder is None else "hybrid"


def open_journal(agent: AgentConfig, *, after: float | None = None) -> Journal:
    """*agent*'s journal, for writing, with the memory *agent* is configured for, once it is known to take the agent's sort of entries.

    A journal holding real entries is refused to a simulated agent, and the
    reverse, unless the agent allows mixing (:func:`runner.run.provenance.check_journal`).

    A hybrid open loads the model: one that takes *after* seconds or more
    (default: ``GHOSTJOURNAL_PROGRESS_AFTER``, else one) logs
    ``memory.model_loading`` then, and ``memory.model_loaded`` with its
    seconds. Embedding passes (entries a ranking finds without a vector from
    the model) log ``memory.embedding`` as they go (see :class:`EmbeddingProgress`).
    The journal remembers its recent queries' vectors (``journal.encoding.semantic.QueryMemo``),
    so a journal kept open across runs (a simulation) embeds each routine's question once.

    Raises:
        MemoryUnavailableError: hybrid memory without the nn extra or the model, unless the
            agent may fall back (the embedded defaults): then it is lexical, with a ``memory.fallback`` warning.
        MixedJournalError: the journal holds entries of the other sort, simulated or real.
        JournalError, OSError: the journal cannot be opened.
    """
    journal = _open_with_memory(agent, after)
    try:
        check_journal(journal, agent)
    except BaseException:
        journal.close()
        raise
    return journal


def fallback_reason(exc: SemanticUnavailableError) -> str:
    """Why hybrid memory cannot run, and what provides it, in one short clause.

    A missing model's places searched are left out: a fallback is said on
    every run, and ``ghostjournal --nn`` lists them when asked for meaning.
    """
    reason = "no embedding model was found offline" if isinstance(exc, ModelNotFoundError) else exc.reason
    return f"{reason}; {exc.fix}"


@dataclass(frozen=True, slots=True)
class Fallback:
    """Agents whose hybrid memory fell back to lexical before their runs, and why (see :func:`fallback_reason`)."""

    agents: tuple[str, ...]
    reason: str

    def note(self, command: str) -> str:
        """The one line a command says about it."""
        return f"ghostrunner: {command}: lexical memory for {', '.join(self.agents)} ({self.reason})"


def settle_fallbacks(config: RunnerConfig, agents: Iterable[str]) -> tuple[RunnerConfig, Fallback | None]:
    """*config* with *agents* that would fall back to lexical memory here made lexical, and which and why, or ``None``.

    Only an agent whose hybrid memory may fall back (the embedded defaults)
    is tried; a configuration file's hybrid memory stays, and fails its runs
    where it cannot run. The model is loaded once to find out.
    """
    falling = [name for name in agents if config.agent(name).memory == "hybrid" and config.agent(name).memory_fallback]
    if not falling:
        return config, None
    try:
        Journal.encoder_for(config.agent(falling[0]).journal_root)
    except SemanticUnavailableError as exc:
        reason = fallback_reason(exc)
    else:
        return config, None
    agents_now = {name: replace(agent, memory="lexical") if name in falling else agent for name, agent in config.agents.items()}
    return replace(config, agents=agents_now), Fallback(tuple(falling), reason)


def _open_with_memory(agent: AgentConfig, after: float | None) -> Journal:
    if agent.memory == "lexical":
        return Journal(agent.journal_root, writable=True, **_redaction(agent))
    try:
        seconds = progress_after() if after is None else after
    except ValueError as exc:  # the run fails with the message, naming the variable, like a bad configuration key
        raise ConfigError(
            "the environment", PROGRESS_ENVVAR, "a number of seconds, 0 or more", repr(os.environ.get(PROGRESS_ENVVAR))
        ) from exc
    fields = {"agent": agent.name, "memory": agent.memory}
    try:
        with reporting_slow(
            seconds,
            lambda: log.info("memory.model_loading", **fields),
            lambda took: log.info("memory.model_loaded", **fields, seconds=round(took, 3)),
        ):
            # The journal remembers the hash of the model files (see journal.EncoderIdentity).
            encoder = Journal.encoder_for(agent.journal_root)
    except SemanticUnavailableError as exc:
        if not agent.memory_fallback:
            raise MemoryUnavailableError(agent.name, exc.reason, exc.fix) from None
        log.warning("memory.fallback", agent=agent.name, memory="lexical", reason=f"{fallback_reason(exc)} for hybrid memory")
        return Journal(agent.journal_root, writable=True, **_redaction(agent))
    return Journal(
        agent.journal_root,
        writable=True,
        enable_nn=True,
        encoder=encoder,
        on_progress=EmbeddingProgress(agent.name, after=seconds),
        **_redaction(agent),
    )


def _redaction(agent: AgentConfig) -> dict[str, Any]:
    """The agent's redaction settings, as the Journal takes them."""
    return {"redact": agent.redact, "redact_patterns": dict(agent.redact_patterns)}
