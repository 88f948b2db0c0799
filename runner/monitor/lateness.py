"""How late a pair's runs start, as ``status`` and ``report`` show it: percentiles, and drift.

A run's lateness is the time from its slot's scheduled time to its start (its
``run.finished`` less its ``duration_ms``), on the schedule's clock (a
simulated run is never late). Over the runs of the last 7 days before *now*
(at most the newest 4,096 kept per pair), ``status`` gives the 50th and 90th
percentiles and the most.

A pair **drifts** when at least :data:`DRIFT_MIN_RUNS` of its runs are in that
window and even the least late of them started more than *threshold*
(``runner.drift_threshold``, default 5 minutes) after its time: not one slot
late, but every slot, the sign of a host that is always busy, a timer that
always waits, something else that covers for it. Drift is a flag beside the
state, never a state of its own: a drifting pair whose slots all have their
entries is ``ok`` and drifting; ``overdue`` is a slot without its entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from runner.monitor.log_digest import RunRecord
from runner.settings.config import DEFAULT_DRIFT_THRESHOLD

__all__ = ["DRIFT_MIN_RUNS", "DRIFT_THRESHOLD", "Lateness", "lateness_of"]

#: A pair drifts when its least late run in the window started more than this after its time (unless the configuration says).
DRIFT_THRESHOLD: Final = DEFAULT_DRIFT_THRESHOLD
#: ... and at least this many runs are in the window: two late runs are bad luck, not a habit.
DRIFT_MIN_RUNS: Final = 3
_WINDOW: Final = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Lateness:
    """The lateness of a pair's runs in the window: how many, their 50th and 90th percentiles and the most (seconds), and drift."""

    runs: int = 0
    p50: float | None = None
    p90: float | None = None
    most: float | None = None
    least: float | None = None
    drift: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        shown = {
            name: None if value is None else round(value, 3)
            for name, value in (("p50_s", self.p50), ("p90_s", self.p90), ("max_s", self.most))
        }
        return {"runs": self.runs, **shown, "drift": self.drift}

    def shown(self) -> str:
        """For a person: ``p50 2s p90 41s`` (``DRIFT`` after it when the pair drifts), ``-`` without runs."""
        if not self.runs or self.p50 is None or self.p90 is None:
            return "-"
        text = f"p50 {_seconds(self.p50)} p90 {_seconds(self.p90)}"
        return text + " DRIFT" if self.drift else text


def _seconds(value: float) -> str:
    value = max(value, 0.0)
    if value < 120:
        return f"{value:.0f}s"
    return f"{value / 60:.0f}m" if value < 7200 else f"{value / 3600:.1f}h"


def _percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile *share* (0..1) of the ascending *ordered*."""
    rank = max(1, -(-len(ordered) * share // 1))
    return ordered[int(rank) - 1]


def lateness_of(started: Iterable[RunRecord], now: datetime, threshold: timedelta = DRIFT_THRESHOLD) -> Lateness:
    """The lateness of the runs in *started* within the 7 days before *now*."""
    since = now - _WINDOW
    values = sorted(run.lateness for run in started if run.lateness is not None and since <= run.on_clock <= now)
    if not values:
        return Lateness()
    least = values[0]
    drift = len(values) >= DRIFT_MIN_RUNS and least > threshold.total_seconds()
    return Lateness(len(values), _percentile(values, 0.5), _percentile(values, 0.9), values[-1], least, drift)
