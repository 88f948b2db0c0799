"""The Journal facade: composes entry files, the writer lock, the index and retrieval."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Self, TypeVar

from journal._lock import WriteLock, current_boot_id
from journal._manifest import Manifest, create_manifest, load_manifest
from journal._safefs import journal_owner, make_dir
from journal._storage import is_storage_failure, storage_error, storage_errors
from journal.embed import DEFAULT_MODEL, Encoder
from journal.entry import (
    Entry,
    check_entry_id,
    check_text_arguments,
    check_utc_range,
    entry_from_json_bytes,
    parse_timestamp,
    show_value,
    utc_key,
)
from journal.errors import (
    ClientKeyTakenError,
    DuplicateEntryError,
    EntryFileError,
    EntryNotFoundError,
    EntryValidationError,
    JournalNotFoundError,
    SemanticUnavailableError,
    UnsafePathError,
)
from journal.fusion import FUSION, fuse
from journal.index import INDEX_SCHEMA_VERSION, Index, IndexCorruptError, IndexRow, IndexState, Window
from journal.retrieval import Digest, Hit, compute_digest, render_prompt_context, row_of_entry
from journal.store import EntryStore, ScanProblem, check_entry_path

if TYPE_CHECKING:
    from journal.semantic import SemanticIndex

__all__ = ["MAX_K", "MAX_LIMIT", "MODES", "AppendResult", "Journal", "SkippedFile"]

log = logging.getLogger("journal")

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_CONTEXT_CHARS: Final = 6000
#: Largest ``k`` of search, relate and prompt_context: ranking holds k candidates per arm in memory.
MAX_K: Final = 10_000
#: Largest ``limit`` of list (SQLite's LIMIT is a 64-bit integer; an export of more pages by since/until).
MAX_LIMIT: Final = 1_000_000_000
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


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a read asked for, checked against each entry as loaded from its file.

    The index chooses the candidates, but the file has the last word: an index
    row whose file holds another id, agent, kind or time than the read asked
    for (a hand-edited or foreign file, a restored index) is left out and
    reported, so a read scoped to one agent never returns another agent's entry.
    """

    agent: str | None = None
    kind: str | None = None
    since: str | None = None
    until: str | None = None

    def misfit(self, entry: Entry) -> str | None:
        """Which asked-for field the entry's file does not match, or None."""
        if self.agent is not None and entry.agent != self.agent:
            return "agent"
        if self.kind is not None and entry.kind != self.kind:
            return "kind"
        key = utc_key(entry.timestamp)
        if (self.since is not None and key < self.since) or (self.until is not None and key >= self.until):
            return "ts"
        return None


def _report_stale(path: str, field: str) -> None:
    # Neither value is logged: the other side of the disagreement may be
    # another agent's data, and the path is all an operator needs.
    log.warning("skipped entries/%s: its file disagrees with its index row (%s); run 'ghostjournal reindex'", path, field)


def _recovering(method: Callable[Concatenate[Journal, P], R]) -> Callable[Concatenate[Journal, P], R]:
    """A read: rebuild a corrupt index from the entry files and retry the call once.

    A read of a journal whose on-disk index could not be opened here (no
    write access, a read-only mount, a full disk) first reads the entry files
    into an in-memory index, once per Journal object (see :meth:`Journal._read_fallback`).
    """
    return _guarded(method, write=False)


def _writing(method: Callable[Concatenate[Journal, P], R]) -> Callable[Concatenate[Journal, P], R]:
    """A write: like :func:`_recovering`, but a journal this process cannot write raises its JournalStorageError at once.

    A write never uses the in-memory fallback, and never reads the entry
    files only to fail afterwards: the on-disk index is opened again and its
    error (disk full, read-only, permission denied) is raised as it is.
    """
    return _guarded(method, write=True)


