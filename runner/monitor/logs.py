"""Structured logs: one JSON object per line, stable dotted event names.

``configure_logging`` is called once, by the CLI. Events and their fields:

=========================  =====================================================
run.started                run_id, agent, routine, slot, client_key, scheduled
run.waiting                run_id, agent, routine, slot, client_key, lock, wait_s (another run holds the slot lock)
run.finished               run_id, agent, routine, slot, client_key, scheduled, entry_id,
                           outcome (appended | duplicate | failed | skipped | busy), duration_ms, error,
                           dry_run, reason (paused | slot_locked, only when set) -- exactly one per run
scheduler.started          agents, jobs, timezone, lock_file, pid, max_concurrent_runs
scheduler.catchup          agent, routine, slot, scheduled, starts (a missed slot run on start, at ``starts``)
scheduler.missed           agent, routine, slot, scheduled, reason (a slot that is not run: downtime | catchup_max | late | refused)
scheduler.run_queued       run_id, agent, routine, slot, client_key, scheduled, trigger, running, waiting, reason
scheduler.reloaded         config, agents, jobs, added, removed, rescheduled, max_concurrent_runs (SIGHUP)
scheduler.reload_failed    config, error (the old configuration keeps serving)
scheduler.agent_unusable   agent, journal_root, error (its journal cannot be used; the others are served)
scheduler.worker_crashed   run_id, agent, routine, slot, client_key, returncode, trigger, error
scheduler.run_skipped      agent, routine, scheduled, reason (the slot is already waiting or going; its pair was removed)
scheduler.stopping         signal, in_flight, waiting
scheduler.stopped          killed (runs cut off at the shutdown timeout)
run.error                  run_id, agent, routine, slot, client_key, exception (a bug, with traceback)
simulate.finished          agent, runs, outcomes, seconds
=========================  =====================================================

Every line also has ``timestamp`` (ISO 8601, UTC) and ``level``. Every line of a simulation
(``simulate``, ``demo``) also has ``simulated: true`` (its runs' clock is virtual). docs/monitoring.md's
event table documents the same, and a test keeps them in agreement. On a TTY
the console renderer is used instead of JSON. Logs of APScheduler and the
journal library (stdlib logging) go through the same renderer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import IO, Any, Final

import structlog
import structlog.tracebacks

__all__ = ["EVENTS", "configure_logging"]

EVENTS: Final = (
    "run.started",
    "run.waiting",
    "run.finished",
    "run.error",
    "run.retry",
    "run.over_budget",
    "run.skip_unrecorded",
    "scheduler.started",
    "scheduler.catchup",
    "scheduler.missed",
    "scheduler.missed_summary",
    "scheduler.run_queued",
    "scheduler.reloaded",
    "scheduler.reload_failed",
    "scheduler.agent_unusable",
    "scheduler.worker_crashed",
    "scheduler.run_skipped",
    "scheduler.retry_scheduled",
    "scheduler.stopping",
    "scheduler.stopped",
    "simulate.finished",
    "simulate.backend_calls",
    "memory.model_loading",
    "memory.model_loaded",
    "memory.embedding",
    "memory.fallback",
)


class _DroppingStream:
    """A log stream that a failing write cannot break: logging must never end a run.

    A reader that went away (EPIPE: ``ghostrunner simulate 2>&1 | head -1``) or a full
    disk (ENOSPC) under the log file would otherwise raise from a log call, possibly
    before the run's ``try``, and the run would end without its ``run.finished`` or its
    result. After the first failure the stream drops every line: there is nowhere left
    to report it, since this stream is where reports go. Its descriptor is pointed at
    /dev/null, so that what is still buffered does not fail again at exit (Python's
    "Exception ignored ... BrokenPipeError").
    """

    def __init__(self, target: IO[str]) -> None:
        self._target = target
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._target.write(text)
            except (OSError, ValueError):  # ValueError: the stream was closed
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._target.flush()
            except (OSError, ValueError):
                self._drop()

    def isatty(self) -> bool:
        return hasattr(self._target, "isatty") and bool(self._target.isatty())

    def _drop(self) -> None:
        self.broken = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._target.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):
            return  # not a file descriptor (a StringIO): dropping the lines is all there is to do
        with contextlib.suppress(OSError, ValueError):
            self._target.flush()  # now into /dev/null


class _Tee:
    """A structlog processor that hands a copy of some events to a callable, and the event on unchanged."""

    def __init__(self, names: frozenset[str], sink: Callable[[dict[str, Any]], object]) -> None:
        self._names = names
        self._sink = sink

    def __call__(self, logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("event") in self._names:
            self._sink(dict(event))
        return event


def configure_logging(
    *,
    stream: IO[str] | None = None,
    level: str = "info",
    json: bool | None = None,
    tee: tuple[frozenset[str], Callable[[dict[str, Any]], object]] | None = None,
) -> None:
    """Send structlog and stdlib logs to *stream* as JSON lines (or console lines on a TTY).

    Args:
        stream: where lines go; stderr by default (``serve`` passes stdout).
        level: the lowest level written (debug, info, warning, error).
        json: force JSON (True) or console (False); None decides by ``stream.isatty()``.
        tee: (event names, a callable): each event of those names is also handed, as its fields
            with its timestamp and level, to the callable (the fleet's runs record).
    """
    original = stream if stream is not None else sys.stderr
    use_json = json if json is not None else not (hasattr(original, "isatty") and original.isatty())
    target: Any = _DroppingStream(original)
    numeric = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # Tracebacks without each frame's local variables (rich's and structlog's default show them):
    # those hold request headers, API keys and replies.
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    tracebacks = structlog.processors.ExceptionRenderer(structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
    tail: list[Any] = [tracebacks] if use_json else []
    teed: list[Any] = [] if tee is None else [_Tee(*tee)]
    structlog.configure(
        processors=[*shared, *teed, structlog.processors.StackInfoRenderer(), *tail, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=target),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(target)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *tail,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # APScheduler narrates every job at INFO; the runner's own events say what matters.
    logging.getLogger("apscheduler").setLevel(max(numeric, logging.WARNING))
