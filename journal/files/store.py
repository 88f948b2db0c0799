"""Entry files: durable no-clobber publish, safe reads and scanning of ``entries/``.

Every path below ``entries/`` is walked with ``O_NOFOLLOW`` directory file
descriptors, so a symlink planted anywhere in the tree is refused instead of
followed. This module never touches the index.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Final

from journal.errors import EntryFileError, UnsafePathError
from journal.files._fsync import FsyncHelper, sync_filesystem
from journal.files._safefs import Owner, describe, open_regular, take_ownership
from journal.files.entry import MAX_ENTRY_BYTES, Entry

__all__ = ["EntryStore", "PendingEntry", "ScanProblem", "check_entry_path"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ENTRY_PATH: Final = re.compile(r"(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})/(?P<id>[A-Za-z0-9][A-Za-z0-9_-]{0,127})\.json")
_TEMP_PREFIX: Final = ".tmp-"
# The largest file read as an entry: the size limit of canonical JSON plus its
# newline. Whether the bytes are a valid entry is journal.files.entry's to judge.
_FILE_LIMIT: Final = MAX_ENTRY_BYTES + 1
_COUNTER: Final = ".generation"  # the write counter (journal.files._lock), not an entry
_DIR_MODE: Final = 0o700  # journals are private by default
_FILE_MODE: Final = 0o600
#: How many fsyncs of one group wait on the disk at once where there is no syncfs, and below how many files each is fsynced alone.
_SYNC_THREADS: Final = 16
_SYNC_ALONE: Final = 4


def check_entry_path(rel_path: str) -> tuple[str, str, str, str]:
    """Split ``YYYY/MM/DD/<id>.json`` into its parts, refusing anything else.

    Raises:
        UnsafePathError: the path could lead outside ``entries/`` or is not an entry path.
    """
    match = _ENTRY_PATH.fullmatch(rel_path) if isinstance(rel_path, str) else None
    if match is None:
        raise UnsafePathError(str(rel_path), "not an entry path of the form YYYY/MM/DD/<id>.json inside entries/")
    return match["y"], match["m"], match["d"], match["id"]


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """An entry written and fsynced to a temporary file, not yet published.

    The file is unnamed (``O_TMPFILE``, held open as *fd*) where the system
    allows it, so that no temporary name ever appears, even after a crash;
    elsewhere it is a hidden ``.tmp-*`` file named *temp_name* (held open as
    *fd* too while its fsync is still to come, see :meth:`EntryStore.sync_temp`).
    """

    entry: Entry
    rel_path: str
    temp_name: str | None
    data: bytes
    fd: int | None = None


@dataclass(frozen=True, slots=True)
class ScanProblem:
    """A file or directory in ``entries/`` that is not an entry, and why."""

    path: str
    reason: str


def _fsync_dir(fd: int) -> None:
    os.fsync(fd)


class EntryStore:
    """The canonical, immutable entry files below ``<root>/entries``."""

    def __init__(self, entries_dir: Path, *, owner: Owner = None) -> None:
        self.entries_dir = entries_dir
        self._owner = owner
        self._day: tuple[tuple[str, str, str], int] | None = None
        self._unnamed_ok = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
        self._fsync_helper = FsyncHelper()
        # Directories made by writes that were not durable, whose names in their parents are not yet fsynced (see sync_dirs).
        self._unsynced: set[tuple[str, ...]] = set()
        try:
            self._fd = os.open(entries_dir, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP or entries_dir.is_symlink():
                raise UnsafePathError(entries_dir, "entries/ is a symlink") from None
            raise

    def close(self) -> None:
        """Release the directory handles and the fsync helper."""
        self._fsync_helper.close()
        self._forget_day()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def in_place(self) -> bool:
        """Whether the ``entries/`` directory this store holds open is the one at its path now (not moved away or replaced)."""
        try:
            held, named = os.fstat(self._fd), os.stat(self.entries_dir, follow_symlinks=False)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)

    @staticmethod
    def rel_path_for(entry: Entry) -> str:
        """Where *entry* lives: ``YYYY/MM/DD/<id>.json`` by its ts in UTC."""
        ts = entry.ts
        if ts.endswith(("Z", "+00:00")):  # already UTC (every generated ts): the date is its first ten characters
            return f"{ts[:4]}/{ts[5:7]}/{ts[8:10]}/{entry.id}.json"
        day = entry.timestamp.astimezone(UTC)
        return f"{day.year:04d}/{day:%m/%d}/{entry.id}.json"  # strftime's %Y gives "1" for year 1 on glibc

    def _open_dirs(self, parts: tuple[str, ...], *, create: bool, durable: bool = True) -> int:
        """Open the directory chain *parts* below entries/ without following symlinks (made if *create*; a new one's name
        fsynced at once if *durable*, else by :meth:`sync_dirs`)."""
        fd = os.dup(self._fd)
        try:
            for depth, part in enumerate(parts):
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    made = True
                    try:
                        os.mkdir(part, _DIR_MODE, dir_fd=fd)
                    except FileExistsError:
                        made = False  # a concurrent writer made it; still fsync below
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    if made:
                        take_ownership(child, _DIR_MODE, self._owner)
                    if durable:
                        _fsync_dir(fd)  # make the new directory's name durable
                    else:
                        self._unsynced.add(parts[:depth])
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafePathError(f"entries/{'/'.join(parts)}", "a symlink or non-directory inside entries/") from None
                    raise
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _forget_day(self) -> None:
        if self._day is not None:
            os.close(self._day[1])
            self._day = None

    def _day_dir(self, parts: tuple[str, str, str], *, create: bool, durable: bool = True) -> int:
        """A borrowed descriptor of the day directory *parts*, kept open between appends.

        Appends cluster on today's directory, so the descriptor is reused while
        the name still leads to the same directory (checked by inode); that
        saves four ``open`` calls per append on the hot path.
        """
        if self._day is not None and self._day[0] == parts:
            try:
                named = os.stat("/".join(parts), dir_fd=self._fd, follow_symlinks=False)
                held = os.fstat(self._day[1])
                if (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                    return self._day[1]
            except FileNotFoundError:
                pass
        self._forget_day()
        fd = self._open_dirs(parts, create=create, durable=durable)
        self._day = (parts, fd)
        return fd

    def write_temp(
        self, entry: Entry, *, meanwhile: Callable[[], object] | None = None, durable: bool = True, dir_fd: int | None = None
    ) -> PendingEntry:
        """Write *entry* to a temporary file beside its final name and fsync it.

        *meanwhile*, if given, runs while the fsync waits on the disk; its
        exception, if any, is raised once the fsync is done. Without
        *durable* the fsync is left to :meth:`sync_temp`, which a group of
        entries calls once for all of them before any is published.
        *dir_fd*, if given, is the entry's day directory (of
        :meth:`open_day_dir`): writes from several threads at once each
        name theirs, for the one this store keeps open is not theirs to share.
        """
        rel_path = self.rel_path_for(entry)
        data = entry.to_json_bytes()
        year, month, day, _ = check_entry_path(rel_path)
        if durable and self._unsynced:
            self._sync_made_dirs()  # a group that failed made them: a durable write relies on every directory above it
        if dir_fd is None:
            dir_fd = self._day_dir((year, month, day), create=True, durable=durable)
        temp_name: str | None = None
        fd = self._open_unnamed(dir_fd)
        if fd is None:
            temp_name = f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
            fd = os.open(temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE, dir_fd=dir_fd)
        try:
            self._fill(fd, data)
            if durable:
                self._fsync(fd, meanwhile)
        except BaseException:
            os.close(fd)
            if temp_name is not None:
                os.unlink(temp_name, dir_fd=dir_fd)  # a full disk leaves no half-written temp file behind
            raise
        if temp_name is not None and durable:
            os.close(fd)
            return PendingEntry(entry=entry, rel_path=rel_path, temp_name=temp_name, data=data)
        # Not yet durable: the descriptor stays open for sync_temp (a named temp file is still published by its name).
        return PendingEntry(entry=entry, rel_path=rel_path, temp_name=temp_name, data=data, fd=fd)

    def open_day_dir(self, rel_path: str) -> int:
        """A descriptor of the day directory of *rel_path* (made if missing, its name made durable by :meth:`sync_dirs`), for
        :meth:`write_temp`'s *dir_fd*; the caller closes it."""
        year, month, day, _ = check_entry_path(rel_path)
        return self._open_dirs((year, month, day), create=True, durable=False)

    def sync_temp(self, pending: Sequence[PendingEntry]) -> None:
        """Make the temporary files of *pending* (written without *durable*) durable, all at once.

        One ``syncfs`` of the filesystem where there is one (see
        :func:`journal.files._fsync.sync_filesystem`), otherwise an fsync of
        each file from several threads, which the filesystem's journal
        commits together: a group's files cost a few disk flushes, not one each.

        Raises:
            OSError: the disk refused (once every fsync has returned).
        """
        fds = [item.fd for item in pending if item.fd is not None]
        if len(fds) < _SYNC_ALONE:
            for fd in fds:
                os.fsync(fd)
            return
        if sync_filesystem(self._fd):
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(_SYNC_THREADS, len(fds)), thread_name_prefix="journal-fsync") as pool:
            list(pool.map(os.fsync, fds))  # raises the first failure, once every fsync has returned

    def discard(self, pending: PendingEntry) -> None:
        """Drop a temporary file that will not be published: close it, and remove its name if it has one."""
        if pending.fd is not None:
            os.close(pending.fd)
        if pending.temp_name is not None:
            year, month, day, _ = check_entry_path(pending.rel_path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pending.temp_name, dir_fd=self._day_dir((year, month, day), create=False))

    def sync_dirs(self, rel_paths: Iterable[str]) -> None:
        """fsync once each day directory of *rel_paths*, and each directory holding one that writes without *durable* made:
        the names :meth:`publish` gave without *durable* become durable."""
        for parts in dict.fromkeys(check_entry_path(rel_path)[:3] for rel_path in rel_paths):
            _fsync_dir(self._day_dir(parts, create=False))
        self._sync_made_dirs()

    def _sync_made_dirs(self) -> None:
        for parts in sorted(self._unsynced, key=len, reverse=True):
            if not parts:
                _fsync_dir(self._fd)
                continue
            fd = self._open_dirs(parts, create=False)
            try:
                _fsync_dir(fd)
            finally:
                os.close(fd)
        self._unsynced.clear()

    def _open_unnamed(self, dir_fd: int) -> int | None:
        """An unnamed file in the directory (``O_TMPFILE``), or None where unsupported."""
        if not self._unnamed_ok:
            return None
        try:
            return os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, _FILE_MODE, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            self._unnamed_ok = False  # this filesystem has no O_TMPFILE: use named temp files
            return None

    def publish(self, pending: PendingEntry, *, meanwhile: Callable[[], object] | None = None, durable: bool = True) -> None:
        """Give the temp file its final name with a no-clobber hard link, durably.

        *meanwhile*, if given, runs once the name exists, while the directory
        fsync waits on the disk; its exception, if any, is raised once the
        fsync is done. Without *durable* the directory's fsync is left to
        :meth:`sync_dirs`, called once for a group's names.

        Raises:
            FileExistsError: a file with the final name already exists.
        """
        year, month, day, entry_id = check_entry_path(pending.rel_path)
        dir_fd = self._day_dir((year, month, day), create=False)
        if pending.temp_name is None:
            assert pending.fd is not None  # noqa: S101 - narrows the type: a pending entry has a descriptor or a temp name
            try:
                # linkat() of an unnamed file through /proc needs no privilege, unlike AT_EMPTY_PATH.
                os.link(f"/proc/self/fd/{pending.fd}", f"{entry_id}.json", dst_dir_fd=dir_fd, follow_symlinks=True)
            finally:
                os.close(pending.fd)
        else:
            try:
                os.link(pending.temp_name, f"{entry_id}.json", src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            finally:
                os.unlink(pending.temp_name, dir_fd=dir_fd)
                if pending.fd is not None:
                    os.close(pending.fd)
        if durable:
            self._fsync(dir_fd, meanwhile)

    def replace(self, rel_path: str, data: bytes) -> None:
        """Replace the entry file at *rel_path* by one holding *data*, durably: the one write that changes a published file (an erase).

        The new bytes are written and fsynced under a temporary name, renamed over the old file in one step
        (a reader sees the old file or the new one, never a mix), and the directory is fsynced. The old
        file's name is gone once this returns; its bytes are in no file.

        Raises:
            FileNotFoundError: no entry file is at *rel_path*.
        """
        year, month, day, entry_id = check_entry_path(rel_path)
        dir_fd = self._open_dirs((year, month, day), create=False)
        try:
            os.stat(f"{entry_id}.json", dir_fd=dir_fd, follow_symlinks=False)  # FileNotFoundError: nothing to replace
            temp_name = f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
            fd = os.open(temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE, dir_fd=dir_fd)
            try:
                self._fill(fd, data)
                os.fsync(fd)
            except BaseException:
                os.unlink(temp_name, dir_fd=dir_fd)
                raise
            finally:
                os.close(fd)
            os.rename(temp_name, f"{entry_id}.json", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._forget_day()  # the held descriptor still names the directory, but drop it: nothing is cached of the old file

    def _fill(self, fd: int, data: bytes) -> None:
        """Give the new file *fd* the journal's owner and mode, and write *data* to it whole (a write may take part of the bytes)."""
        take_ownership(fd, _FILE_MODE, self._owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def _fsync(self, fd: int, meanwhile: Callable[[], object] | None) -> None:
        if meanwhile is None:
            os.fsync(fd)
        else:
            self._fsync_helper.fsync_while(fd, meanwhile)

    def read(self, rel_path: str) -> bytes:
        """Read the bytes of the entry file at *rel_path* (relative to entries/); see :meth:`read_with_stat`."""
        return self.read_with_stat(rel_path)[0]

    def read_with_stat(self, rel_path: str) -> tuple[bytes, os.stat_result]:
        """Read the bytes of the entry file at *rel_path* (relative to entries/), with the ``fstat`` of the file read.

        The file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with
        ``fstat`` before a byte is read: a FIFO or device could hang the reader
        (and a reindex holds the writer lock meanwhile), and a sparse file of
        gigabytes would be read whole. At most the entry size limit plus one
        byte is ever read.

        Raises:
            UnsafePathError: the path is not an entry path, crosses a symlink, or is not a regular file.
            EntryFileError: the file is larger than an entry can be.
            FileNotFoundError: no such file.
        """
        year, month, day, entry_id = check_entry_path(rel_path)
        dir_fd = self._open_dirs((year, month, day), create=False)
        try:
            fd = open_regular(f"{entry_id}.json", os.O_RDONLY, f"entries/{rel_path}", dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            size = info.st_size
            if size > _FILE_LIMIT:
                raise EntryFileError(
                    f"entries/{rel_path}", f"{size} bytes, larger than an entry file can be ({_FILE_LIMIT} bytes); not read"
                )
            data = handle.read(_FILE_LIMIT + 1)  # the file may have grown since the fstat
        if len(data) > _FILE_LIMIT:
            raise EntryFileError(f"entries/{rel_path}", f"larger than an entry file can be ({_FILE_LIMIT} bytes); not read")
        return data, info

    def check(self, rel_paths: Iterable[str]) -> dict[str, str]:
        """Why files at *rel_paths* cannot be entries, judged by ``lstat`` alone: ``{path: reason}`` for those that cannot.

        A cheap test for reads that use only the index (a digest): a missing
        file, a non-regular file, an empty or oversized one. Paths in time
        order open each day directory once (one is held open at a time).
        """
        problems: dict[str, str] = {}
        held: tuple[tuple[str, str, str], int | str] | None = None
        try:
            for rel_path in rel_paths:
                year, month, day, entry_id = check_entry_path(rel_path)
                if held is None or held[0] != (year, month, day):
                    if held is not None and isinstance(held[1], int):
                        os.close(held[1])
                    held = None
                    try:
                        held = ((year, month, day), self._open_dirs((year, month, day), create=False))
                    except FileNotFoundError:
                        held = ((year, month, day), "the entry file is missing")
                    except UnsafePathError as exc:
                        held = ((year, month, day), exc.reason)
                dir_fd = held[1]
                if isinstance(dir_fd, str):
                    problems[rel_path] = dir_fd
                    continue
                try:
                    info = os.stat(f"{entry_id}.json", dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    problems[rel_path] = "the entry file is missing"
                    continue
                if not stat.S_ISREG(info.st_mode):
                    problems[rel_path] = f"{describe(info.st_mode)}, not a regular file"
                elif info.st_size == 0 or info.st_size > _FILE_LIMIT:
                    problems[rel_path] = f"{info.st_size} bytes, not an entry"
        finally:
            if held is not None and isinstance(held[1], int):
                os.close(held[1])
        return problems

    def exists(self, rel_path: str) -> bool:
        """True if an entry file exists at *rel_path*."""
        try:
            self.read(rel_path)
        except FileNotFoundError:
            return False
        return True

    def scan(self) -> Iterator[str | ScanProblem]:
        """Yield the relative path of every entry file, and a ScanProblem for anything else.

        Temporary files of interrupted appends are skipped silently: they were
        never entries. Nothing is modified.
        """
        yield from self._scan_level(self._fd, (), depth=0)

    def _scan_level(self, dir_fd: int, parts: tuple[str, ...], depth: int) -> Iterator[str | ScanProblem]:
        patterns = (r"\d{4}", r"\d{2}", r"\d{2}")
        names = sorted(os.listdir(dir_fd))
        for name in names:
            rel = "/".join((*parts, name))
            if name.startswith(_TEMP_PREFIX) or (depth == 0 and name == _COUNTER):
                continue
            if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode & 0o170000 == 0o120000:
                yield ScanProblem(rel, "symlink refused")
                continue
            if depth < 3:
                if not re.fullmatch(patterns[depth], name):
                    yield ScanProblem(rel, "not part of the entries/YYYY/MM/DD layout")
                    continue
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                except NotADirectoryError:
                    yield ScanProblem(rel, "a file where a date directory belongs")
                    continue
                try:
                    yield from self._scan_level(child, (*parts, name), depth + 1)
                finally:
                    os.close(child)
            elif _ENTRY_PATH.fullmatch(rel):
                yield rel
            else:
                yield ScanProblem(rel, "not an entry file name (<id>.json)")

    def remove_temp_files(self) -> int:
        """Delete temp files left by interrupted appends; only under the writer lock."""
        removed = 0
        for parts in self._day_dirs():
            dir_fd = self._open_dirs(parts, create=False)
            try:
                for name in os.listdir(dir_fd):
                    if name.startswith(_TEMP_PREFIX):
                        os.unlink(name, dir_fd=dir_fd)
                        removed += 1
            finally:
                os.close(dir_fd)
        return removed

    def _day_dirs(self) -> Iterator[tuple[str, str, str]]:
        for year in sorted(os.listdir(self._fd)):
            if not re.fullmatch(r"\d{4}", year):
                continue
            try:
                year_fd = self._open_dirs((year,), create=False)
            except (UnsafePathError, OSError):
                continue
            try:
                for month in sorted(os.listdir(year_fd)):
                    if not re.fullmatch(r"\d{2}", month):
                        continue
                    try:
                        month_fd = self._open_dirs((year, month), create=False)
                    except (UnsafePathError, OSError):
                        continue
                    try:
                        days = sorted(os.listdir(month_fd))
                    finally:
                        os.close(month_fd)
                    yield from ((year, month, day) for day in days if re.fullmatch(r"\d{2}", day))
            finally:
                os.close(year_fd)
