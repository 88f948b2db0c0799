"""Budgets enforced when a run starts: the ledger of what runs used, and the check of a run against it.

The ledger is ``ledger.sqlite3`` in the runner's state directory
(:mod:`runner.settings.state_dir`): beside the pause file and the slot locks,
shared by ``serve``'s workers, the timers and manual runs of one deployment.
Each run of a routine that asks a backend is one row: what it used (tokens
in + out, and cost), counted on its slot's **scheduled** time, so that a
catch-up run counts on its own day and a simulation on its virtual one.

Before its backend is asked (:meth:`Budgets.admit`), a run takes the
ledger's write lock (an SQLite ``BEGIN IMMEDIATE``, which serialises every
process of the host), sums the window of each budget that applies to it (the
runner-wide total, its agent's, its routine's) and:

* when some budget is used up (what is recorded, runs still going included,
  is at or over the limit), the slot is recorded as skipped for budget and
  the run ends ``skipped`` with the reason ``budget``, its backend never
  asked. The slot stays skipped: every later run of it (a retry, catch-up, a
  manual run) is skipped again the same way, so a budget's day is never
  bought back by catch-up;
* otherwise the run is recorded as *going*, counted at its estimate until it
  ends: ``max_tokens_per_run`` (priced as output), else the most a recorded run
  used. So two runs that both start with room left do not both count on the
  same room: the second sees the first's estimate, and a budget is
  overspent by at most one run's excess over its estimate.

Either way the decision is on the disk before the run acts on it, so that a
power cut cannot forget a reservation and let the day be spent again. A
refused run syncs the ledger before it ends; an admitted one has it synced in
a thread (:mod:`runner.run._ledger_sync`) while it opens its journal and
builds its prompt context, and waits for that sync just before its first
backend call (:meth:`Admission.durable`), so it waits for the disk only as
long as that work did not cover.

When the run ends (:meth:`Admission.settle`), its row gets what it used. A run
whose tokens are unknown (the backend did not say) counts as
``max_tokens_per_run`` tokens (priced as output), else as its estimate; a run
killed before it ended keeps its estimate.

A fleet keeps the same ledger in its Redis instead (:mod:`runner.fleet.ledger`), so that its hosts share one
budget; :func:`runner.run.engine.run_at` is given the ledger to check.

A dry run (``run --dry-run``) asks its backend as a run does, so it is checked
and counted the same way; one that is refused leaves its slot unmarked.

The window is the calendar day of the scheduled time in ``runner.timezone``
(``budgets.window = "calendar"``), or the 24 hours up to it (``"rolling"``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Final

import structlog

from runner.errors import StateFileError
from runner.run._ledger_sync import LogSync, sync_now
from runner.run.contract import RunIdentity, RunResult
from runner.settings.config import BudgetConfig, Limits, Price, RunnerConfig
from runner.settings.state_dir import ensure_state_dir, hand_over, state_dir

__all__ = ["LEDGER_FILE", "Admission", "Budgets", "Refusal", "Scope", "day_window", "scopes_of"]

log = structlog.get_logger()

LEDGER_FILE: Final = "ledger.sqlite3"
#: How long a run waits for another process's check of the ledger; each takes about a millisecond.
_LOCK_WAIT_SECONDS: Final = 30.0
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    client_key TEXT NOT NULL,
    agent TEXT NOT NULL,
    routine TEXT NOT NULL,
    at REAL NOT NULL,
    tokens REAL NOT NULL,
    cost REAL NOT NULL,
    going INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_at ON runs (at);
CREATE INDEX IF NOT EXISTS runs_tokens ON runs (tokens);
CREATE INDEX IF NOT EXISTS runs_cost ON runs (cost);
CREATE TABLE IF NOT EXISTS skipped (client_key TEXT PRIMARY KEY, budget TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a run may not start: the budget (its dotted key) that has no room, its limit, and what the window used."""

    budget: str
    limit: float
    used: float
    #: False for a slot skipped for budget before: the limit and use it met then are not kept.
    known: bool = True


