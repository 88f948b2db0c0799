"""Entry schema v1: validation, defaults, the Entry record and canonical JSON.

The packaged JSON Schema (``schemas/entry-v1.schema.json``) describes the same
rules for other tools; a test runs both over one table of payloads. Checks the
schema language cannot express (calendar-valid timestamps, finite numbers
inside free-form ``meta``, the size and nesting limits, text that UTF-8 can
encode) live only here.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from journal.errors import EntryValidationError, InvalidEntryIdError

__all__ = [
    "ENTRY_ID_PATTERN",
    "KINDS",
    "MAX_DEPTH",
    "MAX_ENTRY_BYTES",
    "MAX_INPUT_BYTES",
    "SCHEMA_VERSION",
    "Entry",
    "canonical_json",
    "check_entry_id",
    "entry_from_json_bytes",
    "json_depth_exceeds",
    "json_nesting_depth",
    "json_type_name",
    "parse_json_payload",
    "parse_timestamp",
    "utc_key",
    "validate_payload",
]

SCHEMA_VERSION: Final = 1
KINDS: Final = ("pulse", "evening", "note", "digest")
#: Largest canonical entry file accepted, in bytes (1 MiB). Voices of several
#: hundred kilobytes fit; whole documents belong in ``anchors``.
MAX_ENTRY_BYTES: Final = 1024 * 1024
#: Largest JSON document read as one entry (stdin, ``--input``): the canonical
#: file must still fit MAX_ENTRY_BYTES, but a client's JSON may be indented or
#: spell every non-ASCII character as a 6-byte ``\uXXXX`` escape.
MAX_INPUT_BYTES: Final = 4 * MAX_ENTRY_BYTES
#: Deepest nesting of arrays and objects in a whole entry, the entry object
#: itself being level 1 (so ``meta`` is level 2). Free-form ``meta`` needs a
#: few levels; a thousand would make every later reader recurse until it dies.
MAX_DEPTH: Final = 32
# Integers of more digits cannot be written or read back by Python's json
# under its default int/str conversion limit (sys.int_info.default_max_str_digits).
_INT_DIGITS: Final = 4300
_INT_LIMIT: Final = 10**_INT_DIGITS

ENTRY_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_AGENT_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_TS_PATTERN: Final = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d"
    r"(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# A JSON string token (escapes included) or one bracket: what the depth scan looks at.
_JSON_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}
_UTC_RANGE: Final = "a time within years 0001-9999 once converted to UTC"

_SHORT: Final = 200  # theme, focus, mood, tag: labels, not prose
_KEY_MAX: Final = 256

_TOP_LEVEL: Final = frozenset(
    {
        "schema_version", "id", "ts", "kind", "agent", "voice", "theme", "tags", "mood",
        "anchors", "signals", "embedding", "client_key", "meta",
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
        raise EntryValidationError(field_name, expected, _show(value))
    if not _TS_PATTERN.fullmatch(value):
        naive = re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?", value)
        hint = expected.replace("an ISO", "a timezone-aware ISO") if naive else expected
        raise EntryValidationError(field_name, hint, _show(value))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise EntryValidationError(field_name, "a real calendar date and time", _show(value)) from None
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
        raise EntryValidationError(field_name, _UTC_RANGE, _show(moment.isoformat())) from None
    return moment


def utc_key(moment: datetime) -> str:
    """Render an aware datetime as a sortable UTC string (microsecond precision)."""
    # Not strftime: glibc writes year 1 as "1", not "0001", which would sort after "2026".
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z"


def canonical_json(value: Any) -> str:
    """Serialize *value* deterministically: sorted keys, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _show(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT_LIMIT < value < _INT_LIMIT:
        return f"an integer of more than {_INT_DIGITS} digits"
    text = json.dumps(value, ensure_ascii=False, default=repr) if not isinstance(value, float) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    # JSON leaves U+2028, U+0085, lone surrogates and the like as they are: escaped here, the
    # message stays one line and can be printed to any stream.
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in text)


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
            raise ValueError(f"{name} must be a string, got {json_type_name(value)} {_show(value)}")  # noqa: TRY004
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{name} must be UTF-8 text, got {_show(value)} (a character that is no text at position {exc.start})") from None


