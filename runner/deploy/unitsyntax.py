"""Values in systemd units: which characters a value may hold, and how each kind of setting quotes it.

A unit is run by root, so every value that goes into one is checked and quoted
by systemd's own rules: a line break in a path would start a new directive
(``ExecStartPre=+...`` runs as root, outside the sandbox). Control characters
(C0, DEL, C1, U+2028/U+2029, and lone surrogates) are refused in every value,
with :class:`UnitRenderError` naming the field; ``ExecStart=`` words are
written in double quotes with C escapes, ``%%`` and ``$$``, paths in
``ReadWritePaths=`` quoted with ``%%``, and ``%%`` in ``Description=``.

Paths are written only after lexical normalisation (``os.path.normpath``:
``..``, ``.``, ``//`` and a trailing ``/`` resolved; systemd ignores a path
that still holds ``..``). Relative paths are refused: units run in
``/var/lib/ghostrunner``.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Final

from runner.errors import UnitRenderError, quoted

__all__ = [
    "STATE_DIRECTORY",
    "absolute_path",
    "checked_lines",
    "checked_text",
    "description",
    "exec_program",
    "exec_word",
    "normal_path",
    "path_word",
    "systemd_escape",
    "unit_name",
]

STATE_DIRECTORY: Final = PurePosixPath("/var/lib/ghostrunner")
#: Characters no unit value may hold: C0 (line feed, carriage return and NUL end a unit-file line), DEL, C1,
#: the Unicode line and paragraph separators, lone surrogates (an undecodable file name; not writable as UTF-8),
#: and the noncharacters U+FDD0..U+FDEF and U+xFFFE/U+xFFFF, which systemd's UTF-8 check refuses ("not UTF-8
#: clean"), silently dropping the whole setting.
_FORBIDDEN: Final = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17))
    + "]"
)
#: A word systemd reads back unchanged without quotes (no whitespace, quote, backslash or ';').
_BARE_WORD: Final = re.compile(r"[A-Za-z0-9/._+:@,=%~-]+")
#: Unit names: systemd's character set, at most 255 bytes (a longer or odder name is an invalid unit).
_UNIT_NAME: Final = re.compile(r"[A-Za-z0-9:_.\\-]+@?[A-Za-z0-9:_.\\-]*\.(?:service|timer|target)")
_UNIT_NAME_MAX: Final = 255
_PATH_MAX: Final = 4095  # bytes, without the terminating NUL
_NAME_MAX: Final = 255  # bytes per path component


def systemd_escape(text: str) -> str:
    """Escape *text* for use in a unit name, as ``systemd-escape`` does (``%I`` undoes it)."""
    out = []
    for position, char in enumerate(text):
        if char == "/":
            out.append("-")
        elif (char.isascii() and char.isalnum()) or char in ":_" or (char == "." and position > 0):
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
    return "".join(out)


def checked_text(value: str, field: str, source: str | None = None) -> str:
    """*value* unchanged, if it holds no character that would end a unit-file line or hide in one.

    Raises:
        UnitRenderError: naming *field* and the value, when it holds a control character.
    """
    found = _FORBIDDEN.search(value)
    if found:
        raise UnitRenderError(
            field,
            (
                f"{quoted(value)} holds the character U+{ord(found.group()):04X}, which no systemd unit may carry "
                "(after a line break systemd reads the rest as new settings); remove it"
            ),
            source,
        )
    return value


def normal_path(path: str) -> str:
    """*path* normalised lexically; POSIX leaves a leading '//' to the system, and Linux reads it as '/'."""
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def absolute_path(value: str, field: str, source: str | None = None) -> str:
    """*value* as the absolute, lexically normalised path units name (``..``, ``.``, ``//``, a trailing ``/`` resolved).

    Raises:
        UnitRenderError: *value* holds a control character, is relative, or is longer than systemd accepts.
    """
    checked_text(value, field, source)
    if not value.startswith("/"):
        raise UnitRenderError(
            field, f"expected an absolute path, got {quoted(value)}; units run in {STATE_DIRECTORY}, not where render runs", source
        )
    normal = normal_path(value)
    encoded = normal.encode("utf-8")
    if len(encoded) > _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(b"/")):
        raise UnitRenderError(field, f"{quoted(value)} is longer than systemd accepts ({_PATH_MAX} bytes, {_NAME_MAX} per name)", source)
    return normal


def quoted_word(word: str) -> str:
    """*word* in double quotes, backslash and quote escaped, unless systemd reads it back unchanged bare."""
    if _BARE_WORD.fullmatch(word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_word(word: str, field: str, source: str | None = None) -> str:
    """One ``ExecStart=`` argument that systemd hands to the program as *word*: ``%`` as ``%%``, ``$`` as ``$$``, quoted."""
    return quoted_word(checked_text(word, field, source).replace("%", "%%").replace("$", "$$"))


def exec_program(path: str) -> str:
    """The program of ``ExecStart=``: systemd takes it literally but for ``%`` specifiers, and refuses quotes and backslashes."""
    normal = absolute_path(path, "--exec")
    bad = sorted(set(normal) & set("\"'\\$"))
    if bad:
        raise UnitRenderError(
            "--exec",
            (
                f"the program path {quoted(path)} holds {', '.join(repr(char) for char in bad)}, which systemd does not accept in (or expands"
                " differently from) an ExecStart= program; install the program under a plain path such as /usr/local/bin/ghostrunner"
            ),
        )
    return quoted_word(normal.replace("%", "%%"))


def path_word(path: str) -> str:
    """One entry of a path list such as ``ReadWritePaths=`` (already normalised): ``%`` as ``%%``, quoted."""
    return quoted_word(path.replace("%", "%%"))


def description(text: str) -> str:
    """``Description=`` text: systemd expands ``%`` specifiers there, so ``%`` becomes ``%%``."""
    return text.replace("%", "%%")


def checked_lines(block: str, field: str, source: str | None) -> str:
    """*block* (settings made from *field*, one a line), if no line of it holds a control character."""
    for line in block.split("\n"):
        checked_text(line, field, source)
    return block


def unit_name(name: str, field: str, source: str | None) -> str:
    if len(name.encode("utf-8")) > _UNIT_NAME_MAX or not _UNIT_NAME.fullmatch(name):
        raise UnitRenderError(
            field,
            f"the unit name {name!r} is not one systemd accepts (its characters, at most {_UNIT_NAME_MAX} bytes); use a shorter name",
            source,
        )
    return name
