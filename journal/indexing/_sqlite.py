"""The SQLite plumbing of the index: one connection, WAL mode, transactions, the corruption signal.

:class:`Database` knows nothing of the tables; :class:`journal.indexing.index.Index`
builds on it. The database runs in WAL mode, so readers keep reading their
snapshot while a writer (or a whole rebuild, which is one transaction) is in
progress. A reader that may not write to the journal keeps a private
in-memory database instead.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from journal.files import Owner, check_dir, check_regular, open_regular

__all__ = ["Database", "IndexCorruptError", "corruption_guard"]

_SQLITE_CORRUPT: Final = 11
_SQLITE_NOTADB: Final = 26


class IndexCorruptError(Exception):
    """SQLite reported the index file as corrupt or not a database (internal signal)."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or not isinstance(exc, sqlite3.OperationalError | sqlite3.IntegrityError)


@contextlib.contextmanager
def corruption_guard() -> Iterator[None]:
    """Turn SQLite's reports of a damaged database into :class:`IndexCorruptError`; other errors pass."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if _is_corruption(exc):
            raise IndexCorruptError(str(exc)) from exc
        raise


_BUSY_TIMEOUT: Final = 60.0  # seconds a statement waits for another connection's lock
_CHECKPOINT_PAGES: Final = 4000  # WAL pages (about 16 MB) between automatic checkpoints
_WAL_SIZE_LIMIT: Final = 32 * 1024 * 1024  # bytes a reset WAL is truncated back to (after a rebuild, say)
# KiB of page cache a connection holds while it writes a group of entries (see Database.group_cache), against SQLite's
# default of 2,000. A group inserts thousands of rows under random keys (ids, subjects, proposals) into b-trees far
# larger than the cache: in 2 MB the inner pages of those trees were evicted by the leaves, and read again for the next
# row. An import of 30,000 entries read 47% fewer pages and wrote 31% fewer with 16 MiB.
_GROUP_CACHE_KIB: Final = 16384


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """Put a (new) database in WAL mode, waiting out other processes doing the same.

    Changing the journal mode needs a moment of exclusive access, and SQLite
    answers "database is locked" at once instead of calling the busy handler
    when two processes open a new journal together; so retry here.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT
    pause = 0.001
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


_SIDE_FILES: Final = ("", "-wal", "-shm", "-journal")


