"""Importing an export stream: check all of it first, then append each entry with its own id, time and client_key.

An import is all or nothing about the stream and idempotent about the
journal. First every line is read and checked, at most one entry's size at a
time (a line longer than an entry can be is refused without reading the rest
of it): each must be a valid schema v1 entry with its ``id`` and ``ts``, and
the stream must end with the manifest of :mod:`journal.carry.export`, whose entry
count and ``sha256`` must match the bytes read. The checked entries go to a
private spool file meanwhile, so that standard input can be read only once
and memory stays flat. A stream that fails any of this imports nothing and
the error names the line (``partial`` imports the good lines anyway and lists
the rest).

Then each entry is appended as it is, keeping its id, ts and client_key,
through the journal's append (of a group of entries at a time, each
checked as its own append would be: :meth:`journal.Journal.append_many`)
and its every check: what an import
stores is exactly what an append accepts for that agent, whatever the
stream says of itself (its manifest's ``links_outside`` is the export's
report, never a licence). So the links are planned first
(:func:`_plan`): an entry is stored only after the entries of the stream it
links to, and an entry whose link no append could accept (to itself, to
another agent's entry, to an id neither the journal nor the stream holds
as its agent's, round a circle of links, or to a line left out) is a bad
line, named by its position, never by another agent's id. An entry already
held with the same bytes is a *duplicate* and stores nothing; an id, or a
client_key of the entry's agent, already held with other bytes is a
*conflict*, reported and skipped, never overwritten (a key is unique per
agent: another agent's entry of the same key is no conflict), and so is an
entry the append then refuses because a line it links to was such a
conflict. So an import killed at any point is finished by running it again,
and the second run's summary counts as duplicates exactly the entries the
first stored.

A journal directory of ghostjournal 0.1.1 (another project of the same
name, read by :mod:`journal.carry._peer`) goes the same way: each entry file is
read, mapped onto schema v1 and spooled, a bad one named by its path, and
the spool is stored by the same code, with the same counts.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import heapq
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

from journal.carry._peer import PEER_FORMAT, check_peer_agent, peer_entry, peer_files, read_peer_manifest
from journal.carry.export import EXPORT_FORMAT_VERSION
from journal.errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    EntryValidationError,
    ImportSourceError,
    ImportStreamError,
    JournalStorageError,
)
from journal.files import erased_hash, json_depth_exceeds, load_erase_key, scratch_errors, show_value
from journal.files.entry import MAX_ENTRY_BYTES, Entry, check_agent, entry_from_json_bytes, entry_from_own_bytes
from journal.sync import FILES_AT_ONCE, GroupOutcome

__all__ = ["ImportSummary", "ImportTarget", "check_peer_dir", "import_peer_dir", "import_stream", "parse_agent_map"]

#: The longest line read as an entry: an entry file's size limit plus its newline.
_LINE_LIMIT: Final = MAX_ENTRY_BYTES + 1
_MANIFEST_KEY: Final = "ghostjournal_export"
_PARTIAL: Final = "pass --partial to import the good lines anyway"


#: How many entries are stored as one group: one index transaction and one commit (see journal.sync._group). Its files are
#: written, fsynced and named :data:`IMPORT_GROUP` at a time, so a larger group waits on the disk no more often, and holds
#: no more descriptors; only the group's entries are held in memory meanwhile.
INDEX_GROUP: Final = 4 * FILES_AT_ONCE
#: How many entries' files are named together (see :data:`journal.sync.FILES_AT_ONCE`).
IMPORT_GROUP: Final = FILES_AT_ONCE
#: The field of a link an append refuses: ``signals.continuity_refs[0]``.
_LINK_FIELD: Final = re.compile(r"signals\.(continuity_refs|supersedes)\[(\d+)\]")


#: An entry as a link resolves it: its id and the agent of the entry linking to it (a link crosses no agents).
_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Spooled:
    """One checked entry in the spool: where it came from, its id and agent (as stored), its links, and its bytes' span in the spool.

    One is held for every entry of the source until it is stored, so it keeps no more than it must: its line number or file
    rather than a mapping, its agent's name shared with the others of that agent, and no tuple at all for an entry without links.
    """

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
    def links(self) -> Iterator[tuple[str, str]]:
        """(field, id) for each continuity and supersession link, as an append names them."""
        for n, ref in enumerate(self.continues):
            yield f"signals.continuity_refs[{n}]", ref
        for n, ref in enumerate(self.supersedes):
            yield f"signals.supersedes[{n}]", ref


class ImportTarget(Protocol):
    """What an import needs of a journal: where its entry files are, an append that tells a duplicate, a read by id."""

    @property
    def root(self) -> Path:
        """The journal directory."""

    def append_many(self, payloads: Sequence[Mapping[str, Any] | Entry]) -> list[GroupOutcome]:
        """Append *payloads* as one group: each one's result, or the error its append would raise (see :meth:`journal.Journal.append_many`)."""

    def get(self, entry_id: str, agent: str | None = None) -> Entry:
        """The entry with *entry_id* (with *agent*: only if it is that agent's)."""

    def erase(self, ids: Iterable[str] = (), *, reason: str, by: str | None = None, agent: str | None = None) -> Any:
        """Erase the entries *ids*, leaving tombstones (see :meth:`journal.Journal.erase`)."""


