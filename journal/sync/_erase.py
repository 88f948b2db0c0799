"""Erasing entries for good: each file replaced by its tombstone, its rows removed, and the index rewritten without them.

The order is what lets a rerun finish any erase a kill interrupted. The
tombstone is written first, durably, over the entry file (a rename: the old
bytes are then in no file); then, in one transaction of a connection with
``secure_delete`` on, the entry's rows, words and vectors are deleted and its
tombstone row inserted; then the index is scrubbed (its text tables merged,
checkpointed, vacuumed), so that no page of the database file or its WAL
keeps the erased text. The files decide what is erased: a rerun finds each
file that is already a tombstone, finishes its rows, and scrubs again.
"""

from __future__ import annotations

import errno
import getpass
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from journal.errors import EntryNotFoundError, EntryValidationError, JournalStorageError
from journal.files import load_erase_key, show_value, storage_error, storage_errors, tombstone_payload
from journal.files.entry import Entry, check_entry_id, check_text_arguments, entry_from_json_bytes, utc_key
from journal.files.store import check_entry_path
from journal.sync._keeper import IndexKeeper

__all__ = ["EraseResult", "erase", "ids_of_agent", "operator_name"]

_MAX_REASON = 2000
_RERUN = "free space there and run the same erase again, which finishes it"


@dataclass(slots=True)
class EraseResult:
    """What :func:`erase` did.

    Attributes:
        erased: ids whose entries this call erased.
        already: ids that were tombstones already (an erase is idempotent; its index part was finished again if needed).
        by: who the tombstones name as the eraser.
    """

    erased: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    by: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"erased": list(self.erased), "already_erased": list(self.already), "by": self.by}


def operator_name() -> str:
    """Who erases from a shell: the operator's login name from the environment (``LOGNAME``, ``USER``), else the account's."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def _check_line(value: object, name: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_REASON or any(ord(c) < 32 for c in value):
        raise EntryValidationError(name, f"a non-empty line of at most {_MAX_REASON} characters: {what}", show_value(value))
    return value


def erase(
    keeper: IndexKeeper, ids: Sequence[str], *, reason: str, by: str, agent: str | None = None, now: datetime | None = None
) -> EraseResult:
    """Erase the entries *ids* (see :meth:`journal.Journal.erase`); every id is checked before anything is written."""
    _check_line(reason, "reason", "why the entries are erased")
    _check_line(by, "by", "who erases them")
    check_text_arguments(agent=agent)
    unique = list(dict.fromkeys(check_entry_id(entry_id) for entry_id in ids))
    at = utc_key(now or datetime.now(UTC))
    result = EraseResult(by=by)
    index, store = keeper.index, keeper.store
    with keeper.lock:
        keeper.sync_locked()
        paths: dict[str, str] = {}
        for entry_id in unique:
            row = index.row_for(entry_id=entry_id)
            # Another agent's id reads as unknown, as every scoped read has it.
            if row is None or (agent is not None and row.agent != agent):
                raise EntryNotFoundError(entry_id)
            check_entry_path(row.path)
            paths[entry_id] = row.path
        if not unique:
            return result
        with storage_errors(keeper.root, "write the erase key in"):
            key = load_erase_key(keeper.root, create=True, owner=keeper.owner)
        assert key is not None  # noqa: S101 - narrows the type: create=True makes one
        generation = keeper.lock.bump_generation(durable=keeper.boot_id is None)
        counter = keeper.lock.stamp()
        keeper.note_write_begun()
        index.secure_delete()
        for entry_id in unique:
            rel_path = paths[entry_id]
            with storage_errors(store.entries_dir / rel_path, "read the entry file"):
                raw = store.read(rel_path)
            held = entry_from_json_bytes(raw)
            if held.id != entry_id:
                raise EntryNotFoundError(entry_id)
            if held.erased is None:
                tombstone = Entry.from_payload(tombstone_payload(held.to_dict(), erased=raw, key=key, reason=reason, at=at, by=by))
                with storage_errors(store.entries_dir / rel_path, "write the tombstone over"):
                    store.replace(rel_path, tombstone.to_json_bytes())
                result.erased.append(entry_id)
            else:
                tombstone = held
                result.already.append(entry_id)
            try:
                with index.transaction() as conn:
                    index.delete_entry(conn, entry_id)
                    index.insert_entry(conn, tombstone, rel_path)
                    index.set_generation(conn, generation, counter)
            except Exception as exc:
                _unfinished(exc, index.path, f"remove the rows of {entry_id!r} from the index (its file is a tombstone already) at")
                raise
        keeper.note_caught_up(generation, counter)
        try:
            index.scrub()
        except Exception as exc:
            done = ", ".join(repr(entry_id) for entry_id in unique)
            _unfinished(
                exc,
                index.path,
                f"rewrite the index after erasing {done} (each file is a tombstone and its rows are removed, "
                "but the index file may still hold pages of the erased text) at",
            )
            raise
    return result


def _unfinished(exc: Exception, index_path: Path, action: str) -> None:
    """Raise the storage failure *exc* as one error saying how far the erase got (*action*) and that a rerun finishes it."""
    problem = storage_error(exc, index_path, action, index_path=index_path)
    if problem is not None:
        raise JournalStorageError.for_errno(index_path, problem.errno or errno.EIO, action, _RERUN) from exc


def ids_of_agent(keeper: IndexKeeper, agent: str) -> list[str]:
    """Every entry id of *agent* (its tombstones left out), oldest first: what ``erase --agent A --all`` erases."""
    check_text_arguments(agent=agent)
    return keeper.index.ids_of_agent(agent)
