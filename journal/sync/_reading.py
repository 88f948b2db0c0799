"""Entries as their files hold them: loading, scanning, and the check a read makes of each index row.

The index chooses the candidates, but the files have the last word. A row
whose file is gone or no longer an entry is skipped (and dropped from the
index when the writer lock is free); a file that holds another id, agent,
kind or time than the read asked for (a hand-edited or foreign file, a
restored index) is skipped and reported, so a read scoped to one agent never
returns another agent's entry.

Nor does it name one. What a read scoped to an agent reports of a file
(its warnings, :attr:`journal.Journal.skipped`, its errors) goes through
:func:`shown_path` and :func:`shown_reason`: a file holding another agent's
entry is "an entry of another agent", and a path is shown only when it is
named after the row's own id, so no id, time, client_key or path of another
agent's entry comes out.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from journal.errors import EntryFileError, EntryNotFoundError, EntryValidationError, UnsafePathError
from journal.files import WriteLock, storage_error
from journal.files.entry import Entry, check_entry_id, check_text_arguments, entry_from_json_bytes, utc_key
from journal.files.store import EntryStore, ScanProblem, check_entry_path
from journal.indexing import Scope, bound, cutoff, positive, shown_key
from journal.indexing.digest import Digest, compute_digest, row_of_entry
from journal.indexing.index import Index, IndexRow, Window

__all__ = [
    "ANOTHER_AGENTS_ENTRY",
    "MAX_LIMIT",
    "Reader",
    "SkippedFile",
    "first_of_each",
    "load_entry",
    "load_many",
    "scan",
    "shown_path",
    "shown_reason",
]

log = logging.getLogger("journal")

#: What a report scoped to one agent says of a file holding another agent's entry, instead of its id, time or path.
ANOTHER_AGENTS_ENTRY: Final = "it holds an entry of another agent"

#: Largest ``limit`` of list (SQLite's LIMIT is a 64-bit integer; an export of more pages by since/until).
MAX_LIMIT: Final = 1_000_000_000


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file under ``entries/`` that a rebuild left out, and why. It is never touched.

    ``first``: for a file left out as a duplicate, the path (below ``entries/``) of the file that holds the id or key first.
    """

    path: str
    reason: str
    first: str | None = None


def shown_path(rel_path: str, entry_id: str, agent: str | None) -> str:
    """How a report scoped to *agent* names the file at *rel_path* that the index row of *entry_id* points at.

    An entry file is named after its entry's date and id, so a row pointing at
    another entry's file (a restored or hand-edited index) would name that
    entry. Scoped, a path is shown only when its file name is the row's own
    id; unscoped, always.
    """
    if agent is None or rel_path.rpartition("/")[2] == f"{entry_id}.json":
        return f"entries/{rel_path}"
    return f"the file the index names for entry {entry_id!r}"


def shown_reason(exc: EntryFileError | UnsafePathError, agent: str | None) -> str:
    """Why a file is no usable entry, as a report scoped to *agent* may say it: never the id or time of another agent's entry."""
    if agent is not None and isinstance(exc, EntryFileError) and exc.holder is not None and exc.holder != agent:
        return ANOTHER_AGENTS_ENTRY
    return exc.reason


def report_stale(shown: str, field: str) -> None:
    """Warn of an entry file (*shown* as :func:`shown_path` gives it) that disagrees with its index row in *field*."""
    # Neither value is logged: the other side of the disagreement may be
    # another agent's data, and the path is all an operator needs.
    log.warning("skipped %s: its file disagrees with its index row (%s); run 'ghostjournal reindex'", shown, field)


def load_entry(store: EntryStore, rel_path: str) -> Entry:
    """Read, parse and check the entry file at *rel_path*.

    Raises:
        FileNotFoundError: the file is gone (a race, a stale row).
        UnsafePathError: the path is refused (a symlink, a FIFO).
        EntryFileError: the file is unreadable or not the entry its path names.
        JournalStorageError: this user may not read the file.
    """
    try:
        raw = store.read(rel_path)
    except (FileNotFoundError, UnsafePathError):
        raise  # callers tell "gone" (a race, a stale row) and "refused" from "unreadable"
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            # Not a corrupt file to skip: its entry exists and this user may not read it
            # (root wrote it 0600, say). Skipping would make its data silently disappear.
            path = store.entries_dir / rel_path
            raise storage_error(exc, path, "read the entry file") or exc from None
        raise EntryFileError(f"entries/{rel_path}", f"cannot be read ({exc.strerror})") from None
    try:
        entry = entry_from_json_bytes(raw)
    except EntryValidationError as exc:
        raise EntryFileError(f"entries/{rel_path}", str(exc)) from None
    if EntryStore.rel_path_for(entry) != rel_path:
        raise EntryFileError(
            f"entries/{rel_path}",
            f"holds entry {entry.id!r} of {entry.ts}, which belongs at {EntryStore.rel_path_for(entry)}",
            holder=entry.agent,
        )
    return entry


