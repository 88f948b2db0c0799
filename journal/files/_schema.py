"""Entry schema v1: the rules a payload must satisfy, and the defaults it is completed with.

The packaged JSON Schema (``schemas/entry-v1.schema.json``) describes the same
rules for other tools; a test runs both over one table of payloads. Checks the
schema language cannot express (calendar-valid timestamps, finite numbers
inside free-form ``meta``, the size and nesting limits, text that UTF-8 can
encode) live only here.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from journal.errors import EntryValidationError, InvalidEntryIdError
from journal.files._json import canonical_json, check_json_value, find_surrogate, json_type_name, show_value
from journal.files._tombstone import check_erased

__all__ = [
    "ENTRY_ID_PATTERN",
    "KINDS",
    "MAX_ENTRY_BYTES",
    "MAX_INPUT_BYTES",
    "ORIGINS",
    "SCHEMA_VERSION",
    "check_agent",
    "check_entry_id",
    "check_label",
    "check_text_arguments",
    "check_utc_range",
    "is_agent_name",
    "parse_timestamp",
    "require_object",
    "utc_key",
    "validate_and_encode",
    "validate_payload",
]

SCHEMA_VERSION: Final = 1
KINDS: Final = ("pulse", "evening", "note", "digest")
#: Where an entry's text came from (``meta.origin``): a runner's run, the operator at the command line, an MCP client, or
#: text taken from outside (a web page, a message), which a prompt context leaves out unless asked.
ORIGINS: Final = ("agent", "operator", "tool", "untrusted")
#: Largest canonical entry file accepted, in bytes (1 MiB). Voices of several
#: hundred kilobytes fit; whole documents belong in ``anchors``.
MAX_ENTRY_BYTES: Final = 1024 * 1024
#: Largest JSON document read as one entry (stdin, ``--input``): the canonical
#: file must still fit MAX_ENTRY_BYTES, but a client's JSON may be indented or
#: spell every non-ASCII character as a 6-byte ``\uXXXX`` escape.
MAX_INPUT_BYTES: Final = 4 * MAX_ENTRY_BYTES

ENTRY_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_AGENT_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_TS_PATTERN: Final = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d"
    r"(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_UTC_RANGE: Final = "a time within years 0001-9999 once converted to UTC"

_SHORT: Final = 200  # theme, focus, mood, tag: labels, not prose
#: The longest a label (a theme, tag, focus or mood) may be.
LABEL_MAX: Final = _SHORT
#: The longest an anchor's ref may be.
ANCHOR_REF_MAX: Final = 2048
_KEY_MAX: Final = 256

_TOP_LEVEL: Final = frozenset(
    {
        "schema_version",
        "id",
        "ts",
        "kind",
        "agent",
        "voice",
        "theme",
        "tags",
        "mood",
        "anchors",
        "signals",
        "embedding",
        "client_key",
        "meta",
    }
)


def check_entry_id(value: object) -> str:
    """Return *value* if it is a safe entry id, else raise InvalidEntryIdError.

    A safe id cannot be read as a path (no separators, no ``..``), a glob or an
    option, and fits in a file name.
    """
    if not isinstance(value, str) or not ENTRY_ID_PATTERN.fullmatch(value):
        raise InvalidEntryIdError(value)
    return value


def parse_timestamp(value: str, field_name: str = "ts") -> datetime:
    """Parse an ISO 8601 timestamp that carries a timezone.

    Raises:
        EntryValidationError: naive, malformed or impossible timestamps.
    """
    expected = "an ISO 8601 timestamp with a timezone, e.g. '2026-09-05T16:00:00Z'"
    if not isinstance(value, str):
        raise EntryValidationError(field_name, expected, show_value(value))
    if not _TS_PATTERN.fullmatch(value):
        naive = re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?", value)
        hint = expected.replace("an ISO", "a timezone-aware ISO") if naive else expected
        raise EntryValidationError(field_name, hint, show_value(value))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise EntryValidationError(field_name, "a real calendar date and time", show_value(value)) from None
    check_utc_range(parsed, field_name)
    return parsed


def check_utc_range(moment: datetime, field_name: str) -> datetime:
    """Return the aware *moment* if it converts to UTC inside years 1-9999.

    ``0001-01-01T00:00:00+01:00`` is a valid ISO 8601 string whose UTC time
    falls before year 1; Python cannot represent it, and every sort key, window
    and digest of the journal works in UTC.

    Raises:
        EntryValidationError: the UTC time is out of range, naming *field_name*.
    """
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise EntryValidationError(field_name, _UTC_RANGE, show_value(moment.isoformat())) from None
    return moment


def utc_key(moment: datetime) -> str:
    """Render an aware datetime as a sortable UTC string (microsecond precision)."""
    # Not strftime: glibc writes year 1 as "1", not "0001", which would sort after "2026".
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z"


def check_text_arguments(**arguments: object) -> None:
    """Refuse a read's text argument (``agent=``, ``kind=``, ``client_key=``; None means "any") that is no text.

    A str with a lone surrogate (what Python makes of a command line's bytes that are not
    UTF-8) cannot be bound into an SQLite query: it raised a bare UnicodeEncodeError.

    Raises:
        ValueError: naming the argument, with its value shown bounded and escaped.
    """
    for name, value in arguments.items():
        if value is None:
            continue
        if not isinstance(value, str):
            # A ValueError, not a TypeError: every bad read argument is one (the documented contract, as for since/until).
            raise ValueError(f"{name} must be a string, got {json_type_name(value)} {show_value(value)}")  # noqa: TRY004 - a ValueError is the documented contract (above)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name} must be UTF-8 text, got {show_value(value)} (a character that is no text at position {exc.start})"
            ) from None


def _require_string(payload: Mapping[str, Any], name: str, path: str, *, max_len: int, label: str) -> str:
    value = payload[name]
    if not isinstance(value, str):
        raise EntryValidationError(path, f"{label} (a string)", json_type_name(value))
    if not value.strip():
        raise EntryValidationError(path, f"a non-empty {label}", show_value(value))
    if len(value) > max_len:
        raise EntryValidationError(path, f"{label} of at most {max_len} characters", f"{len(value)} characters")
    return value


def check_label(value: object, path: str, label: str) -> str:
    """*value* if the schema accepts it as a label (a theme, tag, focus or mood); for inputs that later become one.

    Raises:
        EntryValidationError: naming *path*, with what a *label* must be.
    """
    if not isinstance(value, str):
        raise EntryValidationError(path, f"{label} (a string)", json_type_name(value))
    if not value.strip() or _CONTROL.search(value) or len(value) > _SHORT:
        raise EntryValidationError(
            path, f"a non-empty {label} of at most {_SHORT} characters without control characters", show_value(value)
        )
    return value


def is_agent_name(value: str) -> bool:
    """Whether *value* is a valid agent name (the ``agent`` field's rule): one path component, never ``.`` or ``..``."""
    return _AGENT_PATTERN.fullmatch(value) is not None


def check_agent(value: object, path: str) -> str:
    """*value* if it is a valid agent name (the ``agent`` field's rule).

    Raises:
        EntryValidationError: naming *path*, with the rule.
    """
    if not isinstance(value, str) or not _AGENT_PATTERN.fullmatch(value):
        raise EntryValidationError(path, "1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit", show_value(value))
    return value


def _require_integer_one(value: object, path: str) -> int:
    if type(value) is not int or value != SCHEMA_VERSION:
        raise EntryValidationError(
            path,
            f"the integer {SCHEMA_VERSION}",
            show_value(value) if not isinstance(value, bool | float) else f"{json_type_name(value)} {value!r}",
        )
    return value


def _validate_tags(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        raise EntryValidationError("tags", "an array of strings", json_type_name(value))
    seen: set[str] = set()
    for position, tag in enumerate(value):
        check_label(tag, f"tags[{position}]", "tag")
        if tag in seen:
            raise EntryValidationError("tags", "unique tags", f"{tag!r} twice")
        seen.add(tag)
    return list(value)


def _validate_anchors(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list | tuple):
        raise EntryValidationError("anchors", "an array of {type, ref, label?} objects", json_type_name(value))
    anchors = []
    for position, anchor in enumerate(value):
        path = f"anchors[{position}]"
        if not isinstance(anchor, Mapping):
            raise EntryValidationError(path, "an object {type, ref, label?}", json_type_name(anchor))
        unknown = sorted(set(anchor) - {"type", "ref", "label"})
        if unknown:
            raise EntryValidationError(f"{path}.{unknown[0]}", "only 'type', 'ref' and 'label' in an anchor", "an unknown field")
        for required in ("type", "ref"):
            if required not in anchor:
                raise EntryValidationError(f"{path}.{required}", "a non-empty string", "nothing")
        check_label(anchor["type"], f"{path}.type", "anchor type")
        ref = anchor["ref"]
        if not isinstance(ref, str) or not ref.strip() or len(ref) > ANCHOR_REF_MAX:
            raise EntryValidationError(f"{path}.ref", f"a non-empty string of at most {ANCHOR_REF_MAX} characters", show_value(ref))
        if "label" in anchor and not isinstance(anchor["label"], str):
            raise EntryValidationError(f"{path}.label", "a string", json_type_name(anchor["label"]))
        anchors.append(dict(anchor))
    return anchors


_SIGNAL_FIELDS: Final = ("focus", "novelty", "continuity_refs", "supersedes")


def _validate_signals(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise EntryValidationError("signals", "an object {focus?, novelty?, continuity_refs?, supersedes?}", json_type_name(value))
    unknown = sorted(set(value) - set(_SIGNAL_FIELDS))
    if unknown:
        raise EntryValidationError(
            f"signals.{unknown[0]}", "only 'focus', 'novelty', 'continuity_refs' and 'supersedes' in signals", "an unknown field"
        )
    if "focus" in value:
        check_label(value["focus"], "signals.focus", "focus")
    if "novelty" in value:
        novelty = value["novelty"]
        if isinstance(novelty, bool) or not isinstance(novelty, int | float):
            raise EntryValidationError("signals.novelty", "a number between 0 and 1", json_type_name(novelty))
        if not math.isfinite(novelty) or not 0 <= novelty <= 1:
            raise EntryValidationError("signals.novelty", "a number between 0 and 1", repr(novelty))
    for field in ("continuity_refs", "supersedes"):
        if field in value:
            _validate_id_list(value[field], f"signals.{field}")
    result = dict(value)
    for field in ("continuity_refs", "supersedes"):
        if field in result:
            result[field] = list(result[field])
    return result


def _validate_id_list(refs: object, path: str) -> None:
    if not isinstance(refs, list | tuple):
        raise EntryValidationError(path, "an array of entry ids", json_type_name(refs))
    for position, ref in enumerate(refs):
        if not isinstance(ref, str) or not ENTRY_ID_PATTERN.fullmatch(ref):
            raise EntryValidationError(f"{path}[{position}]", "an entry id (letters, digits, '_' or '-', at most 128)", show_value(ref))
    if len(set(refs)) != len(refs):
        raise EntryValidationError(path, "unique entry ids", "a repeated id")


def _validate_embedding(value: object) -> list[float]:
    if not isinstance(value, list | tuple) or not value:
        raise EntryValidationError("embedding", "a non-empty array of numbers", json_type_name(value))
    for position, number in enumerate(value):
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise EntryValidationError(f"embedding[{position}]", "a number", json_type_name(number))
    return list(value)


def _validate_meta(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise EntryValidationError("meta", "an object", json_type_name(value))
    meta = dict(value)
    meta.setdefault("schema_version", SCHEMA_VERSION)
    _require_integer_one(meta["schema_version"], "meta.schema_version")
    if "source_routine" in meta:
        check_label(meta["source_routine"], "meta.source_routine", "routine name")
    if "origin" in meta and meta["origin"] not in ORIGINS:
        raise EntryValidationError("meta.origin", "one of " + ", ".join(repr(origin) for origin in ORIGINS), show_value(meta["origin"]))
    return meta


def validate_payload(payload: object, *, now: datetime | None = None) -> dict[str, Any]:
    """Validate *payload* against entry schema v1 and return it with defaults filled.

    Defaults: ``id`` (a new UUID), ``ts`` (*now*, UTC), ``schema_version``,
    ``tags`` and ``meta.schema_version``. The input is never modified.

    Raises:
        EntryValidationError: the first rule broken, naming its field.
    """
    return validate_and_encode(payload, now=now)[0]


def require_object(payload: object) -> Mapping[Any, Any]:
    """*payload* if it is a JSON object, else EntryValidationError."""
    if not isinstance(payload, Mapping):
        raise EntryValidationError("(entry)", "a JSON object", json_type_name(payload))
    return payload


def validate_and_encode(payload: object, *, now: datetime | None) -> tuple[dict[str, Any], bytes]:
    """:func:`validate_payload`, also returning the canonical file bytes it measured (a valid entry is serialized once)."""
    payload = require_object(payload)
    for key in payload:
        if not isinstance(key, str) or key not in _TOP_LEVEL:
            raise EntryValidationError(str(key), "one of the fields of schema v1: " + ", ".join(sorted(_TOP_LEVEL)), "an unknown field")
    for key, value in payload.items():
        check_json_value(value, key, 2)

    data: dict[str, Any] = {}
    data["schema_version"] = _require_integer_one(payload.get("schema_version", SCHEMA_VERSION), "schema_version")
    if "id" in payload:
        entry_id = payload["id"]
        if not isinstance(entry_id, str) or not ENTRY_ID_PATTERN.fullmatch(entry_id):
            raise EntryValidationError("id", "1-128 letters, digits, '_' or '-', starting with a letter or digit", show_value(entry_id))
        data["id"] = entry_id
    else:
        data["id"] = str(uuid.uuid4())
    if "ts" in payload:
        parse_timestamp(payload["ts"])
        data["ts"] = payload["ts"]
    else:
        moment = now if now is not None else datetime.now(UTC)
        if moment.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        data["ts"] = utc_key(moment)
    for required in ("kind", "agent", "voice", "theme"):
        if required not in payload:
            raise EntryValidationError(required, "a value (the field is required)", "nothing")
    kind = payload["kind"]
    if kind not in KINDS or not isinstance(kind, str):
        raise EntryValidationError("kind", "one of " + ", ".join(repr(k) for k in KINDS), show_value(kind))
    data["kind"] = kind
    data["agent"] = check_agent(payload["agent"], "agent")
    data["voice"] = _require_string(payload, "voice", "voice", max_len=MAX_ENTRY_BYTES, label="voice")
    data["theme"] = check_label(payload["theme"], "theme", "theme")
    data["tags"] = _validate_tags(payload.get("tags", []))
    if "mood" in payload:
        data["mood"] = check_label(payload["mood"], "mood", "mood")
    if "anchors" in payload:
        data["anchors"] = _validate_anchors(payload["anchors"])
    if "signals" in payload:
        data["signals"] = _validate_signals(payload["signals"])
    if "embedding" in payload:
        data["embedding"] = _validate_embedding(payload["embedding"])
    if "client_key" in payload:
        key = payload["client_key"]
        if not isinstance(key, str) or not key or len(key) > _KEY_MAX or _CONTROL.search(key):
            raise EntryValidationError(
                "client_key", f"a non-empty string of at most {_KEY_MAX} characters without control characters", show_value(key)
            )
        data["client_key"] = key
    data["meta"] = _validate_meta(payload.get("meta", {}))
    if "erased" in data["meta"]:
        data["meta"]["erased"] = check_erased(data["meta"]["erased"], data, payload)

    try:
        encoded = (canonical_json(data) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # Only a lone surrogate (U+D800..U+DFFF) has no UTF-8 form; find it to name its field.
        # Searched for only on failure, so a valid append pays nothing for it.
        where, what = find_surrogate(data, "") or ("(entry)", "a lone surrogate")
        raise EntryValidationError(where, "text that UTF-8 can encode (no lone surrogates U+D800..U+DFFF)", what) from None
    # The limit is on the whole file, its final newline included.
    if len(encoded) > MAX_ENTRY_BYTES:
        raise EntryValidationError(
            "(entry)", f"at most {MAX_ENTRY_BYTES} bytes of entry file (canonical JSON and its final newline)", f"{len(encoded)} bytes"
        )
    return data, encoded
