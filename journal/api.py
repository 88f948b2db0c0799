"""The Journal facade: composes entry files, the writer lock, the index and retrieval."""

from __future__ import annotations

import errno
import functools
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

from journal._lock import WriteLock, current_boot_id
from journal._manifest import Manifest, create_manifest, load_manifest
from journal._safefs import journal_owner, make_dir
from journal.embed import DEFAULT_MODEL, Encoder
from journal.entry import Entry, check_entry_id, entry_from_json_bytes, parse_timestamp, utc_key
from journal.errors import (
    DuplicateEntryError,
    EntryFileError,
    EntryNotFoundError,
    EntryValidationError,
    JournalNotFoundError,
    ReadOnlyJournalError,
    SemanticUnavailableError,
    UnsafePathError,
)
from journal.fusion import FUSION, fuse
from journal.index import INDEX_SCHEMA_VERSION, Index, IndexCorruptError, IndexRow, IndexState
from journal.retrieval import Digest, Hit, compute_digest, render_prompt_context
from journal.store import EntryStore, ScanProblem, check_entry_path

if TYPE_CHECKING:
    from journal.semantic import SemanticIndex

__all__ = ["MODES", "AppendResult", "Journal", "SkippedFile"]

log = logging.getLogger("journal")

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_CONTEXT_CHARS: Final = 6000
#: Ranking modes: ``auto`` is ``hybrid`` with NN on and ``lexical`` without.
MODES: Final = ("auto", "lexical", "semantic", "hybrid")
_SNIPPET_WORDS: Final = 24


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: the stored entry, and whether it already existed."""

    entry: Entry
    is_duplicate: bool


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file under ``entries/`` that a rebuild left out, and why. It is never touched."""

    path: str
    reason: str