@dataclass(slots=True)
class ImportSummary:
    """What an import did.

    Attributes:
        lines: entry lines read (0 from a journal directory).
        appended: entries stored by this import.
        duplicate: entries the journal already held with the same bytes (nothing stored).
        conflict: entries whose id or client_key the journal holds with other bytes (skipped, never overwritten).
        erased: entries the journal holds as tombstones (the tombstone wins: nothing stored), and tombstones of the stream that
            erased the entry the journal held (their hash, keyed with this journal's key, matched its bytes).
        conflicts: ``{"line", "id", "reason"}`` for each conflict (``"file"`` for ``"line"`` from a journal directory).
        bad_lines: with ``partial``, ``{"line", "reason"}`` for each line left out.
        manifest: the stream's manifest, or None (a stream without one, imported with ``partial``); a directory's ``manifest.json``.
        agent_map: the agents renamed, old to new.
        source: None for an export stream; for a journal directory, its format (``ghostjournal-0.1.1``).
        files: entry files read from a journal directory.
        bad_files: with ``partial``, ``{"file", "reason"}`` for each entry file of a directory left out.
    """

    lines: int = 0
    appended: int = 0
    duplicate: int = 0
    conflict: int = 0
    erased: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[dict[str, Any]] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    agent_map: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    files: int = 0
    bad_files: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """As JSON data: a stream's summary counts and lists lines, a directory's files."""
        if self.source is not None:
            return {
                "from": self.source,
                "files": self.files,
                "appended": self.appended,
                "duplicate": self.duplicate,
                "conflict": self.conflict,
                "erased": self.erased,
                "conflicts": self.conflicts,
                "bad_files": self.bad_files,
                "manifest": self.manifest,
                "agent_map": self.agent_map,
            }
        return {
            "lines": self.lines,
            "appended": self.appended,
            "duplicate": self.duplicate,
            "conflict": self.conflict,
            "erased": self.erased,
            "conflicts": self.conflicts,
            "bad_lines": self.bad_lines,
            "manifest": self.manifest,
            "agent_map": self.agent_map,
        }


def parse_agent_map(pairs: Mapping[str, str] | list[str] | tuple[str, ...], *, peer: bool = False) -> dict[str, str]:
    """``old=new`` pairs (or a mapping) as a dict, each name checked as an agent name.

    With *peer* (a map for a ghostjournal 0.1.1 journal) an old name need only
    be one that journal accepts, so that a name our schema refuses (one with a
    space, say) can be renamed into one it accepts.

    Raises:
        EntryValidationError: a pair without ``=``, a name that is no valid agent name, or an old
            name given twice with two new names (which was meant is unknown), naming it; the same
            pair given twice says one thing and is taken once.
    """
    mapping: dict[str, str] = {}
    items = pairs.items() if isinstance(pairs, Mapping) else [_split_pair(pair) for pair in pairs]
    check_old = check_peer_agent if peer else check_agent
    for old, new in items:
        checked = check_old(old, "agent-map (old name)")
        renamed = check_agent(new, f"agent-map {old}=")
        if mapping.get(checked, renamed) != renamed:
            raise EntryValidationError(
                "agent-map",
                "each OLD name once",
                f"{show_value(checked)} twice ({show_value(checked + '=' + mapping[checked])} and {show_value(checked + '=' + renamed)})",
            )
        mapping[checked] = renamed
    return mapping


