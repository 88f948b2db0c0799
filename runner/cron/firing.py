"""Which fires of a pair are due since the last one handled, and which of them came too late to run.

One rule for ``serve`` (:meth:`runner.schedule.scheduler.Scheduler.fire`) and the
fleet's beat (:mod:`runner.fleet.beat`), so that both run the same slots
over a DST change: the fires after the last one handled up to now, one per
slot, each run unless it is more than ``misfire_grace`` late.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from runner.cron.slots import CronSchedule, fire_times

__all__ = ["LEAST_MISFIRE_GRACE", "fires_since", "is_late"]

#: A fire is late when it comes more than this after its time, whatever misfire_grace says (a scheduler wakes up ms late).
LEAST_MISFIRE_GRACE: Final = timedelta(seconds=1)


def fires_since(trigger: CronSchedule, last: datetime, now: datetime, *, granularity: str) -> list[datetime]:
    """The fires of *trigger* after *last* and at or before *now*, ascending, one per slot of *granularity*."""
    return list(fire_times(trigger, last + timedelta(microseconds=1), now + timedelta(microseconds=1), granularity=granularity))


def is_late(moment: datetime, now: datetime, misfire_grace: timedelta) -> bool:
    """Whether a fire at *moment*, handled at *now*, is past *misfire_grace* (at least :data:`LEAST_MISFIRE_GRACE`)."""
    return now.astimezone(UTC) - moment.astimezone(UTC) > max(misfire_grace, LEAST_MISFIRE_GRACE)
