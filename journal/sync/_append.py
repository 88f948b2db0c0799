"""The durable append: one entry file published, and its index rows committed, under the writer lock.

**The index is never ahead of the files.** :func:`append` is the one place
that ensures it: the entry's rows are staged in one write transaction while
the entry's temporary file is fsynced, and committed only once the file has
its name, while the directory is fsynced. A crash before the commit leaves
the index behind the files, which the next writer catches up (the lock's
generation was bumped first); never an index row without its file.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journal.errors import DuplicateEntryError, EntryFileError, EntryValidationError, UnsafePathError
from journal.files import Redactor, storage_error, storage_errors
from journal.files.entry import Entry, show_value
from journal.files.store import EntryStore, check_entry_path
from journal.indexing.index import IndexCorruptError
from journal.sync._keeper import IndexKeeper
from journal.sync._reading import ANOTHER_AGENTS_ENTRY, SkippedFile, load_entry, load_many, scan, shown_path, shown_reason

__all__ = ["AppendResult", "append"]

log = logging.getLogger("journal")


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: the stored entry, and whether it already existed."""

    entry: Entry
    is_duplicate: bool


def append(keeper: IndexKeeper, payload: Mapping[str, Any], redactor: Redactor | None = None) -> AppendResult:
    """Validate and durably store one entry (see :meth:`journal.Journal.append_with_result`).

    Every link is checked here, under the lock, for every caller: there is
    no way to store an entry whose links this check would refuse. With
    *redactor*, the secrets in the entry's text are replaced first: what is
    stored, and indexed, never held them.
    """
    if redactor is not None and isinstance(payload, Mapping):
        payload = redactor.payload(payload)
    entry = Entry.from_payload(payload)
    semantic = keeper.semantic
    # Embedded before the lock is taken, so other writers do not wait on the model; or, while the
    # journal embeds behind, on a helper thread meanwhile, its vector stored before the next ranking.
    behind = semantic.embed_behind(entry) if semantic is not None else None
    vector = semantic.embed_entry(entry) if semantic is not None and behind is None else None
    index, store = keeper.index, keeper.store
    with keeper.lock:
        try:
            keeper.sync_locked()
        except Exception as exc:
            stored = _stored_unindexed(keeper, entry, exc)
            if stored is None:
                raise
            return AppendResult(stored, is_duplicate=True)
        # One write transaction from the duplicate checks to the commit: the
        # checks need no read transaction of their own, and the writer lock
        # keeps other writers out while the file is fsynced anyway.
        conn = index.begin()
        try:
            # A client_key is unique per agent: another agent's entry of the same key neither
            # answers this append nor blocks it, so no agent can claim, block or probe another's keys.
            if entry.client_key is not None:
                existing = index.client_key_entry(entry.client_key, entry.agent)
                if existing is not None:
                    earlier = _earlier_for_key(keeper, conn, entry, *existing)
                    if earlier is not None:
                        return AppendResult(earlier, is_duplicate=True)
            # A generated UUID4 cannot collide; only a supplied id needs the lookup.
            if "id" in payload and index.find_id(entry.id) is not None:
                raise DuplicateEntryError(entry.id)
            _check_links(keeper, entry)
            # Bumped first, so that even a crash right after the temp write is
            # noticed by the next writer, which then clears the temp file away.
            generation = keeper.lock.bump_generation(durable=keeper.boot_id is None)
            counter = keeper.lock.stamp()
            keeper.note_write_begun()
            rel_path = EntryStore.rel_path_for(entry)

            def stage_rows() -> None:
                index.insert_entry(conn, entry, rel_path)
                if vector is not None:
                    assert semantic is not None  # noqa: S101 - narrows the type: a vector is only computed with a semantic index
                    semantic.insert(conn, entry.id, vector)
                index.set_generation(conn, generation, counter)

            # The rows are staged while the entry file is fsynced, and
            # committed only once its name exists, while the directory is
            # fsynced: this order is what keeps the index from ever being ahead of the files.
            commit_failure: list[Exception] = []

            def commit() -> None:
                # Runs once the entry file has its name: from here on the entry is stored,
                # so a failed commit must not turn into an error for a write that happened.
                try:
                    index.commit()
                except Exception as exc:  # noqa: BLE001 - reported by _index_fell_behind
                    commit_failure.append(exc)

            day_dir = store.entries_dir / os.path.dirname(rel_path)
            with storage_errors(day_dir, "write a new entry file in"):
                try:
                    pending = store.write_temp(entry, meanwhile=stage_rows)
                    try:
                        store.publish(pending, meanwhile=commit)
                    except FileExistsError:
                        raise DuplicateEntryError(entry.id) from None
                except BaseException as exc:
                    if isinstance(exc, DuplicateEntryError) or not os.path.lexists(store.entries_dir / rel_path):
                        _undo_bump(keeper)  # nothing was published: the counter stays as it was
                    raise
            if commit_failure:
                _index_fell_behind(keeper, entry, commit_failure[0])
                return AppendResult(entry, is_duplicate=False)
        finally:
            _end_transaction(keeper)  # nothing to undo after the commit
        keeper.note_caught_up(generation, counter)
    if behind is not None:
        assert semantic is not None  # noqa: S101 - narrows the type: only a semantic index embeds behind
        semantic.pend(entry.id, behind)
    return AppendResult(entry, is_duplicate=False)


