"""Turn the filesystem's refusals (OSError, sqlite3 I/O errors) into :class:`JournalStorageError`.

A full disk, a read-only mount or a missing permission must reach the user
as one line naming the path, the errno and the fix, never as a traceback.
OSErrors carry their errno. SQLite does not: it reports ``SQLITE_FULL``,
``SQLITE_READONLY``, ``SQLITE_CANTOPEN`` or a generic ``SQLITE_IOERR``
(a ``-shm`` file that cannot grow on a full disk is one), so the index
directory is examined to name the cause: a read-only mount, no write access,
or (almost) no free space or no free inode, else a plain I/O error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from journal.errors import JournalError, JournalStorageError

__all__ = ["STORAGE_ERRNOS", "is_storage_failure", "scratch_errors", "storage_error", "storage_errors"]

#: The errnos that mean "the filesystem refused", as opposed to a missing file or a bug.
STORAGE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG})

_SQLITE_PERM: Final = 3
_SQLITE_READONLY: Final = 8
_SQLITE_IOERR: Final = 10
_SQLITE_FULL: Final = 13
_SQLITE_CANTOPEN: Final = 14
_SQLITE_STORAGE_CODES: Final = frozenset({_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN})

# Below this much free space a failed SQLite write is reported as a full disk:
# a commit needs a few pages of WAL and the -shm file grows by 32 KiB at a time.
_NEARLY_FULL_BYTES: Final = 1024 * 1024


def _diagnose(database: Path) -> tuple[int, Path]:
    """The errno that best explains why SQLite could not use *database*, and the file or directory to blame."""
    directory = database.parent
    try:
        fs = os.statvfs(directory)
    except OSError as exc:
        return exc.errno or errno.EIO, directory
    if fs.f_flag & os.ST_RDONLY:
        return errno.EROFS, database
    effective = os.access in os.supports_effective_ids
    if not os.access(directory, os.W_OK | os.X_OK, effective_ids=effective):
        return errno.EACCES, directory
    for suffix in ("", "-wal", "-shm", "-journal"):  # say a -shm left by another user, not "the directory"
        side = Path(f"{database}{suffix}")
        if os.path.lexists(side) and not os.access(side, os.R_OK | os.W_OK, effective_ids=effective):
            return errno.EACCES, side
    free = (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) * fs.f_frsize
    out_of_inodes = fs.f_files > 0 and (fs.f_ffree if os.geteuid() == 0 else fs.f_favail) == 0  # no new -wal or -shm file
    return errno.ENOSPC if free < _NEARLY_FULL_BYTES or out_of_inodes else errno.EIO, database


def _permission_fix(path: Path | str, access: str = "write") -> str | None:
    """Name the owner and mode of *path* (or of its nearest existing directory), so the fix is plain."""
    directory = Path(path)
    while not os.path.lexists(directory) and directory != directory.parent:
        directory = directory.parent
    try:
        info = os.lstat(directory)
    except OSError:
        return None
    try:
        owner = f"{pwd.getpwuid(info.st_uid).pw_name} (uid {info.st_uid})"
    except KeyError:
        owner = f"uid {info.st_uid}"
    return (
        f"{str(directory)!r} is owned by {owner} with mode {stat.S_IMODE(info.st_mode):04o} and this process runs as uid {os.geteuid()}; "
        f"run as a user that may {access} {'it' if os.path.isfile(directory) and access == 'read' else 'there'}, or change its owner or mode"
    )


def is_storage_failure(exc: sqlite3.Error) -> bool:
    """True when SQLite's *exc* is the filesystem refusing (full, read-only, no permission, cannot open, I/O), not a bug or corruption."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _SQLITE_STORAGE_CODES


def storage_error(exc: BaseException, path: Path | str, action: str, *, index_path: Path | None = None) -> JournalStorageError | None:
    """The JournalStorageError that *exc* amounts to, or None if it is no storage failure.

    Args:
        exc: an OSError, or a sqlite3 error from the index at *index_path*.
        path: what the operation was on, named when the OSError names no absolute path.
        action: what was being done ("write the entry file in", "commit the index").
        index_path: the index database, for sqlite3 errors.
    """
    if isinstance(exc, JournalStorageError):
        return exc
    if isinstance(exc, JournalError):
        return None  # refined on purpose already (UnsafePathError is a PermissionError, say)
    if isinstance(exc, OSError):
        if exc.errno not in STORAGE_ERRNOS:
            return None
        named = exc.filename if isinstance(exc.filename, str) and os.path.isabs(exc.filename) else path
        return _error(named, exc.errno, action)
    if isinstance(exc, sqlite3.DatabaseError) and index_path is not None:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code not in _SQLITE_STORAGE_CODES:
            return None
        cause, culprit = _diagnose(index_path)
        if code in (_SQLITE_FULL, _SQLITE_IOERR) and cause == errno.EIO:
            # The index's own filesystem has room: what filled up may be TMPDIR, where SQLite keeps a statement's
            # temporary files (its statement journal, a sort), so name the scratch space when that is the full one.
            scratch = _full_scratch()
            if scratch is not None:
                return _scratch_error(scratch, errno.ENOSPC, "the index's temporary files")
        if code == _SQLITE_FULL:
            cause, culprit = errno.ENOSPC, index_path
        return _error(culprit, cause, action)
    return None