def _split_pair(pair: str) -> tuple[str, str]:
    old, sep, new = pair.partition("=")
    if not sep:
        raise EntryValidationError("agent-map", "old=new", show_value(pair))
    return old, new


def _lines(source: IO[bytes], *, partial: bool) -> Iterator[tuple[int, bytes]]:
    """Numbered lines of *source*, each read at most an entry's size at a time.

    A longer line raises at once; with *partial* it is read past in pieces
    (never held whole) and given as an empty line, for the caller to report.
    """
    number = 0
    while True:
        line = source.readline(_LINE_LIMIT + 1)
        if not line:
            return
        number += 1
        if len(line) > _LINE_LIMIT:
            if not partial:
                raise ImportStreamError(number, f"longer than an entry can be ({_LINE_LIMIT} bytes); not read further", _PARTIAL)
            while line and not line.endswith(b"\n"):
                line = source.readline(_LINE_LIMIT)
            line = b""
        yield number, line


def _manifest_of(line: bytes) -> dict[str, Any] | None:
    """The manifest *line* holds, or None when it is no manifest (an entry, or not JSON)."""
    if _MANIFEST_KEY.encode() not in line and b"\\u" not in line:
        return None  # no key of it, even escaped: an entry line, parsed once, by its own check
    if json_depth_exceeds(line.decode("utf-8", "replace")):
        return None  # no manifest nests this deep, and json.loads would recurse until it dies
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and _MANIFEST_KEY in value else None


def _bad_line(summary: ImportSummary, *, partial: bool) -> Callable[[int, str], None]:
    """What a bad line does: stop the import naming it, or with *partial* list it under ``bad_lines``."""

    def bad(number: int, reason: str) -> None:
        if not partial:
            raise ImportStreamError(number, reason, _PARTIAL)
        summary.bad_lines.append({"line": number, "reason": reason})

    return bad


def _check_stream(
    source: IO[bytes], spool: IO[bytes], items: list[_Spooled], summary: ImportSummary, agent_map: Mapping[str, str], *, partial: bool
) -> None:
    """Read the whole stream, spool each checked entry (renamed by *agent_map*) as a line listed in *items* with its line number,
    and check the manifest."""
    digest = hashlib.sha256()
    manifest: dict[str, Any] | None = None
    last = 0
    bad = _bad_line(summary, partial=partial)

    for number, line in _lines(source, partial=partial):
        last = number
        if manifest is not None:
            bad(number - 1, "the manifest line is not the last line")
            manifest = None
        if not line:
            bad(number, f"longer than an entry can be ({_LINE_LIMIT} bytes); not read")
            continue
        found = _manifest_of(line)
        if found is not None:
            manifest = found
            continue
        digest.update(line)
        try:
            entry = entry_from_json_bytes(line)
        except EntryValidationError as exc:
            bad(number, str(exc))
            continue
        if entry.agent in agent_map:
            entry = Entry.from_payload({**entry.to_dict(), "agent": agent_map[entry.agent]})
        _spool_entry(spool, items, entry, number)
        summary.lines += 1
    if manifest is None:
        bad(last + 1, "the stream has no manifest line at its end: it is truncated, or no ghostjournal export")
        return
    summary.manifest = manifest
    problem = _manifest_problem(manifest, digest.hexdigest(), summary.lines + len(summary.bad_lines))
    if problem is not None:
        bad(last, problem)


def _manifest_problem(manifest: Mapping[str, Any], sha256: str, entries: int) -> str | None:
    if manifest.get(_MANIFEST_KEY) != EXPORT_FORMAT_VERSION:
        return f"a manifest of export format {show_value(manifest.get(_MANIFEST_KEY))}, not {EXPORT_FORMAT_VERSION}; upgrade ghostjournal"
    if manifest.get("sha256") != f"sha256:{sha256}":
        return f"the entries hash to sha256:{sha256} and the manifest says {show_value(manifest.get('sha256'))}: the stream was changed"
    if manifest.get("entries") != entries:
        return f"{entries} entry lines and the manifest counts {show_value(manifest.get('entries'))}"
    return None


