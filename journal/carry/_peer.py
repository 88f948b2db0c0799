"""Reading the journal directory of ghostjournal 0.1.1 (a different project on PyPI with the same name) as our entries.

Its layout is close to ours: ``manifest.json`` (``"format": "ghostjournal"``
with ``manifest_version`` 1, where ours has ``format_version``), one JSON
file per entry at ``entries/YYYY/MM/DD/<id>.json`` (indented, keys sorted:
not our canonical bytes; the day is the date in the ts's own offset), a
SQLite ``index/`` and a ``.write.lock``. Only the manifest and the entry
files are read; the directory may belong to a running peer writer, so
nothing in it is ever written, locked or created. Every file is opened
relative to its directory's descriptor with ``O_NOFOLLOW`` and
``O_NONBLOCK``: a symlink anywhere below the directory is refused (never
followed), a FIFO or device refused without hanging, and no file is read
past :data:`PEER_FILE_LIMIT`.

:func:`peer_entry` maps one peer entry onto our entry schema v1 (the table
is in docs/ghostjournal.md, "Bringing in a ghostjournal 0.1.1 journal").
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from journal.errors import EntryValidationError, ImportSourceError, UnsafePathError
from journal.files import describe, open_regular, require_object, show_value
from journal.files.entry import MAX_INPUT_BYTES, Entry, json_depth_exceeds, parse_json_payload, parse_timestamp

__all__ = ["PEER_FILE_LIMIT", "PEER_FORMAT", "PeerFile", "check_peer_agent", "peer_entry", "peer_files", "read_peer_manifest"]

#: What ``import`` calls this source in its summary.
PEER_FORMAT: Final = "ghostjournal-0.1.1"
#: The most bytes read of one peer entry file: its indented JSON may be larger than our 1 MiB canonical file, not without bound.
PEER_FILE_LIMIT: Final = MAX_INPUT_BYTES
_MANIFEST_LIMIT: Final = 64 * 1024
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_AGENT_MAX: Final = 128  # the peer's own limit on an agent name: any non-blank text up to this length


#: One entry file of the peer directory: its path below the directory, and its bytes or why it cannot be read.
PeerFile = tuple[str, bytes | str]


def check_peer_agent(value: object, path: str) -> str:
    """*value* if ghostjournal 0.1.1 accepts it as an agent name (the old side of an ``--agent-map`` from such a journal).

    Raises:
        EntryValidationError: naming *path*.
    """
    if not isinstance(value, str) or not value.strip() or len(value) > _AGENT_MAX:
        raise EntryValidationError(path, f"a non-blank agent name of at most {_AGENT_MAX} characters", show_value(value))
    return value


def read_peer_manifest(root: Path, root_fd: int) -> dict[str, Any]:
    """The manifest of the peer journal open as *root_fd*, checked to be a ghostjournal 0.1.1 one.

    Raises:
        ImportSourceError: no manifest, our own journal's manifest, or another format or version, saying what to do.
    """
    shown = root / "manifest.json"
    try:
        fd = open_regular("manifest.json", os.O_RDONLY, "manifest.json", dir_fd=root_fd)
    except FileNotFoundError:
        raise ImportSourceError(
            root,
            "holds no manifest.json: it is no journal directory",
            "import reads an export stream file, or the directory of a ghostjournal 0.1.1 journal",
        ) from None
    except UnsafePathError as exc:
        raise ImportSourceError(shown, exc.reason) from None
    except OSError as exc:  # this user may not read it, or may not search the directory
        raise ImportSourceError(shown, f"cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(_MANIFEST_LIMIT + 1)
    text = raw.decode("utf-8", "replace")
    data: object = None
    if len(raw) <= _MANIFEST_LIMIT and not json_depth_exceeds(text):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if not isinstance(data, dict) or data.get("format") != "ghostjournal":
        raise ImportSourceError(shown, 'is not the manifest of a ghostjournal journal (no "format": "ghostjournal")')
    if "format_version" in data:
        raise ImportSourceError(
            root,
            "is a journal of this ghostjournal, not of ghostjournal 0.1.1",
            f"copy it with 'ghostjournal --root {root} backup --out NEW', "
            f"or 'ghostjournal --root {root} export --out FILE' and import FILE",
        )
    for key in ("manifest_version", "entry_schema_version"):
        if type(data.get(key)) is not int or data[key] != 1:
            raise ImportSourceError(
                shown, f"{key} is {show_value(data.get(key))}: only ghostjournal 0.1.1 journals (version 1) can be imported"
            )
    return data


def peer_files(root: Path, root_fd: int) -> Iterator[PeerFile]:
    """Each ``entries/*/*/*/*.json`` of the peer journal, in path order, with its bytes or the reason it cannot be read.

    The same names the peer itself reads (hidden names and others, such as its
    ``*.tmp`` files of a write in progress, are not entries, and a plain file
    where a directory belongs is none of its entries either); a symlink, FIFO,
    device or socket where a directory belongs, or anything but a regular
    file named like an entry, is reported, never followed or opened.
    """
    try:
        entries_fd = os.open("entries", _DIR_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return  # a peer journal before its first append
    except OSError as exc:
        mode = os.stat("entries", dir_fd=root_fd, follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):  # a directory this user may not open
            yield "entries", f"cannot be opened ({exc.strerror})"
        else:
            yield "entries", f"is {describe(mode)}, not a directory ({exc.strerror}); not followed"
        return
    try:
        yield from _walk(entries_fd, "entries", depth=3)
    finally:
        os.close(entries_fd)


def _walk(dir_fd: int, rel: str, *, depth: int) -> Iterator[PeerFile]:
    with os.scandir(dir_fd) as listing:
        names = sorted(item.name for item in listing if not item.name.startswith("."))
    for name in names:
        path = f"{rel}/{name}"
        if depth == 0 and not name.endswith(".json"):
            continue  # the peer's *.tmp of a write in progress, or anything else it does not read
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone since the listing
        except OSError as exc:  # a directory that may be listed but not searched
            yield path, f"cannot be read ({exc.strerror})"
            continue
        if depth == 0:
            yield path, _read(dir_fd, name)
            continue
        if stat.S_ISLNK(info.st_mode):
            yield path, "is a symlink; links in the journal directory are never followed"
            continue
        if stat.S_ISREG(info.st_mode):
            continue  # the peer reads only entries/*/*/*/*.json; a stray file up here is none of its entries
        if not stat.S_ISDIR(info.st_mode):
            yield path, f"is {describe(info.st_mode)}, not a directory; not opened"
            continue
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            yield path, f"cannot be opened ({exc.strerror})"
            continue
        try:
            yield from _walk(fd, path, depth=depth - 1)
        finally:
            os.close(fd)


def _read(dir_fd: int, name: str) -> bytes | str:
    try:
        fd = open_regular(name, os.O_RDONLY, name, dir_fd=dir_fd)
    except UnsafePathError as exc:
        return exc.reason.replace(f"{name} is", "is", 1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(PEER_FILE_LIMIT + 1)
    if len(raw) > PEER_FILE_LIMIT:
        return f"larger than {PEER_FILE_LIMIT} bytes, more than any entry can be; not read further"
    return raw


def _peer_time(value: object) -> object:
    """*value* unchanged if our schema accepts it as a ts, else the same instant written the way it does.

    The peer accepts any timestamp ``datetime.fromisoformat`` reads with an
    offset (a space for the ``T``, the compact form, an offset with seconds);
    such a one becomes ``YYYY-MM-DDTHH:MM:SS[.ffffff]`` with its offset, or in
    UTC when the offset is not whole minutes. Anything else is left for our
    schema's check to refuse, naming it.
    """
    if not isinstance(value, str):
        return value
    try:
        parse_timestamp(value)
    except EntryValidationError:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        offset = moment.utcoffset()
        if offset is None:
            return value
        if offset.seconds % 60 or offset.microseconds:
            moment = moment.astimezone(UTC)
        return moment.isoformat()
    return value


def _without_nulls(value: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """*value* without those of *keys* that are null: the peer's way of saying "none" where our schema leaves the field out."""
    return {key: item for key, item in value.items() if not (key in keys and item is None)}


def peer_entry(raw: bytes, rel: str, agent_map: Mapping[str, str]) -> Entry:
    """Our entry for the peer entry file *raw* found at *rel* (``entries/YYYY/MM/DD/<id>.json``), its agent renamed by *agent_map*.

    Raises:
        EntryValidationError: the file is no entry our schema v1 can hold after the mapping, or not where the peer keeps it.
    """
    payload = dict(require_object(parse_json_payload(raw)))
    for required in ("id", "ts"):
        if required not in payload:
            raise EntryValidationError(required, "a value in a stored entry", "nothing")
    payload.pop("embedding", None)  # vectors are derived here, by this journal's own model, from the text
    payload = _without_nulls(payload, "mood", "client_key", "signals")
    if isinstance(payload.get("signals"), Mapping):
        payload["signals"] = _without_nulls(payload["signals"], "focus", "novelty")
    if isinstance(payload.get("anchors"), list):
        payload["anchors"] = [_without_nulls(a, "label") if isinstance(a, Mapping) else a for a in payload["anchors"]]
    if isinstance(payload.get("meta"), Mapping):
        payload["meta"] = _without_nulls(payload["meta"], "source_routine")
    original_ts = payload["ts"]
    payload["ts"] = _peer_time(original_ts)
    agent = payload.get("agent")
    if isinstance(agent, str) and agent in agent_map:
        payload["agent"] = agent_map[agent]
    entry = Entry.from_payload(payload)
    # Where the peer itself would keep this entry; a file elsewhere is a stray copy the peer refuses to read too.
    local = datetime.fromisoformat(str(original_ts))
    expected = f"entries/{local.year:04d}/{local.month:02d}/{local.day:02d}/{entry.id}.json"
    if rel != expected:
        raise EntryValidationError(
            "(entry)", f"its file at {expected}, where ghostjournal 0.1.1 keeps the entry of this id and ts", f"a stray copy at {rel}"
        )
    return entry
