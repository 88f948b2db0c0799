"""``manifest.json``: the journal's identity, written once and never rewritten."""

from __future__ import annotations

import errno
import json
import os
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from journal.errors import ManifestError, UnsafePathError
from journal.files._safefs import Owner, open_regular, take_ownership
from journal.files.entry import json_depth_exceeds

__all__ = ["FORMAT", "FORMAT_VERSION", "Manifest", "create_manifest", "holds_journal_manifest", "load_manifest"]

FORMAT: Final = "ghostjournal"
FORMAT_VERSION: Final = 1
_MAX_BYTES: Final = 64 * 1024  # a manifest is a few hundred bytes; never read a huge file whole


@dataclass(frozen=True, slots=True)
class Manifest:
    """What ``manifest.json`` says about a journal."""

    journal_id: str
    format: str
    format_version: int
    created: str


def load_manifest(path: Path) -> Manifest:
    """Read and check ``manifest.json``.

    Raises:
        UnsafePathError: a symlink, FIFO, device or anything but a regular file is there.
        ManifestError: unreadable, not a ghostjournal manifest, or a newer format.
    """
    fd = open_regular(path, os.O_RDONLY, "manifest.json")
    try:
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        text = raw.decode("utf-8")
        if len(raw) > _MAX_BYTES or json_depth_exceeds(text):
            raise ManifestError(path, f"not a {FORMAT} manifest (larger than {_MAX_BYTES} bytes or nested too deeply)")
        data = json.loads(text)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EIO):
            raise  # the filesystem refused: the caller reports it as a storage error, not a bad manifest
        raise ManifestError(path, f"cannot be read as JSON ({exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(path, f"cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(path, f'not a {FORMAT} manifest (expected "format": "{FORMAT}")')
    version = data.get("format_version")
    if version is None and "manifest_version" in data:
        raise ManifestError(
            path,
            "is the manifest of a ghostjournal 0.1.1 journal (another project's format), not of this ghostjournal; "
            f"bring its entries into a journal of this one with 'ghostjournal --root NEW import {path.parent}'",
        )
    if type(version) is not int:
        raise ManifestError(path, f"format_version must be an integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise ManifestError(path, f"format_version {version} is newer than supported {FORMAT_VERSION}; upgrade ghostjournal")
    journal_id = data.get("journal_id")
    if not isinstance(journal_id, str):
        raise ManifestError(path, "journal_id is missing")
    return Manifest(journal_id=journal_id, format=FORMAT, format_version=version, created=str(data.get("created", "")))


def holds_journal_manifest(directory: Path) -> bool:
    """Whether *directory* is a journal: its ``manifest.json`` is a regular file whose JSON says ``"format": "ghostjournal"``.

    Any version counts (a newer one, and a ghostjournal 0.1.1 journal's, which says so too), since what
    asks is a writer that must keep out of every journal. A manifest this user may not read counts when an
    ``entries`` directory stands beside it; anything else there (no manifest, a link, another
    program's ``manifest.json``) does not.
    """
    path = directory / "manifest.json"
    try:
        fd = open_regular(path, os.O_RDONLY, "manifest.json")
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False
    except OSError:
        return os.path.isdir(directory / "entries") and not os.path.islink(directory / "entries")
    try:
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        text = raw.decode("utf-8")
        data = None if len(raw) > _MAX_BYTES or json_depth_exceeds(text) else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def create_manifest(path: Path, *, owner: Owner = None) -> Manifest:
    """Write a new manifest unless one exists; never overwrite existing bytes."""
    manifest = Manifest(
        journal_id=str(uuid.uuid4()),
        format=FORMAT,
        format_version=FORMAT_VERSION,
        created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    body = (
        json.dumps(
            {
                "journal_id": manifest.journal_id,
                "format": manifest.format,
                "format_version": manifest.format_version,
                "created": manifest.created,
            },
            indent=2,
        ).encode("utf-8")
        + b"\n"
    )
    temp = path.with_name(f".manifest.tmp-{secrets.token_hex(6)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        take_ownership(fd, 0o600, owner)
        if os.write(fd, body) != len(body):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temp))  # noqa: TRY301 - a short write means a full disk; the except below removes the file
        os.fsync(fd)
    except BaseException:
        os.unlink(temp)  # a full disk must not leave a half-written temporary manifest behind
        raise
    finally:
        os.close(fd)
    try:
        os.link(temp, path, follow_symlinks=False)
    except FileExistsError:
        return load_manifest(path)  # another process created the journal first
    finally:
        os.unlink(temp)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return manifest