def _guarded(method: Callable[Concatenate[Journal, P], R], *, write: bool) -> Callable[Concatenate[Journal, P], R]:
    @functools.wraps(method)
    def wrapper(self: Journal, *args: P.args, **kwargs: P.kwargs) -> R:
        # A full disk, a read-only mount or a missing permission is one clear JournalStorageError.
        with storage_errors(self.root, "read or write", index_path=self._index.path):
            if self._unusable is not None:
                if write:
                    self._reopen_on_disk()
                else:
                    self._read_fallback()
            try:
                return method(self, *args, **kwargs)
            except IndexCorruptError as exc:
                log.warning("index %s is corrupt (%s); rebuilding it from the entry files", self._index.path, exc)
                with self._lock:
                    self._rebuild_locked(corrupt=True)
                return method(self, *args, **kwargs)

    return wrapper


#: What an open may create, in the order a failed open removes what it did create.
_CREATED_FILES: Final = tuple(f"index/journal.sqlite3{suffix}" for suffix in ("-wal", "-shm", "-journal", "")) + (".write.lock",)
_CREATED_DIRS: Final = ("models", "index", "entries")


def _undone_on_failure(init: Callable[Concatenate[Journal, P], None]) -> Callable[Concatenate[Journal, P], None]:
    """Make a failed open leave behind nothing it created, and report the filesystem's refusals as JournalStorageError.

    A journal created on a full disk, say, must not stay half made: the files
    and (empty) directories this open created are removed again. Nothing that
    existed before the open is touched; the manifest goes only together with
    an ``entries/`` directory the same open created, so no entry can lose it.
    """

    @functools.wraps(init)
    def wrapper(self: Journal, *args: P.args, **kwargs: P.kwargs) -> None:
        root = Path(args[0] if args else kwargs["root"])  # type: ignore[arg-type]
        ancestors = [root, *root.parents]
        missing_dirs = ancestors[: next((i for i, path in enumerate(ancestors) if os.path.lexists(path)), len(ancestors))]
        existed = {name for name in (*_CREATED_FILES, *_CREATED_DIRS, "manifest.json") if os.path.lexists(root / name)}
        try:
            with storage_errors(root, "open", index_path=root / "index" / "journal.sqlite3"):
                init(self, *args, **kwargs)
        except BaseException:
            for part in ("_index", "_store", "_lock"):
                with contextlib.suppress(Exception):
                    getattr(self, part).close()
            new = [name for name in (*_CREATED_FILES, "manifest.json") if name not in existed]
            if "entries" in existed or "manifest.json" not in new or _holds_anything(root / "entries"):
                new = [name for name in new if name not in ("manifest.json", ".write.lock")]  # a journal with entries keeps its identity
            if "index/journal.sqlite3" in existed:
                new = [name for name in new if not name.startswith("index/")]
            for name in new:
                with contextlib.suppress(OSError):
                    os.unlink(root / name)
            for directory in [root / name for name in _CREATED_DIRS if name not in existed] + missing_dirs:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)  # only if empty: never anything another process put there
            raise

    return wrapper


def _holds_anything(directory: Path) -> bool:
    try:
        return bool(os.listdir(directory))
    except OSError:
        return False