def _store(
    journal: ImportTarget,
    entry: Entry,
    outcome: GroupOutcome,
    where: Mapping[str, Any],
    summary: ImportSummary,
    place_of: Callable[[str, str], str | None],
) -> None:
    """Count what storing one entry as it is came to (*outcome*): appended, duplicate or conflict (listed with *where* it came from: its line or file).

    The entry went through the journal's public append (of a group), the path
    of every other write, with every check of it: the guard, the writer lock,
    the duplicate checks and each link's. The plan (:func:`_plan`) left out what
    those checks would refuse as the journal stood; what they refuse now (a
    line this one links to was a conflict, or another writer changed the
    journal meanwhile) is a conflict, naming the linked entry by the position
    *place_of* gives it in the source (among the entry's agent's), never by its id.
    """
    data = entry.to_json_bytes()

    def conflict(reason: str) -> None:
        summary.conflict += 1
        summary.conflicts.append({**where, "id": entry.id, "reason": reason})

    if isinstance(outcome, DuplicateEntryError):
        try:
            held = journal.get(entry.id)
        except EntryNotFoundError:
            conflict("its id is taken by a file the index does not hold; run 'ghostjournal verify'")
            return
        if held.to_json_bytes() == data:
            summary.duplicate += 1
        elif not _settled_by_tombstone(journal, entry, held, summary, conflict):
            conflict("its id is held by an entry with other bytes")
        return
    if isinstance(outcome, EntryValidationError):
        conflict(_refused_link(entry, outcome, place_of))
        return
    if not outcome.is_duplicate:
        summary.appended += 1
    elif outcome.entry.to_json_bytes() == data:
        summary.duplicate += 1
    elif outcome.entry.id != entry.id or not _settled_by_tombstone(journal, entry, outcome.entry, summary, conflict):
        conflict(f"its client_key {entry.client_key!r} is held by entry {outcome.entry.id!r} with other bytes")


def _settled_by_tombstone(
    journal: ImportTarget, entry: Entry, held: Entry, summary: ImportSummary, conflict: Callable[[str], None]
) -> bool:
    """Whether a tombstone decides between *entry* (from the stream) and *held* (the journal's, of the same id); counted if so.

    A tombstone wins over the entry it erased, in either direction, and only over that one: its hash, keyed with this journal's
    erase key, must match the entry's bytes. So an old export never brings an erased entry back, a backup's tombstones erase the
    entries they erased, and a forged tombstone erases nothing.
    """
    tombstone, other = (held, entry) if held.erased is not None else (entry, held)
    erased = tombstone.erased
    if erased is None:
        return False
    if other.erased is not None:
        conflict("its id is held by another tombstone")
        return True
    key = load_erase_key(journal.root, create=False)
    if key is None or erased_hash(key, other.to_json_bytes()) != erased["hash"]:
        conflict(
            "a tombstone and an entry share its id, but the tombstone's hash does not match that entry "
            "(a forged tombstone, or another journal's erase); nothing erased or stored"
        )
        return True
    if tombstone is entry:  # the journal holds the live entry: the stream's tombstone erases it
        journal.erase([entry.id], reason=erased["reason"], by=erased["by"])
    summary.erased += 1
    return True


def _refused_link(entry: Entry, exc: EntryValidationError, place_of: Callable[[str, str], str | None]) -> str:
    """Why the append refused *entry* (*exc*), a refused link named by its field and the linked line's position, not by its id."""
    match = _LINK_FIELD.fullmatch(exc.field)
    if match is None:
        return str(exc)
    refs = entry.continuity_refs if match.group(1) == "continuity_refs" else entry.supersedes
    place = place_of(refs[int(match.group(2))], entry.agent)
    target = f"the entry of {place}" if place is not None else "an id that is no line of its agent in this import"
    return f"{exc.field} links to {target}, which this journal does not hold as an entry of agent {entry.agent!r}; nothing stored"