def show_value(value: object) -> str:
    """*value* as an error message quotes it: JSON, cut to 60 characters, unprintable characters escaped (for other modules)."""
    return _show(value)


def json_type_name(value: object) -> str:
    """The JSON name of a value's type, for messages: ``null``, ``a boolean``, ``a number``, ``a string``, ``an array``, ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _require_string(payload: Mapping[str, Any], name: str, path: str, *, max_len: int, label: str) -> str:
    value = payload[name]
    if not isinstance(value, str):
        raise EntryValidationError(path, f"{label} (a string)", json_type_name(value))
    if not value.strip():
        raise EntryValidationError(path, f"a non-empty {label}", _show(value))
    if len(value) > max_len:
        raise EntryValidationError(path, f"{label} of at most {max_len} characters", f"{len(value)} characters")
    return value


def _require_label(value: object, path: str, label: str) -> str:
    if not isinstance(value, str):
        raise EntryValidationError(path, f"{label} (a string)", json_type_name(value))
    if not value.strip() or _CONTROL.search(value) or len(value) > _SHORT:
        raise EntryValidationError(path, f"a non-empty {label} of at most {_SHORT} characters without control characters", _show(value))
    return value


def check_label(value: object, path: str, label: str) -> str:
    """*value* if the schema accepts it as a label (a theme, tag, focus or mood); for inputs that later become one.

    Raises:
        EntryValidationError: naming *path*, with what a *label* must be.
    """
    return _require_label(value, path, label)


def _require_integer_one(value: object, path: str) -> int:
    if type(value) is not int or value != SCHEMA_VERSION:
        raise EntryValidationError(path, f"the integer {SCHEMA_VERSION}", _show(value) if not isinstance(value, bool | float) else f"{json_type_name(value)} {value!r}")
    return value


def _check_json_value(value: object, path: str, depth: int) -> None:
    """Reject what JSON cannot hold, or holds only to break its readers, anywhere inside *value*.

    That is NaN and infinities, integers of more than 4,300 digits, non-string
    keys, non-JSON types and nesting deeper than MAX_DEPTH (*depth* is the
    level of *value*; the entry object is level 1). The depth bound also keeps
    this walk's own recursion short, even for a payload that contains itself.
    """
    if type(value) is str:  # most values; checked first because appends run this on every field
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EntryValidationError(path, "a finite number (NaN and Infinity are not JSON)", repr(value))
        return
    if isinstance(value, int) and not isinstance(value, bool):
        if not -_INT_LIMIT < value < _INT_LIMIT:
            raise EntryValidationError(path, f"an integer of at most {_INT_DIGITS} digits", _show(value))
        return
    if isinstance(value, Mapping | list | tuple) and depth > MAX_DEPTH:
        raise EntryValidationError(path, f"at most {MAX_DEPTH} levels of nested arrays and objects in an entry", f"level {depth}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise EntryValidationError(path, "an object with string keys", _show(key))
            _check_json_value(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            _check_json_value(item, f"{path}[{position}]", depth + 1)
    elif not (value is None or isinstance(value, str | bool)):  # str subclasses pass too
        raise EntryValidationError(path, "a JSON value", type(value).__name__)


def _find_surrogate(value: object, path: str) -> tuple[str, str] | None:
    """The path and code point of the first lone surrogate in *value* (its keys included), or None."""
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return None if match is None else (path, f"U+{ord(match.group()):04X} at character {match.start()}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            match = _SURROGATE.search(key)
            if match is not None:
                return child, f"U+{ord(match.group()):04X} in this key"  # the message's repr escapes it
            found = _find_surrogate(item, child)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            found = _find_surrogate(item, f"{path}[{position}]")
            if found:
                return found
    return None


def _validate_tags(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        raise EntryValidationError("tags", "an array of strings", json_type_name(value))
    seen: set[str] = set()
    for position, tag in enumerate(value):
        _require_label(tag, f"tags[{position}]", "tag")
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
        _require_label(anchor["type"], f"{path}.type", "anchor type")
        ref = anchor["ref"]
        if not isinstance(ref, str) or not ref.strip() or len(ref) > 2048:
            raise EntryValidationError(f"{path}.ref", "a non-empty string of at most 2048 characters", _show(ref))
        if "label" in anchor and not isinstance(anchor["label"], str):
            raise EntryValidationError(f"{path}.label", "a string", json_type_name(anchor["label"]))
        anchors.append(dict(anchor))
    return anchors


def _validate_signals(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise EntryValidationError("signals", "an object {focus?, novelty?, continuity_refs?}", json_type_name(value))
    unknown = sorted(set(value) - {"focus", "novelty", "continuity_refs"})
    if unknown:
        raise EntryValidationError(f"signals.{unknown[0]}", "only 'focus', 'novelty' and 'continuity_refs' in signals", "an unknown field")
    if "focus" in value:
        _require_label(value["focus"], "signals.focus", "focus")
    if "novelty" in value:
        novelty = value["novelty"]
        if isinstance(novelty, bool) or not isinstance(novelty, int | float):
            raise EntryValidationError("signals.novelty", "a number between 0 and 1", json_type_name(novelty))
        if not math.isfinite(novelty) or not 0 <= novelty <= 1:
            raise EntryValidationError("signals.novelty", "a number between 0 and 1", repr(novelty))
    if "continuity_refs" in value:
        refs = value["continuity_refs"]
        if not isinstance(refs, list | tuple):
            raise EntryValidationError("signals.continuity_refs", "an array of entry ids", json_type_name(refs))
        for position, ref in enumerate(refs):
            if not isinstance(ref, str) or not ENTRY_ID_PATTERN.fullmatch(ref):
                raise EntryValidationError(f"signals.continuity_refs[{position}]", "an entry id (letters, digits, '_' or '-', at most 128)", _show(ref))
        if len(set(refs)) != len(refs):
            raise EntryValidationError("signals.continuity_refs", "unique entry ids", "a repeated id")
    result = dict(value)
    if "continuity_refs" in result:
        result["continuity_refs"] = list(result["continuity_refs"])
    return result


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
        _require_label(meta["source_routine"], "meta.source_routine", "routine name")
    return meta


def validate_payload(payload: object, *, now: datetime | None = None) -> dict[str, Any]:
    """Validate *payload* against entry schema v1 and return it with defaults filled.

    Defaults: ``id`` (a new UUID), ``ts`` (*now*, UTC), ``schema_version``,
    ``tags`` and ``meta.schema_version``. The input is never modified.

    Raises:
        EntryValidationError: the first rule broken, naming its field.
    """
    return _validate(payload, now=now)[0]


def _require_object(payload: object) -> Mapping[Any, Any]:
    if not isinstance(payload, Mapping):
        raise EntryValidationError("(entry)", "a JSON object", json_type_name(payload))
    return payload


def _validate(payload: object, *, now: datetime | None) -> tuple[dict[str, Any], bytes]:
    """:func:`validate_payload`, also returning the canonical file bytes it measured."""
    payload = _require_object(payload)
    for key in payload:
        if not isinstance(key, str) or key not in _TOP_LEVEL:
            raise EntryValidationError(str(key), "one of the fields of schema v1: " + ", ".join(sorted(_TOP_LEVEL)), "an unknown field")
    for key, value in payload.items():
        _check_json_value(value, key, 2)

    data: dict[str, Any] = {}
    data["schema_version"] = _require_integer_one(payload.get("schema_version", SCHEMA_VERSION), "schema_version")
    if "id" in payload:
        entry_id = payload["id"]
        if not isinstance(entry_id, str) or not ENTRY_ID_PATTERN.fullmatch(entry_id):
            raise EntryValidationError("id", "1-128 letters, digits, '_' or '-', starting with a letter or digit", _show(entry_id))
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
        raise EntryValidationError("kind", "one of " + ", ".join(repr(k) for k in KINDS), _show(kind))
    data["kind"] = kind
    agent = payload["agent"]
    if not isinstance(agent, str) or not _AGENT_PATTERN.fullmatch(agent):
        raise EntryValidationError("agent", "1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit", _show(agent))
    data["agent"] = agent
    data["voice"] = _require_string(payload, "voice", "voice", max_len=MAX_ENTRY_BYTES, label="voice")
    data["theme"] = _require_label(payload["theme"], "theme", "theme")
    data["tags"] = _validate_tags(payload.get("tags", []))
    if "mood" in payload:
        data["mood"] = _require_label(payload["mood"], "mood", "mood")
    if "anchors" in payload:
        data["anchors"] = _validate_anchors(payload["anchors"])
    if "signals" in payload:
        data["signals"] = _validate_signals(payload["signals"])
    if "embedding" in payload:
        data["embedding"] = _validate_embedding(payload["embedding"])
    if "client_key" in payload:
        key = payload["client_key"]
        if not isinstance(key, str) or not key or len(key) > _KEY_MAX or _CONTROL.search(key):
            raise EntryValidationError("client_key", f"a non-empty string of at most {_KEY_MAX} characters without control characters", _show(key))
        data["client_key"] = key
    data["meta"] = _validate_meta(payload.get("meta", {}))

    try:
        encoded = (canonical_json(data) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # Only a lone surrogate (U+D800..U+DFFF) has no UTF-8 form; find it to name its field.
        # Searched for only on failure, so a valid append pays nothing for it.
        where, what = _find_surrogate(data, "") or ("(entry)", "a lone surrogate")
        raise EntryValidationError(where, "text that UTF-8 can encode (no lone surrogates U+D800..U+DFFF)", what) from None
    # The limit is on the whole file, its final newline included.
    if len(encoded) > MAX_ENTRY_BYTES:
        raise EntryValidationError("(entry)", f"at most {MAX_ENTRY_BYTES} bytes of entry file (canonical JSON and its final newline)", f"{len(encoded)} bytes")
    return data, encoded


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
        data, encoded = _validate(payload, now=now)
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
    def continuity_refs(self) -> tuple[str, ...]:
        """Ids of earlier entries this one explicitly continues."""
        return tuple((self.signals or {}).get("continuity_refs", ()))

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


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def json_nesting_depth(text: str) -> int:
    """How deep the JSON *text* nests arrays and objects (0 for a scalar), without parsing it.

    Checked before ``json.loads``, whose decoder recurses once per level: a
    document a few thousand levels deep raises RecursionError there, and one
    just under that limit parses into a value every later reader recurses on.
    Brackets inside strings do not count. The scan runs in C (two regular
    expressions and an accumulate), so it costs little even on a 4 MiB input.
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets))) if brackets else 0


