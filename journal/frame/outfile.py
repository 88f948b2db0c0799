"""Writing a command's output file whole or not at all: ``--out FILE`` of both reports and of an export, or ``-`` for stdout.

The file is written to a temporary name in its own directory, fsynced, and
renamed over *path*, and the directory is fsynced: a reader (or a crash)
sees the old file or the new one, never a part. The file is created
``0600``, like the journal's files, since it holds their text.

Before anything is written the target is judged by where it is and by what
is there, and refused (:class:`~journal.errors.OutputPathError`, exit 2):

- anywhere inside a journal, as the kernel resolves the path (``..`` and
  symbolic links of the directories above followed): the journals the
  command names (``--root``, the configured agents'), and any directory at or
  above the target holding a journal manifest (:func:`refuse_inside_journals`;
  the backups, render and ``download-model`` keep out of journals through it too);
- a symlink, FIFO, device or directory, as the journal refuses them at its
  own paths (:mod:`journal.files._safefs`);
- a regular file that is not an earlier output of the same kind (its
  :class:`OutputKind` reads it to tell), unless the caller passes *force*
  (``--force``); an empty file (what ``mktemp`` makes) holds nothing to lose and is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO, Final

from journal.errors import JournalError, JournalStorageError, OutputPathError, UnsafePathError
from journal.files import FILE_MODE, check_regular, fsync_directory, holds_journal_manifest, open_regular

__all__ = [
    "STDOUT",
    "STOP_SIGNALS",
    "HeldStops",
    "OutputKind",
    "claim_partial_directory",
    "dangling_link_fix",
    "hold_stops",
    "output_fix",
    "refuse_inside_journals",
    "release_stops",
    "replace_durably",
    "streamed_output",
    "write_output",
]

#: The ``--out`` value that means standard output.
STDOUT = "-"
_NO_JOURNALS: Final[Mapping[str, Path]] = {}


@dataclass(frozen=True, slots=True)
class OutputKind:
    """What a command writes to its output file, and how it knows a file there for an earlier one of its own.

    Attributes:
        what: how messages name the output ("the report").
        earlier: how the refusal of another file names what could have been replaced ("a page that 'ghostjournal report' wrote").
        is_earlier: whether the open regular file (at its start, seekable) is an earlier output of this kind;
            it reads only what it needs (a head, a tail), whatever the file's size.
    """

    what: str
    earlier: str
    is_earlier: Callable[[BinaryIO], bool]


def refuse_inside_journals(path: Path | str, what: str, journals: Mapping[str, Path] = _NO_JOURNALS) -> None:
    """Refuse *path* (a file or directory to write) when it lies inside a journal, before anything is made.

    *journals* maps how a message names a journal ("agent 'motoko''s journal") to its root; besides them,
    any directory at or above *path* that holds a journal manifest is one. *path* is judged where the
    kernel would write it: ``..`` and the symbolic links on its way resolved.

    Raises:
        OutputPathError: *path* is a journal's root or lies under one.
    """
    real = Path(os.path.realpath(path))
    for name, root in journals.items():
        resolved = Path(os.path.realpath(root))
        if real == resolved or resolved in real.parents:
            raise OutputPathError(path, f"{what} is inside {name} ({str(root)!r}), which only the journal writes; name one outside it")
    for directory in (real, *real.parents):
        if holds_journal_manifest(directory):
            raise OutputPathError(
                path, f"{what} is inside the journal {str(directory)!r}, which only the journal writes; name one outside it"
            )


def output_fix(code: int | None, directory: Path | str | None = None) -> str | None:
    """How to fix a refused output (a file, a backup's directory) in *directory*, where the storage error's own hint would
    speak of the journal or of I/O errors (it is no journal's, and a missing directory is no I/O error)."""
    fix = dangling_link_fix(code, directory)
    if fix is not None:
        return fix
    if code in (errno.ENOENT, errno.ENOTDIR):
        return "create that directory first, or name an output in a directory that exists"
    if code in (errno.EACCES, errno.EPERM):
        return "name a file in a directory this user may write, or give it write access to that one"
    if code == errno.EROFS:
        return "name a file on a filesystem mounted read-write"
    return None  # a full disk's own hint (free space) holds for any file


def dangling_link_fix(code: int | None, directory: Path | str | None) -> str | None:
    """For an output refused with ENOENT in *directory*: the fix naming the symbolic link on the way to it that points nowhere
    (it, or the nearest of its parents that is there); None when there is no such link."""
    if code != errno.ENOENT or directory is None:
        return None
    for place in (Path(directory), *Path(directory).parents):
        if os.path.islink(place) and not os.path.exists(place):
            return (
                f"{str(place)!r} is a symbolic link that points nowhere ({os.readlink(place)!r} does not exist): "
                "make the directory it points to, or name an output in a directory that exists"
            )
        if os.path.lexists(place):
            return None
    return None


def write_output(
    target: str,
    data: bytes,
    *,
    kind: OutputKind,
    journals: Mapping[str, Path] = _NO_JOURNALS,
    force: bool = False,
    stdout: BinaryIO | None = None,
) -> Path | None:
    """Write *data* to the file *target* atomically, or to *stdout* when *target* is ``-``; return the path written (None for stdout).

    *journals*: the journals the command knows of (see :func:`refuse_inside_journals`); *force*: replace a
    file that is not an earlier output of *kind*.

    Raises:
        OutputPathError: *target* is inside a journal; a symlink or anything but a regular file is there; it names a
            directory (``dir/``); or, without *force*, it is a file that is no earlier output of *kind*.
        JournalStorageError: the filesystem refused (full, read-only, denied); nothing was left behind.
    """
    what = kind.what
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
    path = _checked_target(target, kind, journals, force)
    directory = path.parent
    try:
        replace_durably(path, data, prepare=lambda fd: os.fchmod(fd, FILE_MODE))
    except OSError as exc:
        into = exc.filename == str(directory)  # the temporary file could not be made there
        raise JournalStorageError.for_errno(
            directory if into else path,
            exc.errno or errno.EIO,
            f"write {what} {'into' if into else 'to'}",
            output_fix(exc.errno, directory),
        ) from None
    return path


def _checked_target(target: str, kind: OutputKind, journals: Mapping[str, Path], force: bool) -> Path:
    """*target* as a path, refused by the rules of this module's docstring."""
    what = f"the output file for {kind.what}"
    last = os.path.basename(target)
    if last in ("", ".", ".."):
        # Path() would drop a trailing "/" or "/.": "--out reports/" would then become a file named reports.
        raise OutputPathError(
            target, f"{what} names a directory (it ends with {last or '/'!r}), not a file; name a file in it, such as report.html"
        )
    path = Path(target)
    refuse_inside_journals(path, what, journals)
    try:
        info = check_regular(path, what)
    except UnsafePathError as exc:
        raise OutputPathError(exc.path, exc.reason) from None
    if info is not None and info.st_size and not force and not _is_earlier(path, kind):
        raise OutputPathError(target, f"{what} exists and is not {kind.earlier}; pass --force to replace it, or name another file")
    return path


def _is_earlier(path: Path, kind: OutputKind) -> bool:
    """Whether the regular file *path* is an earlier output of *kind*; one that cannot be read is not known to be."""
    try:
        fd = open_regular(path, os.O_RDONLY, "the output file")
    except (OSError, UnsafePathError):
        return False
    with os.fdopen(fd, "rb") as stream:
        try:
            return kind.is_earlier(stream)
        except (OSError, ValueError):
            return False


@contextlib.contextmanager
def streamed_output(
    target: str, *, kind: OutputKind, journals: Mapping[str, Path] = _NO_JOURNALS, force: bool = False, stdout: BinaryIO | None = None
) -> Iterator[BinaryIO]:
    """A binary stream that becomes the file *target* whole when the block ends without error (``-``: *stdout* as it is).

    The stream is a temporary file in the target's directory: written as the
    block goes, then fsynced and renamed over *target*, the directory
    fsynced; an error in the block (a full disk) removes it, and *target* is
    as it was. For an output too large to hold in memory (an export).

    Raises:
        OutputPathError: as :func:`write_output`.
        JournalStorageError: the filesystem refused (full, read-only, denied); nothing was left behind.
    """
    what = kind.what
    if target == STDOUT:
        stream = stdout if stdout is not None else sys.stdout.buffer
        try:
            yield stream
            stream.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE or isinstance(exc, JournalError):  # the journal's own error says what it refused
                raise
            raise JournalStorageError.for_errno("<stdout>", exc.errno or errno.EIO, f"write {what} to") from None
        return
    path = _checked_target(target, kind, journals, force)
    directory = path.parent
    stops = hold_stops()
    try:
        fd, temporary, held = _claim_temporary(path)
    except BaseException as exc:
        release_stops(stops)
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):  # the journal's own refusal says what it refused
            raise JournalStorageError.for_errno(
                directory, exc.errno or errno.EIO, f"write {what} into", output_fix(exc.errno, directory)
            ) from None
        raise
    try:
        release_stops(stops)  # a stop that came since the temporary was made is raised here, where it is removed
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
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):  # a refused link is no I/O error of the output
            raise JournalStorageError.for_errno(
                path, exc.errno or errno.EIO, f"write {what} to", output_fix(exc.errno, directory)
            ) from None
        raise
    finally:
        os.close(held)