def scan(store: EntryStore, on_skip: Callable[[SkippedFile], None]) -> list[str]:
    """The relative paths of the entry files; anything else found is reported through *on_skip*."""
    paths = []
    for item in store.scan():
        if isinstance(item, ScanProblem):
            on_skip(SkippedFile(f"entries/{item.path}", item.reason))
        else:
            paths.append(item)
    return paths


def load_many(store: EntryStore, paths: list[str], on_skip: Callable[[SkippedFile], None]) -> dict[str, Entry]:
    """The entries at *paths*; files that are no entry are reported through *on_skip*, vanished ones left out."""
    loaded = {}
    for rel_path in paths:
        try:
            loaded[rel_path] = load_entry(store, rel_path)
        except (EntryFileError, UnsafePathError) as exc:
            on_skip(SkippedFile(f"entries/{rel_path}", exc.reason))
        except FileNotFoundError:
            continue  # gone between listing and reading
    return loaded


def first_of_each(
    loaded: dict[str, Entry], on_skip: Callable[[SkippedFile], None], *, held: Collection[str] = ()
) -> list[tuple[str, Entry]]:
    """The entries a rebuild indexes, by time: one file for each id and for each agent's client_key, the others skipped.

    A client_key is unique per agent: two agents' entries with one key are both indexed.
    Of two files claiming one id or key, the one the index already holds (*held*, paths) wins, as it
    does when the index is kept in step; between files the index does not hold, the earlier by time,
    then path. So a copy made by hand (a new id, the same key) never takes an entry's place: not in a
    rebuild, and not in what verify expects of the index.
    """
    ids: dict[str, str] = {}
    keys: dict[tuple[str, str], str] = {}
    unique = []
    for path, entry in sorted(loaded.items(), key=lambda item: (item[0] not in held, utc_key(item[1].timestamp), item[0])):
        key = None if entry.client_key is None else (entry.agent, entry.client_key)
        if entry.id in ids:
            on_skip(SkippedFile(f"entries/{path}", f"duplicate id {entry.id!r}, first in entries/{ids[entry.id]}", ids[entry.id]))
        elif key is not None and key in keys:
            first = keys[key]
            on_skip(
                SkippedFile(
                    f"entries/{path}",
                    f"duplicate client_key {entry.client_key!r} of agent {entry.agent!r}, first in entries/{first}",
                    first,
                )
            )
        else:
            ids[entry.id] = path
            if key is not None:
                keys[key] = path
            unique.append((path, entry))
    return sorted(unique, key=lambda item: (utc_key(item[1].timestamp), item[0]))


class KeptJournal(Protocol):
    """What a :class:`Reader` reads through and repairs: the entry files, the index, the writer lock, the skipped files.

    The keeper that opens a journal provides these; a reader needs nothing else of it.
    """

    store: EntryStore
    index: Index
    lock: WriteLock

    def note_skipped(self, item: SkippedFile) -> None:
        """Record an indexed entry a read found unusable, once."""


