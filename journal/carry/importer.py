"""Importing an export stream: check all of it first, then append each entry with its own id, time and client_key.

An import is all or nothing about the stream and idempotent about the
journal. First every line is read and checked, at most one entry's size at a
time (a line longer than an entry can be is refused without reading the rest
of it): each must be a valid schema v1 entry with its ``id`` and ``ts``, and
the stream must end with the manifest of :mod:`journal.carry.export`, whose entry
count and ``sha256`` must match the bytes read. The checked entries go to a
private spool meanwhile (:mod:`journal.carry._spool`: their bytes in one
file, their ids and links in a catalogue on disk), so that standard input
can be read only once and memory stays flat, however long the stream. A stream that fails any of this imports nothing and
the error names the line (``partial`` imports the good lines anyway and lists
the rest).

Then each entry is appended as it is, keeping its id, ts and client_key,
through the journal's append (of a group of entries at a time, each
checked as its own append would be: :meth:`journal.Journal.append_many`)
and its every check: what an import
stores is exactly what an append accepts for that agent, whatever the
stream says of itself (its manifest's ``links_outside`` is the export's
report, never a licence). So the links are planned first
(:mod:`journal.carry._plan`): an entry is stored only after the entries of the stream it
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

import errno
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

from journal.carry._peer import PEER_FORMAT, check_peer_agent, peer_entry, peer_files, read_peer_manifest
from journal.carry._plan import plan
from journal.carry._spool import Spool
from journal.carry.export import EXPORT_FORMAT_VERSION
from journal.errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    EntryValidationError,
    ImportSourceError,
    ImportStreamError,
    JournalStorageError,
)
from journal.files import erased_hash, json_depth_exceeds, load_erase_key, show_value
from journal.files.entry import MAX_ENTRY_BYTES, Entry, check_agent, entry_from_json_bytes, entry_from_own_bytes
from journal.sync import FILES_AT_ONCE, GroupOutcome

__all__ = ["ImportSummary", "ImportTarget", "check_peer_dir", "import_peer_dir", "import_stream", "parse_agent_map"]

#: The longest line read as an entry: an entry file's size limit plus its newline.
_LINE_LIMIT: Final = MAX_ENTRY_BYTES + 1
_MANIFEST_KEY: Final = "ghostjournal_export"
_PARTIAL: Final = "pass --partial to import the good lines anyway"


#: How many entries are stored as one group: one index transaction and one commit (see journal.sync._group). Its files are
#: written, fsynced and named :data:`IMPORT_GROUP` at a time whatever its size, so it holds no more descriptors than that;
#: its entries are what an import holds in memory meanwhile (a group of 4,096 held about 25 MiB more, for entries of 1.2 KB,
#: and imported no faster).
INDEX_GROUP: Final = 1024
#: How many entries' files are named together (see :data:`journal.sync.FILES_AT_ONCE`).
IMPORT_GROUP: Final = FILES_AT_ONCE
#: The field of a link an append refuses: ``signals.continuity_refs[0]``.
_LINK_FIELD: Final = re.compile(r"signals\.(continuity_refs|supersedes)\[(\d+)\]")


#: An entry as a link resolves it: its id and the agent of the entry linking to it (a link crosses no agents).
_Key = tuple[str, str]


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
        agent: the one agent whose entries were imported (after ``agent_map``), or None for every agent's.
        other_agents: with ``agent``, the entries of other agents, left out.
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
    agent: str | None = None
    other_agents: int = 0

    def to_dict(self) -> dict[str, Any]:
        """As JSON data: a stream's summary counts and lists lines, a directory's files; with an agent, it and the others left out."""
        scope = {} if self.agent is None else {"agent": self.agent, "other_agents": self.other_agents}
        return self._counts() | scope

    def _counts(self) -> dict[str, Any]:
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


def _check_stream(source: IO[bytes], spool: Spool, summary: ImportSummary, agent_map: Mapping[str, str], *, partial: bool) -> None:
    """Read the whole stream, spool each checked entry (renamed by *agent_map*; of ``summary.agent`` alone when set) with its
    line number, and check the manifest."""
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
        summary.lines += 1
        if _other_agents(summary, entry):
            continue
        spool.add(entry, number)
    if manifest is None:
        bad(last + 1, "the stream has no manifest line at its end: it is truncated, or no ghostjournal export")
        return
    summary.manifest = manifest
    problem = _manifest_problem(manifest, digest.hexdigest(), summary.lines + len(summary.bad_lines))
    if problem is not None:
        bad(last, problem)


def _other_agents(summary: ImportSummary, entry: Entry) -> bool:
    """Whether *entry* is left out as another agent's than the one the import is kept to (and counted so)."""
    if summary.agent is None or entry.agent == summary.agent:
        return False
    summary.other_agents += 1
    return True


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
    agent: str | None = None,
) -> ImportSummary:
    """Import the export stream *source* into *journal* (see :meth:`journal.Journal.import_stream`)."""
    summary = ImportSummary(agent_map=dict(agent_map or {}), agent=agent)
    with Spool() as spool:
        _check_stream(source, spool, summary, summary.agent_map, partial=partial)
        bad = _bad_line(summary, partial=partial)
        plan(spool, _holder(journal), lambda where, reason: bad(where["line"], reason))
        _store_spooled(journal, spool, summary, on_entry)
    return summary