def _check_links(keeper: IndexKeeper, entry: Entry, agent_of: Callable[[str], str | None] | None = None) -> None:
    """Under the lock: every id *entry* continues or supersedes is an existing entry of its own agent, and not itself.

    Entry files are immutable, so a link that no read can follow (to an id no
    entry holds, or to another agent's entry) would stay a problem ``verify``
    reports for good, and fail every backup that verifies; an import stores
    through this append, so it refuses the same entries. An unknown id and
    another agent's id get the same error, as reads give them: an append must
    not tell which ids exist for other agents. *agent_of* answers, for an id,
    the agent of the entry indexed under it (or None), as the index would.
    """
    lookup = agent_of if agent_of is not None else functools.partial(_indexed_agent, keeper)
    for name, refs in (("continuity_refs", entry.continuity_refs), ("supersedes", entry.supersedes)):
        for position, ref in enumerate(refs):
            field = f"signals.{name}[{position}]"
            if ref == entry.id:
                raise EntryValidationError(field, "the id of an earlier entry, not the entry's own id", show_value(ref))
            if lookup(ref) != entry.agent:
                raise EntryValidationError(
                    field, f"the id of an existing entry of agent {entry.agent!r}", f"{show_value(ref)}, which is none"
                )


def _indexed_agent(keeper: IndexKeeper, entry_id: str) -> str | None:
    """The agent of the entry (or tombstone) indexed as *entry_id*, if any."""
    row = keeper.index.row_for(entry_id=entry_id)
    return None if row is None else row.agent


def _earlier_for_key(keeper: IndexKeeper, conn: sqlite3.Connection, entry: Entry, entry_id: str, rel_path: str) -> Entry | None:
    """Under the lock, in the append's transaction: the entry of *entry*'s agent and client_key (indexed as *entry_id* at *rel_path*), if its file still holds it.

    The files decide: when that file was deleted, or is no longer a
    readable entry of this agent with this key (truncated, replaced), no
    entry holds the key, so its stale row is dropped and the key is free
    again; the append then stores a new entry, and a warning names the file
    as a read scoped to the agent would (never another agent's entry).
    """
    client_key, agent = entry.client_key, entry.agent
    try:
        check_entry_path(rel_path)
        earlier = load_entry(keeper.store, rel_path)
    except FileNotFoundError:
        reason = "the entry file is missing"
    except (EntryFileError, UnsafePathError) as exc:
        reason = shown_reason(exc, agent)
    else:
        if earlier.client_key == client_key and earlier.agent == agent:
            return earlier
        reason = ANOTHER_AGENTS_ENTRY if earlier.agent != agent else f"it no longer holds client_key {client_key!r}"
    shown = shown_path(rel_path, entry_id, agent)
    log.warning("client_key %r was indexed for %s, but %s; the key is free again and a new entry is stored", client_key, shown, reason)
    keeper.note_skipped(SkippedFile(shown, reason))
    keeper.index.delete_entry(conn, entry_id)
    return None


def _undo_bump(keeper: IndexKeeper) -> None:
    """Take back this append's counter bump; if even that fails, the counter stays ahead (safe: the next open checks the files)."""
    with contextlib.suppress(OSError):
        keeper.lock.undo_bump()


def _end_transaction(keeper: IndexKeeper) -> None:
    """Roll back the open write transaction, if any; a connection that cannot is closed (it reopens when needed)."""
    try:
        keeper.index.rollback()
    except Exception:  # noqa: BLE001 - a failing disk must not mask the error being raised
        keeper.index.close()


def _stored_unindexed(keeper: IndexKeeper, entry: Entry, exc: Exception) -> Entry | None:
    """Under the lock, when the index cannot be caught up (*exc*): the stored entry with *entry*'s client_key, if any.

    The files decide: a retry of an append whose entry file was published
    while the index commit failed (a full disk) finds its entry among the
    files the index lacks, and gets it back instead of an error. Nothing
    else can be appended until the index is caught up.
    """
    problem = storage_error(exc, keeper.root, "catch up the index at", index_path=keeper.index.path)
    if entry.client_key is None or problem is None:
        return None
    indexed = keeper.index.paths()
    fresh = load_many(keeper.store, sorted(set(scan(keeper.store, lambda item: None)) - indexed.keys()), lambda item: None)
    found = next(
        (stored for _, stored in sorted(fresh.items()) if (stored.agent, stored.client_key) == (entry.agent, entry.client_key)), None
    )
    if found is not None:
        log.warning(
            "entry %s with client_key %r is stored, but the index could not catch up with it: %s", found.id, entry.client_key, problem
        )
    return found


def _index_problem(keeper: IndexKeeper, exc: Exception) -> object | None:
    """After a failed index commit of published files: None once a corrupt index is rebuilt (which takes them in), else what to report."""
    _end_transaction(keeper)
    if isinstance(exc, IndexCorruptError):
        log.warning("index %s is corrupt (%s); rebuilding it from the entry files", keeper.index.path, exc)
        try:
            keeper.rebuild_locked(corrupt=True)
        except Exception as rebuild_failure:  # noqa: BLE001 - the entries are stored either way
            exc = rebuild_failure
        else:
            return None
    return storage_error(exc, keeper.index.path, "commit the index", index_path=keeper.index.path) or exc


def _index_fell_behind(keeper: IndexKeeper, entry: Entry, exc: Exception) -> None:
    """The entry file is published but the index commit failed: warn, and leave the index to be caught up.

    The writer lock's generation was bumped before the publish and the
    index kept its old one, so the next open or append indexes the file
    (a retry with the same client_key then finds it). A corrupt index is
    rebuilt at once, which takes the entry in; letting the read-retry of
    :func:`journal.sync._keeper.writing` call append again would store it twice.
    """
    rel_path = EntryStore.rel_path_for(entry)
    problem = _index_problem(keeper, exc)
    if problem is None:
        return
    log.warning(
        "entry %s is stored in entries/%s, but the index could not record it: %s; the next open or append catches the index up",
        entry.id,
        rel_path,
        problem,
    )
