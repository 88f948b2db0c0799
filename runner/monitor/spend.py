"""What a pair's runs used, as ``status`` and ``report`` show it: its last run, today, and the last 7 days.

Sums the ``tokens`` and ``cost`` of the ``run.finished`` lines of runs that
called their backend (:attr:`RunRecord.asked_backend`), dry runs too (they
append nothing, but their model calls were paid for), on the schedule's
clock. "Today" is the calendar day of *now* in ``runner.timezone``; "the last
7 days" are that day and the six before it. A run whose line has no tokens
(its backend did not say what it used, or an older runner wrote the line) is
counted in ``unknown``: its spend is not known, and the sums say so rather
than count it as free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo
from typing import Any

from runner.monitor.log_digest import RunRecord

__all__ = ["Spend", "pair_spend", "spend_of"]


@dataclass(frozen=True, slots=True)
class Spend:
    """What some runs used: how many called their backend, their tokens and cost, and how many did not say."""

    runs: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "runs": self.runs,
            "tokens": {"in": self.tokens_in, "out": self.tokens_out},
            "cost": None if self.cost is None else round(self.cost, 9),
            "unknown": self.unknown,
        }

    def shown(self) -> str:
        """For a person: ``1.2k tokens $0.0040`` (with ``+N unknown`` when some runs did not say), ``-`` without runs."""
        if not self.runs:
            return "-"
        tokens = self.tokens_in + self.tokens_out
        text = f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)
        text += " tok"
        if self.cost is not None:
            text += f" {self.cost:.4f}"
        if self.unknown:
            text += f" +{self.unknown} unknown"
        return text


def spend_of(runs: Iterable[RunRecord]) -> Spend:
    """The sum of what *runs* used."""
    count = unknown = tokens_in = tokens_out = 0
    cost: float | None = None
    for run in runs:
        count += 1
        if run.tokens_in is None or run.tokens_out is None:
            unknown += 1
            continue
        tokens_in += run.tokens_in
        tokens_out += run.tokens_out
        if run.cost is not None:
            cost = (cost or 0.0) + run.cost
    return Spend(count, tokens_in, tokens_out, cost, unknown)


def pair_spend(spent: list[RunRecord], now: datetime, tz: tzinfo) -> dict[str, Spend]:
    """A pair's ``last_run``, ``today`` and ``last_7_days`` from its runs that called their backend (*spent*), at *now* in *tz*."""
    local = now.astimezone(tz)
    midnight = datetime.combine(local.date(), time(), tzinfo=tz)
    week = datetime.combine(local.date() - timedelta(days=6), time(), tzinfo=tz)
    upto = [run for run in spent if run.on_clock <= now]
    latest = max(upto, key=lambda run: run.on_clock, default=None)
    return {
        "last_run": spend_of([latest] if latest is not None else []),
        "today": spend_of(run for run in upto if run.on_clock >= midnight),
        "last_7_days": spend_of(run for run in upto if run.on_clock >= week),
    }
