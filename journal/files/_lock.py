"""The writer lock: an OS-held advisory lock, and the write generation it guards.

``fcntl.flock`` is released by the kernel when its holder dies, so a lock is
never judged stale by its age and never stolen. A counter that every append
bumps *before* it publishes a file lives in ``entries/.generation``, beside
the files it counts; the index stores the counter it has caught up with, so a
mismatch reveals a crash between publish and index, or an index restored from
an older copy, without listing ``entries/``. The counter used to live in the
lock file, but a restore of ``index/`` together with ``.write.lock`` from one
copy then brought back a matching pair and hid every append made since; a
restore of ``index/`` never touches ``entries/``. (An old journal's counter is
read from the lock file once, so the new counter continues above it.)

A count alone can be put back, though: a backup's files copied over the live
journal bring an index and a counter that agree with each other and know
nothing of the entries appended since. So the index records the counter
file's *stamp* beside its count: its inode and change time (ctime), which
only the kernel sets. Any copy over the counter (``cp``, rsync, an unpacked
archive) gives it a new ctime, whatever bytes and mtime it copies, and the
index no longer matches.

A killed process loses nothing that it wrote to the page cache, so within one
boot of the machine the counter needs no fsync. Only a power loss or kernel
crash can drop it, and both end the boot: the index records the boot id of
its last full check, and the first writer or reader of a new boot checks
every file name once. Where no boot id can be read, every bump is fsynced.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from journal.errors import JournalNotFoundError, LockTimeoutError
from journal.files._safefs import FILE_MODE, Owner, open_regular, take_ownership

__all__ = ["WriteLock", "current_boot_id", "stamp_of"]

_WIDTH = 20  # decimal digits of the generation counter
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id() -> str | None:
    """The kernel's id for this boot of the machine, or None where there is none (non-Linux)."""
    try:
        return _BOOT_ID.read_text("ascii").strip() or None
    except OSError:
        return None


def stamp_of(status: os.stat_result) -> str:
    """A counter file's stamp (see above): its inode and change time, as the index records them."""
    return f"{status.st_ino}:{status.st_ctime_ns}"