@dataclass(frozen=True, slots=True)
class Admission:
    """A run let through: :meth:`settle` records what it used when it ends."""

    budgets: Budgets
    run_id: str
    max_tokens: int | None
    price: Price | None
    estimate: tuple[float, float]
    #: The sync that puts the run's reservation on the disk (None: a ledger whose admission is durable when it returns).
    syncing: LogSync | None = None

    def durable(self) -> None:
        """Return once the run's reservation is on the disk: called just before the run's first backend call.

        Raises:
            StateFileError: the ledger could not be synced (the run must not ask its backend).
        """
        if self.syncing is not None:
            self.syncing.wait()

    def settle(self, result: RunResult) -> None:
        """Record what the run of *result* used (see the module for unknown tokens)."""
        if self.syncing is not None:
            self.syncing.finish()  # a run that never asked its backend did not wait for it
        if not result.attempts and result.tokens is None:
            tokens, cost = 0.0, 0.0  # it never asked its backend (the slot's entry was there, it failed before)
        elif result.tokens is not None:
            tokens = float(result.tokens["in"] + result.tokens["out"])
            cost = result.cost if result.cost is not None else 0.0
        elif self.max_tokens is not None:
            tokens = float(self.max_tokens)
            cost = self.price.of(0, self.max_tokens) if self.price is not None else 0.0
        else:
            tokens, cost = self.estimate
        self.budgets.record_use(self.run_id, tokens, cost)


@dataclass(frozen=True, slots=True)
class Scope:
    """One budget that applies to a run: its dotted key, the runs it sums (all, or one ``agent``'s or ``routine``'s), its limits."""

    key: str
    #: None: every run; else "agent" or "routine", whose value must be *value*.
    field: str | None
    value: str
    limits: Limits


def scopes_of(settings: BudgetConfig, agent: str, routine: str) -> list[Scope]:
    """The budgets with a day limit that apply to *agent*'s runs of *routine*: the runner-wide one, its agent's, its routine's."""
    scopes = [Scope("budgets", None, "", settings.total)]
    if agent in settings.agents:
        scopes.append(Scope(f"budgets.agents.{agent}", "agent", agent, settings.agents[agent]))
    if routine in settings.routines:
        scopes.append(Scope(f"budgets.routines.{routine}", "routine", routine, settings.routines[routine]))
    return [scope for scope in scopes if scope.limits.has_day_limit]


def day_window(config: RunnerConfig, scheduled: datetime) -> tuple[float, float]:
    """The [start, end) of the window a run scheduled at *scheduled* counts in, as Unix times (see the module)."""
    if config.budgets.window == "rolling":
        return (scheduled - timedelta(days=1)).timestamp(), scheduled.timestamp() + 1e-3
    local = scheduled.astimezone(config.timezone)
    start = datetime.combine(local.date(), time(), tzinfo=config.timezone)
    end = datetime.combine(local.date() + timedelta(days=1), time(), tzinfo=config.timezone)
    return start.timestamp(), end.timestamp()


