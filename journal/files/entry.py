"""The Entry record: one immutable journal entry, its canonical file bytes, and a stored file read back.

The rules of entry schema v1 live in :mod:`journal.files._schema`, JSON's in
:mod:`journal.files._json`; the names other modules use are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from journal.errors import EntryValidationError
from journal.files._json import (
    MAX_DEPTH,
    canonical_json,
    json_depth_exceeds,
    json_nesting_depth,
    json_type_name,
    parse_json_payload,
    show_value,
)
from journal.files._schema import (
    ENTRY_ID_PATTERN,
    KINDS,
    MAX_ENTRY_BYTES,
    MAX_INPUT_BYTES,
    ORIGINS,
    SCHEMA_VERSION,
    check_agent,
    check_entry_id,
    check_label,
    check_text_arguments,
    check_utc_range,
    parse_timestamp,
    require_object,
    utc_key,
    validate_and_encode,
    validate_payload,
)

__all__ = [
    "ENTRY_ID_PATTERN",
    "KINDS",
    "MAX_DEPTH",
    "MAX_ENTRY_BYTES",
    "MAX_INPUT_BYTES",
    "ORIGINS",
    "SCHEMA_VERSION",
    "Entry",
    "canonical_json",
    "check_agent",
    "check_entry_id",
    "check_label",
    "check_text_arguments",
    "check_utc_range",
    "entry_from_json_bytes",
    "entry_from_own_bytes",
    "json_depth_exceeds",
    "json_nesting_depth",
    "json_type_name",
    "parse_json_payload",
    "parse_timestamp",
    "show_value",
    "utc_key",
    "validate_payload",
    "with_origin",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One immutable journal entry, as stored in its canonical file."""

    id: str
    ts: str
    kind: str
    agent: str
    voice: str
    theme: str
    tags: tuple[str, ...] = ()
    mood: str | None = None
    anchors: tuple[dict[str, Any], ...] | None = None
    signals: dict[str, Any] | None = None
    embedding: tuple[float, ...] | None = None
    client_key: str | None = None
    meta: dict[str, Any] = field(default_factory=lambda: {"schema_version": SCHEMA_VERSION})
    schema_version: int = SCHEMA_VERSION
    # The canonical file bytes, when validation already produced them (see to_json_bytes).
    _json_bytes: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, now: datetime | None = None) -> Entry:
        """Validate *payload*, fill defaults and build the Entry."""
        data, encoded = validate_and_encode(payload, now=now)
        entry = cls._from_valid(data)
        object.__setattr__(entry, "_json_bytes", encoded)  # validation measured them; serialize once
        return entry

    @classmethod
    def _from_valid(cls, data: Mapping[str, Any]) -> Entry:
        anchors = data.get("anchors")
        embedding = data.get("embedding")
        return cls(
            id=data["id"],
            ts=data["ts"],
            kind=data["kind"],
            agent=data["agent"],
            voice=data["voice"],
            theme=data["theme"],
            tags=tuple(data.get("tags", ())),
            mood=data.get("mood"),
            anchors=tuple(anchors) if anchors is not None else None,
            signals=data.get("signals"),
            embedding=tuple(embedding) if embedding is not None else None,
            client_key=data.get("client_key"),
            meta=dict(data["meta"]),
            schema_version=data["schema_version"],
        )

    @property
    def timestamp(self) -> datetime:
        """The entry's time as an aware datetime."""
        return datetime.fromisoformat(self.ts)

    @property
    def is_simulated(self) -> bool:
        """True when ``meta.simulated`` is ``true``: a simulation (not a real agent) wrote the entry."""
        return self.meta.get("simulated") is True

    @property
    def origin(self) -> str:
        """Where the text came from: ``meta.origin`` (one of :data:`ORIGINS`).

        An entry written before origins were recorded has none; it reads as ``agent`` when a runner's
        run wrote it (its ``meta.source_routine`` says which routine), else as ``operator``.
        """
        origin = self.meta.get("origin")
        if isinstance(origin, str) and origin in ORIGINS:
            return origin
        return "agent" if "source_routine" in self.meta else "operator"

    @property
    def erased(self) -> dict[str, Any] | None:
        """For a tombstone (an erased entry's file), ``meta.erased``: ``at``, ``by``, ``reason`` and ``hash``; else None."""
        erased = self.meta.get("erased")
        return dict(erased) if isinstance(erased, dict) else None

    @property
    def continuity_refs(self) -> tuple[str, ...]:
        """Ids of earlier entries this one explicitly continues."""
        return tuple((self.signals or {}).get("continuity_refs", ()))

    @property
    def supersedes(self) -> tuple[str, ...]:
        """Ids of earlier entries of the same agent this one corrects (``signals.supersedes``)."""
        return tuple((self.signals or {}).get("supersedes", ()))

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as a JSON-ready dict; absent optional fields are left out."""
        data: dict[str, Any] = {
            "schema_version": self.schema_version,
            "id": self.id,
            "ts": self.ts,
            "kind": self.kind,
            "agent": self.agent,
            "voice": self.voice,
            "theme": self.theme,
            "tags": list(self.tags),
            "meta": dict(self.meta),
        }
        optional = {
            "mood": self.mood,
            "anchors": list(self.anchors) if self.anchors is not None else None,
            "signals": self.signals,
            "embedding": list(self.embedding) if self.embedding is not None else None,
            "client_key": self.client_key,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return data

    def to_json_bytes(self) -> bytes:
        """The exact bytes of this entry's canonical file."""
        if self._json_bytes is not None:
            return self._json_bytes
        return (canonical_json(self.to_dict()) + "\n").encode("utf-8")

    def digest(self) -> bytes:
        """The SHA-256 of :meth:`to_json_bytes`: every field the file holds, as one value an index can record and compare."""
        return hashlib.sha256(self.to_json_bytes()).digest()


def with_origin(payload: object, origin: str) -> Any:
    """*payload* with ``meta.origin`` set to *origin* when it names none (what a writer that knows its source fills in).

    Anything that is not an object with an object (or no) ``meta`` is returned as it is, for validation to refuse.
    """
    if not isinstance(payload, Mapping) or not isinstance(payload.get("meta", {}), Mapping) or "origin" in payload.get("meta", {}):
        return payload
    return {**payload, "meta": {**payload.get("meta", {}), "origin": origin}}


def entry_from_own_bytes(raw: bytes) -> Entry:
    """The Entry whose :meth:`Entry.to_json_bytes` gave *raw* in this process, parsed and not checked again.

    Only for bytes this process wrote from a validated Entry where nothing
    else could change them (an import's private spool): a second check of
    them was half of an import's time. Any other bytes go through
    :func:`entry_from_json_bytes`.
    """
    entry = Entry._from_valid(json.loads(raw))
    object.__setattr__(entry, "_json_bytes", raw)
    return entry


def entry_from_json_bytes(raw: bytes) -> Entry:
    """Parse and validate the bytes of a stored entry file.

    Raises:
        EntryValidationError: not UTF-8, not JSON, not a valid v1 entry, or
            missing the ``id`` and ``ts`` every stored entry has.
    """
    payload = require_object(parse_json_payload(raw))
    if type(payload.get("schema_version")) is int and payload["schema_version"] > SCHEMA_VERSION:
        raise EntryValidationError(
            "schema_version", f"at most {SCHEMA_VERSION}; upgrade ghostjournal to read this entry", str(payload["schema_version"])
        )
    if "id" not in payload or "ts" not in payload:
        missing = "id" if "id" not in payload else "ts"
        raise EntryValidationError(missing, "a value in a stored entry", "nothing")
    return Entry.from_payload(payload)