#: The signals that stop a command (SIGTERM raises SystemExit there, SIGINT KeyboardInterrupt).
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


@dataclass
class HeldStops:
    """What :func:`hold_stops` replaced: the stop signals' handlers, and the stops that came while they were held."""

    handlers: dict[int, Callable[[int, FrameType | None], Any]]
    came: list[tuple[int, FrameType | None]]


def hold_stops() -> HeldStops:
    """Hold SIGTERM and SIGINT until :func:`release_stops`, which hands the first that came to its handler.

    Between making a hidden temporary and entering the block that removes it on failure there are a few steps
    of Python where a stop would leave it behind: a maker of one holds the stops across them, and releases them
    inside that block. A handler (Python's, which raises in the main thread whichever thread the kernel chose) is
    swapped for one that notes the signal; only the main thread can swap it, and elsewhere no stop raises anyway.
    SIG_DFL and SIG_IGN are left as they are: no Python code runs for them.
    """
    held = HeldStops({}, [])
    if threading.current_thread() is not threading.main_thread():
        return held

    def note(signum: int, frame: FrameType | None) -> None:
        held.came.append((signum, frame))

    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if callable(handler):
            held.handlers[sig] = handler
            signal.signal(sig, note)
    return held


def release_stops(held: HeldStops) -> None:
    """Put back the handlers :func:`hold_stops` swapped, then hand them the first stop that came meanwhile (it may raise)."""
    for sig, handler in held.handlers.items():
        signal.signal(sig, handler)
    if held.came:
        signum, frame = held.came[0]
        held.handlers[signum](signum, frame)


