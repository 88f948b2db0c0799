"""Exporting a journal as one stream: its entries' canonical bytes in time order, then a manifest line.

The stream is consistent as of one instant: under the writer lock the index
is caught up with the files and a read transaction of it begins, so the
entries exported are exactly those published before that instant (a later
append is in neither the snapshot nor the stream) and each of them is
complete (a file is named only once it is whole). The rows are then read in
order (time, then id) from that snapshot and each entry's file is read and
checked against its row, one at a time, so memory stays flat at any size.

Two forms:

``jsonl``
    One entry per line, the bytes of its canonical file (each ends with a
    newline), then one manifest line: a canonical JSON object whose
    ``ghostjournal_export`` is the format version (see :data:`MANIFEST_KEYS`),
    with ``sha256`` the hash of every byte before it.
``tar``
    A POSIX tar stream of ``entries/YYYY/MM/DD/<id>.json`` members (the same
    bytes, mode 0600, the entry's time as mtime), then ``export-manifest.json``
    holding the same manifest, whose ``sha256`` is that of the entry lines
    the jsonl form would have.

With ``agent``, nothing of another agent is in the stream: a link
(``continues``, ``supersedes``) to another agent's entry is taken out of the
entry that holds it, whose bytes are then the canonical form of the entry
without it, and the manifest lists that entry under ``links_removed`` with how
many links went, never their ids. Links to an entry the stream does not hold
(outside the window, or missing) stay in the entry and are listed under
``links_outside``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tarfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from journal.errors import EntryFileError, UnsafePathError
from journal.files import json_depth_exceeds
from journal.files.entry import SCHEMA_VERSION, Entry, canonical_json, check_text_arguments
from journal.files.store import EntryStore
from journal.frame.outfile import OutputKind
from journal.indexing import IndexSnapshot, bound
from journal.indexing.index import Window
from journal.sync import load_entry, shown_path, shown_reason

if TYPE_CHECKING:
    from journal.sync import IndexKeeper

__all__ = ["EXPORT_FORMAT_VERSION", "EXPORT_OUTPUT", "FORMATS", "MANIFEST_KEYS", "MANIFEST_MEMBER", "ExportManifest", "export"]

log = logging.getLogger("journal")

#: The version of the stream's layout, the value of the manifest's ``ghostjournal_export``.
EXPORT_FORMAT_VERSION: Final = 1
FORMATS: Final = ("jsonl", "tar")
#: The tar member holding the manifest, after every entry.
MANIFEST_MEMBER: Final = "export-manifest.json"
#: Every key of the manifest, as written.
MANIFEST_KEYS: Final = (
    "ghostjournal_export",
    "journal_id",
    "schema_version",
    "exported_at",
    "agent",
    "since",
    "until",
    "entries",
    "agents",
    "links_outside",
    "links_removed",
    "skipped",
    "sha256",
)


@dataclass(slots=True)
class ExportManifest:
    """What an export holds: the manifest line that ends its stream.

    Attributes:
        journal_id: the exported journal's id.
        exported_at: the instant the stream is consistent as of (UTC).
        agent, since, until: the export's scope (None: unscoped).
        entries: entries in the stream.
        agents: entries per agent.
        links_outside: ``{"entry": id, "link": id}`` for each link to an entry the stream does not hold.
        links_removed: ``{"entry": id, "links": n}`` for each entry whose links to another agent's entries were taken out.
        skipped: index rows whose files could not be exported (a damaged file; ``ghostjournal verify`` says more).
        sha256: ``sha256:<hex>`` of the entry lines.
    """

    journal_id: str
    exported_at: str
    agent: str | None = None
    since: str | None = None
    until: str | None = None
    entries: int = 0
    agents: dict[str, int] = field(default_factory=dict)
    links_outside: list[dict[str, str]] = field(default_factory=list)
    links_removed: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON data, keys as in :data:`MANIFEST_KEYS`."""
        return {
            "ghostjournal_export": EXPORT_FORMAT_VERSION,
            "journal_id": self.journal_id,
            "schema_version": SCHEMA_VERSION,
            "exported_at": self.exported_at,
            "agent": self.agent,
            "since": self.since,
            "until": self.until,
            "entries": self.entries,
            "agents": dict(sorted(self.agents.items())),
            "links_outside": self.links_outside,
            "links_removed": self.links_removed,
            "skipped": self.skipped,
            "sha256": self.sha256,
        }

    def line(self) -> bytes:
        """The manifest as the stream's last line: canonical JSON and a newline."""
        return (canonical_json(self.to_dict()) + "\n").encode("utf-8")


def _without_foreign_links(entry: Entry, foreign: set[str]) -> Entry:
    """*entry* with the links in *foreign* taken out of its signals."""
    data = entry.to_dict()
    signals = dict(data["signals"])
    for name in ("continuity_refs", "supersedes"):
        if name in signals:
            kept = [ref for ref in signals[name] if ref not in foreign]
            if kept:
                signals[name] = kept
            else:
                del signals[name]
    data["signals"] = signals
    return Entry.from_payload(data)


class _Sink:
    """Where the entries go, in either form; it hashes the entry lines as the jsonl form would write them."""

    def __init__(self, out: BinaryIO, form: str) -> None:
        self._out = out
        self._tar = tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) if form == "tar" else None  # noqa: SIM115 - closed in finish()
        self.digest = hashlib.sha256()

    def entry(self, rel_path: str, data: bytes, entry: Entry) -> None:
        self.digest.update(data)
        if self._tar is None:
            self._out.write(data)
        else:
            self._member(f"entries/{rel_path}", data, int(entry.timestamp.timestamp()))

    def _member(self, name: str, data: bytes, mtime: int) -> None:
        assert self._tar is not None  # noqa: S101 - narrows the type: only the tar form writes members
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime, info.uname, info.gname = len(data), 0o600, max(mtime, 0), "", ""
        self._tar.addfile(info, io.BytesIO(data))

    def finish(self, manifest: ExportManifest) -> None:
        if self._tar is None:
            self._out.write(manifest.line())
        else:
            self._member(MANIFEST_MEMBER, manifest.line(), int(datetime.fromisoformat(manifest.exported_at).timestamp()))
            self._tar.close()
        self._out.flush()


