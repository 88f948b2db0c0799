"""Later runs of a slot whose run failed, under ``serve``: when, and until when.

A run retries its backend within ``run_timeout`` (:mod:`runner.run.retries`). A
slot whose run still failed for a transient reason (its result is not
``permanent``, or its worker died without one) gets up to
``runner.slot_retries`` later runs, the first ``runner.slot_retry_delay``
after the failure, each next wait twice the one before, and only while the
routine has not fired again: its next fire is the slot's deadline, after
which that fire's own slot is what the pair runs. Every rerun is the same
``ghostrunner run`` of the same scheduled time, so its client_key is the
slot's: a slot that got its entry meanwhile reports ``duplicate`` and asks
no backend. Under timers, systemd's ``Restart=`` does the same job
(:mod:`runner.deploy.restarts`); ``serve`` and the fleet's workers both plan
through :func:`planned_rerun`, and differ only in how they schedule it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog

from runner.cron.slots import CronSchedule, cron_trigger
from runner.run.contract import Outcome, RunResult
from runner.settings import RunnerConfig

__all__ = ["needs_rerun", "next_fire_after", "planned_rerun", "rerun_time", "slot_rerun_time"]

log = structlog.get_logger()


def needs_rerun(result: RunResult | None) -> bool:
    """Whether a run's end calls for a later run of its slot: it failed, not for good (None: its worker died first).

    A busy run is no failure: the run that held the slot lock decides the slot.
    """
    return result is None or (not result.is_ok and not result.permanent and result.outcome is not Outcome.BUSY)


def next_fire_after(trigger: CronSchedule, scheduled: datetime) -> datetime | None:
    """The routine's first fire after *scheduled*: the deadline of *scheduled*'s slot."""
    return trigger.get_next_fire_time(scheduled, scheduled)


def rerun_time(*, rerun: int, retries: int, delay: timedelta, failed_at: datetime, deadline: datetime | None) -> datetime | None:
    """When rerun number *rerun* (1 for the first) of a slot that failed at *failed_at* starts, or None when there is none.

    None when *rerun* is past *retries*, or when its time is not before *deadline* (the routine's next fire).
    """
    if rerun < 1 or rerun > retries:
        return None
    at = failed_at + delay * (1 << (rerun - 1))
    if deadline is not None and at >= deadline:
        return None
    return at


def slot_rerun_time(config: RunnerConfig, routine: str, scheduled: datetime, *, rerun: int, failed_at: datetime) -> datetime | None:
    """When rerun number *rerun* of *routine*'s slot at *scheduled*, failed at *failed_at*, starts under *config*; None when there is none.

    The rule of serve and of the fleet's workers: ``runner.slot_retries`` reruns, the first
    ``runner.slot_retry_delay`` after the failure and doubling, each before the routine's next fire.
    """
    trigger = cron_trigger(config.routines[routine].schedule, config.timezone)
    return rerun_time(
        rerun=rerun,
        retries=config.slot_retries,
        delay=config.slot_retry_delay,
        failed_at=failed_at,
        deadline=next_fire_after(trigger, scheduled),
    )


def planned_rerun(
    config: RunnerConfig,
    result: RunResult | None,
    *,
    agent: str,
    routine: str,
    slot: str | None,
    scheduled: datetime,
    scheduled_text: str,
    rerun: int,
    now: datetime,
) -> datetime | None:
    """When rerun number *rerun* of a slot whose run ended with *result* (None: its worker died first) starts; None when it gets none.

    A planned rerun is logged here as ``scheduler.retry_scheduled``; the caller schedules it
    (``serve`` as a job of its scheduler, a fleet worker as Celery's retry of the task).
    """
    if not needs_rerun(result):
        return None
    when = slot_rerun_time(config, routine, scheduled, rerun=rerun, failed_at=now)
    if when is not None:
        log.info(
            "scheduler.retry_scheduled",
            agent=agent,
            routine=routine,
            slot=slot,
            scheduled=scheduled_text,
            rerun=rerun,
            run_date=when.isoformat(),
        )
    return when
