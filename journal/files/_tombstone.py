"""Tombstones: what an erased entry's file holds instead of the entry, and the key its hash is made with.

A tombstone is a valid schema v1 entry, so every reader of entry files (an
older ghostjournal too) reads it: the erased entry's ``id``, ``ts``, ``kind``,
``agent`` and ``client_key`` (a retried run of that slot is still a
duplicate, never a rewrite), the placeholder voice and theme below, no other
field, and ``meta.erased``: the reason, when and by whom, and a keyed hash
of the erased file's bytes. The key is the journal's own (``erase.key`` in
its root, made on the first erase), so that whoever holds the erased text and
the journal can confirm which entry it was, while a tombstone alone (in an
export, say) cannot be used to test guesses of it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from journal.errors import EntryValidationError, EraseKeyError, UnsafePathError
from journal.files._fsync import fsync_directory
from journal.files._json import json_type_name, show_value
from journal.files._safefs import FILE_MODE, Owner, describe, open_regular, take_ownership

__all__ = [
    "ERASED_THEME",
    "ERASED_VOICE",
    "ERASE_KEY_FILE",
    "check_erased",
    "erased_hash",
    "load_erase_key",
    "tombstone_payload",
]

ERASED_VOICE: Final = "(erased)"
ERASED_THEME: Final = "erased"
ERASE_KEY_FILE: Final = "erase.key"
_HASH_PREFIX: Final = "hmac-sha256:"
_KEY_BYTES: Final = 32
_HEX_DIGITS: Final = frozenset(b"0123456789abcdefABCDEF")
_FIELDS: Final = ("at", "by", "hash", "reason")
_MAX_REASON: Final = 2000


def erased_hash(key: bytes, erased: bytes) -> str:
    """The keyed hash a tombstone records of the erased file's bytes."""
    return _HASH_PREFIX + hmac.new(key, erased, hashlib.sha256).hexdigest()


def load_erase_key(root: Path, *, create: bool, owner: Owner = None) -> bytes | None:
    """The journal's erase key, made (durably, mode 0600) when *create* and there is none yet; None when absent and not *create*."""
    path = root / ERASE_KEY_FILE
    try:
        fd = open_regular(str(path), os.O_RDONLY, ERASE_KEY_FILE)
    except FileNotFoundError:
        if not create:
            return None
    except UnsafePathError:
        info = os.stat(path, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise  # a planted link is refused as a link, as at every path of the journal
        raise EraseKeyError(path, f"it is {describe(info.st_mode)}, not a regular file") from None
    else:
        with os.fdopen(fd, "rb") as handle:
            text = handle.read(4 * _KEY_BYTES).strip()
        return _key_of(path, text)
    key = secrets.token_bytes(_KEY_BYTES)
    temp = root / f".{ERASE_KEY_FILE}.{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        take_ownership(fd, FILE_MODE, owner)
        os.write(fd, key.hex().encode("ascii") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)  # no clobber: a key made meanwhile by another process wins
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)
    fsync_directory(root)
    return load_erase_key(root, create=False)


def _key_of(path: Path, text: bytes) -> bytes:
    """The key *text* (what the key file at *path* holds, stripped) spells; its content is never quoted, being a secret."""
    digits = 2 * _KEY_BYTES
    if not text:
        raise EraseKeyError(path, f"the file is empty, where {digits} hex digits were expected")
    if any(byte not in _HEX_DIGITS for byte in text):
        raise EraseKeyError(path, f"it holds characters other than hex digits, where {digits} hex digits on one line were expected")
    if len(text) != digits:
        count = f"only {len(text)}" if len(text) < digits else f"more than {digits}"
        raise EraseKeyError(path, f"it holds {count} hex digits, where {digits} were expected")
    return bytes.fromhex(text.decode("ascii"))


def tombstone_payload(original: Mapping[str, Any], *, erased: bytes, key: bytes, reason: str, at: str, by: str) -> dict[str, Any]:
    """The tombstone of the entry *original* (its dict), whose file held the bytes *erased*."""
    payload: dict[str, Any] = {
        "schema_version": original["schema_version"],
        "id": original["id"],
        "ts": original["ts"],
        "kind": original["kind"],
        "agent": original["agent"],
        "voice": ERASED_VOICE,
        "theme": ERASED_THEME,
        "tags": [],
        "meta": {
            "schema_version": original["meta"]["schema_version"],
            "erased": {"at": at, "by": by, "hash": erased_hash(key, erased), "reason": reason},
        },
    }
    if original.get("client_key") is not None:
        payload["client_key"] = original["client_key"]
    return payload


def check_erased(value: object, data: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """*value* (``meta.erased``) if it and the entry around it (*data* so far, the raw *payload*) are a tombstone's.

    Raises:
        EntryValidationError: naming the field that no tombstone holds so.
    """
    if not isinstance(value, Mapping):
        raise EntryValidationError("meta.erased", "an object {at, by, hash, reason}", json_type_name(value))
    if sorted(value) != sorted(_FIELDS):
        raise EntryValidationError("meta.erased", "exactly the fields 'at', 'by', 'hash' and 'reason'", ", ".join(sorted(map(str, value))))
    for name in _FIELDS:
        text = value[name]
        if not isinstance(text, str) or not text.strip() or len(text) > _MAX_REASON:
            raise EntryValidationError(f"meta.erased.{name}", f"a non-empty string of at most {_MAX_REASON} characters", show_value(text))
    hash_hex = value["hash"].removeprefix(_HASH_PREFIX)
    if not value["hash"].startswith(_HASH_PREFIX) or len(hash_hex) != 64 or any(c not in "0123456789abcdef" for c in hash_hex):
        raise EntryValidationError("meta.erased.hash", f"{_HASH_PREFIX} and 64 lowercase hex digits", show_value(value["hash"]))
    if payload.get("voice") != ERASED_VOICE or payload.get("theme") != ERASED_THEME:
        raise EntryValidationError(
            "voice", f"{ERASED_VOICE!r} with theme {ERASED_THEME!r} in a tombstone", show_value(payload.get("voice"))
        )
    extra = sorted(set(payload) - {"schema_version", "id", "ts", "kind", "agent", "voice", "theme", "tags", "client_key", "meta"})
    if extra or payload.get("tags", []):
        raise EntryValidationError(extra[0] if extra else "tags", "no text of the erased entry in its tombstone", "a value")
    meta_extra = sorted(set(data.get("meta", payload.get("meta", {}))) - {"schema_version", "erased"})
    if meta_extra:
        raise EntryValidationError(f"meta.{meta_extra[0]}", "no text of the erased entry in its tombstone", "a value")
    return dict(value)
