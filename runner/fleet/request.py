"""How a fleet worker's main process sees a run's end that the run could not log itself: a hard time limit, a revoke.

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

A task revoked (``celery control revoke``, Flower) or expired before its
run started is acknowledged without a run: it is logged as the slot's
``scheduler.missed``, reason ``revoked`` or ``expired``, so the slot shows
as missed, never as a silent gap. One revoked with ``terminate`` while its
run was going ends as its signal says: on SIGTERM (Celery's default) the
run logs its own ``run.finished``, interrupted; on SIGKILL it cannot, and
it is logged here as a killed run is. Either way, as after the hard time
limit, a ``command`` backend the run started ends with the run's process
(its reaper: :class:`runner.processes.Reaper`).
"""

from __future__ import annotations

import signal
from typing import Any, Final

import structlog
from celery.worker import state
from celery.worker.request import Request

from runner.fleet.tasks import served_slot
from runner.run.contract import RunIdentity

__all__ = ["SlotRequest", "slot_identity"]

log = structlog.get_logger()
#: How a terminate signal may be spelled when the run cannot log its own end on it (SIGKILL, as a number or a name).
_UNANSWERABLE: Final = frozenset({str(int(signal.SIGKILL)), "KILL"})


def slot_identity(args: object) -> RunIdentity | None:
    """The identity of the run a task's arguments *args* ask for, when this process serves it."""
    served = served_slot(args)
    if served is None:
        return None
    work, agent, routine, at = served
    return RunIdentity.of(agent, work.config.routines[routine], at, work.config.timezone)


class SlotRequest(Request):  # type: ignore[misc]  # celery ships no type hints
    """Celery's request of one run task, which also logs what becomes of a slot Celery ended without its run's word (see above)."""

    def on_timeout(self, soft: bool, timeout: float) -> Any:
        outcome = super().on_timeout(soft, timeout)
        if not soft and not state.should_terminate:  # as Celery: a cold shutdown's kills are no failure of the run
            self._log_killed(timeout)
        return outcome

    def _announce_revoked(self, reason: str, terminated: bool, signum: Any, expired: bool) -> Any:
        outcome = super()._announce_revoked(reason, terminated, signum, expired)
        identity = self._identity()
        if identity is None:
            return outcome  # a task this process would have refused: it never started a run
        if terminated:  # its run was going, and Celery signalled its process
            # SIGKILL leaves the run no word; on any other signal the run logs its own run.finished, interrupted.
            if str(signum).removeprefix("SIG") in _UNANSWERABLE:
                self._log_ended(identity, f"the task was revoked with terminate, and its run's process was killed (signal {signum})")
        else:
            identity.log_missed("expired" if expired else "revoked")
        return outcome

    def _identity(self) -> RunIdentity | None:
        """The identity of the run this task asks for, when this process serves it."""
        return slot_identity(self.args)

    def _log_killed(self, timeout: float) -> None:
        served = served_slot(self.args)
        identity = self._identity()
        if served is None or identity is None:
            return  # a task this process would have refused: it never started a run
        run_timeout = served[0].config.run_timeout.total_seconds()
        self._log_ended(
            identity, f"the run ran past run_timeout ({run_timeout:g} s), and Celery's hard time limit ({timeout:g} s) killed its process"
        )

    def _log_ended(self, identity: RunIdentity, error: str) -> None:
        """Log what serve logs for a worker it killed: scheduler.worker_crashed, then the run's run.finished, failed."""
        trigger = "retry" if (self._context.retries or 0) > 0 else "cron"
        identity.log_worker_died(error, returncode=None, trigger=trigger)
