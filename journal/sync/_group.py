"""Appending a group of entries at once: each checked as an append checks it, all published with one index transaction.

An append pays for its durability one entry at a time: its file's fsync,
its directory's fsync, an index commit. A group pays for them once, in the
same order, so every promise of :mod:`journal.sync._append` holds for each
of its entries:

1. Under the writer lock, in one write transaction, each entry is checked
   as an append checks it (its client_key, its id, its links) and its rows
   are staged. The checks see the rows staged before them, so a group
   answers as the same appends one after another would: a second entry of
   one client_key gets the first back as a duplicate, a second of one id is
   a :class:`DuplicateEntryError`, a link to an earlier entry of the group
   is a link to an existing entry.
   Each entry staged is meanwhile written to its unnamed temporary file by
   helper threads (:mod:`journal.sync._writes`): making files is the dearest
   step, and it overlaps with the index work of the entries after it.
2. The lock's generation is bumped once (so a crash from here on is noticed
   by the next writer), and the files are fsynced together
   (:meth:`EntryStore.sync_temp`).
3. Only then is each file given its name, and each day directory fsynced
   once: no name ever points at bytes not yet on the disk.
   Steps 2 and 3 come every :data:`FILES_AT_ONCE` files as well (the first
   time alone bumps the generation), so a group of any size holds no more
   descriptors than that, and pays one index commit.
4. Only then do the rows commit: **the index is never ahead of the files.**

A crash anywhere leaves some of the group's files published and none of its
rows committed; the next writer indexes those files (the generation moved),
so a rerun of the same appends finds each one stored as a duplicate.
"""

from __future__ import annotations

import concurrent.futures
import logging
import resource
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

from journal.errors import DuplicateEntryError, EntryValidationError
from journal.files import storage_errors
from journal.files.entry import Entry
from journal.files.store import EntryStore, PendingEntry
from journal.sync._append import AppendResult, _check_links, _earlier_for_key, _end_transaction, _index_problem, _undo_bump
from journal.sync._keeper import IndexKeeper
from journal.sync._known import GroupKnown
from journal.sync._writes import GroupWrites

__all__ = ["FILES_AT_ONCE", "GroupOutcome", "append_group"]

log = logging.getLogger("journal")

#: What one payload of a group came to: stored or found stored (an AppendResult), or refused as an append refuses it.
GroupOutcome = AppendResult | DuplicateEntryError | EntryValidationError