def replace_durably(path: Path, data: bytes, *, prepare: Callable[[int], None] | None = None) -> None:
    """Replace the file *path* with *data*: a temporary file in its directory (given to *prepare* first), fsynced, renamed, the directory fsynced.

    A reader, or a crash, sees the old content or the new, never a part; nothing is left behind on failure.

    Raises:
        OSError: the filesystem refused; its ``filename`` is the directory when the temporary file could not be created there, else *path*.
    """
    stops = hold_stops()
    try:
        fd, temporary, held = _claim_temporary(path)
    except BaseException as exc:
        release_stops(stops)
        if isinstance(exc, OSError):
            exc.filename = str(path.parent)
        raise
    try:
        release_stops(stops)  # a stop that came since the temporary was made is raised here, where it is removed
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
    finally:
        os.close(held)
    try:
        fsync_directory(path.parent)
    except OSError as exc:
        exc.filename = str(path)
        raise


def _claim_temporary(path: Path) -> tuple[int, str, int]:
    """Make the hidden temporary file (``.NAME.XXXXXXXX.tmp``) an output meant for *path* is written in before its rename, after
    removing those of earlier outputs meant for *path* that no process holds any more (what a run killed with SIGKILL left: nothing
    unwinds, and an export's holds the journal's text).

    Returns its descriptor, its name and a second descriptor holding its lock (the kernel's flock) until closed, after the rename:
    a temporary no process holds is one a killed run left. Another run's removal may come between making the file and locking
    it; the file is then gone once locked (no link left), and another is made. No lock on the directory is taken: a backup's
    partial directory, where its marker is written, is locked by the backup itself.

    Raises:
        OSError: the file could not be made (nothing is left).
    """
    _remove_abandoned_temporaries(path)
    while True:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink > 0:
                return fd, temporary, os.dup(fd)  # the lock is the open file's: it lasts while the duplicate is open
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        os.close(fd)  # removed by another run's cleanup before it was locked


