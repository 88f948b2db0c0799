"""Retries of a backend call within one run: which failures, how often, how long to wait.

A run asks its backend again after a transient failure
(:attr:`BackendError.is_transient`):

======================================  ==========================================================
failure                                 retried
======================================  ==========================================================
connection refused or reset, a cut      up to ``attempts`` calls in all, waiting ``retry_delay``
answer, HTTP 5xx, a timeout, a          times 2^(n-1) (at most 60 s) with jitter: a random point
helper's exit status 75 or its death    in the upper half of that wait, so that agents failing
by a signal                             together do not come back together
HTTP 429                                the same, but never sooner than its ``Retry-After``
a reply that is not the JSON asked for  once, at once, with ``correction`` saying what was wrong
401, 403, 404, another 4xx, a           never: the same request fails the same way
redirect, an untrusted certificate,
a configuration error
======================================  ==========================================================

Every wait ends before the run's deadline with time for one more call
(:data:`MIN_ATTEMPT_SECONDS`); when it would not, the last failure ends the run.
Without a deadline (a run given no ``run_timeout``) no wait is longer than
:data:`MAX_RETRY_WAIT`. Every attempt carries the same client_key, so however many calls a run
makes, at most one entry is appended for its slot.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, TypeVar

from runner.backends.base import ReflectionRequest
from runner.errors import BackendError, BackendReplyError, BackendUnavailableError

__all__ = ["MAX_RETRY_WAIT", "MIN_ATTEMPT_SECONDS", "Retrier", "RetryPolicy"]

#: The longest wait between two attempts that backoff alone produces (a Retry-After may ask for more).
MAX_RETRY_WAIT: Final = 60.0
#: The least time an attempt must still have before the deadline to be worth making.
MIN_ATTEMPT_SECONDS: Final = 1.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a run calls its backend and how long it waits in between.

    Attributes:
        attempts: the most calls one run makes (1: no retry).
        base_delay: seconds before the second call; each later wait doubles, up to MAX_RETRY_WAIT.
    """

    attempts: int = 4
    base_delay: float = 1.0

    def wait(self, failed: int, rng: Callable[[], float] = random.random) -> float:
        """The seconds to wait after failed attempt number *failed* (1 for the first), jittered by *rng* (0 <= x < 1)."""
        ceiling = min(MAX_RETRY_WAIT, self.base_delay * 2.0 ** (failed - 1))
        return ceiling / 2 + ceiling / 2 * float(rng())


class Retrier:
    """Makes one run's backend calls under a :class:`RetryPolicy`, and counts them.

    Args:
        policy: the attempt cap and base delay.
        on_retry: called before each wait with the number of the attempt about to be made, the wait, and the failure.
        sleep, clock, rng: injectable for tests (``time.sleep``, ``time.monotonic``, ``random.random``).
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        on_retry: Callable[[int, float, BackendError], object] | None = None,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self.attempts = 0
        self._on_retry = on_retry
        self._sleep = sleep
        self._clock = clock
        self._rng = rng

    def call(self, attempt: Callable[[ReflectionRequest], T], request: ReflectionRequest) -> T:
        """*attempt* (*request*), again after each transient failure while the policy and the deadline allow.

        Raises:
            BackendError: the last failure: a permanent one, a second unusable reply, or a transient one
                once the attempts or the time are used up. :attr:`attempts` says how many calls were made.
        """
        corrected = False
        while True:
            self.attempts += 1
            try:
                return attempt(replace(request, attempt=self.attempts))
            except BackendError as exc:
                if not exc.is_transient or self.attempts >= self.policy.attempts:
                    raise
                if isinstance(exc, BackendReplyError):
                    if corrected:
                        raise
                    corrected = True
                    request = replace(request, correction=exc.reason)
                    wait = 0.0  # the server answered: it is up, and only the reply needs another try
                else:
                    wait = self.policy.wait(self.attempts, self._rng)
                    if isinstance(exc, BackendUnavailableError) and exc.retry_after is not None:
                        wait = max(wait, exc.retry_after)
                if request.deadline is not None and self._clock() + wait + MIN_ATTEMPT_SECONDS > request.deadline:
                    raise  # no time left in run_timeout for another call after the wait
                if request.deadline is None and wait > MAX_RETRY_WAIT:
                    raise  # no run_timeout bounds this call (a direct execute_run): a server's long Retry-After is not waited for
                if self._on_retry is not None:
                    self._on_retry(self.attempts + 1, wait, exc)
                if wait > 0:
                    self._sleep(wait)