class Reader:
    """The reads that return entries: each index row checked against its file (see the module docstring)."""

    def __init__(self, keeper: KeptJournal) -> None:
        self._keeper = keeper

    def usable(self, row: IndexRow, bad: set[str], scope: Scope | None = None) -> Entry | None:
        """The entry of *row* as its file holds it, or None (reported) when the file is gone, is no entry, or disagrees.

        One deleted or truncated file must not fail every read that touches
        it: a file that is gone or unreadable is not an entry, as a rebuild
        would also find (its row is dropped). *bad* collects the ids skipped.
        """
        if row.id in bad:
            return None
        check_entry_path(row.path)  # a tampered row pointing outside entries/ is an error, never skipped
        agent = None if scope is None else scope.agent
        try:
            entry = load_entry(self._keeper.store, row.path)
        except FileNotFoundError:
            reason = "the entry file is missing"
        except (EntryFileError, UnsafePathError) as exc:
            reason = shown_reason(exc, agent)
        else:
            misfit = "id" if entry.id != row.id else scope.misfit(entry) if scope is not None else None
            if misfit is None and entry.erased is not None and not self._keeper.index.is_tombstone(row.id):
                # An erase stopped between the tombstone and the index: the row is the erased entry's, never shown.
                log.warning("entry %s is erased but its index rows are not yet removed; run the same erase again to finish it", row.id)
                bad.add(row.id)
                return None
            if misfit is None:
                return entry
            bad.add(row.id)
            report_stale(shown_path(row.path, row.id, agent), misfit)
            return None
        bad.add(row.id)
        self.skip_unreadable(row.id, row.path, reason, agent)
        return None

    def skip_unreadable(self, entry_id: str, rel_path: str, reason: str, agent: str | None = None) -> None:
        """Report an indexed entry whose file is gone or unreadable (to a read scoped to *agent*), and drop its row if the lock is free."""
        keeper = self._keeper
        item = SkippedFile(shown_path(rel_path, entry_id, agent), reason)
        log.warning(
            "skipped %s (entry %s): %s; its index row is dropped, restore the file and run 'ghostjournal reindex' to bring it back",
            item.path,
            entry_id,
            reason,
        )
        keeper.note_skipped(item)
        if keeper.index.in_memory:
            with keeper.index.transaction() as conn:
                keeper.index.delete_entry(conn, entry_id)
            return
        # A repair, not a requirement: a reader that cannot write, or a busy
        # writer, leaves the row; the next read skips it again.
        try:
            if not keeper.lock.acquire(blocking=False):
                return
        except OSError:
            return
        try:
            self._drop_if_unreadable(entry_id, rel_path)
        except (OSError, sqlite3.Error):
            pass
        finally:
            keeper.lock.release()

    def _drop_if_unreadable(self, entry_id: str, rel_path: str) -> None:
        """Under the lock: drop *entry_id*'s row if its file at *rel_path* is still gone or no entry."""
        try:
            load_entry(self._keeper.store, rel_path)
        except (FileNotFoundError, EntryFileError, UnsafePathError):
            pass
        else:
            return  # it came back meanwhile
        index = self._keeper.index
        with index.transaction() as conn:
            if index.find_id(entry_id) == rel_path:
                index.delete_entry(conn, entry_id)

    def usable_rows(self, fetch: Callable[[int], Sequence[IndexRow]], limit: int | None, scope: Scope | None = None) -> list[Entry]:
        """Entries of the rows *fetch(extra)* returns, skipping unusable ones and fetching *extra* more to fill *limit*."""
        bad: set[str] = set()
        while True:
            known = len(bad)
            rows = fetch(known)
            found = [entry for row in rows if (entry := self.usable(row, bad, scope)) is not None]
            # Done when nothing was skipped this time, or the window holds no more rows.
            if limit is None or len(found) >= limit or len(bad) == known or len(rows) < limit + known:
                return found if limit is None else found[:limit]

    def get(self, entry_id: str, agent: str | None) -> Entry:
        """The entry with *entry_id*, if both its row and its file say it is *agent*'s (any agent's when None).

        A row of another agent gets exactly the error of a row that does not
        exist, and its file is not even opened, so nothing about it (content,
        corruption, absence) can change the answer. A file that is gone is
        reported (its row dropped) and reads as missing too.
        """
        check_entry_id(entry_id)
        check_text_arguments(agent=agent)
        row = self._keeper.index.row_for(entry_id=entry_id)
        if row is None or (agent is not None and row.agent != agent):
            raise EntryNotFoundError(entry_id)
        check_entry_path(row.path)  # an index row pointing outside entries/ is refused
        try:
            entry = load_entry(self._keeper.store, row.path)
        except FileNotFoundError:
            self.skip_unreadable(row.id, row.path, "the entry file is missing", agent)
            raise EntryNotFoundError(entry_id) from None
        except (EntryFileError, UnsafePathError) as exc:
            if agent is None:
                raise
            raise type(exc)(shown_path(row.path, row.id, agent), shown_reason(exc, agent)) from None
        misfit = "id" if entry.id != row.id else Scope(agent=agent).misfit(entry)
        if misfit is not None:
            report_stale(shown_path(row.path, row.id, agent), misfit)
            raise EntryNotFoundError(entry_id) from None
        return entry

    def find_by_client_key(self, client_key: str, agent: str | None) -> Entry | None:
        """*agent*'s entry appended with *client_key*, or None; without *agent*, the earliest of any agent's holding it."""
        check_text_arguments(client_key=client_key, agent=agent)
        row = self._keeper.index.row_for(client_key=client_key, agent=agent)
        if row is None:
            return None
        entry = self.usable(row, set(), Scope(agent=agent))
        if entry is None:
            return None
        if entry.client_key != client_key:
            report_stale(shown_path(row.path, row.id, agent), "client_key")
            return None
        return entry

    def entries(
        self,
        *,
        kind: str | None,
        agent: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        limit: int | None,
        as_of: datetime | str | None = None,
        current_only: bool = False,
    ) -> list[Entry]:
        """Entries in a window, newest first; rows whose files disagree are skipped, so fewer than *limit* may come back."""
        check_text_arguments(kind=kind, agent=agent)
        if limit is not None:
            positive(limit, "limit", MAX_LIMIT)
        scope = Scope(
            agent=agent, kind=kind, since=bound(since, "since"), until=bound(until, "until"), as_of=cutoff(as_of), current_only=current_only
        )
        index = self._keeper.index
        hidden = set(index.superseded_in(scope.window, before=scope.as_of)) if current_only else set()

        def fetch(extra: int) -> list[IndexRow]:
            rows = index.rows(scope.window, limit=None if limit is None else limit + extra + len(hidden))
            return [row for row in rows if row.id not in hidden]

        return self.usable_rows(fetch, limit, scope)

    def digest(
        self,
        *,
        agent: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        exclude_kinds: Collection[str],
        as_of: datetime | str | None = None,
    ) -> Digest:
        """The digest of a window: from the index alone when unscoped, from the entry files with *agent* given."""
        check_text_arguments(agent=agent)
        index = self._keeper.index
        lower, until_key, as_of_key = bound(since, "since"), bound(until, "until"), cutoff(as_of)
        upper = Scope(until=until_key, as_of=as_of_key).upper
        shown = {"since": lower, "until": until_key, "as_of": shown_key(as_of_key)}
        rows = index.rows(Window(agent=agent, since=lower, until=upper), oldest_first=True)
        if exclude_kinds:
            rows = [row for row in rows if row.kind not in exclude_kinds]
        if agent is None:
            # Unscoped, a digest is computed from the index alone; a cheap lstat of
            # each file keeps entries whose files were deleted or replaced out of it.
            problems = self._keeper.store.check(row.path for row in rows)
            if problems:
                for row in rows:
                    if row.path in problems:
                        self.skip_unreadable(row.id, row.path, problems[row.path], agent)
                rows = [row for row in rows if row.path not in problems]
            ids = [row.id for row in rows]
            return compute_digest(rows, index.links_within(ids), agent=agent, corrections=index.corrections_within(ids), **shown)
        scope = Scope(agent=agent, since=lower, until=upper)
        bad: set[str] = set()
        loaded = [(row.path, entry) for row in rows if (entry := self.usable(row, bad, scope)) is not None]
        loaded.sort(key=lambda item: (utc_key(item[1].timestamp), item[1].id))
        entries = [entry for _, entry in loaded]
        owned = {entry.id for entry in entries}
        outside = sorted({ref for entry in entries for ref in (*entry.continuity_refs, *entry.supersedes)} - owned)
        owner = Scope(agent=agent)
        owned.update(row.id for row in index.rows(Window(agent=agent), ids=outside) if self.usable(row, bad, owner) is not None)
        links = [(entry.id, ref) for entry in entries for ref in dict.fromkeys(entry.continuity_refs) if ref in owned]
        corrections = [(entry.id, ref) for entry in entries for ref in entry.supersedes if ref in owned]
        rows_of_files = [row_of_entry(entry, path) for path, entry in loaded]
        return compute_digest(rows_of_files, links, agent=agent, corrections=corrections, **shown)
