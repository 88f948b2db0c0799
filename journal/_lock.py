"""The writer lock: an OS-held advisory lock that also carries the write generation.

``fcntl.flock`` is released by the kernel when its holder dies, so a lock is
never judged stale by its age and never stolen. The lock file's first bytes
hold a counter that every append bumps *before* it publishes a file; the
index stores the counter it has caught up with, so a mismatch reveals a crash
between publish and index, or an index restored from an older copy, without
listing ``entries/``.

A killed process loses nothing that it wrote to the page cache, so within one
boot of the machine the counter needs no fsync. Only a power loss or kernel
crash can drop it, and both end the boot: the index records the boot id of
its last full check, and the first writer or reader of a new boot checks
every file name once. Where no boot id can be read, every bump is fsynced.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from journal.errors import LockTimeoutError, UnsafePathError

__all__ = ["WriteLock", "current_boot_id"]

_WIDTH = 20  # decimal digits of the generation counter
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id() -> str | None:
    """The kernel's id for this boot of the machine, or None where there is none (non-Linux)."""
    try:
        return _BOOT_ID.read_text("ascii").strip() or None
    except OSError:
        return None


class WriteLock:
    """Exclusive writer lock on ``<root>/.write.lock``; reentrant within one object."""

    def __init__(self, path: Path, *, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def _open(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                if os.path.islink(self.path):
                    raise UnsafePathError(self.path, "the writer lock file is a symlink") from exc
                raise
        return self._fd

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds; False only when not *blocking*."""
        if self._depth:
            self._depth += 1
            return True
        fd = self._open()
        deadline = time.monotonic() + self.timeout
        pause = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not blocking:
                    return False
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(self.path, self.timeout) from None
                # flock has no timed wait. Short pauses keep a waiter from being
                # starved by a writer that re-takes the lock within microseconds.
                time.sleep(pause)
                pause = min(pause * 2, 0.002)
        self._depth = 1
        return True

    def release(self) -> None:
        """Release one level of the lock."""
        if self._depth == 0:
            raise RuntimeError("release of a writer lock that is not held")
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @property
    def is_held(self) -> bool:
        """True while this object holds the lock."""
        return self._depth > 0

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def read_generation(self) -> int:
        """The current write generation (0 for a new or emptied lock file)."""
        raw = os.pread(self._open(), _WIDTH, 0)
        try:
            return int(raw.decode("ascii").strip() or 0)
        except (UnicodeDecodeError, ValueError):
            return -1  # unreadable: never equal to an index's generation, so it forces a reconcile

    def bump_generation(self, *, durable: bool = True) -> int:
        """Increase the generation, fsynced if *durable*; only while holding the lock."""
        if not self._depth:
            raise RuntimeError("the write generation changes only under the writer lock")
        fd = self._open()
        new = max(self.read_generation(), 0) + 1
        os.pwrite(fd, str(new).rjust(_WIDTH).encode("ascii"), 0)
        if durable:
            os.fdatasync(fd)
        return new

    def close(self) -> None:
        """Close the lock file (releasing the lock if held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._depth = 0
