"""Slots a run skipped on purpose, kept in the state directory's ``skips.sqlite3``: decided, though they have no entry.

A run that ends ``skipped`` (a dry run aside) decided its slot without an entry: its routine's gate said there
was nothing to do (reason ``gate``), its pair was paused (``paused``), a digest found nothing in its window (no
reason), a budget had no room (``budget``). The journal cannot tell such a slot from one no run ever reached, so
``serve``'s catch-up (:mod:`runner.schedule.catchup`) asks :func:`skipped_slots` before it runs a slot again or
records it as missed. Each skip is noted here, by its client_key, as its run ends (:func:`note_skip`); a skip
for budget is already in the budgets' ledger (:mod:`runner.run.budgets`), which :func:`skipped_slots` reads too,
so that one answer covers every reason.

A note that cannot be written (the state directory unusable, its disk full) leaves the run's outcome as it was:
the run logs ``run.skip_unrecorded``, and a later catch-up may run that slot, as it would without the note.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import structlog

from runner.errors import StateFileError
from runner.run.budgets import Budgets
from runner.run.contract import REASON_BUDGET, Outcome, RunResult
from runner.settings.config import RunnerConfig
from runner.settings.state_dir import ensure_state_dir, hand_over, state_dir

__all__ = ["SKIPS_FILE", "note_skip", "skipped_slots"]

log = structlog.get_logger()

SKIPS_FILE: Final = "skips.sqlite3"
#: How long a note waits for another process's; each takes about a millisecond.
_LOCK_WAIT_SECONDS: Final = 30.0
_SCHEMA: Final = "CREATE TABLE IF NOT EXISTS skipped (client_key TEXT PRIMARY KEY, reason TEXT, noted TEXT NOT NULL)"
#: Well under SQLite's limit of parameters in one statement.
_KEYS_PER_QUERY: Final = 500


def _path(config: RunnerConfig) -> Path:
    return state_dir(config) / SKIPS_FILE


def note_skip(config: RunnerConfig, result: RunResult, *, dry_run: bool) -> None:
    """Note *result*'s slot as skipped when its run skipped it on purpose (not a dry run; a budget's skip is the ledger's).

    Never raises: a note that cannot be written is logged as ``run.skip_unrecorded`` (see the module).
    """
    if result.outcome is not Outcome.SKIPPED or dry_run or result.reason == REASON_BUDGET:
        return
    path = _path(config)
    try:
        ensure_state_dir(path.parent)
        is_new = not path.exists()
        db = sqlite3.connect(path, timeout=_LOCK_WAIT_SECONDS, isolation_level=None)
        try:
            if is_new:
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o600)
                    hand_over(path)
            db.execute(_SCHEMA)
            noted = datetime.now(UTC).isoformat(timespec="seconds")
            db.execute("INSERT OR IGNORE INTO skipped VALUES (?, ?, ?)", (result.identity.client_key, result.reason, noted))
        finally:
            db.close()
    except (OSError, sqlite3.Error, StateFileError) as exc:
        log.warning("run.skip_unrecorded", **result.identity.fields(), path=str(path), error=str(exc))


def _noted(path: Path, client_keys: list[str]) -> set[str]:
    """Those of *client_keys* noted in the file at *path* (read only: catch-up creates nothing)."""
    if not path.exists():
        return set()
    found: set[str] = set()
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=_LOCK_WAIT_SECONDS)
        try:
            for start in range(0, len(client_keys), _KEYS_PER_QUERY):
                chunk = client_keys[start : start + _KEYS_PER_QUERY]
                marks = ", ".join("?" * len(chunk))  # placeholders only: the keys are parameters
                found.update(row[0] for row in db.execute(f"SELECT client_key FROM skipped WHERE client_key IN ({marks})", chunk))
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise StateFileError(
            path, f"the record of skipped slots cannot be read ({exc})", "move it away; runs note their skips anew"
        ) from None
    return found


def skipped_slots(config: RunnerConfig, client_keys: Collection[str]) -> set[str]:
    """Those of *client_keys* whose slots a run skipped on purpose, for any reason (see the module).

    Raises:
        StateFileError: the record or the budgets' ledger cannot be read.
    """
    keys = list(client_keys)
    if not keys:
        return set()
    found = _noted(_path(config), keys)
    budgets = Budgets(config)
    try:
        found |= budgets.skipped_slots(keys)  # also once the budget is gone: its day was decided then
    finally:
        budgets.close()
    return found
