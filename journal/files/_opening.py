"""What an open of a journal directory may rely on: its directories checked, its failures undone.

A journal created on a full disk, say, must not stay half made: a failed
open removes the files and (empty) directories it created, and nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from journal.errors import UnsafePathError
from journal.files._storage import is_storage_failure, storage_errors

__all__ = ["ensure_dir", "may_fall_back", "undone_on_failure"]

#: What an open may create, in the order a failed open removes what it did create.
_CREATED_FILES: Final = (*(f"index/journal.sqlite3{suffix}" for suffix in ("-wal", "-shm", "-journal", "")), ".write.lock")
_CREATED_DIRS: Final = ("models", "index", "entries")
#: The write counter in ``entries/``, which a writer's open makes (see journal.files._lock.WriteLock.hold).
_COUNTER: Final = ".generation"


@contextlib.contextmanager
def undone_on_failure(root: Path) -> Iterator[None]:
    """Make a failed open leave behind nothing it created, and report the filesystem's refusals as JournalStorageError.

    Nothing that existed before the open is touched; the manifest goes only
    together with an ``entries/`` directory the same open created, so no
    entry can lose it. The block must close whatever it opened before it
    raises.
    """
    ancestors = [root, *root.parents]
    missing_dirs = ancestors[: next((i for i, path in enumerate(ancestors) if os.path.lexists(path)), len(ancestors))]
    existed = {name for name in (*_CREATED_FILES, *_CREATED_DIRS, "manifest.json") if os.path.lexists(root / name)}
    try:
        with storage_errors(root, "open", index_path=root / "index" / "journal.sqlite3"):
            yield
    except BaseException:
        if "entries" not in existed and _names_in(root / "entries") == [_COUNTER]:
            with contextlib.suppress(OSError):
                os.unlink(root / "entries" / _COUNTER)  # the write counter a writer's open made in the entries/ it made
        new = [name for name in (*_CREATED_FILES, "manifest.json") if name not in existed]
        if "entries" in existed or "manifest.json" not in new or _names_in(root / "entries"):
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


def _names_in(directory: Path) -> list[str]:
    """The names in *directory*; none when it cannot be listed."""
    try:
        return os.listdir(directory)
    except OSError:
        return []


def may_fall_back(exc: BaseException) -> bool:
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


def ensure_dir(path: Path, *, create: bool) -> None:
    """Check that *path* is a directory and no symlink (creating it 0700 if missing and *create*).

    Raises:
        FileNotFoundError: *path* is missing and *create* is false.
        UnsafePathError: *path* is a symlink or no directory, or the way to it is no way to a directory
            (a symbolic link loop, a file where a directory belongs).
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not create:
            raise
        path.mkdir(mode=0o700, exist_ok=True)
        mode = os.lstat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "a symbolic link loop on the way to it (too many levels of symbolic links)") from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafePathError(path, "a file where a directory on the way to it belongs") from None
        raise
    if stat.S_ISLNK(mode):
        raise UnsafePathError(path, "a symlink where the journal expects a directory")
    if not stat.S_ISDIR(mode):
        raise UnsafePathError(path, "not a directory")
