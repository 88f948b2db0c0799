"""Reading configuration and persona TOML within bounds of size and nesting.

``tomllib`` recurses once per nested array or inline table (a few hundred
levels raise RecursionError), its handling of a dotted key grows with the
square of the key's length (a line of 100,000 ``a.`` exhausts memory), and a
file is read whole. These helpers refuse such input with a ConfigError naming
the file, before and after parsing:

- a file is read up to MAX_TOML_BYTES (one byte more tells it is too long);
- before parsing, a scan that skips strings and comments refuses brackets
  nested deeper than MAX_TOML_DEPTH and keys of more than MAX_TOML_DEPTH
  dotted parts;
- after parsing, tables and arrays nested deeper than MAX_TOML_DEPTH in the
  result (a dotted table header plus a dotted key plus brackets add up) are
  refused, so no reader of the document recurses deeply either.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Final

from runner.errors import ConfigError

__all__ = ["MAX_TOML_BYTES", "MAX_TOML_DEPTH", "loads_bounded", "read_bounded"]

#: Largest configuration or persona file read (1 MiB); real ones are a few kilobytes.
MAX_TOML_BYTES: Final = 1024 * 1024
#: Deepest nesting of tables and arrays (the document is level 1), and the most parts of one dotted key.
MAX_TOML_DEPTH: Final = 32

# One token of TOML that matters to the scan: a string or comment (skipped whole, so brackets
# and dots inside them do not count), or one structural character.
_TOKEN: Final = re.compile(
    r'"""(?:[^\\"]|\\[\s\S]|"(?!""))*"{3,5}'  # multi-line basic string (may end in up to two extra quotes)
    r"|'''(?:[^']|'(?!''))*'{3,5}"  # multi-line literal string
    r'|"(?:[^\\"\n]|\\.)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[\]{}.=,\n]"
)
_OPENING: Final = frozenset("[{")
_CLOSING: Final = frozenset("]}")
_RUN_END: Final = frozenset("=,\n[]{}")


def _scan_exceeds(text: str) -> str | None:
    """What in *text* is too deep for the parser (a short description), or None."""
    depth = dots = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in _OPENING:
            depth += 1
            if depth > MAX_TOML_DEPTH:
                return f"arrays or inline tables nested more than {MAX_TOML_DEPTH} levels deep"
        elif token in _CLOSING:
            depth = max(depth - 1, 0)
        elif token == ".":  # noqa: S105 - a TOML token, not a password
            # Dots between two separators: the parts of one dotted key (a number has one dot at most).
            dots += 1
            if dots >= MAX_TOML_DEPTH:
                return f"a dotted key of more than {MAX_TOML_DEPTH} parts"
        if token in _RUN_END:
            dots = 0
    return None


def _structure_depth(value: object) -> int:
    """How deeply tables and arrays nest in *value* (a scalar is 0), without recursing."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children: Any = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > MAX_TOML_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads_bounded(text: str, source: str | Path) -> dict[str, Any]:
    """Parse TOML *text* from *source* (named in errors), refusing what is too large or too deep.

    Raises:
        ConfigError: not valid TOML, larger than MAX_TOML_BYTES, or nested too deeply.
    """
    if len(text) > MAX_TOML_BYTES:  # characters; the file's bytes were bounded on reading
        raise ConfigError(source, "", f"a TOML document of at most {MAX_TOML_BYTES} bytes", f"{len(text)} characters")
    problem = _scan_exceeds(text)
    if problem is not None:
        raise ConfigError(source, "", f"TOML nested at most {MAX_TOML_DEPTH} levels deep", problem)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", "valid TOML", str(exc)) from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
        raise ConfigError(source, "", "valid TOML with integers of at most 4300 digits", str(exc).split(";")[0]) from None
    except (RecursionError, MemoryError):  # the scan above should make these unreachable; never a traceback
        raise ConfigError(source, "", f"TOML nested at most {MAX_TOML_DEPTH} levels deep", "a document too deep to parse") from None
    if _structure_depth(data) > MAX_TOML_DEPTH:
        raise ConfigError(source, "", f"tables and arrays nested at most {MAX_TOML_DEPTH} levels deep", "deeper nesting")
    return data


def read_bounded(path: Path, what: str) -> str:
    """The text of the TOML file at *path*, read up to MAX_TOML_BYTES; *what* names it in errors.

    Raises:
        ConfigError: unreadable, larger than MAX_TOML_BYTES, or not UTF-8.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, "", f"a readable {what}", exc.strerror or str(exc)) from None
    if len(raw) > MAX_TOML_BYTES:
        raise ConfigError(path, "", f"a {what} of at most {MAX_TOML_BYTES} bytes", "a larger file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", f"a {what} in UTF-8", f"an invalid byte at offset {exc.start}") from None