def _files_at_once() -> int:
    """How many new entry files a group holds open at once: each holds a descriptor until it is named, so a quarter of the
    process's descriptors (256 under the usual limit of 1024), and never more than 1024, whatever the size of the group."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(64, min(1024, soft // 4))


#: How many entry files of a group are written, fsynced and named together (see _files_at_once).
FILES_AT_ONCE: Final = _files_at_once()


def append_group(keeper: IndexKeeper, payloads: Sequence[Mapping[str, Any] | Entry]) -> list[GroupOutcome]:
    """Validate and durably store *payloads* as :func:`journal.sync._append.append` would one after another; one outcome each.

    An :class:`Entry` is taken as it is (:meth:`Entry.from_payload` validated it), with the id it holds.

    A payload an append would refuse (invalid, an id already held, a link to
    no entry of its agent) is refused alone, its error as its outcome, and the
    others are stored. A failure of the disk or the index raises, as an
    append's does: what was published before it is found by the next writer.
    A group of any size holds at most :data:`FILES_AT_ONCE` files open: its
    files are named that many at a time, all before its one index commit.
    """
    outcomes: list[GroupOutcome | None] = [None] * len(payloads)
    entries: list[tuple[int, Entry]] = []
    supplied_id = [isinstance(payload, Entry) or "id" in payload for payload in payloads]
    for position, payload in enumerate(payloads):
        try:
            entries.append((position, payload if isinstance(payload, Entry) else Entry.from_payload(payload)))
        except EntryValidationError as exc:
            outcomes[position] = exc
    semantic = keeper.semantic
    vectors: dict[int, bytes | concurrent.futures.Future[bytes]] = {}
    if semantic is not None:  # embedded before the lock is taken, as an append's is
        for position, entry in entries:
            behind = semantic.embed_behind(entry)
            vectors[position] = behind if behind is not None else semantic.embed_entry(entry)
    stored: list[tuple[int, Entry]] = []
    with keeper.lock:
        keeper.sync_locked()
        with keeper.index.group_cache():  # its rows go into trees far larger than SQLite's default cache
            conn = keeper.index.begin()
            try:
                known = GroupKnown(keeper.index, (entry for _, entry in entries))
                rows = _StagedRows(keeper, conn)
                generation: tuple[int, str] | None = None  # the counter and its file's stamp the group's rows record
                writes = GroupWrites(keeper.store)
                try:
                    for position, entry in entries:
                        outcome = _stage(
                            keeper, rows, writes, entry, has_id=supplied_id[position], vector=vectors.get(position), known=known
                        )
                        outcomes[position] = outcome
                        if isinstance(outcome, AppendResult) and not outcome.is_duplicate:
                            stored.append((position, entry))
                            with storage_errors(keeper.store.entries_dir, "write new entry files in"):
                                writes.write(entry)  # its unnamed file is made while the next entries are checked (a new day directory now)
                            if len(writes) == FILES_AT_ONCE:  # named now, so that no group holds more descriptors than this
                                rows.write()
                                generation = _publish(keeper, conn, writes, generation)
                                writes.close()
                                writes = GroupWrites(keeper.store)
                    rows.write()
                    if len(writes):
                        generation = _publish(keeper, conn, writes, generation)
                finally:
                    writes.close()
                if generation is None:
                    return _settled(outcomes)
                try:
                    keeper.index.commit()
                except Exception as exc:  # noqa: BLE001 - the files are stored: reported, and the index caught up later
                    _group_fell_behind(keeper, len(stored), exc)
                    return _settled(outcomes)
            finally:
                _end_transaction(keeper)
        keeper.note_caught_up(*generation)
    if semantic is not None:
        for position, entry in stored:
            vector = vectors[position]
            if isinstance(vector, concurrent.futures.Future):
                semantic.pend(entry.id, vector)
    return _settled(outcomes)


def _settled(outcomes: list[GroupOutcome | None]) -> list[GroupOutcome]:
    settled = [outcome for outcome in outcomes if outcome is not None]
    assert len(settled) == len(outcomes)  # noqa: S101 - every payload was answered
    return settled


class _StagedRows:
    """The rows of the entries a group has checked, written to the group's transaction a batch at a time (see :meth:`Index.insert_entries`).

    Each batch is written before its files are named, and before anything that reads or changes the index by
    rowid or by the staged entries' rows: a stale row dropped, a vector stored.
    """

    def __init__(self, keeper: IndexKeeper, conn: sqlite3.Connection) -> None:
        self._index = keeper.index
        self._conn = conn
        self._rows: list[tuple[Entry, str]] = []

    def add(self, entry: Entry, rel_path: str) -> None:
        self._rows.append((entry, rel_path))

    def write(self) -> None:
        """Write the rows added since the last write."""
        if self._rows:
            self._index.insert_entries(self._conn, self._rows)
            self._rows = []

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn


def _stage(
    keeper: IndexKeeper,
    rows: _StagedRows,
    writes: GroupWrites,
    entry: Entry,
    *,
    has_id: bool,
    vector: bytes | concurrent.futures.Future[bytes] | None,
    known: GroupKnown,
) -> GroupOutcome:
    """Under the lock, in the group's transaction: check *entry* as an append does and add its rows to *rows*, or say why not.

    The index is asked only what *known* cannot answer (see :mod:`journal.sync._known`); what the group staged, *known* answers itself."""
    index = keeper.index
    if entry.client_key is not None:
        earlier = known.staged_for_key(entry.agent, entry.client_key)
        if earlier is not None:
            return AppendResult(earlier, is_duplicate=True)
        existing = index.client_key_entry(entry.client_key, entry.agent) if known.may_hold_key(entry.agent, entry.client_key) else None
        if existing is not None:
            rows.write()  # a stale row may be dropped: the rowids after it are given as single appends would give them
            earlier = _earlier_for_key(keeper, rows.conn, entry, *existing)
            if earlier is None:
                known.dropped()
            else:
                return AppendResult(earlier, is_duplicate=True)
    rel_path = EntryStore.rel_path_for(entry)
    if has_id and (
        known.staged_entry(entry.id) is not None
        or (known.may_hold_id(entry.id) and index.find_id(entry.id) is not None)
        or writes.named(rel_path)
    ):
        # A file at the name the index does not hold would make the publish fail: refused now, as that publish is.
        return DuplicateEntryError(entry.id)
    try:
        _check_links(keeper, entry, known.agent_of)
    except EntryValidationError as exc:
        return exc
    rows.add(entry, rel_path)
    known.staged(entry)
    if isinstance(vector, bytes):
        assert keeper.semantic is not None  # noqa: S101 - narrows the type: a vector is only computed with a semantic index
        rows.write()  # the vector is stored against the entry's row, and pairs it by meaning with the rows before it
        keeper.semantic.insert(rows.conn, entry.id, vector)
    return AppendResult(entry, is_duplicate=False)


def _publish(keeper: IndexKeeper, conn: sqlite3.Connection, writes: GroupWrites, generation: tuple[int, str] | None) -> tuple[int, str]:
    """Once every file of *writes* is written, fsync them together, then name them and fsync each day directory once; the
    generation the group's rows record (with the counter file's stamp), bumped before the group's first name (*generation* None)
    and kept for the next.

    Until a name is given, a failure leaves nothing of these files (those not
    written or not taken are *writes*' to discard; the group's first bump is
    taken back); the names given, by now or before, stay for the next writer to index.
    """
    store = keeper.store
    first = generation is None
    if generation is None:
        generation = (keeper.lock.bump_generation(durable=keeper.boot_id is None), keeper.lock.stamp())
        keeper.note_write_begun()
        keeper.index.set_generation(conn, *generation)
    pending: list[PendingEntry] = []
    with storage_errors(store.entries_dir, "write new entry files in"):
        try:
            pending = writes.pending()
            store.sync_temp(pending)
        except BaseException:
            for item in pending:
                store.discard(item)
            if first:
                _undo_bump(keeper)  # nothing was published: the counter stays as it was
            raise
        for done, item in enumerate(pending):
            try:
                store.publish(item, durable=False)
            except BaseException as exc:
                for rest in pending[done + 1 :]:
                    store.discard(rest)
                if isinstance(exc, FileExistsError):  # a file made meanwhile by hand: the lock keeps every writer out
                    raise DuplicateEntryError(item.entry.id) from None
                raise
        store.sync_dirs(item.rel_path for item in pending)
    return generation


def _group_fell_behind(keeper: IndexKeeper, count: int, exc: Exception) -> None:
    """The group's files are published but its index commit failed: warn, and leave the index to be caught up (see _index_fell_behind)."""
    problem = _index_problem(keeper, exc)
    if problem is None:
        return
    log.warning(
        "%d entries are stored in entries/, but the index could not record them: %s; the next open or append catches the index up",
        count,
        problem,
    )
