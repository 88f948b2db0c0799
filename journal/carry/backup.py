"""An online backup: a copy of the journal that is itself a journal directory, consistent as of one instant, then verified.

Under the writer lock (appends wait meanwhile, readers do not) the index is
caught up, the entry file names are listed, and the index is copied through
SQLite's online backup API, so the copy's index holds exactly the listed
files. The files themselves are copied after the lock is released: a
published entry file never changes. Everything is written into a hidden
directory beside the target and renamed to it only once complete and
fsynced, so a failure (a full disk) leaves no target and nothing half
written. The copy opens as any journal does (``Journal(copy)``), which is why
no restore command exists: use the copy, or copy it back.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.errors import EntryFileError, JournalError, JournalStorageError, OutputPathError, UnsafePathError
from journal.files import DIR_MODE, ERASE_KEY_FILE, FILE_MODE, check_dir, fsync_directory, load_erase_key, stamp_of
from journal.files.store import ScanProblem
from journal.frame.outfile import claim_partial_directory, hold_stops, output_fix, refuse_inside_journals, release_stops
from journal.indexing import copy_index

if TYPE_CHECKING:
    from journal.checking.verify import VerifyReport
    from journal.sync import IndexKeeper

__all__ = ["BackupReport", "backup"]

_COUNTER_WIDTH: Final = 20  # as journal.files._lock writes the write counter


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What :func:`backup` made: the copy, what it holds, and the check of it."""

    out: str
    files: int
    bytes: int
    skipped: list[dict[str, str]]
    verify: VerifyReport

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"out": self.out, "files": self.files, "bytes": self.bytes, "skipped": self.skipped, "verify": self.verify.to_dict()}


def _check_target(out: Path, root: Path) -> None:
    """Refuse a target that exists (a file, a symlink, a FIFO, a journal, any directory) or lies inside a journal (this one or another)."""
    if os.path.lexists(out):
        kind = "a journal" if (out / "manifest.json").exists() and not out.is_symlink() else None
        try:
            check_dir(out, "the backup directory")
        except UnsafePathError as exc:
            raise OutputPathError(out, f"{exc.reason.split(';')[0]}; name a directory that does not exist yet") from None
        raise OutputPathError(
            out,
            f"the backup directory exists{' and is ' + kind if kind else ''}; name a directory that does not exist yet "
            "(a backup never writes into or over anything)",
        )
    refuse_inside_journals(out, "the backup directory", {"the journal": root})


def _mkdir(path: Path) -> None:
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE)  # whatever the umask


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_counter(path: Path, generation: int) -> str:
    """Write the copy's write counter at *generation*; its stamp, which the copy's index records (see journal.files._lock)."""
    _write(path, str(generation).rjust(_COUNTER_WIDTH).encode("ascii"))
    return stamp_of(os.stat(path, follow_symlinks=False))


def backup(keeper: IndexKeeper, out: Path, verify: Callable[[Path], VerifyReport]) -> BackupReport:
    """Copy the journal to *out* (see :meth:`journal.Journal.backup`); *verify* checks the copy and returns its report."""
    _check_target(out, keeper.root)
    parent = out.parent
    stops = hold_stops()
    try:
        work, claim = claim_partial_directory(out)
    except BaseException as exc:
        release_stops(stops)
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):  # the journal's own refusal says what it refused
            raise JournalStorageError.for_errno(
                parent, exc.errno or errno.EIO, "write the backup into", output_fix(exc.errno, parent)
            ) from None
        raise
    try:
        release_stops(stops)  # a stop that came since the partial directory was made is raised here, where it is removed
        return _copy(keeper, out, work, verify)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # gone already unless the stop came before the copy began
        raise
    finally:
        os.close(claim)


def _copy(keeper: IndexKeeper, out: Path, work: Path, verify: Callable[[Path], VerifyReport]) -> BackupReport:
    parent = out.parent
    size = 0
    paths: list[str] = []
    skipped: list[dict[str, str]] = []
    try:
        os.chmod(work, DIR_MODE)
        for name in ("entries", "index", "models"):
            _mkdir(work / name)
        _write(work / "manifest.json", (keeper.root / "manifest.json").read_bytes())
        key = load_erase_key(keeper.root, create=False)
        if key is not None:  # the copy's tombstones are checked, and its imports decided, with the same key
            _write(work / ERASE_KEY_FILE, key.hex().encode("ascii") + b"\n")
        with keeper.lock:
            keeper.sync_locked()  # the index holds every file published so far
            paths = [item for item in keeper.store.scan() if not isinstance(item, ScanProblem)]
            copy_index(
                keeper.index, work / "index" / "journal.sqlite3", functools.partial(_write_counter, work / "entries" / ".generation")
            )
        made: set[Path] = set()
        for rel_path in paths:
            target = work / "entries" / rel_path
            for level in reversed(target.relative_to(work / "entries").parents[:-1]):
                directory = work / "entries" / level
                if directory not in made:
                    _mkdir(directory)
                    made.add(directory)
            try:
                data = keeper.store.read(rel_path)
            except (UnsafePathError, EntryFileError, FileNotFoundError) as exc:
                skipped.append({"path": f"entries/{rel_path}", "reason": str(getattr(exc, "reason", "the file is gone"))})
                continue  # no entry (a FIFO, an oversized file): the source's verify names it
            _write(target, data)
            size += len(data)
        for directory in sorted(made, key=lambda p: -len(p.parts)):
            fsync_directory(directory)
        for name in ("entries", "index", "models", ""):
            fsync_directory(work / name if name else work)
        os.rename(work, out)  # the target does not exist: the copy appears whole or not at all
        fsync_directory(parent)
    except BaseException as exc:
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):  # a refused link is no I/O error of the copy
            raise JournalStorageError.for_errno(out, exc.errno or errno.EIO, "write the backup to", output_fix(exc.errno, parent)) from None
        raise
    try:
        checked = verify(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # not checked (its scratch space refused, a signal): no backup, as for any other failure
        raise
    return BackupReport(str(out), len(paths) - len(skipped), size, skipped, checked)
