"""``ghostrunner history``: every slot's runs, from the same log lines ``status`` reads.

:func:`build_history` reads the lines with :func:`runner.monitor.log_digest.read_log`
(so the same inputs work: plain lines, ``journalctl -o cat`` or ``-o json``,
and the same malformed or hostile lines are skipped and counted) and groups
each ``run.finished`` by (agent, routine, slot). A slot's

* ``outcome`` is ``appended`` when one of its runs appended its entry, else
  that of its latest run that was not ``busy`` (``busy`` only when every run was);
* ``attempts`` is how many runs it had in the log (each ``run.finished``), and
  ``backend_attempts`` the backend calls they counted, where the lines count them;
* ``spend`` is what its runs used: their tokens and cost added up, and how
  many of them did not say (:mod:`runner.monitor.spend`);
* ``duration_ms`` is the duration of the run that gave the outcome, and
  ``error`` the latest error of any of its runs (a slot appended after a
  failure keeps the failure's error).

Slots come newest first (by their latest run), and so do the runs of each.
Dry runs append nothing and are left out, as ``status`` leaves them out.
*since* is read on the schedule's clock, as ``status`` reads times: a
simulated run counts as finished at its scheduled time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runner.monitor.log_digest import LogDigest, RunRecord, read_log
from runner.monitor.spend import Spend, spend_of
from runner.run.contract import Outcome

__all__ = ["History", "SlotHistory", "build_history"]


@dataclass(frozen=True, slots=True)
class SlotHistory:
    """The runs of one (agent, routine, slot) in the log, newest first."""

    agent: str
    routine: str
    slot: str | None
    runs: tuple[RunRecord, ...]

    @property
    def deciding(self) -> RunRecord:
        """The run that gave the slot its outcome: the one that appended, else the latest that was not busy, else the latest."""
        for candidate in (
            next((run for run in self.runs if run.outcome is Outcome.APPENDED), None),
            next((run for run in self.runs if run.outcome is not Outcome.BUSY), None),
        ):
            if candidate is not None:
                return candidate
        return self.runs[0]

    @property
    def error(self) -> str | None:
        """The latest error among the slot's runs."""
        return next((run.error for run in self.runs if run.error), None)

    @property
    def spend(self) -> Spend:
        """What the slot's runs used, every run that called its backend added up (retries and reruns too)."""
        return spend_of(run for run in self.runs if run.asked_backend)

    @property
    def backend_attempts(self) -> int | None:
        """Backend calls the runs counted (None when no line counts them)."""
        counted = [run.attempts for run in self.runs if run.attempts is not None]
        return sum(counted) if counted else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the slot, its outcome, attempts, duration and error, then each run."""
        deciding = self.deciding
        scheduled = next((run.scheduled for run in self.runs if run.scheduled is not None), None)
        return {
            "agent": self.agent,
            "routine": self.routine,
            "slot": self.slot,
            "scheduled": scheduled.isoformat() if scheduled else None,
            "outcome": deciding.outcome.value,
            "attempts": len(self.runs),
            "backend_attempts": self.backend_attempts,
            "spend": self.spend.to_dict(),
            "duration_ms": deciding.duration_ms,
            "error": self.error,
            "entry_id": deciding.entry_id,
            "last_finished": self.runs[0].finished.isoformat(),
            "runs": [run.to_dict() for run in self.runs],
        }


@dataclass(frozen=True, slots=True)
class History:
    """The slots found, newest first, and what the read of the log counted."""

    slots: tuple[SlotHistory, ...]
    digest: LogDigest


def build_history(
    lines: Iterable[str],
    *,
    agent: str | None = None,
    routine: str | None = None,
    since: datetime | None = None,
) -> History:
    """The history of every slot in *lines*, optionally of one agent and/or routine, with runs finished at or after *since*.

    Never raises on bad input (see :func:`read_log`).
    """
    grouped: dict[tuple[str, str, str | None], list[RunRecord]] = {}

    def collect(pair: tuple[str, str], record: RunRecord) -> None:
        if record.dry_run or (agent is not None and pair[0] != agent) or (routine is not None and pair[1] != routine):
            return
        if since is not None and record.on_clock < since:  # a simulated run finished at its scheduled time
            return
        grouped.setdefault((*pair, record.slot), []).append(record)

    digest = read_log(lines, on_run=collect)
    slots = [
        SlotHistory(key[0], key[1], key[2], tuple(sorted(runs, key=lambda run: run.finished, reverse=True)))
        for key, runs in grouped.items()
    ]
    slots.sort(key=lambda slot: (slot.runs[0].finished, slot.agent, slot.routine, slot.slot or ""), reverse=True)
    return History(tuple(slots), digest)