def _store_spooled(journal: ImportTarget, spool: Spool, summary: ImportSummary, on_entry: Callable[[int], None] | None) -> None:
    """Store the checked entries *spool* holds, in the order it planned, once the disk is known to have room."""
    _check_space(journal, spool.size, spool.count, "the journal directory" if summary.source is not None else "the stream")

    def place_of(ref: str, agent: str) -> str | None:
        linked = spool.positions(ref, agent)
        return spool.item(linked[0]).place if linked else None

    # Stored a group at a time, in the planned order: an entry links only to entries stored before it, in its group or an earlier one.
    done = 0
    for group in spool.in_plan(INDEX_GROUP):
        # The spool is this process's own unlinked file of entries checked as they were read: not checked again.
        entries = [entry_from_own_bytes(data) for _, data in group]
        outcomes = journal.append_many(entries)
        for (item, _), entry, outcome in zip(group, entries, outcomes, strict=True):
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
    agent: str | None = None,
) -> ImportSummary:
    """Import the ghostjournal 0.1.1 journal directory *root* into *journal* (see :meth:`journal.Journal.import_dir`).

    As with a stream, every entry file is read, mapped and checked (spooled
    as our canonical line) before anything is stored, so a directory with an
    unimportable file imports nothing unless *partial*; the same storing
    then makes a second import all duplicates.
    """
    summary = ImportSummary(agent_map=dict(agent_map or {}), source=PEER_FORMAT, agent=agent)
    root_fd = _open_peer_dir(root)

    def bad(rel: str, reason: str) -> None:
        if not partial:
            raise ImportSourceError(root / rel, reason, "pass --partial to import the other entry files anyway")
        summary.bad_files.append({"file": rel, "reason": reason})

    try:
        summary.manifest = _peer_manifest(root, root_fd, journal.root)
        with Spool() as spool:
            for rel, content in peer_files(root, root_fd):
                reason = content if isinstance(content, str) else None
                if isinstance(content, bytes):
                    summary.files += 1
                    try:
                        entry = peer_entry(content, rel, summary.agent_map)
                    except EntryValidationError as exc:
                        reason = str(exc) + (" (rename it with --agent-map OLD=NEW)" if exc.field == "agent" else "")
                    else:
                        if not _other_agents(summary, entry):
                            spool.add(entry, rel)
                if reason is not None:
                    bad(rel, reason)
            plan(spool, _holder(journal), lambda where, reason: bad(where["file"], reason))
            _store_spooled(journal, spool, summary, on_entry)
    finally:
        os.close(root_fd)
    return summary


def _holder(journal: ImportTarget) -> Callable[[str, str], bool]:
    """Whether *journal* holds an id as an agent's entry."""

    def holds(entry_id: str, agent: str) -> bool:
        try:
            journal.get(entry_id, agent)
        except EntryNotFoundError:
            return False
        return True

    return holds


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