#: How much of a file's end is read to find an export's manifest there (a manifest listing more is not recognised).
_TAIL_BYTES: Final = 1 << 20
_BLOCK: Final = tarfile.BLOCKSIZE


def _is_manifest(data: bytes) -> bool:
    """Whether *data* is an export's manifest line (a JSON object with the export format's version)."""
    try:
        text = data.decode("utf-8")
        parsed = None if json_depth_exceeds(text) else json.loads(text)
    except ValueError:
        return False
    return isinstance(parsed, dict) and type(parsed.get("ghostjournal_export")) is int


def _is_export(stream: BinaryIO) -> bool:
    """Whether *stream* holds an export of either form: its last line, or its last tar member, is the manifest.

    Only the last MiB is read, whatever the size: the manifest ends the stream (the jsonl form's last
    line; the tar form's ``export-manifest.json``, in a header on a block boundary, then its data).
    """
    size = stream.seek(0, io.SEEK_END)
    start = max(0, size - _TAIL_BYTES) // _BLOCK * _BLOCK
    stream.seek(start)
    tail = stream.read()
    if tail.endswith(b"\n"):
        cut = tail.rfind(b"\n", 0, len(tail) - 1)
        if (cut >= 0 or start == 0) and _is_manifest(tail[cut + 1 :]):
            return True
    name = MANIFEST_MEMBER.encode("ascii") + b"\0"
    at = tail.rfind(name)
    while at >= 0 and (start + at) % _BLOCK:
        at = tail.rfind(name, 0, at)
    if at < 0:
        return False
    try:
        length = int(tail[at + 124 : at + 136].strip(b"\0 ") or b"0", 8)  # the header's size field, octal
    except ValueError:
        return False
    return _is_manifest(tail[at + _BLOCK : at + _BLOCK + length])


#: What ``ghostjournal export --out`` writes: a file there is replaced without --force only when it is an export (either form).
EXPORT_OUTPUT: Final = OutputKind("the export", "an export that 'ghostjournal export' wrote", _is_export)


def export(
    keeper: IndexKeeper,
    out: BinaryIO,
    *,
    agent: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    form: str = "jsonl",
    now: datetime | None = None,
) -> ExportManifest:
    """Write the entries of the scope to *out* in *form*, then the manifest (see :meth:`journal.Journal.export`)."""
    if form not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {form!r}")
    check_text_arguments(agent=agent)
    window = Window(agent=agent, since=bound(since, "since"), until=bound(until, "until"))
    with keeper.lock:
        keeper.sync_locked()  # the index holds every file published so far, and nothing else
        snapshot = IndexSnapshot.of(keeper.index)
        snapshot.begin()  # the snapshot starts with its first read, under the lock
        stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with snapshot:
        manifest = ExportManifest(keeper.manifest.journal_id, stamp, agent, window.since, window.until)
        sink = _Sink(out, form)
        # The rows, then each one's links, are read from the snapshot; entries are exported in (time, id) order.
        for row in snapshot.window_rows(window):
            _export_one(keeper.store, snapshot, sink, manifest, row, window)
        manifest.sha256 = f"sha256:{sink.digest.hexdigest()}"
        sink.finish(manifest)
    return manifest


def _export_one(
    store: EntryStore, snapshot: IndexSnapshot, sink: _Sink, manifest: ExportManifest, row: tuple[str, str, str], window: Window
) -> None:
    entry_id, rel_path, owner = row
    # Scoped, a damaged or foreign file is named as the scope's reads name it: never by another agent's id, time or path.
    shown = shown_path(rel_path, entry_id, window.agent)
    try:
        entry = load_entry(store, rel_path)
    except (EntryFileError, UnsafePathError) as exc:
        reason = shown_reason(exc, window.agent)
    except FileNotFoundError:
        reason = "the file is gone"
    else:
        if entry.id == entry_id and entry.agent == owner:
            _export_entry(snapshot, sink, manifest, entry, rel_path, window)
            return
        reason = "the file disagrees with its index row"
    log.warning("skipped %s: %s; run 'ghostjournal verify'", shown, reason)
    manifest.skipped.append({"path": shown, "reason": reason})


def _export_entry(snapshot: IndexSnapshot, sink: _Sink, manifest: ExportManifest, entry: Entry, rel_path: str, window: Window) -> None:
    links = [*entry.continuity_refs, *entry.supersedes]
    if links:
        agents = snapshot.agents_of(sorted(set(links)))
        foreign = {ref for ref in links if ref in agents and agents[ref] != entry.agent} if window.agent is not None else set()
        if foreign:
            entry = _without_foreign_links(entry, foreign)
            manifest.links_removed.append({"entry": entry.id, "links": sum(1 for ref in links if ref in foreign)})
        for ref in dict.fromkeys(ref for ref in links if ref not in foreign):
            if not snapshot.holds(ref, window):  # an entry the snapshot holds in the window is in the stream too
                manifest.links_outside.append({"entry": entry.id, "link": ref})
    sink.entry(rel_path, entry.to_json_bytes(), entry)
    manifest.entries += 1
    manifest.agents[entry.agent] = manifest.agents.get(entry.agent, 0) + 1
