"""How a fleet worker's main process sees a run's end that the run could not log itself: Celery's hard time limit.

The run has its own deadline (``runner.run_timeout``) and logs its one
``run.finished`` when it passes it. Celery's hard time limit, a little
later, is the backstop for a run stuck where no deadline reaches (a journal
lock held elsewhere, a hung system call): it kills the run's pool process,
which then logs nothing. The worker's main process logs for it what
``serve`` logs for a worker it killed at ``run_timeout``:
``scheduler.worker_crashed``, then the run's ``run.finished``, failed, so
that ``status`` says failed rather than overdue. The task is acknowledged
(``task_acks_on_failure_or_timeout``): a run stuck this way would be stuck
again.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery.worker import state
from celery.worker.request import Request

from runner.fleet.tasks import served_slot
from runner.run.contract import Outcome, RunIdentity

__all__ = ["SlotRequest"]

log = structlog.get_logger()


class SlotRequest(Request):  # type: ignore[misc]  # celery ships no type hints
    """Celery's request of one run task, which also logs the end of a run its hard time limit killed."""

    def on_timeout(self, soft: bool, timeout: float) -> Any:
        outcome = super().on_timeout(soft, timeout)
        if not soft and not state.should_terminate:  # as Celery: a cold shutdown's kills are no failure of the run
            self._log_killed(timeout)
        return outcome

    def _log_killed(self, timeout: float) -> None:
        served = served_slot(self.args)
        if served is None:
            return  # a task this process would have refused: it never started a run
        work, agent, routine, at = served
        identity = RunIdentity.of(agent, work.config.routines[routine], at, work.config.timezone)
        run_timeout = work.config.run_timeout.total_seconds()
        error = f"the run ran past run_timeout ({run_timeout:g} s), and Celery's hard time limit ({timeout:g} s) killed its process"
        trigger = "retry" if (self._context.retries or 0) > 0 else "cron"
        log.error("scheduler.worker_crashed", **identity.fields(scheduled=False), returncode=None, trigger=trigger, error=error)
        identity.log_finished(Outcome.FAILED, entry_id=None, duration_ms=None, error=error, dry_run=False, attempts=None)