class Budgets:
    """The budgets of one configuration, checked against its ledger (see the module).

    This one keeps the ledger in the state directory; a fleet's (:mod:`runner.fleet.ledger`) keeps it
    in Redis, with the same :meth:`admit`, :meth:`record_use`, :meth:`used` and :meth:`close`.
    """

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.settings: BudgetConfig = config.budgets
        self.path = state_dir(config) / LEDGER_FILE
        self._db: sqlite3.Connection | None = None

    @property
    def is_active(self) -> bool:
        """Whether any budget limits a day (else no run needs the ledger)."""
        return self.settings.has_day_limit

    def _connect(self) -> sqlite3.Connection:
        try:
            directory = ensure_state_dir(self.path.parent)
            is_new = not self.path.exists()
            db = sqlite3.connect(directory / LEDGER_FILE, timeout=_LOCK_WAIT_SECONDS, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StateFileError(
                self.path, f"the budgets' ledger cannot be opened ({exc})", "check that the state directory is writable"
            ) from None
        if is_new:
            with contextlib.suppress(OSError):
                os.chmod(self.path, 0o600)
                hand_over(self.path)
        try:
            # WAL: readers never wait for the writer. NORMAL: a commit is written, not synced (see writing).
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            db.close()
            raise StateFileError(
                self.path, f"the budgets' ledger cannot be opened ({exc})", "check that the state directory is writable"
            ) from None
        return db

    def close(self) -> None:
        """Close the ledger, if this object opened it."""
        if self._db is not None:
            self._db.close()
            self._db = None

    @contextlib.contextmanager
    def writing(self, *, synced_after: bool = False) -> Iterator[sqlite3.Connection]:
        """The ledger in one transaction holding its write lock (committed on success); the connection is kept for the next.

        The commit is written to the ledger's log, not synced: a crash of the process loses none of it, a power cut
        may. An admission syncs the log after its commit (:mod:`runner.run._ledger_sync`), before the run's backend is
        asked, and so syncs every commit before it too; a run's use written when it ended and lost with the power
        leaves that run at its estimate, as a killed run is.

        *synced_after*: the caller syncs the log (and its directory) itself after the commit (:mod:`runner.run._ledger_sync`).
        Then a commit to an empty log (the last connection to close a ledger copies its log into the database and
        empties it away, so nearly every ``ghostrunner run`` starts one) makes no sync at all: ``NORMAL`` would sync
        the new log's header before its first frames, which only matters when they overwrite older frames (a torn
        write could then bring those back), and an empty log has none (nor do the few frames of one run's row come near an
        automatic checkpoint, which would sync). A log with frames keeps ``NORMAL``, which
        syncs nothing on a commit but that header when it starts the log over.
        """
        if self._db is None:
            self._db = self._connect()
        db = self._db
        try:
            # SQLite takes the level only outside a transaction: a log found empty is looked at again under the write
            # lock, and a writer's frames put in between make the transaction start over at NORMAL.
            unsynced = synced_after and self._log_is_empty()
            if unsynced:
                db.execute("PRAGMA synchronous = OFF")
            db.execute("BEGIN IMMEDIATE")
            try:
                if unsynced and not self._log_is_empty():
                    db.execute("ROLLBACK")
                    unsynced = False
                    db.execute("PRAGMA synchronous = NORMAL")
                    db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            finally:
                if unsynced:
                    db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            self.close()
            raise StateFileError(self.path, f"the budgets' ledger cannot be written ({exc})", "check the state directory's disk") from None

    def _log_is_empty(self) -> bool:
        """Whether the ledger's write-ahead log holds no frames (False when it cannot be told)."""
        try:
            return os.stat(f"{self.path}-wal").st_size == 0
        except OSError:
            return False

    def admit(self, identity: RunIdentity, scheduled: datetime, *, dry_run: bool = False) -> Admission | Refusal:
        """Let the run of *identity* start, recorded as going, or refuse it, its slot recorded as skipped for budget.

        A *dry_run* asks its backend like any run, so it is counted like one; refused, it leaves its slot as it
        was: a dry run is no run of its slot, and the slot's own run may find room.

        Raises:
            StateFileError: the ledger cannot be opened or written.
        """
        agent = self.config.agent(identity.agent)
        max_tokens = self.settings.max_tokens_for(identity.agent, identity.routine)
        price = self.config.price_of(agent)
        verdict = self._check(identity, scheduled, max_tokens, price, dry_run=dry_run)
        if isinstance(verdict, Refusal):
            if verdict.known and not dry_run:
                sync_now(self.path)  # the run ends here: its slot's skip is on the disk before it says so
            return verdict
        # The reservation is synced while the run gets ready; it waits for it before asking its backend (Admission.durable).
        return Admission(self, identity.run_id, max_tokens, price, verdict, LogSync.start(self.path))

    def _check(
        self, identity: RunIdentity, scheduled: datetime, max_tokens: int | None, price: Price | None, *, dry_run: bool
    ) -> Refusal | tuple[float, float]:
        """:meth:`admit`'s one transaction: the refusal (the slot recorded as skipped), or the estimate the run is recorded at."""
        start, end = day_window(self.config, scheduled)
        with self.writing(synced_after=True) as db:
            row = db.execute("SELECT budget FROM skipped WHERE client_key = ?", (identity.client_key,)).fetchone()
            if row is not None:
                return Refusal(row[0], 0.0, 0.0, known=False)
            if max_tokens is not None:
                estimate = (float(max_tokens), price.of(0, max_tokens) if price is not None else 0.0)
            else:
                # A going run's estimate is itself at most the most recorded before it, so all rows give the same maxima
                # (and each max is one step down its index, whatever the ledger's length).
                tokens_most = db.execute("SELECT max(tokens) FROM runs").fetchone()[0]
                cost_most = db.execute("SELECT max(cost) FROM runs").fetchone()[0]
                estimate = (float(tokens_most or 0.0), float(cost_most or 0.0))
            for scope in scopes_of(self.settings, identity.agent, identity.routine):
                # The field is "agent" or "routine" (Scope's own, never input): safe to name in the statement.
                where, params = (f" AND {scope.field} = ?", (scope.value,)) if scope.field else ("", ())
                tokens, cost = db.execute(
                    "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost), 0) FROM runs WHERE at >= ? AND at < ?" + where,
                    (start, end, *params),
                ).fetchone()
                limits = scope.limits
                for name, limit, used in (("tokens_per_day", limits.tokens_per_day, tokens), ("cost_per_day", limits.cost_per_day, cost)):
                    if limit is not None and used >= limit:
                        refusal = Refusal(f"{scope.key}.{name}", float(limit), float(used))
                        if not dry_run:
                            db.execute("INSERT OR IGNORE INTO skipped VALUES (?, ?)", (identity.client_key, refusal.budget))
                        return refusal
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (identity.run_id, identity.client_key, identity.agent, identity.routine, scheduled.timestamp(), *estimate),
            )
        return estimate

    def record_use(self, run_id: str, tokens: float, cost: float) -> None:
        """Record that the admitted run *run_id* ended having used *tokens* and *cost*.

        Raises:
            StateFileError: the ledger cannot be written.
        """
        with self.writing() as db:
            db.execute("UPDATE runs SET tokens = ?, cost = ?, going = 0 WHERE run_id = ?", (tokens, cost, run_id))

    def skipped_slots(self, client_keys: Collection[str]) -> set[str]:
        """Those of *client_keys* whose slots were skipped for budget (and so stay skipped: no catch-up runs them).

        Raises:
            StateFileError: the ledger cannot be read.
        """
        if not client_keys or not Path(self.path).exists():
            return set()
        keys = list(client_keys)
        found: set[str] = set()
        with self.writing() as db:
            for start in range(0, len(keys), 500):  # well under SQLite's limit of parameters in one statement
                chunk = keys[start : start + 500]
                marks = ", ".join("?" * len(chunk))  # placeholders only: the keys are parameters
                found.update(row[0] for row in db.execute(f"SELECT client_key FROM skipped WHERE client_key IN ({marks})", chunk))
        return found

    def used(self, *, since: datetime | None = None) -> tuple[float, float]:
        """The tokens and cost recorded (runs going at their estimate), all of them or those scheduled at or after *since*."""
        if not Path(self.path).exists():
            return 0.0, 0.0
        with self.writing() as db:
            tokens, cost = db.execute(
                "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost), 0) FROM runs WHERE at >= ?",
                (since.timestamp() if since is not None else float("-inf"),),
            ).fetchone()
        return float(tokens), float(cost)
