"""Opening a journal and keeping its index in step with the entry files.

The entry files are the truth and the index a cache of them. The index
records the writer lock's generation it last caught up with, the counter
file's stamp then, and the boot it happened in (see :mod:`journal.files._lock`):
when the counter has moved on, or was copied over (a backup's files copied into
the journal put back a counter its copied index agrees with), files may exist
that the index lacks, and whoever holds the lock next indexes them (a *reconcile*). A missing, corrupt or outdated index is
rebuilt from the files. A reader that cannot use the on-disk index at all
(no write access, a read-only mount, a full disk) reads the files into a
private in-memory index instead; a writer never does, and raises why.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

from journal.encoding import Encoder
from journal.errors import JournalClosedError, JournalError, JournalNotFoundError, UnsafePathError
from journal.files import (
    Manifest,
    Owner,
    WriteLock,
    create_manifest,
    current_boot_id,
    ensure_dir,
    holds_journal_manifest,
    journal_owner,
    load_manifest,
    make_dir,
    may_fall_back,
    storage_error,
    storage_errors,
    watch_for_fork,
)
from journal.files.entry import Entry, utc_key
from journal.files.store import EntryStore
from journal.indexing.index import INDEX_SCHEMA_VERSION, Index, IndexCorruptError, IndexState
from journal.sync._reading import SkippedFile, first_of_each, load_many, scan

if TYPE_CHECKING:
    from journal.encoding.semantic import SemanticIndex

__all__ = ["IndexKeeper", "recovering", "writing"]

log = logging.getLogger("journal")

P = ParamSpec("P")
R = TypeVar("R")


class _Kept(Protocol):
    """What the guards below wrap the methods of: an object with an IndexKeeper (the Journal facade)."""

    @property
    def _keeper(self) -> IndexKeeper: ...


K = TypeVar("K", bound=_Kept)


def recovering(method: Callable[Concatenate[K, P], R]) -> Callable[Concatenate[K, P], R]:
    """A read: rebuild a corrupt index from the entry files and retry the call once.

    A read of a journal whose on-disk index could not be opened here (no
    write access, a read-only mount, a full disk) first reads the entry files
    into an in-memory index, once per Journal object (see :meth:`IndexKeeper.read_fallback`).
    """
    return _guarded(method, write=False)


def writing(method: Callable[Concatenate[K, P], R]) -> Callable[Concatenate[K, P], R]:
    """A write: like :func:`recovering`, but a journal this process cannot write raises its JournalStorageError at once.

    A write never uses the in-memory fallback, and never reads the entry
    files only to fail afterwards: the on-disk index is opened again and its
    error (disk full, read-only, permission denied) is raised as it is.
    """
    return _guarded(method, write=True)


def _guarded(method: Callable[Concatenate[K, P], R], *, write: bool) -> Callable[Concatenate[K, P], R]:
    @functools.wraps(method)
    def wrapper(owner: K, /, *args: P.args, **kwargs: P.kwargs) -> R:
        keeper = owner._keeper
        keeper.check_open()  # before the lock: a forked child may have inherited it held by a thread it does not have
        with keeper.calls:
            keeper.check_open()  # close() may have run while this call waited
            keeper.depth += 1
            try:
                # A full disk, a read-only mount or a missing permission is one clear JournalStorageError.
                with storage_errors(keeper.root, "read or write", index_path=keeper.index.path):
                    if keeper.unusable is not None:
                        if write:
                            keeper.reopen_on_disk()
                        else:
                            keeper.read_fallback()
                    try:
                        return method(owner, *args, **kwargs)
                    except IndexCorruptError as exc:
                        if not keeper.repairs_index:
                            raise  # opened to check the index as found: a rebuild would hide what a check must report
                        log.warning("index %s is corrupt (%s); rebuilding it from the entry files", keeper.index.path, exc)
                        with keeper.lock:
                            keeper.rebuild_locked(corrupt=True)
                        return method(owner, *args, **kwargs)
            finally:
                keeper.depth -= 1
                if keeper.closed and not keeper.depth:
                    keeper.release()  # a close() from a callback of this call waited for it to finish

    return wrapper


def _manifest_exists(path: Path) -> bool:
    """Whether the journal's manifest is there; a root this user may not look into is refused so, never taken for no journal."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        converted = storage_error(exc, path, "read the manifest")
        if converted is None:
            raise
        raise converted from None
    return True


