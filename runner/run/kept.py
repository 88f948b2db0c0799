"""Journals a long-lived process keeps open between its runs, rather than opening and closing one for each run.

A fleet worker's pool process runs one agent's slot after another. Each
run that opens its journal and closes it again pays for the open (the
manifest, the index's catch-up check) and, above all, for the close: the
last connection to the index checkpoints its write-ahead log into the
database and syncs it to disk, about as long as the rest of the run. A
journal kept open is checkpointed by SQLite as its log grows instead.

Keeping one open is safe where a journal is built for it (a reader such as
``ghostjournal mcp`` holds one for its life): an open journal holds no
lock between calls, and each call catches up with what other processes
wrote meanwhile. What a kept journal must not outlive is checked before
each run that takes it again:

- the process it was opened in (a forked child starts with none);
- the agent's configuration it was opened for: a run given another one (the
  agent's memory, journal path or redaction changed) opens the journal as
  that configuration says;
- the journal at the agent's path (:meth:`journal.Journal.still_in_place`):
  a journal moved away or replaced by another (a restore, of the directory
  or of what is in it) is opened anew, never written through the handles of
  the old one;
- a run that ended otherwise than well (failed, or ended by an exception
  or a signal): its journal is closed, and the next run opens it anew;
- the agent's sort of entries, checked as every open checks it.

Only a journal opened with lexical memory is kept: a hybrid one holds an
encoder of its own (the model's weights and session), and hundreds kept
would hold hundreds of models; it is opened for each run as before. At
most :data:`KEPT_MOST` journals are kept, fewer when the process's open
file limit is low (each holds about five descriptors); past that, a run
opens and closes its journal as before. The first journals to be kept stay
kept: with a shard's agents run in turn, evicting the least recent one
would close each journal just before its next run.

A process may open its journals ahead of their first runs
(:meth:`KeptJournals.open_ahead`): a fleet worker's pool process does as it
starts, so that the first burst of runs after a start (every agent's
first run) does not pay for an open each.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from journal import Journal, JournalError
from runner.errors import RunnerError
from runner.run._memory import open_journal
from runner.run.contract import Outcome, RunResult
from runner.run.provenance import check_journal
from runner.settings import AgentConfig

__all__ = ["KEPT_MOST", "KeptJournals"]

#: The most journals one process keeps open between runs.
KEPT_MOST: Final = 256
#: File descriptors a kept journal holds (its index, log and shared memory, its lock file and directories), with some room.
_DESCRIPTORS_A_JOURNAL: Final = 8


def _limit() -> int:
    """How many journals fit in half of this process's open file limit, at most :data:`KEPT_MOST`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return KEPT_MOST
    return max(0, min(KEPT_MOST, soft // 2 // _DESCRIPTORS_A_JOURNAL))


@dataclass(frozen=True, slots=True)
class _Kept:
    journal: Journal
    agent: AgentConfig  # the configuration it was opened for


class KeptJournals:
    """The journals this process keeps open between runs, by agent (see the module)."""

    def __init__(self, most: int | None = None) -> None:
        self._most = most
        self._kept: dict[str, _Kept] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self._kept) if self._pid == os.getpid() else 0

    def take(self, agent: AgentConfig) -> Journal:
        """*agent*'s journal for a run: the one kept open, when it still may be used, else one opened now.

        Raises:
            MixedJournalError, JournalError, OSError and what else :func:`runner.run.open_journal` raises.
        """
        if self._pid != os.getpid():  # a forked child: the parent's journals are not its own to use or close
            self._kept, self._pid = {}, os.getpid()
        kept = self._kept.get(agent.name)
        if kept is not None:
            if kept.agent == agent and kept.journal.still_in_place():
                try:
                    check_journal(kept.journal, agent)
                except BaseException:
                    self._forget(agent.name)
                    raise
                return kept.journal
            self._forget(agent.name)  # configured otherwise, or moved or replaced since: no longer what the run is to use
        return open_journal(agent)

    def open_ahead(self, agents: Iterable[AgentConfig], until: float) -> int:
        """Open and keep the journals of *agents* before their runs, until the monotonic clock reads *until*; how many were kept.

        A journal that cannot be opened is left for its run, which fails with the reason; one with hybrid memory is
        left too, as it would not be kept (its model is not loaded here).
        """
        if self._pid != os.getpid():
            self._kept, self._pid = {}, os.getpid()
        most = self._most if self._most is not None else _limit()
        opened = 0
        for agent in agents:
            if time.monotonic() >= until or len(self._kept) >= most:
                break
            if agent.memory != "lexical" or agent.name in self._kept:
                continue
            try:
                journal = open_journal(agent)
            except (RunnerError, JournalError, OSError):
                continue
            if journal.encoder is not None or not journal.still_in_place():
                with contextlib.suppress(RunnerError, JournalError, OSError):
                    journal.close()
                continue
            self._kept[agent.name] = _Kept(journal, agent)
            opened += 1
        return opened

    def keep(self, agent: AgentConfig, journal: Journal, result: RunResult) -> bool:
        """Whether *journal*, which *agent*'s run just used and ended with *result*, stays open for the next run.

        When not, the caller closes it (it is no longer kept).
        """
        kept = self._kept.get(agent.name)
        if result.outcome is Outcome.FAILED or journal.encoder is not None or self._pid != os.getpid():
            if kept is not None and kept.journal is journal:
                del self._kept[agent.name]
            return False
        if kept is not None:
            return kept.journal is journal
        if len(self._kept) >= (self._most if self._most is not None else _limit()) or not journal.still_in_place():
            return False
        self._kept[agent.name] = _Kept(journal, agent)
        return True

    def drop(self, agent: AgentConfig, journal: Journal) -> None:
        """Stop keeping *journal* (its run ended by an exception); the caller closes it."""
        kept = self._kept.get(agent.name)
        if kept is not None and kept.journal is journal:
            del self._kept[agent.name]

    def close(self) -> None:
        """Close every kept journal (the process is going)."""
        if self._pid != os.getpid():
            self._kept = {}
            return
        while self._kept:
            self._forget(next(iter(self._kept)))

    def _forget(self, name: str) -> None:
        kept = self._kept.pop(name)
        with contextlib.suppress(RunnerError, JournalError, OSError):  # a journal that cannot close cleanly is given up all the same
            kept.journal.close()