class Database:
    """One connection to an SQLite file, or to a private in-memory database.

    Args:
        path: the database file.
        owner: who must own the database file when this process creates it
            (see :func:`journal.files._safefs.journal_owner`).
        in_memory: keep the database in this process's memory instead (for a
            reader that may not write to the journal); *path* is then only
            named in messages.
    """

    def __init__(self, path: Path, *, owner: Owner = None, in_memory: bool = False) -> None:
        self.path = path
        self.owner = owner
        self.in_memory = in_memory
        self._conn: sqlite3.Connection | None = None
        # The device and inode of the file the connection opened (None while none is open, or in memory).
        self._file: tuple[int, int] | None = None
        # The in-memory copy set aside while a writer tries the on-disk index again (see switch_to_disk).
        self._memory: sqlite3.Connection | None = None

    def connection_changed(self) -> None:
        """Called when reads go to another database (memory or disk): drop what was cached about the old one."""

    # -- lifecycle -----------------------------------------------------------------

    # -- lifecycle -----------------------------------------------------------------

    def check_files(self) -> bool:
        """Refuse a symlink, FIFO, device or directory at the database or its side files; True if the database exists.

        SQLite follows symlinks and opens whatever it finds: a link planted at
        ``journal.sqlite3`` (or at its ``-wal``/``-shm``) would let a rebuild
        drop and replace another application's tables.

        Raises:
            UnsafePathError: naming the path that is not a regular file.
        """
        check_dir(self.path.parent, "index/")
        found = [check_regular(f"{self.path}{suffix}", f"the index file {self.path.name}{suffix}") for suffix in _SIDE_FILES]
        return found[0] is not None

    def _create_file(self) -> None:
        """Create the empty database file ourselves: mode 0600 and the journal's owner, whatever the umask.

        SQLite gives the ``-wal`` and ``-shm`` files it creates the mode (and,
        running as root, the owner) of the database file, so they follow.
        """
        os.close(open_regular(self.path, os.O_RDWR, f"the index file {self.path.name}", create=True, owner=self.owner))

    def connect(self) -> None:
        """Open the database file, creating an empty one if it is missing.

        Raises:
            UnsafePathError: the database or a side file is not a regular file.
        """
        if self._conn is not None:
            return
        if not self.in_memory and not self.check_files():
            self._create_file()
        with corruption_guard():
            conn = sqlite3.connect(":memory:" if self.in_memory else self.path, isolation_level=None, check_same_thread=False)
            try:
                if not self.in_memory:
                    self.check_files()  # nothing was swapped in between the check and the open
                conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
                if self.in_memory:
                    self._conn = conn
                    return
                _switch_to_wal(conn)
                # NORMAL in WAL mode: a commit survives a process crash; the
                # entry files, fsynced before the index commit, survive power loss.
                conn.execute("PRAGMA synchronous = NORMAL")
                # Each checkpoint fsyncs the WAL and the database; at SQLite's
                # default of 1,000 pages that happened every ~50 appends and cost
                # more than the index insert itself. A larger WAL amortizes it.
                conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
                conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
                opened = os.stat(self.path, follow_symlinks=False)
            except BaseException:
                conn.close()
                raise
        self._conn, self._file = conn, (opened.st_dev, opened.st_ino)

    def in_place(self) -> bool:
        """Whether the database file the connection opened is the one at its path now (true while none is open, or in memory).

        A restore that puts another file there (a copy renamed over it) leaves the connection on the old one, which
        no other process reads or writes any more.
        """
        if self._conn is None or self.in_memory or self._file is None:
            return True
        try:
            named = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (named.st_dev, named.st_ino) == self._file

    def close(self) -> None:
        """Close the connection (and an in-memory copy set aside)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._file = None
        self.forget_memory()

    def switch_to_memory(self) -> None:
        """Use a private in-memory database from now on (empty, or the copy :meth:`switch_to_disk` set aside)."""
        if self.in_memory:
            return
        if self._conn is not None:
            self._conn.close()
        self._conn, self._memory = self._memory, None
        self.in_memory = True
        self.connection_changed()

    def switch_to_disk(self) -> None:
        """Use the database file again; an in-memory copy in use is set aside until :meth:`forget_memory`."""
        if not self.in_memory:
            return
        self._memory, self._conn = self._conn, None
        self.in_memory = False
        self.connection_changed()

    def forget_memory(self) -> None:
        """Drop the in-memory copy set aside by :meth:`switch_to_disk`, if any."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.connect()
        assert self._conn is not None  # noqa: S101 - narrows the type: connect() sets it or raises
        return self._conn

    def remove_files(self) -> None:
        """Delete the database and its WAL side files (only under the writer lock)."""
        self.close()
        if self.in_memory:
            return
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    # -- transactions --------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back on any error."""
        conn = self.begin()
        try:
            with corruption_guard():
                yield conn
        except BaseException as exc:
            try:
                self.rollback()
            except Exception as failure:  # noqa: BLE001 - the error being raised is the one that matters
                # A rollback that fails too (a disk gone bad) must not hide why the
                # transaction failed; the connection is closed (SQLite rolls back
                # on close) and reopens when next needed.
                exc.add_note(f"the rollback failed too: {failure}")
                with contextlib.suppress(Exception):
                    self.close()
            raise
        self.commit()

    def begin(self) -> sqlite3.Connection:
        """Open a write transaction, for a caller that commits it at a moment of its choosing."""
        with corruption_guard():
            self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    @contextlib.contextmanager
    def group_cache(self) -> Iterator[None]:
        """Let the connection's page cache grow to :data:`_GROUP_CACHE_KIB` while inside (a group's writes), and give it back after.

        A connection closed or replaced meanwhile (a failed rollback closes it) is left as it is.
        """
        conn = self.conn
        with corruption_guard():
            before = int(conn.execute("PRAGMA cache_size").fetchone()[0])
            conn.execute(f"PRAGMA cache_size = -{_GROUP_CACHE_KIB}")
        try:
            yield
        finally:
            if self._conn is conn:
                with corruption_guard():
                    conn.execute(f"PRAGMA cache_size = {before}")

    def commit(self) -> None:
        """Commit the open write transaction."""
        with corruption_guard():
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        """Undo the open write transaction, if any (after a commit there is none)."""
        if self._conn is not None and self._conn.in_transaction:
            with corruption_guard():
                self._conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run several reads against one consistent snapshot of the database."""
        conn = self.conn
        with corruption_guard():
            conn.execute("BEGIN")
            try:
                yield
            finally:
                conn.execute("COMMIT")
