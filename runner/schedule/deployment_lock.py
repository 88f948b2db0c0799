"""The deployment lock of ``serve``: one scheduler per deployment, held by the OS on ``runner.lock_file``."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from pathlib import Path
from typing import Final

from runner.errors import ConfigError, SchedulerBusyError

__all__ = ["DeploymentLock"]

#: What a deployment lock file may hold: nothing, or the process id a scheduler wrote.
_LOCK_CONTENT: Final = re.compile(rb"(?:[0-9]{1,19}\n?)?")
_LOCK_MAX_BYTES: Final = 32
#: errnos of a filesystem that refuses the lock file, which serve reports with their own exit code (73, 74, 77).
_FS_REFUSALS: Final = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM})


class DeploymentLock:
    """An OS-held exclusive lock: released by the kernel if the process dies.

    The lock file is the scheduler's own: empty, or holding one scheduler's
    process id. Whatever else ``runner.lock_file`` names (a symlink, a
    directory, a FIFO or device, a hard link, a file with other content, such
    as a persona after a configuration slip) is refused with a ConfigError
    and left exactly as it was: the path is opened without following a
    symlink, without O_TRUNC and without blocking, and nothing is written
    before the checks pass.
    """

    def __init__(self, path: Path, source: str = "the configuration") -> None:
        self.path = path
        self.source = source
        self._fd: int | None = None

    def _refuse(self, what: str) -> ConfigError:
        return ConfigError(
            self.source,
            "runner.lock_file",
            "a path of the scheduler's own (no file yet, or a regular file holding only a process id); "
            "point runner.lock_file at a new file",
            f"{str(self.path)!r}, {what}",
        )

    def _check(self, info: os.stat_result) -> None:
        if stat.S_ISLNK(info.st_mode):
            raise self._refuse("a symbolic link")
        if not stat.S_ISREG(info.st_mode):
            raise self._refuse("not a regular file")
        if info.st_nlink != 1:
            raise self._refuse(f"a file with {info.st_nlink} hard links")
        if info.st_size > _LOCK_MAX_BYTES:
            raise self._refuse(f"a file of {info.st_size} bytes, not a lock")

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise  # the filesystem refusing (read-only, full, no permission): exit 73, 74 or 77, not a configuration error
            raise self._refuse(f"its directory cannot be created ({exc.strerror or exc})") from None
        try:
            self._check(os.lstat(self.path))  # refuses a device or FIFO before it is even opened
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise
            raise self._refuse(exc.strerror or str(exc)) from None  # a name too long, a file where a directory should be
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno in _FS_REFUSALS:
                raise
            raise self._refuse("a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
        try:
            self._check(os.fstat(fd))  # what was opened, not what the name pointed to a moment ago
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SchedulerBusyError(self.path) from None
            held = os.pread(fd, _LOCK_MAX_BYTES + 1, 0)
            if not _LOCK_CONTENT.fullmatch(held):
                raise self._refuse("a file whose content is not a scheduler's process id")  # noqa: TRY301 - the except below only closes the file
            own = f"{os.getpid()}\n".encode()
            os.pwrite(fd, own, 0)
            os.ftruncate(fd, len(own))  # only ever shortens a process id written by a scheduler
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def is_held(self) -> bool:
        """Whether a running ``serve`` holds this lock now (without taking it; a missing or unreadable file is not held)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