def import_stream(
    journal: ImportTarget,
    source: IO[bytes],
    *,
    agent_map: Mapping[str, str] | None = None,
    partial: bool = False,
    on_entry: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Import the export stream *source* into *journal* (see :meth:`journal.Journal.import_stream`)."""
    summary = ImportSummary(agent_map=dict(agent_map or {}))
    items: list[_Spooled] = []
    with _spool() as spool:
        _check_stream(source, spool, items, summary, summary.agent_map, partial=partial)
        bad = _bad_line(summary, partial=partial)
        order = _plan(journal, items, lambda where, reason: bad(where["line"], reason))
        _store_spooled(journal, spool, items, order, summary, on_entry)
    return summary


@contextlib.contextmanager
def _spool() -> Iterator[IO[bytes]]:
    """The private temporary file (in ``$TMPDIR``) entries are spooled to, unbuffered: a write the scratch space refuses fails at once,
    as one error naming TMPDIR (see :func:`_spool_write`), and closing it has nothing left to write that could fail."""
    with contextlib.ExitStack() as stack:
        with scratch_errors("the import's spool"):
            spool = stack.enter_context(tempfile.TemporaryFile(prefix="ghostjournal-import-", buffering=0))
        yield spool


def _spool_entry(spool: IO[bytes], items: list[_Spooled], entry: Entry, at: int | str) -> None:
    """Spool *entry*'s canonical line and list it in *items*, from line or file *at*, with its links and its span in the spool."""
    data = entry.to_json_bytes()
    offset = spool.tell()
    _spool_write(spool, data)
    items.append(_Spooled(at, entry.id, sys.intern(entry.agent), tuple(entry.continuity_refs), tuple(entry.supersedes), offset, len(data)))


def _spool_write(spool: IO[bytes], data: bytes) -> None:
    view = memoryview(data)
    with scratch_errors("the import's spool"):
        while view:  # an unbuffered write may take part of the bytes
            view = view[spool.write(view) :]


def _store_spooled(
    journal: ImportTarget,
    spool: IO[bytes],
    items: list[_Spooled],
    order: list[int],
    summary: ImportSummary,
    on_entry: Callable[[int], None] | None,
) -> None:
    """Store the checked entries *spool* holds, those of *items* at the positions *order* lists, in that order, once the disk is known
    to have room."""
    _check_space(journal, spool.tell(), len(items), "the journal directory" if summary.source is not None else "the stream")
    first: dict[_Key, int] = {}

    def place_of(ref: str, agent: str) -> str | None:
        if not first:  # made at the first refusal: most imports have none, and it would hold a key of every entry meanwhile
            for position, item in enumerate(items):
                first.setdefault((item.id, item.agent), position)
        linked = first.get((ref, agent))
        return _place(items[linked].where) if linked is not None else None

    # Stored a group at a time, in the planned order: an entry links only to entries stored before it, in its group or an earlier one.
    done = 0
    for start in range(0, len(order), INDEX_GROUP):
        group = [items[position] for position in order[start : start + INDEX_GROUP]]
        # The spool is this process's own unlinked file of entries checked as they were read: not checked again.
        entries = [entry_from_own_bytes(os.pread(spool.fileno(), item.size, item.offset)) for item in group]
        outcomes = journal.append_many(entries)
        for item, entry, outcome in zip(group, entries, outcomes, strict=True):
            _store(journal, entry, outcome, item.where, summary, place_of)
            done += 1
            if on_entry is not None:
                on_entry(done)


def check_peer_dir(root: Path, into: Path) -> dict[str, Any]:
    """The manifest of the ghostjournal 0.1.1 journal directory *root*, checked before a journal at *into* is opened (or created) to import it.

    Raises:
        ImportSourceError: *root* is no such journal, or *into* is inside it (nothing may be written there).
    """
    fd = _open_peer_dir(root)
    try:
        return _peer_manifest(root, fd, into)
    finally:
        os.close(fd)


def _open_peer_dir(root: Path) -> int:
    """A descriptor of the directory *root* (reached through a link if the caller named one; nothing inside it is)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportSourceError(root, f"cannot be opened as a directory ({exc.strerror})") from None


def _peer_manifest(root: Path, root_fd: int, into: Path) -> dict[str, Any]:
    manifest = read_peer_manifest(root, root_fd)
    if into.resolve().is_relative_to(root.resolve()):
        raise ImportSourceError(
            root,
            f"holds the journal to import into ({into}), and nothing may be written into the directory it reads",
            "import into a journal outside it",
        )
    return manifest


def import_peer_dir(
    journal: ImportTarget,
    root: Path,
    *,
    agent_map: Mapping[str, str] | None = None,
    partial: bool = False,
    on_entry: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Import the ghostjournal 0.1.1 journal directory *root* into *journal* (see :meth:`journal.Journal.import_dir`).

    As with a stream, every entry file is read, mapped and checked (spooled
    as our canonical line) before anything is stored, so a directory with an
    unimportable file imports nothing unless *partial*; the same storing
    then makes a second import all duplicates.
    """
    summary = ImportSummary(agent_map=dict(agent_map or {}), source=PEER_FORMAT)
    items: list[_Spooled] = []
    root_fd = _open_peer_dir(root)

    def bad(rel: str, reason: str) -> None:
        if not partial:
            raise ImportSourceError(root / rel, reason, "pass --partial to import the other entry files anyway")
        summary.bad_files.append({"file": rel, "reason": reason})

    try:
        summary.manifest = _peer_manifest(root, root_fd, journal.root)
        with _spool() as spool:
            for rel, content in peer_files(root, root_fd):
                reason = content if isinstance(content, str) else None
                if isinstance(content, bytes):
                    summary.files += 1
                    try:
                        entry = peer_entry(content, rel, summary.agent_map)
                    except EntryValidationError as exc:
                        reason = str(exc) + (" (rename it with --agent-map OLD=NEW)" if exc.field == "agent" else "")
                    else:
                        _spool_entry(spool, items, entry, rel)
                if reason is not None:
                    bad(rel, reason)
            order = _plan(journal, items, lambda where, reason: bad(where["file"], reason))
            _store_spooled(journal, spool, items, order, summary, on_entry)
    finally:
        os.close(root_fd)
    return summary


def _place(where: Mapping[str, Any]) -> str:
    """Where a spooled entry came from, as a report names it: ``line 3``, or a directory's entry file."""
    return f"line {where['line']}" if "line" in where else str(where["file"])


def _plan(journal: ImportTarget, items: list[_Spooled], bad: Callable[[Mapping[str, Any], str], None]) -> list[int]:
    """The positions in *items* to store, in an order that stores each entry after the entries of the source it links to.

    A link is resolved within the source first: to the lines of the same id and the linking entry's
    agent, stored before it. Only an id no such line can bring in is looked up in *journal*, whose
    answer this import cannot have changed, so a rerun plans the same. An entry is left out, reported
    to *bad* (in the order of the positions), when an append would refuse one of its links: to itself;
    to an id that no line of its agent brings in and the journal does not hold as its agent's (an
    unknown id and another agent's alike, as an append says); to an entry left out, in turn; or
    round a circle of links, which no order of appends can store. A reason names a linked entry of
    the same agent by its position in the source, never a linked entry by its id, nor another
    agent's entry at all.
    """
    # The position of each entry's line, or a list of them where a source repeats one: a list for every entry would double this.
    lines: dict[_Key, int | list[int]] = {}
    for position, item in enumerate(items):
        key = (item.id, item.agent)
        held_at = lines.setdefault(key, position)
        if held_at != position:
            lines[key] = [*held_at, position] if isinstance(held_at, list) else [held_at, position]
    in_source = {item.id for item in items}
    held: dict[_Key, bool] = {}

    def holds(key: _Key) -> bool:
        if key not in held:
            try:
                journal.get(*key)
            except EntryNotFoundError:
                held[key] = False
            else:
                held[key] = True
        return held[key]

    out: dict[int, str] = {}
    # position -> {an entry it links to that the source brings in: the field}, for the positions that link to one alone.
    waits: dict[int, dict[_Key, str]] = {}
    dependents: dict[_Key, list[int]] = {}
    for position, item in enumerate(items):
        for name, ref in item.links:
            key = (ref, item.agent)
            if ref == item.id:
                out[position] = f"{name} is the entry's own id: an append refuses a link to itself"
            elif key in lines:
                waits.setdefault(position, {}).setdefault(key, name)
                dependents.setdefault(key, []).append(position)
                continue
            elif holds(key):
                continue
            elif ref in in_source:
                out[position] = f"{name} links to an entry of another agent in this import: an append refuses that link"
            else:
                out[position] = f"{name} names no entry of agent {item.agent!r} that this journal holds or this import brings in"
            break
    order, placed, resolved = _in_link_order(items, waits, dependents, out, holds)
    _explain_left_out(items, lines, waits, dependents, out, placed, resolved)
    for position in sorted(out):
        bad(items[position].where, out[position])
    return order


def _in_link_order(
    items: list[_Spooled],
    waits: Mapping[int, dict[_Key, str]],
    dependents: Mapping[_Key, list[int]],
    out: Mapping[int, str],
    holds: Callable[[_Key], bool],
) -> tuple[list[int], bytearray, set[_Key]]:
    """The positions not in *out* that can be stored, each after a line bringing in every entry it *waits* for (or, once no line can,
    when the journal holds it), otherwise in the source's order; a flag of each position so placed; and the entries so resolved
    that a line waits for (no other entry's resolution is ever asked about)."""
    remaining = {position: len(waiting) for position, waiting in waits.items()}
    ready = [position for position in range(len(items)) if position not in out and position not in waits]
    heapq.heapify(ready)
    resolved: set[_Key] = set()
    order: list[int] = []
    placed = bytearray(len(items))

    def resolve(key: _Key) -> None:
        if key in resolved or key not in dependents:
            return
        resolved.add(key)
        for dependent in dict.fromkeys(dependents.get(key, ())):
            if dependent not in out and key in waits[dependent]:
                remaining[dependent] -= 1
                if remaining[dependent] == 0:
                    heapq.heappush(ready, dependent)

    while True:
        while ready:
            position = heapq.heappop(ready)
            order.append(position)
            placed[position] = 1
            resolve((items[position].id, items[position].agent))
        # Stuck: what the waiting lines still need, no line brought in. The journal's answer for those is
        # the one from before this import (no line of them was stored), so a rerun resolves the same.
        needed = sorted(
            {key for position, waiting in waits.items() if position not in out and not placed[position] for key in waiting} - resolved
        )
        found = [key for key in needed if holds(key)]
        if not found:
            return order, placed, resolved
        for key in found:
            resolve(key)


def _explain_left_out(
    items: list[_Spooled],
    lines: Mapping[_Key, int | list[int]],
    waits: Mapping[int, dict[_Key, str]],
    dependents: Mapping[_Key, list[int]],
    out: dict[int, str],
    placed: bytearray,
    resolved: set[_Key],
) -> None:
    """Add to *out* the reason of each line neither stored (*placed*) nor left out yet: it links to a line left out, or round a circle."""
    stuck = {position for position in range(len(items)) if position not in out and not placed[position]}
    # A worklist from the lines left out, so a hostile source's long chains of links cost one pass.
    pending = sorted(out)
    while pending:
        gone = pending.pop()
        key = (items[gone].id, items[gone].agent)
        if key in resolved or not all(line in out for line in _positions(lines, key)):
            continue
        for dependent in dependents.get(key, ()):
            if dependent in stuck and dependent not in out:
                out[dependent] = (
                    f"{waits[dependent][key]} links to the entry of {_place(items[_positions(lines, key)[0]].where)}, which this import leaves out"
                )
                pending.append(dependent)
    left_out = set(out)
    for position in sorted(stuck - left_out):
        key, name = next((key, name) for key, name in waits[position].items() if key not in resolved)
        linked = next(
            line for line in _positions(lines, key) if line not in left_out
        )  # were all left out, the worklist would have left this out too
        out[position] = (
            f"{name} links to the entry of {_place(items[linked].where)}, and the links from there come back round in a circle: "
            "no order of appends can store it"
        )


def _positions(lines: Mapping[_Key, int | list[int]], key: _Key) -> list[int]:
    """The positions of the lines of *key*, in the source's order."""
    held_at = lines[key]
    return held_at if isinstance(held_at, list) else [held_at]


def _check_space(journal: ImportTarget, size: int, entries: int, what: str) -> None:
    """Refuse, before anything is stored, an import the journal's filesystem clearly has no room for.

    Each entry takes at least one block for its file, and the index about
    twice its text again; a disk that fills anyway stops the import with its
    error, the entries stored so far whole (a rerun finishes it).
    """
    info = os.statvfs(journal.root / "entries")
    needed = entries * info.f_frsize + 3 * size
    if info.f_bavail * info.f_frsize < needed:
        raise JournalStorageError.for_errno(
            journal.root / "entries",
            errno.ENOSPC,
            f"import {what} into",
            f"{needed} bytes are needed and {info.f_bavail * info.f_frsize} are free; free space on that filesystem, then import again",
        )
