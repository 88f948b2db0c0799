"""A group's temporary entry files, written by helper threads while the group is still being checked.

Making a file is the dearest step of storing an entry (the filesystem
allocates and logs a new inode: far more time than its few bytes take), and
the kernel does it without Python's lock. So each entry a group will store
is handed to a few threads as soon as its check has passed, and the next
entries are checked (the index work, which SQLite also does without that
lock) while the files are made. The files are unnamed until the group
publishes them, so whatever happens to the process meanwhile leaves nothing
a reader or the next writer could take for an entry.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from journal.files.entry import Entry
from journal.files.store import EntryStore, PendingEntry

__all__ = ["GroupWrites"]

#: Threads making a group's files: the kernel's work on them overlaps, and with the index work of the thread checking the group.
_WRITE_THREADS = 4


class GroupWrites:
    """The temporary files of one group's entries, made in the background in the order they were handed over.

    Use as a context manager: leaving it discards every file not taken by :meth:`pending`.
    """

    def __init__(self, store: EntryStore) -> None:
        self._store = store
        self._pool: ThreadPoolExecutor | None = None
        self._writes: list[Future[PendingEntry]] = []
        self._days: dict[str, int] = {}  # "YYYY/MM/DD" -> a descriptor of that day's directory, this group's own
        self._names: dict[str, set[str]] = {}  # "YYYY/MM/DD" -> the names in that day's directory when it was opened
        self._taken = False

    def __enter__(self) -> GroupWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        """How many files were handed over."""
        return len(self._writes)

    def write(self, entry: Entry) -> None:
        """Start writing *entry*'s temporary file (not yet durable: :meth:`EntryStore.sync_temp` makes a group's files so at once)."""
        rel_path = EntryStore.rel_path_for(entry)
        day = rel_path.rsplit("/", 1)[0]
        dir_fd = self._days.get(day)
        if dir_fd is None:  # opened here, in the checking thread: the store's record of directories it made is not the helpers' to touch
            dir_fd = self._days[day] = self._store.open_day_dir(rel_path)
            # Listed once: no name is given in it until the group publishes these files, under the writer lock.
            self._names[day] = set(os.listdir(dir_fd))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=_WRITE_THREADS, thread_name_prefix="journal-write")
        self._writes.append(self._pool.submit(self._store.write_temp, entry, durable=False, dir_fd=dir_fd))

    def named(self, rel_path: str) -> bool:
        """Whether anything is named *rel_path* in the entries directory (as :func:`os.path.lexists` answers): in a day
        directory this group holds open, from its listing (a look-up of each name waited on the helpers making their files there)."""
        day, name = rel_path.rsplit("/", 1)
        names = self._names.get(day)
        if names is None:
            return os.path.lexists(self._store.entries_dir / rel_path)
        return name in names

    def pending(self) -> list[PendingEntry]:
        """Every file handed over, once all are written, in the order handed over; they are the caller's to publish or discard.

        Raises:
            OSError: a write failed (once every write has returned; the files written are discarded).
        """
        wait(self._writes)
        failed = next((write.exception() for write in self._writes if write.exception() is not None), None)
        if failed is not None:
            raise failed  # close() discards the others
        self._taken = True
        return [write.result() for write in self._writes]

    def close(self) -> None:
        """Wait for the writes, discard every file not taken, and release the threads and directories."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if not self._taken:
            _discard(self._store, (write.result() for write in self._writes if write.exception() is None))
        self._writes = []
        for dir_fd in self._days.values():
            with contextlib.suppress(OSError):
                os.close(dir_fd)
        self._days = {}
        self._names = {}


def _discard(store: EntryStore, pending: Iterable[PendingEntry]) -> None:
    for item in pending:
        with contextlib.suppress(OSError):
            store.discard(item)
