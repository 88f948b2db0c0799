"""Writing a command's output file whole or not at all: ``--out FILE`` of both reports and of an export, or ``-`` for stdout.

The file is written to a temporary name in its own directory, fsynced, and
renamed over *path*, and the directory is fsynced: a reader (or a crash)
sees the old file or the new one, never a part. A symlink, FIFO, device or
directory at *path* is refused before anything is written, as the journal
refuses them at its own paths (:mod:`journal.files._safefs`); the file is created
``0600``, like the journal's files, since it holds their text.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from journal.errors import JournalStorageError, UnsafePathError
from journal.files import FILE_MODE, check_regular, fsync_directory

__all__ = ["STDOUT", "partial_directory", "remove_abandoned_partials", "replace_durably", "streamed_output", "write_output"]

#: The ``--out`` value that means standard output.
STDOUT = "-"


def _fix(code: int | None) -> str | None:
    """How to fix a refused output file, where the storage error's own hint would speak of the journal (it is no journal's)."""
    if code in (errno.ENOENT, errno.ENOTDIR):
        return "create that directory first, or name a file in one that exists"
    if code in (errno.EACCES, errno.EPERM):
        return "name a file in a directory this user may write, or give it write access to that one"
    if code == errno.EROFS:
        return "name a file on a filesystem mounted read-write"
    return None  # a full disk's own hint (free space) holds for any file


def write_output(target: str, data: bytes, *, what: str = "the report", stdout: BinaryIO | None = None) -> Path | None:
    """Write *data* to the file *target* atomically, or to *stdout* when *target* is ``-``; return the path written (None for stdout).

    Raises:
        UnsafePathError: a symlink or anything but a regular file is at *target*, or *target* names a directory (``dir/``).
        JournalStorageError: the filesystem refused (full, read-only, denied); nothing was left behind.
    """
    if target == STDOUT:
        stream = stdout if stdout is not None else sys.stdout.buffer
        try:
            stream.write(data)
            stream.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            raise JournalStorageError.for_errno("<stdout>", exc.errno or errno.EIO, f"write {what} to") from None
        return None
    path = _checked_target(target, what)
    directory = path.parent
    try:
        replace_durably(path, data, prepare=lambda fd: os.fchmod(fd, FILE_MODE))
    except OSError as exc:
        into = exc.filename == str(directory)  # the temporary file could not be made there
        raise JournalStorageError.for_errno(directory if into else path, exc.errno or errno.EIO, f"write {what} {'into' if into else 'to'}",
                                            _fix(exc.errno)) from None
    return path


def _checked_target(target: str, what: str) -> Path:
    """*target* as a path, refused when it names a directory or something other than a regular file is there."""
    last = os.path.basename(target)
    if last in ("", ".", ".."):
        # Path() would drop a trailing "/" or "/.": "--out reports/" would then become a file named reports.
        raise UnsafePathError(target, f"the output file for {what} names a directory (it ends with {last or '/'!r}), "
                                      "not a file; name a file in it, such as report.html")
    path = Path(target)
    check_regular(path, f"the output file for {what}")
    return path


@contextlib.contextmanager
def streamed_output(target: str, *, what: str, stdout: BinaryIO | None = None) -> Iterator[BinaryIO]:
    """A binary stream that becomes the file *target* whole when the block ends without error (``-``: *stdout* as it is).

    The stream is a temporary file in the target's directory: written as the
    block goes, then fsynced and renamed over *target*, the directory
    fsynced; an error in the block (a full disk) removes it, and *target* is
    as it was. For an output too large to hold in memory (an export).

    Raises:
        UnsafePathError: as :func:`write_output`.
        JournalStorageError: the filesystem refused (full, read-only, denied); nothing was left behind.
    """
    if target == STDOUT:
        stream = stdout if stdout is not None else sys.stdout.buffer
        try:
            yield stream
            stream.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE or isinstance(exc, JournalStorageError):
                raise
            raise JournalStorageError.for_errno("<stdout>", exc.errno or errno.EIO, f"write {what} to") from None
        return
    path = _checked_target(target, what)
    directory = path.parent
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise JournalStorageError.for_errno(directory, exc.errno or errno.EIO, f"write {what} into", _fix(exc.errno)) from None
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
        fsync_directory(directory)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(exc, OSError) and not isinstance(exc, JournalStorageError):
            raise JournalStorageError.for_errno(path, exc.errno or errno.EIO, f"write {what} to", _fix(exc.errno)) from None
        raise


def replace_durably(path: Path, data: bytes, *, prepare: Callable[[int], None] | None = None) -> None:
    """Replace the file *path* with *data*: a temporary file in its directory (given to *prepare* first), fsynced, renamed, the directory fsynced.

    A reader, or a crash, sees the old content or the new, never a part; nothing is left behind on failure.

    Raises:
        OSError: the filesystem refused; its ``filename`` is the directory when the temporary file could not be created there, else *path*.
    """
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        exc.filename = str(path.parent)
        raise
    try:
        if prepare is not None:
            prepare(fd)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            exc.filename = str(path)  # not the temporary name, which is gone
        raise
    try:
        fsync_directory(path.parent)
    except OSError as exc:
        exc.filename = str(path)
        raise


def partial_directory(target: Path) -> tuple[Path, int]:
    """Make the hidden directory (``.NAME.XXXXXXXX.partial``, mode 0700) a copy meant for *target* is written in before its rename.

    Returns it and a descriptor that holds its lock (the kernel's flock) until closed: closed by the caller once the copy is renamed or
    removed, and released by the kernel however the process ends, so a partial directory no process holds is one a killed run left
    (see :func:`remove_abandoned_partials`).

    Raises:
        OSError: the directory could not be made (nothing is left).
    """
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        held = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(work)
        raise
    fcntl.flock(held, fcntl.LOCK_EX)
    return work, held


def remove_abandoned_partials(target: Path) -> list[str]:
    """Remove the partial directories of copies meant for *target* that no process holds any more: what a run killed (SIGKILL, a power cut)
    before its rename left. One still being written is locked by its run and left alone; one that cannot be removed stays. Returns the
    names removed.
    """
    prefix = f".{target.name}."
    try:
        names = [name for name in os.listdir(target.parent) if name.startswith(prefix) and name.endswith(".partial")]
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        try:
            held = os.open(target.parent / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no directory (a link, a file): not a partial copy, left alone
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(held)
            continue  # a run still writing it
        try:
            shutil.rmtree(target.parent / name)
        except OSError:
            continue  # it stays, hidden, and never stops the new copy
        else:
            removed.append(name)
        finally:
            os.close(held)
    return removed