def json_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """True if the JSON *text* nests arrays and objects more than *limit* levels deep (see :func:`json_nesting_depth`)."""
    return json_nesting_depth(text) > limit


def parse_json_payload(raw: bytes) -> object:
    """Decode UTF-8 JSON bytes strictly (NaN and Infinity are refused, nesting is bounded).

    Raises:
        EntryValidationError: not UTF-8, not JSON, or nested more than
            MAX_DEPTH levels, naming the position.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EntryValidationError("(entry)", "UTF-8 text", f"an invalid byte at offset {exc.start}") from None
    if json_depth_exceeds(text):
        raise EntryValidationError("(entry)", f"at most {MAX_DEPTH} levels of nested arrays and objects", "deeper nesting")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:  # also integers beyond the int/str conversion limit
        raise EntryValidationError("(entry)", "a JSON object", f"invalid JSON: {exc}") from None


def entry_from_json_bytes(raw: bytes) -> Entry:
    """Parse and validate the bytes of a stored entry file.

    Raises:
        EntryValidationError: not UTF-8, not JSON, not a valid v1 entry, or
            missing the ``id`` and ``ts`` every stored entry has.
    """
    payload = _require_object(parse_json_payload(raw))
    if type(payload.get("schema_version")) is int and payload["schema_version"] > SCHEMA_VERSION:
        raise EntryValidationError(
            "schema_version", f"at most {SCHEMA_VERSION}; upgrade ghostjournal to read this entry", str(payload["schema_version"])
        )
    if "id" not in payload or "ts" not in payload:
        missing = "id" if "id" not in payload else "ts"
        raise EntryValidationError(missing, "a value in a stored entry", "nothing")
    return Entry.from_payload(payload)