def _error(path: Path | str, code: int, action: str) -> JournalStorageError:
    access = "read" if action.startswith("read the") else "write"  # "read the entry file": a reader lacks read access
    fix = _permission_fix(path, access) if code in (errno.EACCES, errno.EPERM) else None
    return JournalStorageError.for_errno(path, code, action, fix)


@contextlib.contextmanager
def storage_errors(path: Path | str, action: str, *, index_path: Path | None = None) -> Iterator[None]:
    """Raise what the block's OSError or sqlite3 I/O error amounts to as a JournalStorageError."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        converted = storage_error(exc, path, action, index_path=index_path)
        if converted is None or converted is exc:
            raise
        raise converted from exc


_SCRATCH_FIXES: Final = {
    errno.ENOSPC: "free space there, or set TMPDIR to a directory with room; the journal is not at fault",
    errno.EDQUOT: "free space there (or raise the quota), or set TMPDIR to a directory with room; the journal is not at fault",
}
_SCRATCH_ELSE: Final = "set TMPDIR to a directory this user may write, on a filesystem with room; the journal is not at fault"


@contextlib.contextmanager
def scratch_errors(what: str) -> Iterator[None]:
    """Raise the block's OSError or SQLite I/O error as a JournalStorageError naming the scratch space (``$TMPDIR``), never the journal.

    For the work a command does in temporary files outside the journal (an import's spool, verify's scratch index):
    a full or unwritable ``$TMPDIR`` is named as such, with its path, its errno's exit code (74, 73, 77) and the fix.

    Args:
        what: what the scratch space holds ("the import's spool", "verify's scratch index").
    """
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        directory = tempfile.gettempdir()
        if isinstance(exc, JournalError) and not isinstance(exc, JournalStorageError):
            raise
        if isinstance(exc, OSError):
            if exc.errno not in STORAGE_ERRNOS:
                raise
            code = exc.errno
        else:
            sqlite_code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if sqlite_code not in _SQLITE_STORAGE_CODES:
                raise
            code = errno.ENOSPC if sqlite_code == _SQLITE_FULL else _diagnose(Path(directory) / "scratch")[0]
        raise _scratch_error(directory, code, what) from exc


def _scratch_error(directory: str, code: int, what: str) -> JournalStorageError:
    """The error naming the scratch space *directory* (``$TMPDIR``) as what refused to hold *what*, with the fix."""
    fix = _SCRATCH_FIXES.get(code, _SCRATCH_ELSE)
    return JournalStorageError.for_errno(directory, code, f"write {what} in the scratch space (TMPDIR)", fix)


#: Where SQLite looks for its temporary files' directory after its two environment variables, in its order.
_SQLITE_TEMP_DIRECTORIES: Final = ("/var/tmp", "/usr/tmp", "/tmp")  # noqa: S108 - named to find SQLite's choice, never written here


def _sqlite_scratch() -> str | None:
    """The directory SQLite keeps its temporary files in, chosen as SQLite chooses it (its unix VFS's order), or None.

    Python's :func:`tempfile.gettempdir` would pass over a full ``$TMPDIR`` (it must create a file there); SQLite only asks
    whether it may write there, so a full one is where its temporary files failed.
    """
    for directory in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), *_SQLITE_TEMP_DIRECTORIES):
        if directory and os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK):
            return directory
    return None


def _full_scratch() -> str | None:
    """SQLite's scratch space (``$TMPDIR``) when it has (almost) no room or no free inode, else None."""
    directory = _sqlite_scratch()
    if directory is None:
        return None
    try:
        fs = os.statvfs(directory)
    except OSError:
        return None
    free = (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) * fs.f_frsize
    out_of_inodes = fs.f_files > 0 and (fs.f_ffree if os.geteuid() == 0 else fs.f_favail) == 0
    return directory if free < _NEARLY_FULL_BYTES or out_of_inodes else None