def _refuse_inside_a_journal(root: Path) -> None:
    """Refuse to create a journal at *root* when a directory above it (as the kernel resolves it) is a journal: the new one's files
    would be written among the other's, which only it writes, and each would take the other's for damage or foreign files.

    Raises:
        UnsafePathError: naming the journal above.
    """
    for directory in Path(os.path.realpath(root)).parents:
        if holds_journal_manifest(directory):
            raise UnsafePathError(root, f"it lies inside the journal {str(directory)!r}; create a journal outside any other")


class IndexKeeper:
    """One open journal's parts (lock, entry files, index, vectors) and the protocol that keeps its index caught up.

    Its state is its own: other modules read it, and change it only through its methods
    (:meth:`note_skipped`, :meth:`set_skipped`, :meth:`note_write_begun`, :meth:`note_caught_up`).

    Attributes:
        unusable: why the on-disk index cannot be used here, or None: reads fall back, writes raise it.
    """

    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        *,
        owner: Owner,
        lock_timeout: float,
        unusable: BaseException | None,
        repairs_index: bool = True,
    ) -> None:
        self.root = root
        # The journal directory this object opened (its device and inode), for :meth:`in_place`.
        opened = os.stat(root, follow_symlinks=False)
        self._root_file = (opened.st_dev, opened.st_ino)
        self.repairs_index = repairs_index
        self.manifest = manifest
        self.owner = owner
        self.unusable = unusable
        self.lock = WriteLock(root / ".write.lock", timeout=lock_timeout, counter=root / "entries" / ".generation", owner=owner)
        self.store = EntryStore(root / "entries", owner=owner)
        self.index = Index(root / "index" / "journal.sqlite3", owner=owner)
        self.semantic: SemanticIndex | None = None
        self._skipped: list[SkippedFile] = []
        self.boot_id = current_boot_id()
        # The lock generation and counter stamp this object last saw the index caught up with (None: not known).
        self._caught_up: tuple[int, str] | None = None
        # One call at a time: the connection, its in-memory fallback and the
        # caches of the index and vectors are used by one thread at a time
        # (SQLite's rule for a connection). Reentrant per thread, for a call
        # that makes another. Measured against per-thread connections, see
        # bench/bench_threads.py: the GIL leaves little for parallel reads to win.
        self.calls = threading.RLock()
        # How many calls the thread holding *calls* is inside (a callback's call nests in its caller's).
        self.depth = 0
        self.opened_in = os.getpid()
        self.closed = False
        watch_for_fork(self)

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        create: bool,
        writable: bool,
        lock_timeout: float,
        encoder: Encoder | None,
        on_progress: Callable[[int, int], None] | None,
        repair_index: bool = True,
    ) -> IndexKeeper:
        """Open (or create) the journal at *root* and bring its index up to date (see :class:`journal.Journal`).

        Without *repair_index* the index is left as found: neither rebuilt nor caught up, here or by a read.
        """
        manifest_path = root / "manifest.json"
        if create and not os.path.lexists(manifest_path):  # lexists: a root that is a file keeps ensure_dir's own refusal below
            _refuse_inside_a_journal(root)
        try:
            ensure_dir(root, create=False)
        except FileNotFoundError:
            if not create:
                raise JournalNotFoundError(root) from None
            root.parent.mkdir(parents=True, exist_ok=True)
            make_dir(root, "the journal root", None)
        # Root repairing a service user's journal creates everything as that user.
        owner = journal_owner(root)
        if _manifest_exists(manifest_path):
            manifest = load_manifest(manifest_path)
        elif create:
            manifest = create_manifest(manifest_path, owner=owner)
            writable = True  # this open makes a new journal: a writer, which must not end up half made or in memory
        else:
            raise JournalNotFoundError(root)
        # A reader without write access must still read: what it cannot
        # create (a deleted index/, say) is done without in memory, once a read needs it.
        unusable: BaseException | None = None
        for name in ("entries", "index", "models"):
            try:
                make_dir(root / name, f"{name}/", owner)
            except OSError as exc:
                if writable or name == "entries" or not may_fall_back(exc):
                    raise
                if name == "index":
                    unusable = exc
        keeper = cls(root, manifest, owner=owner, lock_timeout=lock_timeout, unusable=unusable, repairs_index=repair_index)
        try:
            if writable:
                keeper.lock.hold()  # a writer holds its lock file and write counter from its open on (see in_place)
            keeper._open_first(writable=writable, encoder=encoder, on_progress=on_progress)
        except BaseException:
            keeper.close()
            raise
        return keeper

    def _open_first(self, *, writable: bool, encoder: Encoder | None, on_progress: Callable[[int, int], None] | None) -> None:
        if self.unusable is None and self.repairs_index:
            try:
                self.open_index()
            except (OSError, sqlite3.Error) as exc:
                if writable or not may_fall_back(exc):
                    raise
                self.index.close()
                self.unusable = exc
        if encoder is not None:
            if self.unusable is not None:
                self.read_fallback()  # the vectors are read from the index now
            from journal.encoding.semantic import SemanticIndex  # numpy only with NN on

            # Entries lacking a vector are embedded by the first ranking (or Journal.embed), not here:
            # an open that only reads or appends never waits for a backlog.
            self.semantic = SemanticIndex(self.index, encoder, on_progress=on_progress)

    @property
    def skipped(self) -> list[SkippedFile]:
        """The files the last rebuild left out, and indexed entries a read found unusable since."""
        return self._skipped

    def note_skipped(self, item: SkippedFile) -> None:
        """Add *item* to :attr:`skipped`, once."""
        if item not in self._skipped:
            self._skipped.append(item)

    def set_skipped(self, items: list[SkippedFile]) -> None:
        """Make *items* the list :attr:`skipped` gives."""
        self._skipped = items

    def note_write_begun(self) -> None:
        """Under the lock: a write bumped the counter and its index commit has not landed, so the next :meth:`sync_locked` looks again."""
        self._caught_up = None

    def note_caught_up(self, generation: int, counter: str) -> None:
        """Under the lock: the index has committed everything up to the counter's *generation*, its file's stamp then being *counter*."""
        self._caught_up = (generation, counter)

    def check_open(self) -> None:
        """Raise JournalClosedError after :meth:`close`, or in a child process that inherited this object through fork."""
        if self.opened_in != os.getpid():
            # The child shares the parent's SQLite connection and writer lock
            # (one flock for both processes): using either would corrupt.
            raise JournalClosedError(
                self.root, f"was opened in process {self.opened_in}, before a fork; open a new Journal in process {os.getpid()}"
            )
        if self.closed:
            raise JournalClosedError(self.root, "is closed; open a new Journal to use it again")

    def close(self) -> None:
        """Release the index connection, the lock file and directory handles, once the calls in progress are done.

        Another thread's call is waited for. A close from inside a call of this
        thread (a callback such as ``on_progress``) lets that call finish first,
        and the call releases everything as it returns: released under it, its
        connection would only be opened again, and left open.
        """
        if self.opened_in != os.getpid():
            # The parent's connection is not this process's to close (SQLite forbids
            # using a connection across fork), nor its lock to take for waiting.
            self.closed = True
            return
        with self.calls:
            self.closed = True
            if not self.depth:
                self.release()

    def in_place(self) -> bool:
        """Whether this open journal is still the one at its path: see :meth:`journal.Journal.still_in_place`."""
        if self.closed or self.opened_in != os.getpid():
            return False
        with self.calls:
            if self.closed:  # closed while this call waited
                return False
            try:
                named = os.stat(self.root, follow_symlinks=False)
                journal_id = load_manifest(self.root / "manifest.json").journal_id
            except (OSError, JournalError):
                return False
            return (
                (named.st_dev, named.st_ino) == self._root_file
                and journal_id == self.manifest.journal_id
                and self.store.in_place()
                and self.lock.in_place()
                and self.index.in_place()
            )

    def release(self) -> None:
        """Release the index connection, the lock file and directory handles now (the caller holds *calls*, no call is running)."""
        self.index.close()
        self.store.close()
        self.lock.close()

    def state(self) -> IndexState | None:
        """The index's state; None when unbuilt, schema_version -1 when corrupt."""
        try:
            return self.index.state()
        except IndexCorruptError:
            return IndexState(-1, -1, "")

    @staticmethod
    def is_corrupt(state: IndexState | None) -> bool:
        return state is not None and state.schema_version == -1

    @staticmethod
    def _needs_rebuild(state: IndexState | None) -> bool:
        return state is None or state.schema_version != INDEX_SCHEMA_VERSION

    def _is_behind(self, state: IndexState) -> bool:
        """True when files may exist that the index lacks (see journal.files._lock)."""
        return (
            state.generation != self.lock.read_generation()
            or state.counter != self.lock.stamp()
            or (self.boot_id is not None and state.boot_id != self.boot_id)
        )

    def open_index(self) -> None:
        """Rebuild the index if it needs it, and catch it up if the lock is free; a busy lock means a writer does."""
        state = self.state()
        if self._needs_rebuild(state):
            with self.lock:
                state = self.state()
                if self._needs_rebuild(state):
                    self.rebuild_locked(corrupt=self.is_corrupt(state))
            return
        assert state is not None  # noqa: S101 - narrows the type: a missing state needs a rebuild, handled above
        if self._is_behind(state) and self.lock.acquire(blocking=False):
            try:
                self.sync_locked()
            except Exception as exc:
                problem = storage_error(exc, self.root, "catch up the index at", index_path=self.index.path)
                if problem is None:
                    raise
                # Reads still work from the index as it is. A writer must catch it up before it may
                # write (so client_keys stay exactly-once), and fails clearly while it cannot.
                log.warning(
                    "the index is behind the entry files and could not be caught up: %s; reads miss the newest entries until it is", problem
                )
            finally:
                self.lock.release()

    def _problem(self, exc: BaseException) -> BaseException:
        """*exc* as the JournalStorageError it amounts to, if it is one."""
        return storage_error(exc, self.root, "open", index_path=self.index.path) or exc

    def read_fallback(self) -> None:
        """Read every entry file into a private in-memory index, writing nothing (once per object).

        For a reader that may not write to the journal (another user, a
        read-only mount, a full disk where SQLite cannot create its ``-shm``):
        the on-disk index could not be opened or repaired. Only a read gets
        here; a write raises the problem instead (see :func:`writing`).
        """
        if self.unusable is None or self.index.in_memory:
            return
        log.warning(
            "the index of journal %s cannot be used here (%s); reading the entry files into an in-memory index, writing nothing. "
            "Read as the journal's owner, with the fault fixed, to use index/ (and rebuild it if missing)",
            self.root,
            self._problem(self.unusable),
        )
        self.index.switch_to_memory()
        skipped: list[SkippedFile] = []
        unique = first_of_each(load_many(self.store, scan(self.store, skipped.append), skipped.append), skipped.append)
        # The copy's generation is never compared with the counter (which this user may not even read).
        self.index.rebuild(((entry, path) for path, entry in unique), 0, "", self.boot_id or "")
        for item in skipped:
            log.warning("skipped %s: %s", item.path, item.reason)
        self._skipped = skipped

    def reopen_on_disk(self) -> None:
        """Before a write on a journal whose on-disk index could not be opened: open it again, or raise why not.

        The fault may have been fixed since (a remount, a freed disk); if not,
        its JournalStorageError is raised before anything is read or written.
        """
        was_in_memory = self.index.in_memory
        self.index.switch_to_disk()  # an in-memory copy is kept aside, for the reads after a refused write
        try:
            make_dir(self.root / "index", "index/", self.owner)
            self.open_index()
        except Exception as exc:
            if was_in_memory:
                self.index.switch_to_memory()
            else:
                self.index.close()
            if may_fall_back(exc):
                self.unusable = exc  # the latest reason; a busy lock, say, leaves the earlier one
            problem = self._problem(exc)
            if problem is exc:
                raise
            raise problem from exc
        self.index.forget_memory()
        self.unusable = None

    def sync_locked(self) -> None:
        """Under the lock: index whatever the files hold that the index lacks."""
        # The common case costs one pread and one fstat: nobody wrote, nor copied
        # a counter in, since this object last saw the index caught up.
        if self._caught_up is not None and self._caught_up == (self.lock.read_generation(), self.lock.stamp()):
            return
        state = self.state()
        if self._needs_rebuild(state):
            self.rebuild_locked(corrupt=self.is_corrupt(state))
        elif state is not None and self._is_behind(state):
            self._reconcile_locked(self._generation_locked())
        else:
            self._caught_up = (state.generation, state.counter) if state is not None else None

    def _generation_locked(self) -> int:
        generation = self.lock.read_generation()
        return generation if generation >= 0 else self.lock.bump_generation()

    def rebuild_locked(
        self,
        *,
        corrupt: bool,
        preloaded: dict[str, Entry] | None = None,
        on_skip: Callable[[SkippedFile], None] | None = None,
        keep_vectors: bool = True,
        keep_digests: bool = True,
    ) -> int:
        """Under the lock: rebuild every table from the entry files; return how many entries the index holds.

        The vectors of entries whose text is unchanged are kept unless *keep_vectors* is false (an explicit reindex),
        and the digests the entries were first indexed with unless *keep_digests* is (a reindex adopts the files as they are).
        """
        skipped: list[SkippedFile] = []
        report = on_skip or skipped.append
        # What the index holds wins a tie between two files of one id or key, as it does in _reconcile_locked.
        held: set[str] = set()
        if not corrupt:
            with contextlib.suppress(IndexCorruptError, sqlite3.Error):  # an index that cannot say what it holds prefers nothing
                held = set(self.index.paths())
        if corrupt:
            self.index.remove_files()
        paths = scan(self.store, report)
        present = set(paths)
        loaded = {p: e for p, e in (preloaded or {}).items() if p in present}
        loaded.update(load_many(self.store, [p for p in paths if p not in loaded], report))
        unique = first_of_each(loaded, report, held=held)
        generation = self._generation_locked()
        counter = self.lock.stamp()
        count = self.index.rebuild(
            ((entry, path) for path, entry in unique),
            generation,
            counter,
            self.boot_id or "",
            keep_vectors=keep_vectors,
            keep_digests=keep_digests,
        )
        self._caught_up = (generation, counter)
        self.store.remove_temp_files()
        for item in skipped:
            log.warning("skipped %s: %s", item.path, item.reason)
        self._skipped = skipped if on_skip is None else self._skipped
        return count

    def _reconcile_locked(self, generation: int) -> None:
        """Under the lock: index files the index lacks, drop rows whose files are gone."""
        indexed = self.index.paths()
        on_disk = set(scan(self.store, lambda item: None))
        gone = [indexed[p] for p in indexed.keys() - on_disk]
        fresh = load_many(self.store, sorted(on_disk - indexed.keys()), lambda item: log.warning("skipped %s: %s", item.path, item.reason))
        with self.index.transaction() as conn:
            for entry_id in gone:
                self.index.delete_entry(conn, entry_id)
            for path, entry in sorted(fresh.items(), key=lambda item: (utc_key(item[1].timestamp), item[0])):
                if self.index.find_id(entry.id) or (entry.client_key and self.index.find_client_key(entry.client_key, entry.agent)):
                    log.warning("skipped entries/%s: its id or client_key is already indexed", path)
                    continue
                self.index.insert_entry(conn, entry, path)
            counter = self.lock.stamp()
            self.index.set_generation(conn, generation, counter, self.boot_id or "")
        self._caught_up = (generation, counter)
        self.store.remove_temp_files()

    def reindex(self, *, on_skip: Callable[[SkippedFile], None] | None, on_progress: Callable[[int, int], None] | None) -> int:
        """Rebuild the index from the entry files, reading them before the lock is taken (see :meth:`journal.Journal.reindex`)."""
        skipped: list[SkippedFile] = []

        def report(item: SkippedFile) -> None:
            if item not in skipped:
                skipped.append(item)

        preloaded = load_many(self.store, scan(self.store, lambda item: None), lambda item: None)
        with self.lock:
            # An explicit reindex re-embeds every entry, as documented: it is how a hybrid journal starts its vectors afresh.
            # It adopts the files as they are: an entry edited by hand is recorded as it is now (see journal.indexing._kept_digests).
            count = self.rebuild_locked(
                corrupt=self.is_corrupt(self.state()), preloaded=preloaded, on_skip=report, keep_vectors=False, keep_digests=False
            )
        self._skipped = skipped
        if on_skip is not None:
            for item in skipped:
                on_skip(item)
        if self.semantic is not None:
            self.semantic.fill(on_progress=on_progress)
        return count
