"""An import's spool: the checked entries' bytes, and a catalogue of them on disk, so that an import's memory does not grow with its source.

The bytes go to one unlinked temporary file, unbuffered (a write the
scratch space refuses fails at once, naming TMPDIR). Each entry's line or
file, id, agent, links and span go to a catalogue on disk
(:mod:`journal.indexing.catalogue`, in ``$TMPDIR``, deleted when closed); the
order the import stores the entries in is written there too. Only a few
pages of it are held in memory at a time, whatever the number of entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Final

from journal.files import scratch_errors
from journal.files.entry import Entry
from journal.indexing.catalogue import BATCH, CatalogueRow, SpoolCatalogue

__all__ = ["Spool", "Spooled"]

_WHAT: Final = "the import's spool"


@dataclass(frozen=True, slots=True)
class Spooled:
    """One checked entry in the spool: its position in the source, where it came from, its id and agent (as stored), its links,
    and its bytes' span in the spool file."""

    position: int
    at: int | str  # the line number, or the entry file of a journal directory
    id: str
    agent: str
    continues: tuple[str, ...]
    supersedes: tuple[str, ...]
    offset: int
    size: int

    @property
    def where(self) -> dict[str, Any]:
        """Where it came from, as a report lists it: ``{"line": 3}`` or ``{"file": ...}``."""
        return {"line": self.at} if isinstance(self.at, int) else {"file": self.at}

    @property
    def place(self) -> str:
        """Where it came from, as a reason names it: ``line 3``, or a directory's entry file."""
        return f"line {self.at}" if isinstance(self.at, int) else self.at

    @property
    def key(self) -> tuple[str, str]:
        """Its id and agent: what a link of the same agent resolves to."""
        return self.id, self.agent

    @property
    def links(self) -> Iterator[tuple[str, str]]:
        """(field, id) for each continuity and supersession link, as an append names them."""
        for n, ref in enumerate(self.continues):
            yield f"signals.continuity_refs[{n}]", ref
        for n, ref in enumerate(self.supersedes):
            yield f"signals.supersedes[{n}]", ref


def _spooled(row: CatalogueRow) -> Spooled:
    position, at, entry_id, agent, links, offset, size = row
    continues, supersedes = json.loads(links) if links is not None else ((), ())
    return Spooled(position, at, entry_id, agent, tuple(continues), tuple(supersedes), offset, size)


class Spool:
    """The spool of one import: :meth:`add` each checked entry, :meth:`close` (or leave the ``with`` block) to delete it all."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._catalogue: SpoolCatalogue | None = None
        self._rows: list[CatalogueRow] = []
        self._steps: list[tuple[int, int]] = []
        self._planned = 0  # steps of the plan made
        self.count = 0  # entries spooled
        self.size = 0  # their bytes
        with contextlib.ExitStack() as stack:
            stack.callback(self.close)
            with scratch_errors(_WHAT):
                self._file = tempfile.TemporaryFile(prefix="ghostjournal-import-", buffering=0)  # noqa: SIM115 - closed by close()
                self._catalogue = SpoolCatalogue()
            stack.pop_all()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Delete the spool: its file and its catalogue."""
        if self._catalogue is not None:
            self._catalogue.close()
            self._catalogue = None
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def _listed(self) -> SpoolCatalogue:
        assert self._catalogue is not None  # noqa: S101 - narrows the type: only a closed spool has none, and it is not used
        return self._catalogue

    def add(self, entry: Entry, at: int | str) -> None:
        """Spool *entry*'s canonical line, from line or file *at*, with its links and its span in the spool."""
        assert self._file is not None  # noqa: S101 - narrows the type, as _listed
        data = entry.to_json_bytes()
        view = memoryview(data)
        with scratch_errors(_WHAT):
            while view:  # an unbuffered write may take part of the bytes
                view = view[self._file.write(view) :]
        links = json.dumps([entry.continuity_refs, entry.supersedes]) if entry.continuity_refs or entry.supersedes else None
        self._rows.append((self.count, at, entry.id, entry.agent, links, self.size, len(data)))
        self.count += 1
        self.size += len(data)
        if len(self._rows) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        with scratch_errors(_WHAT):
            if self._rows:
                self._listed.add(self._rows)
            if self._steps:
                self._listed.add_steps(self._steps)
        self._rows, self._steps = [], []

    def sealed(self) -> None:
        """Every entry is spooled: index the catalogue for the plan's lookups."""
        self._flush()
        with scratch_errors(_WHAT):
            self._listed.seal()

    def entries(self) -> Iterator[Spooled]:
        """Every spooled entry, in the source's order."""
        for rows in _scratch_read(self._listed.rows()):
            yield from map(_spooled, rows)

    def item(self, position: int) -> Spooled:
        """The entry spooled at *position*."""
        with scratch_errors(_WHAT):
            return _spooled(self._listed.row(position))

    def positions(self, entry_id: str, agent: str) -> list[int]:
        """The positions of the lines of *entry_id* and *agent*, in the source's order."""
        with scratch_errors(_WHAT):
            return self._listed.positions(entry_id, agent)

    def holds_id(self, entry_id: str) -> bool:
        """Whether a line of any agent holds *entry_id*."""
        with scratch_errors(_WHAT):
            return self._listed.holds_id(entry_id)

    def planned(self, position: int) -> None:
        """*position* is the next entry to store."""
        self._steps.append((self._planned, position))
        self._planned += 1
        if len(self._steps) >= BATCH:
            self._flush()

    def plan_done(self) -> None:
        """Every entry to store is planned."""
        self._flush()

    def in_plan(self, size: int) -> Iterator[list[tuple[Spooled, bytes]]]:
        """The planned entries with their bytes, in the planned order, *size* at a time."""
        assert self._file is not None  # noqa: S101 - narrows the type, as _listed
        fd = self._file.fileno()
        for rows in _scratch_read(self._listed.in_plan(size)):
            group = [_spooled(row) for row in rows]
            with scratch_errors(_WHAT):
                read = [(item, os.pread(fd, item.size, item.offset)) for item in group]
            yield read


def _scratch_read(batches: Iterator[list[CatalogueRow]]) -> Iterator[list[CatalogueRow]]:
    """*batches*, each read under :func:`scratch_errors` and handed over outside it: what the caller raises meanwhile is its own."""
    while True:
        with scratch_errors(_WHAT):
            rows = next(batches, None)
        if rows is None:
            return
        yield rows
