"""One run of one routine for one agent at one scheduled time.

``execute_run`` is the single code path behind ``ghostrunner run``, the
scheduler's workers and the simulation. Its steps:

1. slot from the *scheduled* time; ``client_key = "<agent>:<routine>:<slot>"``;
2. if an entry with that key exists: outcome ``duplicate`` (the backend is not asked);
3. ``run.started`` names the memory the run's context ranks by (``lexical`` or ``hybrid``);
   a digest routine computes ``Journal.digest`` of its window, digest
   entries left out (outcome ``skipped`` when nothing else is in it); any other routine builds the
   agent-scoped ``Journal.context`` of its window and asks the backend, again after
   each transient failure while ``attempts`` and the deadline allow (:mod:`runner.run.retries`;
   each retry logged as ``run.retry``);
4. the entry (ts = scheduled time, ``meta.source_routine``) is validated and
   appended; an append racing another run of the same slot returns ``duplicate``.

Any failure is outcome ``failed`` with the error; nothing is appended then,
and the result says whether it was ``permanent``. Exactly one ``run.finished``
event is logged per run, with the number of backend ``attempts``.

Around it, :func:`run_at` skips a paused pair (:mod:`runner.run.pauses`), and
:func:`run_slot` runs only holding the slot's lock (:mod:`runner.run.slot_lock`).

A SIGTERM or SIGINT is acted on at once, except while the journal is asked
for the slot's entry or appends it: there it waits until the answer is
recorded in the run's outcome, so that the one ``run.finished`` of an
interrupted run never says "no entry" for an entry it appended or found.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

import structlog

from journal import Journal, JournalError, JournalStorageError, validate_payload
from routines import Routine, digest_entry_fields, digest_window
from runner.backends import Backend, ReflectionRequest, build_backend, check_reply, keep_shown_ids
from runner.backends.base import one_line
from runner.backends.usage import UsageMeter
from runner.cron.slots import cron_trigger, latest_fire_time
from runner.errors import (
    BackendError,
    BackendReplyError,
    ConfigError,
    FleetUnavailableError,
    NoScheduledTimeError,
    RunnerError,
    StateFileError,
)
from runner.processes import process_age, signals_deferred
from runner.run._memory import memory_in_use, open_journal
from runner.run.budgets import Admission, Budgets, Refusal
from runner.run.contract import REASON_BUDGET, REASON_GATE, REASON_PAUSED, Outcome, RunEnding, RunIdentity, RunResult
from runner.run.gate import ask_gate
from runner.run.kept import KeptJournals
from runner.run.pauses import pause_of
from runner.run.quoting import RUN_MARKS, continuing, quoted_payload
from runner.run.retries import Retrier, RetryPolicy
from runner.run.skips import note_skip
from runner.run.slot_lock import SlotLock, run_in_turn
from runner.settings.config import AgentConfig, Price, RunnerConfig
from runner.settings.state_dir import state_dir

__all__ = ["RunResult", "RunTerms", "backend_deadline", "execute_run", "held_by_pause", "open_failure", "run_at", "run_slot"]

log = structlog.get_logger()


def backend_deadline(started: float, run_timeout: float | None) -> float | None:
    """When a run started at *started* (``time.monotonic()``) must have its backend reply, under *run_timeout* seconds.

    The backend gets run_timeout less a reserve of a tenth of it (1 to 30 s,
    at most half of it), so that the run can still append or log its failure
    itself before the scheduler or systemd kills the worker at run_timeout.
    """
    if run_timeout is None:
        return None
    return started + run_timeout - min(max(run_timeout / 10, 1.0), 30.0, run_timeout / 2)


def _accept_proposals(journal: Journal, agent: str, entry_id: str, run: RunIdentity) -> None:
    """Accept the proposals the run's entry makes above the stricter threshold (``accept_proposals = "auto"``).

    After the entry is stored, and idempotent: a run that finds its slot's entry (a retry after a crash here) accepts
    what is left. A failure is logged and leaves the run's outcome as it is: the entry is stored, and each
    acceptance is whole or not written.
    """
    try:
        with signals_deferred():
            accepted = journal.auto_accept(entry_id, agent=agent)
    except JournalError as exc:
        log.warning("run.proposals_failed", **run.fields(scheduled=False), entry_id=entry_id, error=str(exc))
        return
    if accepted:
        log.info("run.proposals_accepted", **run.fields(scheduled=False), entry_id=entry_id, corrections=[e.id for e in accepted])


def _decide_proposals(journal: Journal, agent: str, decisions: list[dict[str, str]], run: RunIdentity) -> None:
    """Accept or reject the proposals the reply decides (ids, or their starts as a context's marks show them), as the agent.

    After the run's entry is stored. The agent's own proposals alone: another agent's ids are unknown here. A decision
    the journal refuses (no such pending proposal, decided the other way) is logged and skipped; the run's outcome stays.
    """
    for item in decisions:
        try:
            older, newer = journal.resolve_id(item["older"], agent=agent), journal.resolve_id(item["newer"], agent=agent)
            decide = journal.accept_proposal if item["decision"] == "accept" else journal.reject_proposal
            with signals_deferred():
                entry = decide(older, newer, agent=agent, origin="agent")
        except JournalError as exc:
            log.warning("run.proposal_refused", **run.fields(scheduled=False), decision=item["decision"], error=str(exc))
            continue
        log.info(
            "run.proposal_decided", **run.fields(scheduled=False), decision=item["decision"], older=older, newer=newer, entry_id=entry.id
        )


def _fields_from_backend(
    journal: Journal,
    agent: AgentConfig,
    routine: Routine,
    scheduled: datetime,
    slot: str,
    key: str,
    backend: Backend,
    deadline: float | None,
    retrier: Retrier,
    terms: RunTerms,
    meter: UsageMeter,
) -> dict[str, Any]:
    context = journal.context(
        routine.question,
        k=routine.context_k,
        agent=agent.name,
        since=scheduled - routine.window,
        until=scheduled,
        max_chars=routine.context_chars,
    )
    request = ReflectionRequest(
        agent=agent.name,
        routine=routine.name,
        kind=routine.kind,
        slot=slot,
        client_key=key,
        scheduled=scheduled.isoformat(timespec="seconds"),
        question=routine.question,
        instructions=routine.prompt,
        context=context,
        persona=agent.persona,
        deadline=deadline,
        max_tokens=terms.max_tokens,
        meter=meter,
    )

    def attempt(request: ReflectionRequest) -> dict[str, Any]:
        fields = keep_shown_ids(check_reply(backend.reflect(request), backend.name), {record.id for record in context.records})
        try:
            # The reply's field values are the backend's: a bad one is its failure, and the error says so.
            entry_fields = {name: value for name, value in fields.items() if name not in RUN_MARKS}  # the run's marks, no entry fields
            validate_payload({**entry_fields, "kind": routine.kind, "agent": agent.name, "ts": request.scheduled, "client_key": key})
            if "quoted" in fields:
                validate_payload({**quoted_payload(fields, agent.name, request.scheduled, key), "meta": {}})
        except (JournalError, ValueError) as exc:  # ValueError: e.g. a lone surrogate no JSON encoder can write
            raise BackendReplyError(backend.name, f"the reply is not a valid entry: {one_line(str(exc), 300)}") from None
        return fields

    if terms.before_backend is not None:
        terms.before_backend()  # after the context is built: the budget's sync had that long to finish
    try:
        return retrier.call(attempt, request)
    except BackendError as exc:
        raise exc.for_agent(agent.name) from None


@dataclass(frozen=True, slots=True)
class RunTerms:
    """What a run's spending is held to and priced at: ``max_tokens`` (``max_tokens_per_run``) and its model's ``price``.

    ``before_backend`` is called once before the run's first backend call: an admitted run's wait for its budget's
    reservation to be on the disk (:meth:`runner.run.budgets.Admission.durable`); what it raises fails the run.
    """

    max_tokens: int | None = None
    price: Price | None = None
    before_backend: Callable[[], None] | None = None

    @classmethod
    def of(cls, config: RunnerConfig, agent: AgentConfig, routine: str, *, before_backend: Callable[[], None] | None = None) -> RunTerms:
        """The terms of *agent*'s runs of *routine* under *config*."""
        return cls(config.budgets.max_tokens_for(agent.name, routine), config.price_of(agent), before_backend)

    def cost(self, tokens: dict[str, int] | None) -> float | None:
        """The price of *tokens* (None: unknown tokens, or no price)."""
        if tokens is None or self.price is None:
            return None
        return round(self.price.of(tokens["in"], tokens["out"]), 9)


def execute_run(
    journal: Journal,
    *,
    agent: AgentConfig,
    routine: Routine,
    scheduled: datetime,
    backend: Backend | None,
    tz: tzinfo,
    dry_run: bool = False,
    run_id: str | None = None,
    run_timeout: float | None = None,
    on_result: Callable[[RunResult], object] | None = None,
    terms: RunTerms = RunTerms(),
) -> RunResult:
    """Run *routine* for *agent* at the *scheduled* time and append the entry.

    Args:
        journal: the agent's journal.
        agent: the agent's configuration.
        routine: the routine to run.
        scheduled: the fire time the run belongs to (aware); it decides the slot and the entry's ts.
        backend: the agent's backend (unused by digest routines).
        tz: the runner's timezone, in which slots are computed.
        dry_run: build and validate the entry but append nothing (outcome ``skipped``).
        run_id: the run's id (a new UUID when omitted).
        run_timeout: seconds the run may still take (``runner.run_timeout``, less the process's age
            when the process is the run's worker); the backend call is cut off in time (see
            :func:`backend_deadline`). None: only the backend's own timeout applies.
        on_result: called with the result right after its ``run.finished`` is logged, before any signal is acted on.
        terms: the run's ``max_tokens_per_run`` (asked of the backend) and its model's price (for ``cost``).

    Returns:
        The RunResult; failures are reported in it, never raised.

    Raises:
        RunInterrupted: SIGTERM or SIGINT ended the run; it carries the result, already logged and reported.
    """
    ending = RunEnding(RunIdentity.of(agent.name, routine, scheduled, tz, run_id), dry_run=dry_run, on_result=on_result)
    return _execute(
        journal, ending, agent=agent, routine=routine, scheduled=scheduled, backend=backend, tz=tz, run_timeout=run_timeout, terms=terms
    )


def _execute(
    journal: Journal,
    ending: RunEnding,
    *,
    agent: AgentConfig,
    routine: Routine,
    scheduled: datetime,
    backend: Backend | None,
    tz: tzinfo,
    run_timeout: float | None,
    terms: RunTerms,
) -> RunResult:
    """:func:`execute_run` for the run *ending* will end."""
    started = time.perf_counter()
    deadline = backend_deadline(time.monotonic(), run_timeout)
    run, dry_run = ending.identity, ending.dry_run
    scheduled = scheduled.astimezone(tz)
    slot, key, scheduled_text = run.slot, run.client_key, run.scheduled
    outcome: Outcome = Outcome.FAILED
    entry_id: str | None = None
    decisions: list[dict[str, str]] = []  # the reply's decisions on proposals, made once its entry is stored
    error: str | None = None
    would_be: dict[str, Any] | None = None
    fault: str | None = None
    permanent = False

    def on_retry(attempt: int, delay: float, exc: BackendError) -> None:
        log.warning(
            "run.retry", **run.fields(scheduled=False), attempt=attempt, delay=round(delay, 3), error=str(exc.for_agent(agent.name))
        )

    settings = agent.backend
    retrier = Retrier(RetryPolicy(settings.attempts, settings.retry_delay), on_retry=on_retry)
    meter = UsageMeter()  # every backend call of the run, retries included, reports what it used here

    try:
        # Inside the try: a signal acted on right after this line (the check follows every call) still ends the run with its line.
        log.info("run.started", **run.fields(), memory=memory_in_use(journal))
        try:
            # Only spares a backend call: the append's client_key check is what
            # guarantees one entry per slot.
            with signals_deferred():
                existing = journal.find_by_client_key(key, agent=agent.name)
                if existing is not None:
                    outcome, entry_id = Outcome.DUPLICATE, existing.id
            if outcome is not Outcome.DUPLICATE:
                if routine.is_digest:
                    digest = digest_window(journal, agent=agent.name, since=scheduled - routine.window, until=scheduled)
                    fields = digest_entry_fields(digest, slot=slot) if digest.count else None
                else:
                    if backend is None:
                        raise ValueError("a backend is required for a routine that is not a digest")  # noqa: TRY301 - a caller's bug ends the run with its line, as any bug does
                    fields = _fields_from_backend(journal, agent, routine, scheduled, slot, key, backend, deadline, retrier, terms, meter)
                if fields is None:
                    outcome = Outcome.SKIPPED  # nothing to digest in the window: nothing failed, so no error
                else:
                    # The agent's own words, or (when its reply says it quotes outside text) text kept out of later prompts.
                    origin = "untrusted" if fields.pop("quoted_from_outside", False) is True else "agent"
                    meta = {
                        **fields.pop("meta", {}),
                        "origin": origin,
                        "source_routine": routine.name,
                        "slot": slot,
                        "backend": "digest" if routine.is_digest else backend.name if backend else None,
                    }
                    # meta.simulated is the engine's mark, never a reply's: a simulated agent's entries, its digests too,
                    # carry it (runner.run.provenance keeps the two sorts apart).
                    meta.pop("simulated", None)
                    if agent.backend.type == "simulated":
                        meta["simulated"] = True
                    quoted = quoted_payload(fields, agent.name, scheduled_text, key) if "quoted" in fields else None
                    fields.pop("quoted", None)
                    decisions = fields.pop("proposals", [])
                    payload = {**fields, "kind": routine.kind, "agent": agent.name, "ts": scheduled_text, "client_key": key, "meta": meta}
                    if dry_run:
                        would_be = journal.as_stored(payload)  # redacted as the append would store it
                        outcome = Outcome.SKIPPED
                    else:
                        with signals_deferred():
                            if quoted is not None:
                                # The quoted text first, under a key of its own, then the agent's entry continuing it: a
                                # retry after a crash between the two finds the quote stored, and the slot's entry is last.
                                source = journal.append_with_result({**quoted, "meta": {**meta, "origin": "untrusted"}})
                                payload = continuing(payload, source.entry.id)
                            appended = journal.append_with_result(payload)
                            outcome = Outcome.DUPLICATE if appended.is_duplicate else Outcome.APPENDED
                            entry_id = appended.entry.id
            if agent.accept_proposals == "auto" and entry_id is not None and not dry_run:
                _accept_proposals(journal, agent.name, entry_id, run)
            if decisions and entry_id is not None and not dry_run:
                _decide_proposals(journal, agent.name, decisions, run)
        except (RunnerError, JournalError) as exc:
            error = str(exc)
            fault = exc.errno_name if isinstance(exc, JournalStorageError) else None
            # Another run cannot fix a backend's permanent refusal or a bad configuration; anything else may pass.
            permanent = isinstance(exc, BackendError | ConfigError) and not (isinstance(exc, BackendError) and exc.is_transient)
        except Exception as exc:  # a bug in a backend or routine must still end the run with one clear line
            error = f"{type(exc).__name__}: {exc}"
            log.exception("run.error", **run.fields(scheduled=False))
        return ending.end(
            outcome,
            entry_id=entry_id,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error=error,
            entry=would_be,
            fault=fault,
            attempts=retrier.attempts,
            permanent=permanent,
            tokens=meter.tokens(),
            cost=terms.cost(meter.tokens()),
        )
    except (KeyboardInterrupt, SystemExit) as exc:
        # SIGTERM (systemctl stop, a timer unit's timeout, serve's shutdown) or Ctrl-C ends
        # the run here; it still gets its one run.finished line before the process goes
        # (unless that line was just written and reported: then the signal came right after it).
        if outcome is Outcome.FAILED:
            error = "interrupted by a signal before the run finished; the slot has no entry and can be run again"
        raise ending.interrupted(
            exc,
            outcome=outcome,
            error=error,
            entry_id=entry_id,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            fault=fault,
            attempts=retrier.attempts,
            tokens=meter.tokens(),
            cost=terms.cost(meter.tokens()),
        ) from exc


def open_failure(agent: AgentConfig, exc: RunnerError | JournalError | OSError) -> tuple[str, str | None]:
    """What a run reports when :func:`runner.run._memory.open_journal` raised *exc* for *agent*: its one-line error, and its fault.

    The fault is the errno name when the filesystem refused the journal (None otherwise), for the exit code.
    """
    if isinstance(exc, RunnerError):  # hybrid memory that cannot run here, say: the error names the key and the fix
        return str(exc), None
    if isinstance(exc, JournalStorageError):
        return str(exc), exc.errno_name  # names the path, the errno and the fix already
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return (
            f"cannot open the journal at {str(agent.journal_root)!r}: {reason}; check that the directory exists and is writable by this user",
            None,
        )
    # The journal's own error (a foreign manifest, an unsupported format) says what is wrong: no guess about permissions.
    return f"cannot open the journal at {str(agent.journal_root)!r}: {exc}", None


def run_slot(
    agent: AgentConfig,
    routine: Routine,
    scheduled: datetime,
    *,
    backend: Backend | None,
    tz: tzinfo,
    dry_run: bool = False,
    run_id: str | None = None,
    run_timeout: float | None = None,
    on_result: Callable[[RunResult], object] | None = None,
    slot_lock: SlotLock | None = None,
    terms: RunTerms = RunTerms(),
) -> RunResult:
    """Open *agent*'s journal and :func:`execute_run` in it; what ``ghostrunner run`` does.

    A journal that cannot be opened (missing permissions, a file in the way,
    a sandbox without ``ReadWritePaths=``) fails the run like any other
    failure: one ``run.finished`` line with the error, no exception.
    *on_result* is called once with the result, as in :func:`execute_run`.
    With *slot_lock*, the run works on its slot only while holding that lock
    (:mod:`runner.run.slot_lock`): a run that does not get it in time ends
    ``busy``; one that gets it finds the entry a previous holder appended.

    Raises:
        RunInterrupted: SIGTERM or SIGINT ended the run, also while the journal
            was being opened (which can take a while: it may catch its index
            up) or closed, or while the run waited for the slot lock; the
            run's one ``run.finished`` is logged and reported first.
    """
    ending = RunEnding(RunIdentity.of(agent.name, routine, scheduled, tz, run_id), dry_run=dry_run, on_result=on_result)
    return _run_slot(ending, agent, routine, scheduled, backend=backend, tz=tz, run_timeout=run_timeout, slot_lock=slot_lock, terms=terms)


def _run_slot(
    ending: RunEnding,
    agent: AgentConfig,
    routine: Routine,
    scheduled: datetime,
    *,
    backend: Backend | None,
    tz: tzinfo,
    run_timeout: float | None,
    slot_lock: SlotLock | None,
    terms: RunTerms,
    journals: KeptJournals | None = None,
) -> RunResult:
    """:func:`run_slot` for the run *ending* will end; with *journals*, its journal is taken from and kept in them."""
    try:
        # A run writes: a journal it cannot write fails it at once.
        journal = open_journal(agent) if journals is None else journals.take(agent)
    except (RunnerError, JournalError, OSError) as exc:
        error, fault = open_failure(agent, exc)
        return ending.end(Outcome.FAILED, error=error, fault=fault)
    except (KeyboardInterrupt, SystemExit) as exc:
        raise ending.interrupted(
            exc,
            error="interrupted by a signal while the journal was being opened; the slot has no entry from this run and can be run again",
        ) from exc
    try:
        result = run_in_turn(
            ending,
            slot_lock,
            lambda: _execute(
                journal,
                ending,
                agent=agent,
                routine=routine,
                scheduled=scheduled,
                backend=backend,
                tz=tz,
                run_timeout=run_timeout,
                terms=terms,
            ),
        )
    except BaseException:
        if journals is not None:
            journals.drop(agent, journal)
        journal.close()
        raise
    if journals is not None and journals.keep(agent, journal, result):
        return result
    try:
        journal.close()
    except (KeyboardInterrupt, SystemExit) as exc:
        # The run has finished, logged and reported its outcome; the process just goes.
        raise ending.interrupted(exc, error="interrupted by a signal") from exc
    return result


def held_by_pause(
    config: RunnerConfig,
    identity: RunIdentity,
    *,
    dry_run: bool = False,
    on_result: Callable[[RunResult], object] | None = None,
) -> RunResult | None:
    """The end of *identity*'s run when the pause file holds it back, or None when it may go on.

    A paused pair is ``skipped`` (reason ``paused``); a pause file that cannot
    be read fails the run with its error (the run cannot know whether it may
    call its backend). Either way its one ``run.finished`` is logged here.
    """
    held = _held_by_pause(config, RunEnding(identity, dry_run=dry_run, on_result=on_result))
    if held is not None:
        note_skip(config, held, dry_run=dry_run)  # serve's own skip of a paused run: decided, as a worker's would be
    return held


def _held_by_pause(config: RunnerConfig, ending: RunEnding) -> RunResult | None:
    """:func:`held_by_pause` for the run *ending* will end."""
    paused, error, fault = pause_of(config, ending.identity.agent, ending.identity.routine)
    if not paused and error is None:
        return None
    return ending.end(Outcome.FAILED if error else Outcome.SKIPPED, error=error, fault=fault, reason=None if error else REASON_PAUSED)


def run_at(
    config: RunnerConfig,
    agent: str,
    routine: str,
    *,
    at: datetime | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
    on_result: Callable[[RunResult], object] | None = None,
    run_timeout: float | None = None,
    ledger: Callable[[RunnerConfig], Budgets] = Budgets,
    journals: KeptJournals | None = None,
) -> RunResult:
    """Run *routine* for *agent* in the slot of its latest scheduled time at or before *at*; what ``ghostrunner run`` does.

    The run gets the agent's backend (none for a digest routine) and, unless
    *run_timeout* says otherwise (a fleet worker's long-lived process gives
    each run all of it), ``runner.run_timeout`` counted from this process's
    start (:func:`process_age`), since under ``serve`` the process is the run's worker.

    Args:
        config: the runner configuration.
        agent: a configured agent.
        routine: one of *agent*'s routines.
        at: an aware time (default now); the run's slot is that of the latest scheduled time at or before it.
        dry_run: build and validate the entry but append nothing.
        run_id: the run's id (a new UUID when omitted).
        on_result: as in :func:`execute_run`.
        ledger: the budgets' ledger the run is checked against: the state directory's (the default), or a
            fleet's in Redis (:func:`runner.fleet.ledger.fleet_budgets`).
        journals: the journals a long-lived process keeps open between its runs (:mod:`runner.run.kept`), or
            None to open the agent's journal for this run and close it after.

    Raises:
        UnknownNameError: *agent* is not configured, or does not run *routine*.
        NoScheduledTimeError: the routine's schedule has no time at or before *at*.
        RunInterrupted: as in :func:`run_slot`.

    A paused pair is ``skipped`` (reason ``paused``) before its journal or backend is touched; so is a slot
    whose routine's gate says there is nothing to do (reason ``gate``, :mod:`runner.run.gate`), and one a
    budget has no room for (reason ``budget``, :mod:`runner.run.budgets`).
    """
    agent_config = config.agent(agent)
    routine_config = config.routine_for(agent_config, routine)
    at = at if at is not None else datetime.now(config.timezone)
    scheduled = latest_fire_time(cron_trigger(routine_config.schedule, config.timezone), at)
    if scheduled is None:
        raise NoScheduledTimeError(routine, routine_config.schedule, at)
    ending = RunEnding(RunIdentity.of(agent, routine_config, scheduled, config.timezone, run_id), dry_run=dry_run, on_result=on_result)
    try:
        return _run_ending(config, ending, agent_config, routine_config, scheduled, run_timeout, ledger, journals)
    finally:
        # However the run skipped its slot (a pause, its gate, a digest with nothing to take), that slot is decided:
        # noted, so that catch-up neither runs it again nor records it missed (runner.run.skips).
        if ending.result is not None:
            note_skip(config, ending.result, dry_run=dry_run)


def _run_ending(
    config: RunnerConfig,
    ending: RunEnding,
    agent_config: AgentConfig,
    routine_config: Routine,
    scheduled: datetime,
    run_timeout: float | None,
    ledger: Callable[[RunnerConfig], Budgets],
    journals: KeptJournals | None,
) -> RunResult:
    """:func:`run_at` once its run has an identity: the pause, the gate and the budgets asked, then the run made."""
    routine = routine_config.name
    held = _held_by_pause(config, ending)
    if held is not None:  # checked at every run, so a pause or resume needs no restart of serve
        return held
    gate = config.gates.get(routine)
    if gate is not None:  # before the budgets: a slot with nothing to do costs nothing and takes no room
        answer = ask_gate(config, gate, ending.identity)
        if not answer.go:
            if answer.error is None:
                return ending.end(Outcome.SKIPPED, reason=REASON_GATE)
            return ending.end(Outcome.FAILED, error=answer.error, permanent=answer.permanent)
    admission: Admission | None = None
    if not routine_config.is_digest:  # a digest asks no backend; a dry run does, and pays for it like any run
        verdict = _admitted(ledger(config), ending, scheduled)
        if isinstance(verdict, RunResult):
            return verdict
        admission = verdict
    try:
        return _run_admitted(config, ending, agent_config, routine_config, scheduled, run_timeout, admission, journals)
    finally:
        # Also when a signal ended the run (its result is set before RunInterrupted is raised); a run
        # that ended without a result (a bug) keeps its estimate.
        if admission is not None and ending.result is not None:
            _settle(admission, ending.result)


def _admitted(budgets: Budgets, ending: RunEnding, scheduled: datetime) -> Admission | RunResult | None:
    """The run's admission by *budgets* (None: none applies), or its end: skipped for budget, or failed on an unusable ledger."""
    if not budgets.is_active:
        return None
    try:
        verdict = budgets.admit(ending.identity, scheduled, dry_run=ending.dry_run)
    except (StateFileError, FleetUnavailableError) as exc:
        return ending.end(Outcome.FAILED, error=str(exc))
    if isinstance(verdict, Refusal):
        budgets.close()
        log.warning(
            "run.over_budget",
            **ending.identity.fields(),
            budget=verdict.budget,
            limit=verdict.limit if verdict.known else None,
            used=round(verdict.used, 9) if verdict.known else None,
        )
        return ending.end(Outcome.SKIPPED, reason=REASON_BUDGET)
    return verdict


def _settle(admission: Admission, result: RunResult) -> None:
    """Record what the admitted run used; a ledger that cannot take it keeps the run at its estimate, which never undercounts."""
    with contextlib.suppress(StateFileError, FleetUnavailableError):
        admission.settle(result)
    admission.budgets.close()


def _run_admitted(
    config: RunnerConfig,
    ending: RunEnding,
    agent_config: AgentConfig,
    routine_config: Routine,
    scheduled: datetime,
    run_timeout: float | None,
    admission: Admission | None,
    journals: KeptJournals | None,
) -> RunResult:
    """:func:`run_at` past its pause and budget checks: the backend built, the slot's lock taken, the run made.

    The *admission*'s reservation is synced meanwhile: the run waits for it only before its first backend call.
    """
    agent, routine = agent_config.name, routine_config.name
    backend = None if routine_config.is_digest else build_backend(agent_config)
    if run_timeout is None:
        run_timeout = config.run_timeout.total_seconds() - process_age()
    # Never waiting past half the run's time leaves the rest for the run itself, should it get the lock.
    slot_lock = SlotLock(state_dir(config), agent, routine, wait=max(0.0, min(config.slot_lock_wait.total_seconds(), run_timeout / 2)))
    return _run_slot(
        ending,
        agent_config,
        routine_config,
        scheduled,
        backend=backend,
        tz=config.timezone,
        run_timeout=run_timeout,
        slot_lock=slot_lock,
        terms=RunTerms.of(config, agent_config, routine, before_backend=admission.durable if admission is not None else None),
        journals=journals,
    )
