"""Opening journal paths without following links or trusting what sits there.

Every file the journal opens by name is opened with ``O_NOFOLLOW`` (a symlink
is refused, never followed into another application's data) and
``O_NONBLOCK`` (a FIFO or device cannot hang the open), then ``fstat``-ed:
anything that is not a regular file is refused with :class:`UnsafePathError`
naming the path. What the journal creates gets the modes docs/python-api.md states
(directories ``0700``, files ``0600``) whatever the umask, and, when root
works on a journal that another user owns, that user as owner, so that a
root-run read or repair never leaves files the service user cannot open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from journal.errors import UnsafePathError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "Owner",
    "check_dir",
    "check_regular",
    "describe",
    "journal_owner",
    "make_dir",
    "open_regular",
    "take_ownership",
]

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600

#: ``(uid, gid)`` to give what the journal creates, or None to leave the creator's own.
Owner = tuple[int, int] | None

_KINDS: Final = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a regular file"),
)


def describe(mode: int) -> str:
    """What kind of file *mode* (an ``st_mode``) is, as words for an error message."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def journal_owner(root: Path) -> Owner:
    """Whom files created in the journal at *root* must belong to.

    Only root can give a file away; for any other user the files it creates
    are its own, which is right (it could not write to another user's 0700
    journal anyway). Root working on a journal owned by another user (a
    service account) hands what it creates to that user.
    """
    if os.geteuid() != 0:
        return None
    info = os.lstat(root)
    if info.st_uid == 0:
        return None
    return info.st_uid, info.st_gid


def take_ownership(fd: int, mode: int, owner: Owner) -> None:
    """Give a file or directory the journal creates its stated *mode* and *owner*."""
    if owner is not None:
        os.fchown(fd, *owner)
    os.fchmod(fd, mode)  # the umask may have taken bits away (or, at 0, never narrowed a caller's wider mode)


def _check_kind(path: Path | str, what: str, is_kind: Callable[[int], bool], kind: str) -> os.stat_result | None:
    """The ``lstat`` of *path* if *is_kind* holds for it, None if nothing is there; else UnsafePathError."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not is_kind(info.st_mode):
        raise UnsafePathError(path, f"{what} is {describe(info.st_mode)}, not {kind}; move it away")
    return info


def check_regular(path: Path | str, what: str) -> os.stat_result | None:
    """The ``lstat`` of *path* if it is a regular file, None if nothing is there.

    Raises:
        UnsafePathError: something other than a regular file is at *path*.
    """
    return _check_kind(path, what, stat.S_ISREG, "a regular file")


def check_dir(path: Path | str, what: str) -> os.stat_result | None:
    """The ``lstat`` of *path* if it is a real directory, None if nothing is there.

    Raises:
        UnsafePathError: a symlink or anything else but a directory is at *path*.
    """
    return _check_kind(path, what, stat.S_ISDIR, "a directory")


def make_dir(path: Path, what: str, owner: Owner) -> None:
    """Create the directory *path* (if missing) with mode 0700 and *owner*; refuse a non-directory there."""
    if check_dir(path, what) is not None:
        return
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        check_dir(path, what)  # made meanwhile by another process, or something else put there
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        take_ownership(fd, DIR_MODE, owner)
    finally:
        os.close(fd)


def open_regular(path: Path | str, flags: int, what: str, *, create: bool = False, owner: Owner = None, dir_fd: int | None = None) -> int:
    """Open the regular file *path* without following a symlink or blocking on a FIFO.

    With *create*, a missing file is created (exclusively, so that it is known
    to be this call's own) with mode 0600 and *owner*. *flags* are the access
    flags (``O_RDONLY``, ``O_RDWR``, ...); the safety flags are added here.

    Raises:
        UnsafePathError: a symlink, FIFO, device, socket or directory is at *path*.
        FileNotFoundError: nothing is at *path* and *create* is false, or the directory to create it in is gone (at once:
            trying again would only spin for as long as it is gone).
    """
    safe = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    shown = path if dir_fd is None else what
    try:
        # Refused before any open: opening some devices has effects of its own.
        info = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            raise
    else:
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(shown, f"{what} is a symlink; the journal never follows links, move it away")
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(shown, f"{what} is {describe(info.st_mode)}, not a regular file; move it away")
    while True:
        created = False
        try:
            if create:
                try:
                    fd = os.open(path, safe | os.O_CREAT | os.O_EXCL, FILE_MODE, dir_fd=dir_fd)
                    created = True
                except FileExistsError:
                    try:
                        fd = os.open(path, safe, dir_fd=dir_fd)
                    except FileNotFoundError:
                        continue  # removed between the two opens: try again
            else:
                fd = os.open(path, safe, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(shown, f"{what} is a symlink; the journal never follows links, move it away") from None
            if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENOTDIR):  # ENXIO: a FIFO opened for writing with no reader
                info = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
                raise UnsafePathError(shown, f"{what} is {describe(info.st_mode)}, not a regular file; move it away") from None
            raise
        break
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(shown, f"{what} is {describe(info.st_mode)}, not a regular file; move it away")  # noqa: TRY301 - the except below only closes the file
        if created:
            take_ownership(fd, FILE_MODE, owner)
    except BaseException:
        os.close(fd)
        raise
    return fd
