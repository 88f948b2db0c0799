"""The later attempts of a failed slot under timers: ``Restart=`` and start limits of a routine's oneshot service.

A timer run that failed for a transient reason exits 1, and systemd starts
it again ``RestartSec=`` (``runner.slot_retry_delay``) later; ``ghostrunner
run`` picks the same slot until the routine fires next. The start limit
bounds those restarts: ``StartLimitBurst=`` is one start by the timer plus
``slot_retries`` restarts, within ``StartLimitIntervalSec=`` long enough to
hold them all even if each run takes its whole ``TimeoutStartSec=``, so a
further restart is refused ("start request repeated too quickly") and the
slot waits for the next fire. The interval stays under half of the
routine's shortest gap between fires, so the limit never refuses the
timer's own next start; a schedule too frequent for that gets fewer reruns,
or none (``Restart=no``: its next fire is the retry).

A permanent failure is never restarted: exit 78 (the backend refused for
good, or a bad configuration), 2 (usage), 73 (a read-only journal), 77
(permission denied) and systemd's own 203 (``EXEC``: the program could not
be started, a missing file or one the sandbox hides) are in
``RestartPreventExitStatus=``. A run that SIGTERM stopped (``systemctl
stop``, a shutdown) unwinds and exits 143, which ``SuccessExitStatus=143``
counts as a clean stop, not a failure (a run stopped at its
``TimeoutStartSec=`` still fails: systemd records the timeout first).

systemd 252 has no growing ``RestartSec=`` (``RestartSteps=`` came with 254),
so under timers the wait between reruns is constant; ``serve`` doubles it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import Final

from runner.cron.slots import cron_trigger, fire_times
from runner.settings.config import RunnerConfig

__all__ = ["NO_RESTART_STATUSES", "STOPPED_STATUS", "SYSTEMD_NO_RESTART_STATUSES", "RestartPlan", "restart_plan", "shortest_gap"]

#: Exit statuses of `ghostrunner run` that another start cannot fix.
NO_RESTART_STATUSES: Final = (2, 73, 77, 78)
#: What systemd's units list in ``RestartPreventExitStatus=``: those, and 203 (systemd's EXEC: the program could not be started).
SYSTEMD_NO_RESTART_STATUSES: Final = (*NO_RESTART_STATUSES, 203)
#: The exit status of a command SIGTERM stopped after it unwound (128 + 15): ``SuccessExitStatus=`` of every service.
STOPPED_STATUS: Final = 143


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What a routine's oneshot service says about restarts.

    Attributes:
        reruns: restarts after the timer's start, at most (0: ``Restart=no``).
        delay: ``RestartSec=``.
        interval: ``StartLimitIntervalSec=``, within which ``reruns + 1`` starts are allowed.
        gap: the schedule's shortest time between two fires.
    """

    reruns: int
    delay: timedelta
    interval: timedelta
    gap: timedelta

    def unit_lines(self) -> str:
        """The ``[Unit]`` lines: the start limit."""
        if not self.reruns:
            return "# No restarts (see [Service]): the default start limit applies."
        return "\n".join(
            [
                f"# At most {self.reruns + 1} starts (the timer's and {self.reruns} restarts) within {_seconds(self.interval)}: then the slot",
                "# waits for the routine's next fire.",
                f"StartLimitIntervalSec={_seconds(self.interval)}",
                f"StartLimitBurst={self.reruns + 1}",
            ]
        )

    def service_lines(self) -> str:
        """The ``[Service]`` lines: when systemd starts a failed run again."""
        if not self.reruns:
            return "\n".join(
                [
                    f"# The schedule fires every {_seconds(self.gap)} or more often: too often for reruns in between; the next fire is the retry.",
                    "Restart=no",
                ]
            )
        return "\n".join(
            [
                "# A run that failed for a transient reason (exit 1, a timeout) runs again; one the backend refused for good",
                "# (78), a usage error (2), a read-only journal (73), a denied permission (77) or a program systemd could not",
                "# start (203, EXEC) does not.",
                "Restart=on-failure",
                f"RestartSec={_seconds(self.delay)}",
                "RestartPreventExitStatus=" + " ".join(str(status) for status in SYSTEMD_NO_RESTART_STATUSES),
            ]
        )


def _seconds(delta: timedelta) -> str:
    return f"{max(1, int(delta.total_seconds()))}s"


#: How far ahead gaps between fires are measured: eight days from the first fire (every weekday and a DST change
#: near), found within a year and a bit (a schedule of a few months fires in it), at most this many fires.
_GAP_DAYS: Final = 8
_SEARCH_DAYS: Final = 400
_MAX_FIRES: Final = 20_000


def shortest_gap(config: RunnerConfig, schedule: str, today: date) -> timedelta:
    """The shortest real time between two fires of *schedule* in the eight days from its first fire on or after *today*.

    The first fire may be months away (``* * * jan *`` in December): the gap of
    the season it fires in is what counts. One fire a year or less: eight days.
    """
    trigger = cron_trigger(schedule, config.timezone)
    start = datetime(today.year, today.month, today.day, tzinfo=config.timezone)
    # Real time: subtracting two times of one ZoneInfo gives wall-clock time, an hour off across a change.
    moments: list[datetime] = []
    for moment in fire_times(trigger, start, start + timedelta(days=_SEARCH_DAYS)):
        moments.append(moment.astimezone(UTC))
        if len(moments) >= _MAX_FIRES or moments[-1] - moments[0] > timedelta(days=_GAP_DAYS):
            break
    return min((later - earlier for earlier, later in pairwise(moments)), default=timedelta(days=_GAP_DAYS))


def restart_plan(config: RunnerConfig, schedule: str, run_time: timedelta, today: date) -> RestartPlan:
    """The restarts of a routine with *schedule* whose runs may each take *run_time* (``TimeoutStartSec=``)."""
    gap = shortest_gap(config, schedule, today)
    delay = config.slot_retry_delay
    reruns = config.slot_retries
    # Start number k (0: the timer's) comes at most k * (run_time + delay) after the first; the window must hold the
    # last allowed one and the refused one after it, and end before the timer's next start.
    while reruns and (reruns + 1) * (run_time + delay) > gap / 2:
        reruns -= 1
    return RestartPlan(reruns, delay, (reruns + 1) * (run_time + delay), gap)