def _recovering(method: Callable[Concatenate[Journal, P], R]) -> Callable[Concatenate[Journal, P], R]:
    """Rebuild a corrupt index from the entry files and retry the call once."""

    @functools.wraps(method)
    def wrapper(self: Journal, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except IndexCorruptError as exc:
            log.warning("index %s is corrupt (%s); rebuilding it from the entry files", self._index.path, exc)
            with self._lock:
                self._rebuild_locked(corrupt=True)
            return method(self, *args, **kwargs)

    return wrapper


def _bound(value: datetime | str | None, name: str) -> str | None:
    """A since/until bound as a sortable UTC key; naive times are refused."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_timestamp(value, name)
        except EntryValidationError as exc:
            raise ValueError(f"{name} must be an ISO 8601 time with a timezone, got {value!r}") from exc
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime or ISO 8601 string, got {value!r}")
    return utc_key(value)


def _positive(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _preview(text: str) -> str:
    """The first words of *text*, as a snippet for an entry found by meaning alone."""
    words = text.split()
    return " ".join(words[:_SNIPPET_WORDS]) + ("…" if len(words) > _SNIPPET_WORDS else "")


def _is_access_error(exc: BaseException) -> bool:
    """True for "this process may not write (or create) the index here", as opposed to any other failure."""
    if isinstance(exc, UnsafePathError):
        return False
    if isinstance(exc, OSError):
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _ensure_dir(path: Path, *, create: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not create:
            raise
        path.mkdir(mode=0o700, exist_ok=True)
        mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise UnsafePathError(path, "a symlink where the journal expects a directory")
    if not stat.S_ISDIR(mode):
        raise UnsafePathError(path, "not a directory")


class Journal:
    """A journal rooted at a directory: immutable entry files plus a derived index.

    Opening a journal repairs its index when needed: a missing, corrupt or
    outdated index is rebuilt from the entry files, and entries published
    by an interrupted append are indexed.

    Args:
        root: the journal directory (created with a new manifest if missing,
            unless *create* is false). A root that is a symlink is refused.
        enable_nn: embed entries and rank by meaning as well as words. Loads
            the model (never from the network); entries lacking a vector from
            it are embedded on open. Without it, torch is never imported.
        create: create a missing journal instead of raising JournalNotFoundError.
        lock_timeout: seconds an append waits for the writer lock.
        model: with NN, a model name (found offline, see
            :func:`journal.embed.resolve_model`) or a local model directory.
        device: with NN, the torch device for the model.
        encoder: with NN, an :class:`~journal.embed.Encoder` to use instead
            of loading *model*.
        on_progress: with NN, called with ``(done, total)`` while missing
            vectors are embedded on open.

    Raises:
        SemanticUnavailableError: NN asked for without the ``nn`` extra.
        ModelNotFoundError: NN asked for and no local copy of the model.
    """

    def __init__(
        self, root: str | os.PathLike[str], enable_nn: bool = False, *, create: bool = True, lock_timeout: float = 60.0,
        model: str | os.PathLike[str] = DEFAULT_MODEL, device: str = "cpu", encoder: Encoder | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if encoder is not None and not enable_nn:
            raise ValueError("encoder= is used only with enable_nn=True")
        self._semantic: SemanticIndex | None = None
        if enable_nn:
            encoder = encoder or self._load_encoder(model, device)
        self.root = Path(root)
        manifest_path = self.root / "manifest.json"
        try:
            _ensure_dir(self.root, create=False)
        except FileNotFoundError:
            if not create:
                raise JournalNotFoundError(self.root) from None
            self.root.parent.mkdir(parents=True, exist_ok=True)
            make_dir(self.root, "the journal root", None)
        # Root repairing a service user's journal creates everything as that user.
        owner = journal_owner(self.root)
        if os.path.lexists(manifest_path):
            self.manifest: Manifest = load_manifest(manifest_path)
        elif create:
            self.manifest = create_manifest(manifest_path, owner=owner)
        else:
            raise JournalNotFoundError(self.root)
        # A reader without write access must still read: what it cannot
        # create (a deleted index/, say) is done without in memory.
        missing_index = False
        for name in ("entries", "index", "models"):
            try:
                make_dir(self.root / name, f"{name}/", owner)
            except PermissionError as exc:
                if exc.__class__ is not PermissionError or name == "entries":
                    raise
                missing_index = missing_index or name == "index"
            except OSError as exc:
                if exc.errno != errno.EROFS or name == "entries":
                    raise
                missing_index = missing_index or name == "index"
        self._lock = WriteLock(self.root / ".write.lock", timeout=lock_timeout, counter=self.root / "entries" / ".generation", owner=owner)
        self._store = EntryStore(self.root / "entries", owner=owner)
        self._index = Index(self.root / "index" / "journal.sqlite3", owner=owner, in_memory=missing_index)
        self.skipped: list[SkippedFile] = []
        self._boot_id = current_boot_id()
        # The lock generation this object last saw the index caught up with.
        self._caught_up: int | None = None
        self._read_only: str | None = None  # why this object may only read, once it found it may not write
        if missing_index:
            self._open_in_memory("index/ is missing and cannot be created")
        else:
            try:
                self._open_index()
            except (OSError, sqlite3.OperationalError) as exc:
                if not _is_access_error(exc):
                    raise
                self._open_in_memory(str(exc))
        if encoder is not None:
            from journal.semantic import SemanticIndex  # numpy only with NN on

            self._semantic = SemanticIndex(self._index, encoder)
            self._semantic.fill(on_progress=on_progress)

    @staticmethod
    def _load_encoder(model: str | os.PathLike[str], device: str) -> Encoder:
        from journal.embed import SentenceTransformerEncoder

        return SentenceTransformerEncoder(model, device=device)

    @property
    def encoder(self) -> Encoder | None:
        """The encoder in use, or None when NN is off."""
        return None if self._semantic is None else self._semantic.encoder

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Release the index connection, the lock file and directory handles."""
        self._index.close()
        self._store.close()
        self._lock.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Journal({str(self.root)!r})"

    # -- keeping the index in step with the files -----------------------------------

    def _index_state(self) -> IndexState | None:
        """The index's state; None when unbuilt, schema_version -1 when corrupt."""
        try:
            return self._index.state()
        except IndexCorruptError:
            return IndexState(-1, -1, "")

    @staticmethod
    def _is_corrupt(state: IndexState | None) -> bool:
        return state is not None and state.schema_version == -1

    @staticmethod
    def _needs_rebuild(state: IndexState | None) -> bool:
        return state is None or state.schema_version != INDEX_SCHEMA_VERSION

    def _is_behind(self, state: IndexState) -> bool:
        """True when files may exist that the index lacks (see journal._lock)."""
        return state.generation != self._lock.read_generation() or (self._boot_id is not None and state.boot_id != self._boot_id)

    def _open_index(self) -> None:
        state = self._index_state()
        if self._needs_rebuild(state):
            with self._lock:
                state = self._index_state()
                if self._needs_rebuild(state):
                    self._rebuild_locked(corrupt=self._is_corrupt(state))
            return
        assert state is not None
        if self._is_behind(state) and self._lock.acquire(blocking=False):
            # A busy lock means a writer is active; it catches the index up itself.
            try:
                self._sync_locked()
            finally:
                self._lock.release()

    def _open_in_memory(self, reason: str) -> None:
        """Read every entry file into a private in-memory index, writing nothing.

        For a reader that may not write to the journal (another user, a
        read-only filesystem): the on-disk index could not be used or
        repaired. Such a journal object reads, and refuses appends.
        """
        log.warning(
            "journal %s is not writable here (%s); reading the entry files into an in-memory index, writing nothing. "
            "Read as the journal's owner to use index/ (and rebuild it if missing)",
            self.root, reason,
        )
        self._read_only = reason
        self._index.close()
        self._index = Index(self._index.path, in_memory=True)
        skipped: list[SkippedFile] = []
        loaded = self._load_many(self._scan(skipped.append), skipped.append)
        unique = self._first_of_each(loaded, skipped.append)
        self._index.rebuild(((entry, path) for path, entry in unique), max(self._lock.read_generation(), 0), self._boot_id or "")
        for item in skipped:
            log.warning("skipped %s: %s", item.path, item.reason)
        self.skipped = skipped

    def _sync_locked(self) -> None:
        """Under the lock: index whatever the files hold that the index lacks."""
        # The common case costs one pread: nobody wrote since this object last
        # saw the index caught up with the lock's generation.
        if self._caught_up is not None and self._caught_up == self._lock.read_generation():
            return
        state = self._index_state()
        if self._needs_rebuild(state):
            self._rebuild_locked(corrupt=self._is_corrupt(state))
        elif state is not None and self._is_behind(state):
            self._reconcile_locked(self._generation_locked())
        else:
            self._caught_up = state.generation if state is not None else None

    def _generation_locked(self) -> int:
        generation = self._lock.read_generation()
        return generation if generation >= 0 else self._lock.bump_generation()

    def _load(self, rel_path: str) -> Entry:
        """Read, parse and check the entry file at *rel_path*."""
        try:
            raw = self._store.read(rel_path)
        except (FileNotFoundError, UnsafePathError):
            raise  # callers tell "gone" (a race, a stale row) and "refused" from "unreadable"
        except OSError as exc:
            raise EntryFileError(f"entries/{rel_path}", f"cannot be read ({exc.strerror})") from None
        try:
            entry = entry_from_json_bytes(raw)
        except EntryValidationError as exc:
            raise EntryFileError(f"entries/{rel_path}", str(exc)) from None
        if EntryStore.rel_path_for(entry) != rel_path:
            raise EntryFileError(f"entries/{rel_path}", f"holds entry {entry.id!r} of {entry.ts}, which belongs at {EntryStore.rel_path_for(entry)}")
        return entry

    def _scan(self, on_skip: Callable[[SkippedFile], None]) -> list[str]:
        paths = []
        for item in self._store.scan():
            if isinstance(item, ScanProblem):
                on_skip(SkippedFile(f"entries/{item.path}", item.reason))
            else:
                paths.append(item)
        return paths

    def _load_many(self, paths: list[str], on_skip: Callable[[SkippedFile], None]) -> dict[str, Entry]:
        loaded = {}
        for rel_path in paths:
            try:
                loaded[rel_path] = self._load(rel_path)
            except (EntryFileError, UnsafePathError) as exc:
                on_skip(SkippedFile(f"entries/{rel_path}", getattr(exc, "reason", str(exc))))
            except FileNotFoundError:
                continue  # gone between listing and reading
        return loaded

    def _rebuild_locked(self, *, corrupt: bool, preloaded: dict[str, Entry] | None = None, on_skip: Callable[[SkippedFile], None] | None = None) -> int:
        """Under the lock: rebuild every table from the entry files."""
        skipped: list[SkippedFile] = []
        report = on_skip or skipped.append
        if corrupt:
            self._index.remove_files()
        paths = self._scan(report)
        present = set(paths)
        loaded = {p: e for p, e in (preloaded or {}).items() if p in present}
        loaded.update(self._load_many([p for p in paths if p not in loaded], report))
        unique = self._first_of_each(loaded, report)
        generation = self._generation_locked()
        count = self._index.rebuild(((entry, path) for path, entry in unique), generation, self._boot_id or "")
        self._caught_up = generation
        self._store.remove_temp_files()
        for item in skipped:
            log.warning("skipped %s: %s", item.path, item.reason)
        self.skipped = skipped if on_skip is None else self.skipped
        return count

    @staticmethod
    def _first_of_each(loaded: dict[str, Entry], on_skip: Callable[[SkippedFile], None]) -> list[tuple[str, Entry]]:
        """Order by time; the first file wins each id and client_key, the rest are skipped."""
        ids: dict[str, str] = {}
        keys: dict[str, str] = {}
        unique = []
        for path, entry in sorted(loaded.items(), key=lambda item: (utc_key(item[1].timestamp), item[0])):
            if entry.id in ids:
                on_skip(SkippedFile(f"entries/{path}", f"duplicate id {entry.id!r}, first in entries/{ids[entry.id]}"))
            elif entry.client_key is not None and entry.client_key in keys:
                on_skip(SkippedFile(f"entries/{path}", f"duplicate client_key {entry.client_key!r}, first in entries/{keys[entry.client_key]}"))
            else:
                ids[entry.id] = path
                if entry.client_key is not None:
                    keys[entry.client_key] = path
                unique.append((path, entry))
        return unique

    def _reconcile_locked(self, generation: int) -> None:
        """Under the lock: index files the index lacks, drop rows whose files are gone."""
        indexed = self._index.paths()
        on_disk = set(self._scan(lambda item: None))
        gone = [indexed[p] for p in indexed.keys() - on_disk]
        fresh = self._load_many(sorted(on_disk - indexed.keys()), lambda item: log.warning("skipped %s: %s", item.path, item.reason))
        with self._index.transaction() as conn:
            for entry_id in gone:
                self._index.delete_entry(conn, entry_id)
            for path, entry in sorted(fresh.items(), key=lambda item: (utc_key(item[1].timestamp), item[0])):
                if self._index.find_id(entry.id) or (entry.client_key and self._index.find_client_key(entry.client_key)):
                    log.warning("skipped entries/%s: its id or client_key is already indexed", path)
                    continue
                self._index.insert_entry(conn, entry, path)
            self._index.set_generation(conn, generation, self._boot_id or "")
        self._caught_up = generation
        self._store.remove_temp_files()

    # -- writing -------------------------------------------------------------------

    def append(self, payload: Mapping[str, Any]) -> Entry:
        """Validate and durably store one entry; return it (or the earlier one with its client_key).

        Raises:
            EntryValidationError: the payload breaks schema v1; nothing is written.
            DuplicateEntryError: a supplied ``id`` already exists.
            LockTimeoutError: another writer held the lock too long.
        """
        return self.append_with_result(payload).entry

    @_recovering
    def append_with_result(self, payload: Mapping[str, Any]) -> AppendResult:
        """Like :meth:`append`, also telling whether the client_key already existed."""
        entry = Entry.from_payload(payload)
        if self._read_only is not None:
            raise ReadOnlyJournalError(self.root, self._read_only)
        # Embedded before the lock is taken, so other writers do not wait on the model.
        vector = self._semantic.embed_entry(entry) if self._semantic is not None else None
        with self._lock:
            self._sync_locked()
            # One write transaction from the duplicate checks to the commit: the
            # checks need no read transaction of their own, and the writer lock
            # keeps other writers out while the file is fsynced anyway.
            conn = self._index.begin()
            try:
                if entry.client_key is not None:
                    existing = self._index.find_client_key(entry.client_key)
                    if existing is not None:
                        earlier = self._earlier_for_key(conn, entry.client_key, existing)
                        if earlier is not None:
                            return AppendResult(earlier, is_duplicate=True)
                # A generated UUID4 cannot collide; only a supplied id needs the lookup.
                if "id" in payload and self._index.find_id(entry.id) is not None:
                    raise DuplicateEntryError(entry.id)
                # Bumped first, so that even a crash right after the temp write is
                # noticed by the next writer, which then clears the temp file away.
                generation = self._lock.bump_generation(durable=self._boot_id is None)
                self._caught_up = None  # until the commit lands

                def stage_rows() -> None:
                    self._index.insert_entry(conn, entry, EntryStore.rel_path_for(entry))
                    if vector is not None:
                        assert self._semantic is not None
                        self._index.insert_vector(conn, entry.id, self._semantic.model, vector)
                    self._index.set_generation(conn, generation)

                # The rows are staged while the entry file is fsynced, and
                # committed only once its name exists, while the directory is
                # fsynced: a crash before the commit leaves the index behind
                # the files (caught up by the next writer), never ahead.
                pending = self._store.write_temp(entry, meanwhile=stage_rows)
                try:
                    self._store.publish(pending, meanwhile=self._index.commit)
                except FileExistsError:
                    raise DuplicateEntryError(entry.id) from None
                except IndexCorruptError as exc:
                    # The entry is published: a rebuild takes it in. Letting
                    # @_recovering call append again would store it twice.
                    log.warning("index %s is corrupt (%s); rebuilding it from the entry files", self._index.path, exc)
                    self._rebuild_locked(corrupt=True)
                    return AppendResult(entry, is_duplicate=False)
            finally:
                self._index.rollback()  # nothing to undo after the commit
            self._caught_up = generation
        return AppendResult(entry, is_duplicate=False)

    def _earlier_for_key(self, conn: sqlite3.Connection, client_key: str, rel_path: str) -> Entry | None:
        """Under the lock, in the append's transaction: the entry *client_key* is indexed for, if its file still holds it.

        The files decide: when that file was deleted, or is no longer a
        readable entry with this key (truncated, replaced), no entry holds the
        key, so its stale row is dropped and the key is free again; the append
        then stores a new entry, and a warning names the file.
        """
        try:
            check_entry_path(rel_path)
            earlier = self._load(rel_path)
        except FileNotFoundError:
            reason = "the entry file is missing"
        except (EntryFileError, UnsafePathError) as exc:
            reason = exc.reason
        else:
            if earlier.client_key == client_key:
                return earlier
            reason = f"it no longer holds client_key {client_key!r}"
        found = self._index.client_key_entry(client_key)
        assert found is not None  # the caller just found it, in this transaction
        log.warning(
            "client_key %r was indexed for entries/%s, but %s; the key is free again and a new entry is stored",
            client_key, rel_path, reason,
        )
        item = SkippedFile(f"entries/{rel_path}", reason)
        if item not in self.skipped:
            self.skipped.append(item)
        self._index.delete_entry(conn, found[0])
        return None

    @_recovering
    def reindex(self, *, on_skip: Callable[[SkippedFile], None] | None = None, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the index from the entry files; return how many entries it holds.

        Files that are not valid entries (foreign, corrupt, symlinks, duplicates)
        are reported through *on_skip* (and in :attr:`skipped`) and left untouched.
        Files are read before the writer lock is taken, so appends wait only
        for the final transaction. With NN on, every entry is then embedded
        again in batches, reported through *on_progress* as ``(done, total)``.
        """
        skipped: list[SkippedFile] = []

        def report(item: SkippedFile) -> None:
            if item not in skipped:
                skipped.append(item)

        preloaded = self._load_many(self._scan(lambda item: None), lambda item: None)
        with self._lock:
            count = self._rebuild_locked(corrupt=self._is_corrupt(self._index_state()), preloaded=preloaded, on_skip=report)
        self.skipped = skipped
        if on_skip is not None:
            for item in skipped:
                on_skip(item)
        if self._semantic is not None:
            self._semantic.fill(on_progress=on_progress)
        return count

    # -- reading -------------------------------------------------------------------

    def _entry_for_row(self, row: IndexRow) -> Entry:
        check_entry_path(row.path)  # an index row pointing outside entries/ is refused
        return self._load(row.path)

    def _usable(self, row: IndexRow, bad: set[str]) -> Entry | None:
        """The entry of *row*, or None (reported, and its row dropped) when its file is gone or is no entry.

        One deleted or truncated file must not fail every read that touches
        it: the files decide, and a file that is gone or unreadable is not an
        entry, as a rebuild would also find. *bad* collects the ids skipped.
        """
        if row.id in bad:
            return None
        check_entry_path(row.path)  # a tampered row pointing outside entries/ is an error, never skipped
        try:
            return self._load(row.path)
        except FileNotFoundError:
            reason = "the entry file is missing"
        except (EntryFileError, UnsafePathError) as exc:
            reason = exc.reason
        bad.add(row.id)
        self._skip_unreadable(row.id, row.path, reason)
        return None

    def _skip_unreadable(self, entry_id: str, rel_path: str, reason: str) -> None:
        """Report an indexed entry whose file is gone or unreadable, and drop its row if the lock is free."""
        item = SkippedFile(f"entries/{rel_path}", reason)
        log.warning(
            "skipped %s (entry %s): %s; its index row is dropped, restore the file and run 'ghostjournal reindex' to bring it back",
            item.path, entry_id, reason,
        )
        if item not in self.skipped:
            self.skipped.append(item)
        if self._index.in_memory:
            with self._index.transaction() as conn:
                self._index.delete_entry(conn, entry_id)
            return
        # A repair, not a requirement: a reader that cannot write, or a busy
        # writer, leaves the row; the next read skips it again.
        try:
            if not self._lock.acquire(blocking=False):
                return
        except OSError:
            return
        try:
            self._drop_if_unreadable(entry_id, rel_path)
        except (OSError, sqlite3.Error):
            pass
        finally:
            self._lock.release()

    def _drop_if_unreadable(self, entry_id: str, rel_path: str) -> None:
        """Under the lock: drop *entry_id*'s row if its file at *rel_path* is still gone or no entry."""
        try:
            self._load(rel_path)
            return  # it came back meanwhile
        except (FileNotFoundError, EntryFileError, UnsafePathError):
            pass
        with self._index.transaction() as conn:
            if self._index.find_id(entry_id) == rel_path:
                self._index.delete_entry(conn, entry_id)

    def _usable_rows(self, fetch: Callable[[int], Sequence[IndexRow]], limit: int | None) -> list[Entry]:
        """Entries of the rows *fetch(extra)* returns, skipping unusable ones and fetching *extra* more to fill *limit*."""
        bad: set[str] = set()
        while True:
            known = len(bad)
            rows = fetch(known)
            found = [entry for row in rows if (entry := self._usable(row, bad)) is not None]
            # Done when nothing was skipped this time, or the window holds no more rows.
            if limit is None or len(found) >= limit or len(bad) == known or len(rows) < limit + known:
                return found if limit is None else found[:limit]

    @_recovering
    def get(self, entry_id: str) -> Entry:
        """Return the entry with *entry_id*.

        Raises:
            InvalidEntryIdError: the id has path, glob or length trouble.
            EntryNotFoundError: no such entry.
        """
        check_entry_id(entry_id)
        path = self._index.find_id(entry_id)
        if path is None:
            raise EntryNotFoundError(entry_id)
        check_entry_path(path)
        try:
            return self._load(path)
        except FileNotFoundError:
            raise EntryNotFoundError(entry_id) from None

    @_recovering
    def find_by_client_key(self, client_key: str) -> Entry | None:
        """The entry appended with *client_key*, or None if there is none."""
        found = self._index.client_key_entry(client_key)
        if found is None:
            return None
        entry_id, path = found
        check_entry_path(path)
        try:
            entry = self._load(path)
        except FileNotFoundError:
            reason = "the entry file is missing"
        except (EntryFileError, UnsafePathError) as exc:
            reason = exc.reason
        else:
            return entry if entry.client_key == client_key else None
        # The files decide: a file that is gone or no entry holds no key.
        self._skip_unreadable(entry_id, path, reason)
        return None

    @_recovering
    def list(
        self, kind: str | None = None, agent: str | None = None, since: datetime | str | None = None,
        until: datetime | str | None = None, limit: int | None = None,
    ) -> list[Entry]:
        """Entries in a window (``since`` inclusive, ``until`` exclusive), newest first."""
        if limit is not None:
            _positive(limit, "limit")
        lower, upper = _bound(since, "since"), _bound(until, "until")

        def fetch(extra: int) -> list[IndexRow]:
            return self._index.rows(kind=kind, agent=agent, since=lower, until=upper, limit=None if limit is None else limit + extra)

        return self._usable_rows(fetch, limit)

    def _resolve_mode(self, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "auto":
            return "lexical" if self._semantic is None else "hybrid"
        if mode != "lexical" and self._semantic is None:
            raise SemanticUnavailableError(
                f"mode {mode!r} needs entry vectors and this journal was opened without NN",
                "open it with Journal(root, enable_nn=True) or pass --nn",
            )
        return mode

    def _rank(
        self, query: str, *, k: int, mode: str, agent: str | None = None, kind: str | None = None, since: str | None = None,
        until: str | None = None, exclude: Sequence[str] = (), vector: Any = None,
    ) -> list[Hit]:
        """The best *k* entries for *query* by one arm or by both fused (see :mod:`journal.fusion`).

        *vector* replaces the query's embedding (``relate`` passes the entry's own).
        """
        mode = self._resolve_mode(mode)
        bad: set[str] = set()
        while True:
            known = len(bad)
            window = {"agent": agent, "kind": kind, "since": since, "until": until}
            hits = self._rank_once(query, k=k, mode=mode, window=window, exclude=[*exclude, *bad], vector=vector, bad=bad)
            if len(hits) >= k or len(bad) == known:
                return hits

    def _rank_once(
        self, query: str, *, k: int, mode: str, window: dict[str, str | None], exclude: Sequence[str], vector: Any, bad: set[str],
    ) -> list[Hit]:
        """One ranking pass of :meth:`_rank`; entries whose files are unusable are skipped and added to *bad*."""
        if mode == "lexical":
            found = self._index.search(query, k=k, exclude=exclude, **window)
            return [Hit(r.row.id, r.score, r.snippet, entry) for r in found if (entry := self._usable(r.row, bad)) is not None]
        assert self._semantic is not None
        depth = max(k, FUSION.depth) if mode == "hybrid" else k
        lexical = self._index.search(query, k=depth, exclude=exclude, with_snippets=False, **window) if mode == "hybrid" else []
        if vector is None:
            vector = self._semantic.query_vector(query)
        semantic = self._semantic.rank(vector, depth, exclude=exclude, **window)
        ranked = semantic[:k] if mode == "semantic" else fuse([(r.row.id, r.score) for r in lexical], semantic)[:k]
        rows = {row.id: row for row in self._index.rows(ids=[entry_id for entry_id, _ in ranked])}
        matched = {r.row.id for r in lexical}
        snippets = self._index.snippets(query, [entry_id for entry_id, _ in ranked if entry_id in matched])
        hits = []
        for entry_id, score in ranked:
            if entry_id in rows and (entry := self._usable(rows[entry_id], bad)) is not None:
                hits.append(Hit(entry_id, score, snippets.get(entry_id) or _preview(entry.voice), entry))
        return hits

    @_recovering
    def search(
        self, query: str, k: int = 8, kind: str | None = None, agent: str | None = None,
        since: datetime | str | None = None, until: datetime | str | None = None, mode: str = "auto",
    ) -> list[Hit]:
        """Rank entries for *query*: by words (BM25 over theme, voice, tags, focus, mood), and with NN on also by meaning.

        Any text is a valid query; with NN off, one with no searchable word
        returns no hits.

        Args:
            mode: ``auto`` (hybrid with NN on, else lexical), ``lexical``,
                ``semantic`` or ``hybrid``; the last two need NN on.

        Raises:
            SemanticUnavailableError: a semantic or hybrid mode without NN.
        """
        _positive(k, "k")
        return self._rank(query, k=k, mode=mode, kind=kind, agent=agent, since=_bound(since, "since"), until=_bound(until, "until"))

    @_recovering
    def relate(self, entry_id: str, k: int = 8, agent: str | None = None) -> list[Hit]:
        """Entries most related to *entry_id*: explicit continuity links first, then similar entries.

        Similarity is lexical with NN off; with NN on it fuses the lexical
        ranking with the cosine ranking of the entry's own vector.

        Links in both directions count: the entries it continues
        (``reason="continues"``) and the entries that continue it
        (``"continued_by"``), most recent first; ``"similar"`` hits follow, best first.
        """
        _positive(k, "k")
        source = self.get(entry_id)
        linked: dict[str, str] = {}
        for ref in self._index.links_from(entry_id):
            linked.setdefault(ref, "continues")
        for ref in self._index.links_to(entry_id):
            linked.setdefault(ref, "continued_by")
        query = " ".join((source.theme, *source.tags, (source.signals or {}).get("focus", ""), source.voice))
        vector = None if self._semantic is None else self._semantic.entry_vector(source)
        similar = self._rank(query, k=k + len(linked), mode="auto", agent=agent, exclude=[entry_id], vector=vector)
        scores = {hit.entry_id: hit for hit in similar}
        link_rows = self._index.rows(ids=list(linked), agent=agent)
        bad: set[str] = set()
        hits = [
            Hit(
                row.id, scores[row.id].score if row.id in scores else 0.0, scores[row.id].snippet if row.id in scores else "",
                entry, linked[row.id],
            )
            for row in link_rows
            if (entry := self._usable(row, bad)) is not None
        ]
        hits.sort(key=lambda hit: hit.reason != "continues")
        for found in similar:
            if len(hits) >= k:
                break
            if found.entry_id not in linked:
                hits.append(Hit(found.entry_id, found.score, found.snippet, found.entry, "similar"))
        return hits[:k]

    @_recovering
    def digest(self, agent: str | None = None, since: datetime | str | None = None, until: datetime | str | None = None) -> Digest:
        """A computed summary of a window: themes, tags, focus, moods, novelty trend and continuity."""
        lower, upper = _bound(since, "since"), _bound(until, "until")
        rows = self._index.rows(agent=agent, since=lower, until=upper, oldest_first=True)
        # A digest is computed from the index alone; a cheap lstat of each file
        # keeps entries whose files were deleted or replaced out of it.
        problems = self._store.check(row.path for row in rows)
        if problems:
            for row in rows:
                if row.path in problems:
                    self._skip_unreadable(row.id, row.path, problems[row.path])
            rows = [row for row in rows if row.path not in problems]
        links = self._index.links_within([row.id for row in rows])
        return compute_digest(rows, links, agent=agent, since=lower, until=upper)

    @_recovering
    def prompt_context(
        self, query: str, k: int = 6, agent: str | None = None, since: datetime | str | None = None,
        until: datetime | str | None = None, max_chars: int = DEFAULT_CONTEXT_CHARS,
    ) -> str:
        """A bounded, labelled block of past entries as escaped JSON data, for an agent's next prompt.

        The best matches for *query* come first (hybrid with NN on, see
        :meth:`search`); when fewer than *k* match, the most recent entries of
        the window fill the rest. The result
        never exceeds *max_chars*. It frames entries as data; it is not a full
        defence against prompt injection.
        """
        _positive(k, "k")
        lower, upper = _bound(since, "since"), _bound(until, "until")
        found = self._rank(query, k=k, mode="auto", agent=agent, since=lower, until=upper)
        picks = [(hit.entry, "match") for hit in found]
        if len(picks) < k:
            seen = {entry.id for entry, _ in picks}
            wanted = k - len(picks)

            def fetch(extra: int) -> list[IndexRow]:
                rows = self._index.rows(agent=agent, since=lower, until=upper, limit=k + len(seen) + extra)
                return [row for row in rows if row.id not in seen]

            picks += [(entry, "recent") for entry in self._usable_rows(fetch, wanted)]
        return render_prompt_context(query, picks, max_chars=max_chars)
