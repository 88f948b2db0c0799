"""JSON as the journal reads and writes it: canonical text, a strict bounded parse, and values JSON can hold.

Used by the entry schema (:mod:`journal.files._schema`) and by every reader of JSON
the journal did not write itself (the manifest, a client's input).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from journal.errors import EntryValidationError

__all__ = [
    "MAX_DEPTH",
    "canonical_json",
    "check_json_value",
    "find_surrogate",
    "json_depth_exceeds",
    "json_nesting_depth",
    "json_type_name",
    "parse_json_payload",
    "show_value",
]

#: Deepest nesting of arrays and objects in a whole entry, the entry object
#: itself being level 1 (so ``meta`` is level 2). Free-form ``meta`` needs a
#: few levels; a thousand would make every later reader recurse until it dies.
MAX_DEPTH: Final = 32
# Integers of more digits cannot be written or read back by Python's json
# under its default int/str conversion limit (sys.int_info.default_max_str_digits).
_INT_DIGITS: Final = 4300
_INT_LIMIT: Final = 10**_INT_DIGITS
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# A JSON string token (escapes included) or one bracket: what the depth scan looks at.
_JSON_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def canonical_json(value: Any) -> str:
    """Serialize *value* deterministically: sorted keys, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def show_value(value: object) -> str:
    """*value* as an error message quotes it: JSON, cut to 60 characters, unprintable characters escaped."""
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT_LIMIT < value < _INT_LIMIT:
        return f"an integer of more than {_INT_DIGITS} digits"
    text = json.dumps(value, ensure_ascii=False, default=repr) if not isinstance(value, float) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    # JSON leaves U+2028, U+0085, lone surrogates and the like as they are: escaped here, the
    # message stays one line and can be printed to any stream.
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in text)


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


def check_json_value(value: object, path: str, depth: int) -> None:
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
            raise EntryValidationError(path, f"an integer of at most {_INT_DIGITS} digits", show_value(value))
        return
    if isinstance(value, Mapping | list | tuple) and depth > MAX_DEPTH:
        raise EntryValidationError(path, f"at most {MAX_DEPTH} levels of nested arrays and objects in an entry", f"level {depth}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise EntryValidationError(path, "an object with string keys", show_value(key))
            check_json_value(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            check_json_value(item, f"{path}[{position}]", depth + 1)
    elif not (value is None or isinstance(value, str | bool)):  # str subclasses pass too
        raise EntryValidationError(path, "a JSON value", type(value).__name__)


def find_surrogate(value: object, path: str) -> tuple[str, str] | None:
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
            found = find_surrogate(item, child)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            found = find_surrogate(item, f"{path}[{position}]")
            if found:
                return found
    return None


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
    if text.count("[") + text.count("{") <= limit:
        return False  # no deeper than it has opening brackets (those in strings counted too): most texts need no scan
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