def _bound(value: datetime | str | None, name: str) -> str | None:
    """A since/until bound as a sortable UTC key; naive times are refused."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_timestamp(value, name)
        except EntryValidationError as exc:
            raise ValueError(f"{name} must be an ISO 8601 time with seconds and a timezone such as '2026-09-05T16:00:00Z' "
                             f"or '2026-09-05T16:00:00+02:00', within years 1-9999 in UTC, got {show_value(value)}") from exc
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime or ISO 8601 string, got {show_value(value)}")
    try:
        check_utc_range(value, name)
    except EntryValidationError as exc:
        raise ValueError(f"{name} must fall within years 1-9999 in UTC, got {value.isoformat()!r}") from exc
    return utc_key(value)


def _positive(value: int, name: str, maximum: int = MAX_K) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        shown = show_value(value) if not isinstance(value, int) or abs(value) <= 10**30 else "an integer beyond 10**30"
        raise ValueError(f"{name} must be a positive integer of at most {maximum:,}, got {shown}")
    return value


def _preview(text: str) -> str:
    """The first words of *text*, as a snippet for an entry found by meaning alone."""
    words = text.split()
    return " ".join(words[:_SNIPPET_WORDS]) + ("…" if len(words) > _SNIPPET_WORDS else "")


def _may_fall_back(exc: BaseException) -> bool:
    """True when a reader may do without the on-disk index: the filesystem refused (access, read-only, full).

    A refused path (a symlink, a FIFO) is never worked around: it is an attack or a slip to be fixed.
    """
    if isinstance(exc, UnsafePathError):
        return False
    if isinstance(exc, OSError):
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, sqlite3.Error) and is_storage_failure(exc):
        return True
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
        writable: the caller means to write (append, reindex): an open that
            cannot use the on-disk index for writing (no write access, a
            read-only mount, a full disk) raises its JournalStorageError at
            once. Without it (the default) such an open still succeeds: the
            reads fall back to an in-memory index of the entry files (one
            warning, only once a read needs it), and writes raise the error.

    Raises:
        SemanticUnavailableError: NN asked for without the ``nn`` extra.
        ModelNotFoundError: NN asked for and no local copy of the model.
        JournalStorageError: the filesystem refused (disk full, read-only,
            permission denied); what this open created is removed again.
    """

    @_undone_on_failure
    def __init__(
        self, root: str | os.PathLike[str], enable_nn: bool = False, *, create: bool = True, lock_timeout: float = 60.0,
        model: str | os.PathLike[str] = DEFAULT_MODEL, device: str = "cpu", encoder: Encoder | None = None,
        on_progress: Callable[[int, int], None] | None = None, writable: bool = False,
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
            writable = True  # this open makes a new journal: a writer, which must not end up half made or in memory
        else:
            raise JournalNotFoundError(self.root)
        # A reader without write access must still read: what it cannot
        # create (a deleted index/, say) is done without in memory, once a read needs it.
        # Why the on-disk index cannot be used here, or None: reads fall back, writes raise it.
        self._unusable: BaseException | None = None
        self._owner = owner
        for name in ("entries", "index", "models"):
            try:
                make_dir(self.root / name, f"{name}/", owner)
            except OSError as exc:
                if writable or name == "entries" or not _may_fall_back(exc):
                    raise
                if name == "index":
                    self._unusable = exc
        self._lock = WriteLock(self.root / ".write.lock", timeout=lock_timeout, counter=self.root / "entries" / ".generation", owner=owner)
        self._store = EntryStore(self.root / "entries", owner=owner)
        self._index = Index(self.root / "index" / "journal.sqlite3", owner=owner)
        self.skipped: list[SkippedFile] = []
        self._boot_id = current_boot_id()
        # The lock generation this object last saw the index caught up with.
        self._caught_up: int | None = None
        if self._unusable is None:
            try:
                self._open_index()
            except (OSError, sqlite3.Error) as exc:
                if writable or not _may_fall_back(exc):
                    raise
                self._index.close()
                self._unusable = exc
        if encoder is not None:
            if self._unusable is not None:
                self._read_fallback()  # the vectors are read from the index now
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

    def __enter__(self) -> Self:
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
            except Exception as exc:
                problem = storage_error(exc, self.root, "catch up the index at", index_path=self._index.path)
                if problem is None:
                    raise
                # Reads still work from the index as it is. A writer must catch it up before it may
                # write (so client_keys stay exactly-once), and fails clearly while it cannot.
                log.warning("the index is behind the entry files and could not be caught up: %s; reads miss the newest entries until it is", problem)
            finally:
                self._lock.release()

    def _problem(self, exc: BaseException) -> BaseException:
        """*exc* as the JournalStorageError it amounts to, if it is one."""
        return storage_error(exc, self.root, "open", index_path=self._index.path) or exc

    def _read_fallback(self) -> None:
        """Read every entry file into a private in-memory index, writing nothing (once per object).

        For a reader that may not write to the journal (another user, a
        read-only mount, a full disk where SQLite cannot create its ``-shm``):
        the on-disk index could not be opened or repaired. Only a read gets
        here; a write raises the problem instead (see :func:`_writing`).
        """
        if self._unusable is None or self._index.in_memory:
            return
        problem = self._problem(self._unusable)
        log.warning(
            "the index of journal %s cannot be used here (%s); reading the entry files into an in-memory index, writing nothing. "
            "Read as the journal's owner, with the fault fixed, to use index/ (and rebuild it if missing)",
            self.root, problem,
        )
        self._index.switch_to_memory()
        skipped: list[SkippedFile] = []
        loaded = self._load_many(self._scan(skipped.append), skipped.append)
        unique = self._first_of_each(loaded, skipped.append)
        # The copy's generation is never compared with the counter (which this user may not even read).
        self._index.rebuild(((entry, path) for path, entry in unique), 0, self._boot_id or "")
        for item in skipped:
            log.warning("skipped %s: %s", item.path, item.reason)
        self.skipped = skipped

    def _reopen_on_disk(self) -> None:
        """Before a write on a journal whose on-disk index could not be opened: open it again, or raise why not.

        The fault may have been fixed since (a remount, a freed disk); if not,
        its JournalStorageError is raised before anything is read or written.
        """
        was_in_memory = self._index.in_memory
        self._index.switch_to_disk()  # an in-memory copy is kept aside, for the reads after a refused write
        try:
            make_dir(self.root / "index", "index/", self._owner)
            self._open_index()
        except Exception as exc:
            if was_in_memory:
                self._index.switch_to_memory()
            else:
                self._index.close()
            if _may_fall_back(exc):
                self._unusable = exc  # the latest reason; a busy lock, say, leaves the earlier one
            problem = self._problem(exc)
            if problem is exc:
                raise
            raise problem from exc
        self._index.forget_memory()
        self._unusable = None

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
            if exc.errno in (errno.EACCES, errno.EPERM):
                # Not a corrupt file to skip: its entry exists and this user may not read it
                # (root wrote it 0600, say). Skipping would make its data silently disappear.
                path = self._store.entries_dir / rel_path
                raise storage_error(exc, path, "read the entry file") or exc from None
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

    @_writing
    def append_with_result(self, payload: Mapping[str, Any]) -> AppendResult:
        """Like :meth:`append`, also telling whether the client_key already existed."""
        entry = Entry.from_payload(payload)
        # Embedded before the lock is taken, so other writers do not wait on the model.
        vector = self._semantic.embed_entry(entry) if self._semantic is not None else None
        with self._lock:
            try:
                self._sync_locked()
            except Exception as exc:
                stored = self._stored_unindexed(entry, exc)
                if stored is None:
                    raise
                if stored.agent != entry.agent:
                    raise ClientKeyTakenError(entry.client_key or "", entry.agent) from None
                return AppendResult(stored, is_duplicate=True)
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
                            if earlier.agent != entry.agent:
                                raise ClientKeyTakenError(entry.client_key, entry.agent)
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
                commit_failure: list[Exception] = []

                def commit() -> None:
                    # Runs once the entry file has its name: from here on the entry is stored,
                    # so a failed commit must not turn into an error for a write that happened.
                    try:
                        self._index.commit()
                    except Exception as exc:  # noqa: BLE001 - reported by _index_fell_behind
                        commit_failure.append(exc)

                rel_path = EntryStore.rel_path_for(entry)
                day_dir = self._store.entries_dir / os.path.dirname(rel_path)
                with storage_errors(day_dir, "write a new entry file in"):
                    try:
                        pending = self._store.write_temp(entry, meanwhile=stage_rows)
                        try:
                            self._store.publish(pending, meanwhile=commit)
                        except FileExistsError:
                            raise DuplicateEntryError(entry.id) from None
                    except BaseException as exc:
                        if isinstance(exc, DuplicateEntryError) or not os.path.lexists(self._store.entries_dir / rel_path):
                            self._undo_bump()  # nothing was published: the counter stays as it was
                        raise
                if commit_failure:
                    self._index_fell_behind(entry, commit_failure[0])
                    return AppendResult(entry, is_duplicate=False)
            finally:
                self._end_transaction()  # nothing to undo after the commit
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
    def _undo_bump(self) -> None:
        """Take back this append's counter bump; if even that fails, the counter stays ahead (safe: the next open checks the files)."""
        try:
            self._lock.undo_bump()
        except OSError:
            pass

    def _end_transaction(self) -> None:
        """Roll back the open write transaction, if any; a connection that cannot is closed (it reopens when needed)."""
        try:
            self._index.rollback()
        except Exception:  # noqa: BLE001 - a failing disk must not mask the error being raised
            self._index.close()

    def _stored_unindexed(self, entry: Entry, exc: Exception) -> Entry | None:
        """Under the lock, when the index cannot be caught up (*exc*): the stored entry with *entry*'s client_key, if any.

        The files decide: a retry of an append whose entry file was published
        while the index commit failed (a full disk) finds its entry among the
        files the index lacks, and gets it back instead of an error. Nothing
        else can be appended until the index is caught up.
        """
        problem = storage_error(exc, self.root, "catch up the index at", index_path=self._index.path)
        if entry.client_key is None or problem is None:
            return None
        indexed = self._index.paths()
        fresh = self._load_many(sorted(set(self._scan(lambda item: None)) - indexed.keys()), lambda item: None)
        found = next((stored for _, stored in sorted(fresh.items()) if stored.client_key == entry.client_key), None)
        if found is not None:
            log.warning("entry %s with client_key %r is stored, but the index could not catch up with it: %s", found.id, entry.client_key, problem)
        return found

    def _index_fell_behind(self, entry: Entry, exc: Exception) -> None:
        """The entry file is published but the index commit failed: warn, and leave the index to be caught up.

        The writer lock's generation was bumped before the publish and the
        index kept its old one, so the next open or append indexes the file
        (a retry with the same client_key then finds it). A corrupt index is
        rebuilt at once, which takes the entry in; letting @_recovering call
        append again would store it twice.
        """
        rel_path = EntryStore.rel_path_for(entry)
        self._end_transaction()
        if isinstance(exc, IndexCorruptError):
            log.warning("index %s is corrupt (%s); rebuilding it from the entry files", self._index.path, exc)
            try:
                self._rebuild_locked(corrupt=True)
                return
            except Exception as rebuild_failure:  # noqa: BLE001 - the entry is stored either way
                exc = rebuild_failure
        problem = storage_error(exc, self._index.path, "commit the index", index_path=self._index.path) or exc
        log.warning("entry %s is stored in entries/%s, but the index could not record it: %s; the next open or append catches the index up",
                    entry.id, rel_path, problem)

    @_writing
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

    def _usable(self, row: IndexRow, bad: set[str], scope: _Scope | None = None) -> Entry | None:
        """The entry of *row* as its file holds it, or None (reported) when the file is gone, is no entry, or disagrees.

        One deleted or truncated file must not fail every read that touches
        it: the files decide, and a file that is gone or unreadable is not an
        entry, as a rebuild would also find (its row is dropped). A file that
        holds another id than its row, or another agent, kind or time than
        *scope* asked for (a hand-edited or foreign file, a restored index), is
        left out and reported, so a scoped read never returns another agent's
        entry. *bad* collects the ids skipped.
        """
        if row.id in bad:
            return None
        check_entry_path(row.path)  # a tampered row pointing outside entries/ is an error, never skipped
        try:
            entry = self._load(row.path)
        except FileNotFoundError:
            reason = "the entry file is missing"
        except (EntryFileError, UnsafePathError) as exc:
            reason = exc.reason
        else:
            misfit = "id" if entry.id != row.id else scope.misfit(entry) if scope is not None else None
            if misfit is None:
                return entry
            bad.add(row.id)
            _report_stale(row.path, misfit)
            return None
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

    def _usable_rows(self, fetch: Callable[[int], Sequence[IndexRow]], limit: int | None, scope: _Scope | None = None) -> list[Entry]:
        """Entries of the rows *fetch(extra)* returns, skipping unusable ones and fetching *extra* more to fill *limit*."""
        bad: set[str] = set()
        while True:
            known = len(bad)
            rows = fetch(known)
            found = [entry for row in rows if (entry := self._usable(row, bad, scope)) is not None]
            # Done when nothing was skipped this time, or the window holds no more rows.
            if limit is None or len(found) >= limit or len(bad) == known or len(rows) < limit + known:
                return found if limit is None else found[:limit]

    def _scoped_entry(self, row: IndexRow, scope: _Scope) -> Entry | None:
        """The entry of *row* as its file holds it, or None (reported) if the file is unusable or disagrees with the row or the scope."""
        return self._usable(row, set(), scope)

    def _owned_entry(self, row: IndexRow, agent: str | None, *, missing: Callable[[], Exception]) -> Entry:
        """The entry of *row* if both the row and its file say it is *agent*'s (any agent's when None); else *missing*'s error.

        A row of another agent gets exactly the error of a row that does not
        exist, and its file is not even opened, so nothing about it (content,
        corruption, absence) can change the answer. A file that is gone is
        reported (its row dropped) and reads as missing too.
        """
        if agent is not None and row.agent != agent:
            raise missing()
        try:
            entry = self._entry_for_row(row)
        except FileNotFoundError:
            self._skip_unreadable(row.id, row.path, "the entry file is missing")
            raise missing() from None
        misfit = "id" if entry.id != row.id else _Scope(agent=agent).misfit(entry)
        if misfit is not None:
            _report_stale(row.path, misfit)
            raise missing() from None
        return entry

    @_recovering
    def get(self, entry_id: str, agent: str | None = None) -> Entry:
        """Return the entry with *entry_id* (with *agent* given: only if it is that agent's).

        Raises:
            InvalidEntryIdError: the id has path, glob or length trouble.
            EntryNotFoundError: no such entry, or (with *agent*) one of
                another agent: the two cases are indistinguishable.
        """
        check_entry_id(entry_id)
        check_text_arguments(agent=agent)
        row = self._index.row_for(entry_id=entry_id)
        if row is None:
            raise EntryNotFoundError(entry_id)
        return self._owned_entry(row, agent, missing=lambda: EntryNotFoundError(entry_id))

    @_recovering
    def find_by_client_key(self, client_key: str, agent: str | None = None) -> Entry | None:
        """The entry appended with *client_key* (with *agent* given: only if it is that agent's), or None.

        The files decide: a file that is gone or no entry holds no key (it is
        reported and its row dropped); a file that holds another key, id or
        agent than its row is reported and holds none either.
        """
        check_text_arguments(client_key=client_key, agent=agent)
        row = self._index.row_for(client_key=client_key)
        if row is None or (agent is not None and row.agent != agent):
            return None
        entry = self._usable(row, set(), _Scope(agent=agent))
        if entry is None:
            return None
        if entry.client_key != client_key:
            _report_stale(row.path, "client_key")
            return None
        return entry

    @_recovering
    def list(
        self, kind: str | None = None, agent: str | None = None, since: datetime | str | None = None,
        until: datetime | str | None = None, limit: int | None = None,
    ) -> list[Entry]:
        """Entries in a window (``since`` inclusive, ``until`` exclusive), newest first.

        An index row whose file disagrees with it is skipped and logged, so
        fewer than *limit* entries may come back until a reindex.
        """
        check_text_arguments(kind=kind, agent=agent)
        if limit is not None:
            _positive(limit, "limit", MAX_LIMIT)
        scope = _Scope(agent=agent, kind=kind, since=_bound(since, "since"), until=_bound(until, "until"))

        def fetch(extra: int) -> list[IndexRow]:
            return self._index.rows(Window(kind=kind, agent=agent, since=scope.since, until=scope.until), limit=None if limit is None else limit + extra)

        return self._usable_rows(fetch, limit, scope)

    def _resolve_mode(self, mode: str) -> str:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {show_value(mode)}")
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
        scope = _Scope(agent=agent, kind=kind, since=since, until=until)
        while True:
            known = len(bad)
            hits = self._rank_once(query, k=k, mode=mode, window=Window(kind=kind, agent=agent, since=since, until=until),
                                   exclude=[*exclude, *bad], vector=vector, bad=bad, scope=scope)
            if len(hits) >= k or len(bad) == known:
                return hits

    def _rank_once(
        self, query: str, *, k: int, mode: str, window: Window, exclude: Sequence[str], vector: Any, bad: set[str], scope: _Scope,
    ) -> list[Hit]:
        """One ranking pass of :meth:`_rank`; entries whose files are unusable or out of *scope* are skipped and added to *bad*."""
        if mode == "lexical":
            found = self._index.search(query, k=k, window=window, exclude=exclude)
            return [Hit(r.row.id, r.score, r.snippet, entry) for r in found if (entry := self._usable(r.row, bad, scope)) is not None]
        assert self._semantic is not None
        depth = max(k, FUSION.depth) if mode == "hybrid" else k
        lexical = self._index.search(query, k=depth, window=window, exclude=exclude, with_snippets=False) if mode == "hybrid" else []
        if vector is None:
            vector = self._semantic.query_vector(query)
        semantic = self._semantic.rank(vector, depth, window, exclude=exclude)
        ranked = semantic[:k] if mode == "semantic" else fuse([(r.row.id, r.score) for r in lexical], semantic)[:k]
        rows = {row.id: row for row in self._index.rows(window, ids=[entry_id for entry_id, _ in ranked])}
        matched = {r.row.id for r in lexical}
        snippets = self._index.snippets(query, [entry_id for entry_id, _ in ranked if entry_id in matched], window)
        hits = []
        for entry_id, score in ranked:
            if entry_id in rows and (entry := self._usable(rows[entry_id], bad, scope)) is not None:
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
        check_text_arguments(kind=kind, agent=agent)
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

        With *agent* given, an *entry_id* of another agent raises the very
        EntryNotFoundError of an id that does not exist, and only that agent's
        entries are linked or ranked.
        """
        check_text_arguments(agent=agent)
        _positive(k, "k")
        # With agent= given, another agent's id is refused exactly like a missing
        # one: its hidden text must not rank anything, nor its links show.
        source = self.get(entry_id, agent=agent)
        scope = _Scope(agent=agent)
        wanted: dict[str, str] = {}
        for ref in source.continuity_refs:  # the file decides what the entry continues
            wanted.setdefault(ref, "continues")
        for ref in self._index.links_to(entry_id):
            wanted.setdefault(ref, "continued_by")
        linked: dict[str, tuple[str, Entry]] = {}
        for row in self._index.rows(Window(agent=agent), ids=list(wanted)):
            entry = self._scoped_entry(row, scope)
            if entry is None or (wanted[row.id] == "continued_by" and entry_id not in entry.continuity_refs):
                continue
            linked[row.id] = (wanted[row.id], entry)
        # Only links in scope count towards how many similar entries are fetched.
        query = " ".join((source.theme, *source.tags, (source.signals or {}).get("focus", ""), source.voice))
        vector = None if self._semantic is None else self._semantic.entry_vector(source)
        similar = self._rank(query, k=k + len(linked), mode="auto", agent=agent, exclude=[entry_id], vector=vector)
        scores = {hit.entry_id: hit for hit in similar}
        hits = []
        for linked_id, (reason, entry) in linked.items():
            scored = scores.get(linked_id)
            hits.append(Hit(linked_id, scored.score if scored else 0.0, scored.snippet if scored else "", entry, reason))
        hits.sort(key=lambda hit: hit.reason != "continues")
        for found in similar:
            if len(hits) >= k:
                break
            if found.entry_id not in linked:
                hits.append(Hit(found.entry_id, found.score, found.snippet, found.entry, "similar"))
        return hits[:k]

    @_recovering
    def digest(
        self, agent: str | None = None, since: datetime | str | None = None, until: datetime | str | None = None, *,
        exclude_kinds: Collection[str] = (),
    ) -> Digest:
        """A computed summary of a window: themes, tags, focus, moods, novelty trend and continuity.

        Entries of the kinds in *exclude_kinds* are left out entirely (a
        digest routine leaves out ``digest`` entries, so that no digest
        counts the digest before it).

        With *agent* given, the summary is computed from the entry files (the
        file decides whose entry it is), and continuity counts only links to
        that agent's own entries: a reference to another agent's entry counts
        exactly like one to an id that does not exist, which is not at all.
        """
        check_text_arguments(agent=agent)
        lower, upper = _bound(since, "since"), _bound(until, "until")
        rows = self._index.rows(Window(agent=agent, since=lower, until=upper), oldest_first=True)
        if exclude_kinds:
            rows = [row for row in rows if row.kind not in exclude_kinds]
        if agent is None:
            # Unscoped, a digest is computed from the index alone; a cheap lstat of
            # each file keeps entries whose files were deleted or replaced out of it.
            problems = self._store.check(row.path for row in rows)
            if problems:
                for row in rows:
                    if row.path in problems:
                        self._skip_unreadable(row.id, row.path, problems[row.path])
                rows = [row for row in rows if row.path not in problems]
            links = self._index.links_within([row.id for row in rows])
            return compute_digest(rows, links, agent=agent, since=lower, until=upper)
        scope = _Scope(agent=agent, since=lower, until=upper)
        bad: set[str] = set()
        loaded = [(row.path, entry) for row in rows if (entry := self._usable(row, bad, scope)) is not None]
        loaded.sort(key=lambda item: (utc_key(item[1].timestamp), item[1].id))
        entries = [entry for _, entry in loaded]
        owned = {entry.id for entry in entries}
        outside = sorted({ref for entry in entries for ref in entry.continuity_refs} - owned)
        owner = _Scope(agent=agent)
        owned.update(row.id for row in self._index.rows(Window(agent=agent), ids=outside) if self._usable(row, bad, owner) is not None)
        links = [(entry.id, ref) for entry in entries for ref in dict.fromkeys(entry.continuity_refs) if ref in owned]
        return compute_digest([row_of_entry(entry, path) for path, entry in loaded], links, agent=agent, since=lower, until=upper)

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
        check_text_arguments(agent=agent)
        _positive(k, "k")
        lower, upper = _bound(since, "since"), _bound(until, "until")
        found = self._rank(query, k=k, mode="auto", agent=agent, since=lower, until=upper)
        picks = [(hit.entry, "match") for hit in found]
        if len(picks) < k:
            seen = {entry.id for entry, _ in picks}
            wanted = k - len(picks)
            scope = _Scope(agent=agent, since=lower, until=upper)

            def fetch(extra: int) -> list[IndexRow]:
                rows = self._index.rows(Window(agent=agent, since=lower, until=upper), limit=k + len(seen) + extra)
                return [row for row in rows if row.id not in seen]

            picks += [(entry, "recent") for entry in self._usable_rows(fetch, wanted, scope)]
        return render_prompt_context(query, picks, max_chars=max_chars)