def _remove_abandoned_temporaries(path: Path) -> None:
    """Remove the regular files named as temporaries meant for *path* (``.NAME.`` + mkstemp's eight characters + ``.tmp``) that no
    process holds; anything else (a link, a FIFO, a file another name) is left alone, and so is one that cannot be removed."""
    prefix = f".{path.name}."
    try:
        names = [name for name in os.listdir(path.parent) if name.startswith(prefix) and name.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        if len(name) != len(prefix) + 8 + len(".tmp"):
            continue
        try:
            held = os.open(path.parent / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # a symbolic link, or gone: left alone
        try:
            if not stat.S_ISREG(os.fstat(held).st_mode):
                continue
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, OSError):
            continue  # a run still writing it
        else:
            with contextlib.suppress(OSError):
                os.unlink(path.parent / name)
        finally:
            os.close(held)


def claim_partial_directory(target: Path) -> tuple[Path, int]:
    """Make the hidden directory (``.NAME.XXXXXXXX.partial``, mode 0700) a copy meant for *target* is written in before its rename, after
    removing those of earlier copies meant for *target* that no process holds any more (what a run killed before its rename left).

    Returns it and a descriptor that holds its lock (the kernel's flock) until closed: closed by the caller once the copy is renamed or
    removed, and released by the kernel however the process ends, so a partial directory no process holds is one a killed run left.

    Making a partial directory and locking it are two steps; a lock on the parent directory (shared while claiming, exclusive while
    removing) keeps another run's removal out from between them. A removal that finds the parent busy leaves the leftovers to a later run.

    Raises:
        OSError: the directory could not be made (nothing is left).
    """
    try:
        parent = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        parent = None  # a parent this user may not list: no leftovers can be found, and mkdtemp says what else is wrong
    try:
        if parent is not None:
            try:
                fcntl.flock(parent, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fcntl.flock(parent, fcntl.LOCK_SH)  # another run is claiming (or a backup run holds the directory): no removal now
            else:
                _remove_abandoned_partials(target)
        return _make_locked_partial(target)
    finally:
        if parent is not None:
            os.close(parent)


def _make_locked_partial(target: Path) -> tuple[Path, int]:
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        held = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(work)
        raise
    fcntl.flock(held, fcntl.LOCK_EX)
    return work, held


def _remove_abandoned_partials(target: Path) -> None:
    """Remove the partial directories meant for *target* that no process holds; one still being written is locked by its run and left
    alone, and one that cannot be removed stays (hidden, it never stops the new copy)."""
    prefix = f".{target.name}."
    try:
        names = [name for name in os.listdir(target.parent) if name.startswith(prefix) and name.endswith(".partial")]
    except OSError:
        return
    for name in names:
        try:
            held = os.open(target.parent / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no directory (a link, a file): not a partial copy, left alone
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a run still writing it
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(target.parent / name)
        finally:
            os.close(held)