class WriteLock:
    """Exclusive writer lock on ``<root>/.write.lock``; reentrant within one thread."""

    def __init__(self, path: Path, *, timeout: float = 60.0, counter: Path | None = None, owner: Owner = None) -> None:
        self.path = path
        self.timeout = timeout
        self.counter_path = counter if counter is not None else path.parent / "entries" / ".generation"
        self._owner = owner
        self._fd: int | None = None
        self._counter_fd: int | None = None
        self._depth = 0
        self._holder: int | None = None  # the thread holding the lock
        self._threads = threading.RLock()
        # How to take the last bump back: the counter's bytes before it, or None if the bump created the file.
        self._before_bump: bytes | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = self._open_file(self.path, "the writer lock file .write.lock")
        return self._fd

    def _open_file(self, path: Path, what: str) -> int:
        try:
            return open_regular(path, os.O_RDWR, what, create=True, owner=self._owner)
        except PermissionError as exc:
            if exc.__class__ is not PermissionError:
                raise  # an UnsafePathError
            # A user with read access only: flock works on a read-only descriptor,
            # and a reader never bumps the counter.
            try:
                return open_regular(path, os.O_RDONLY, what)
            except FileNotFoundError:
                raise exc from None  # missing, and not ours to create: the permission is the problem

    def _open_counter(self) -> int | None:
        """The counter's descriptor, opened read-only if not open yet; None while there is no counter."""
        if self._counter_fd is None:
            try:
                self._counter_fd = open_regular(self.counter_path, os.O_RDONLY, "the write counter entries/.generation")
            except FileNotFoundError:
                return None
        return self._counter_fd

    def _writable_counter(self) -> int:
        """The counter's descriptor opened for writing, creating the counter if missing."""
        if self._counter_fd is not None and fcntl.fcntl(self._counter_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            os.close(self._counter_fd)
            self._counter_fd = None
        if self._counter_fd is None:
            try:
                self._counter_fd = open_regular(
                    self.counter_path, os.O_RDWR, "the write counter entries/.generation", create=True, owner=self._owner
                )
            except FileNotFoundError:  # no entries/ to make it in: the journal was moved away or removed under this object
                raise JournalNotFoundError(self.path.parent) from None
        return self._counter_fd

    def hold(self) -> None:
        """For a writer's open: open the lock file and the write counter now, each made if missing, and keep them open.

        The counter is made in one step, holding the generation an older journal's lock file carried (0 for a new
        journal): written under another name, then linked to its own, so no process ever reads a counter that is half
        made, and one made meanwhile by another process is kept. Once both are held, :meth:`in_place` tells whether
        they are still the files at their paths.
        """
        lock = self._open()
        if self._open_counter() is not None:
            return
        temp = self.counter_path.with_name(f".tmp-generation-{secrets.token_hex(8)}")  # a temporary name no scan takes for an entry
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            take_ownership(fd, FILE_MODE, self._owner)
            text = str(max(_parse(os.pread(lock, _WIDTH, 0)), 0)).rjust(_WIDTH).encode("ascii")
            if os.pwrite(fd, text, 0) != len(text):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temp))  # noqa: TRY301 - a short write means a full disk; removed below
        except BaseException:
            os.close(fd)
            os.unlink(temp)
            raise
        os.close(fd)
        try:
            os.link(temp, self.counter_path, follow_symlinks=False)
        except FileExistsError:
            pass  # another writer made it meanwhile: that one is the counter
        finally:
            os.unlink(temp)
        self._open_counter()

    def in_place(self) -> bool:
        """Whether the lock file and the counter this object holds open (those it holds) are the files at their paths now.

        A restore that copies files in replaces them: a writer locking the old lock file would exclude no other writer,
        and one counting in the old counter would count writes no other process reads.
        """
        return all(fd is None or _names(fd, path) for fd, path in ((self._fd, self.path), (self._counter_fd, self.counter_path)))

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds; False only when not *blocking*.

        Reentrant per thread: ``flock`` belongs to the open file, which every
        thread of the process shares, so a thread lock decides which thread
        holds it, and another thread waits here as another process would.
        """
        deadline = time.monotonic() + self.timeout
        if not self._threads.acquire(blocking, self.timeout if blocking else -1):
            if not blocking:
                return False
            raise LockTimeoutError(self.path, self.timeout)
        try:
            taken = self._depth > 0 or self._flock(blocking=blocking, deadline=deadline)
        except BaseException:
            self._threads.release()
            raise
        if not taken:
            self._threads.release()
            return False
        self._depth += 1
        self._holder = threading.get_ident()
        return True

    def _flock(self, *, blocking: bool, deadline: float) -> bool:
        fd = self._open()
        pause = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not blocking:
                    return False
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(self.path, self.timeout) from None
                # flock has no timed wait. Short pauses keep a waiter from being
                # starved by a writer that re-takes the lock within microseconds.
                time.sleep(pause)
                pause = min(pause * 2, 0.002)
            else:
                return True

    def release(self) -> None:
        """Release one level of the lock."""
        if not self.is_held:
            raise RuntimeError("release of a writer lock that this thread does not hold")
        self._depth -= 1
        if self._depth == 0:
            self._holder = None
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()

    @property
    def is_held(self) -> bool:
        """True while the calling thread holds the lock."""
        return self._depth > 0 and self._holder == threading.get_ident()

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def read_generation(self) -> int:
        """The current write generation: 0 before the first append, -1 when the counter file is unreadable.

        -1 is never an index's generation, so it forces a reconcile, after
        which the writer writes the counter anew (see :meth:`bump_generation`).
        """
        fd = self._open_counter()
        return 0 if fd is None else _parse(os.pread(fd, _WIDTH, 0))

    def stamp(self) -> str:
        """The counter file's stamp (its inode and change time, see :func:`stamp_of`); "" while there is no counter.

        Every bump changes it, so the index records it with the generation of the same write.
        """
        fd = self._open_counter()
        return "" if fd is None else stamp_of(os.fstat(fd))

    def bump_generation(self, *, durable: bool = True) -> int:
        """Increase the generation, fsynced if *durable*; only while holding the lock."""
        if not self.is_held:
            raise RuntimeError("the write generation changes only under the writer lock")
        fd = self._open_counter()
        self._before_bump = None if fd is None else os.pread(fd, _WIDTH + 1, 0)
        # No counter yet (fd is None): a new journal, or one of an older version,
        # whose counter was in the lock file; continue above that, so that no
        # copy of its index can match the new counter.
        current = max(_parse(os.pread(self._open() if fd is None else fd, _WIDTH, 0)), 0)
        fd = self._writable_counter()
        new = current + 1
        os.pwrite(fd, str(new).rjust(_WIDTH).encode("ascii"), 0)
        if durable:
            os.fdatasync(fd)
        return new

    def undo_bump(self) -> None:
        """Take back the last :meth:`bump_generation`, for an append that published nothing; only while holding the lock.

        A counter left ahead of the index is safe (it only makes the next open
        check the files), but it would change a file for a write that did not
        happen, and make every reader warn that the index is behind.
        """
        if not self.is_held:
            raise RuntimeError("the write generation changes only under the writer lock")
        if self._before_bump is None:
            os.unlink(self.counter_path)  # this bump created it; a stale descriptor is dropped below
            if self._counter_fd is not None:
                os.close(self._counter_fd)
                self._counter_fd = None
            return
        fd = self._writable_counter()
        os.pwrite(fd, self._before_bump, 0)
        os.ftruncate(fd, len(self._before_bump))

    def close(self) -> None:
        """Close the lock file (releasing the lock if held)."""
        if self._counter_fd is not None:
            os.close(self._counter_fd)
            self._counter_fd = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.is_held:
                for _ in range(self._depth):
                    self._threads.release()
            self._depth = 0
            self._holder = None


def _names(fd: int, path: Path) -> bool:
    """Whether *path* names the very file open as *fd* (its device and inode)."""
    try:
        held, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _parse(raw: bytes) -> int:
    try:
        return int(raw.decode("ascii").strip() or 0)
    except (UnicodeDecodeError, ValueError):
        return -1  # unreadable: never equal to an index's generation, so it forces a reconcile
