"""systemd's own unit-file parser, through the shared library its tools link (libsystemd-shared-NNN.so).

``systemd-analyze verify`` says whether a unit is acceptable, not what it means. These two calls
into the same code systemd runs say what it reads: :func:`settings` runs ``config_parse`` (line
ends, continuations, comments, sections) on a unit file and records every (section, key, value);
:func:`words` runs ``extract_first_word`` (quotes and escapes) on a value. The library's ABI is
internal and its flag bits moved between versions, so the bits are found by what they do, and a
library that behaves otherwise fails the tests instead of being trusted.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import tempfile
from functools import cache

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_uint,
                             ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p)
_LOOKUP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
_SECTIONS = b"Unit\0Service\0Timer\0Install\0"


@cache
def _library() -> ctypes.CDLL:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is required"
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(analyze)))  # /usr/bin -> /usr
    found = sorted(glob.glob(f"{prefix}/lib/*/systemd/libsystemd-shared-*.so") + glob.glob(f"{prefix}/lib/systemd/libsystemd-shared-*.so"))
    assert found, f"no libsystemd-shared-*.so under {prefix}/lib: the library systemd-analyze runs on"
    library = ctypes.CDLL(found[-1])
    library.extract_first_word.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_int]
    library.extract_first_word.restype = ctypes.c_int
    library.config_parse.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, _LOOKUP, ctypes.c_void_p,
                                     ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    library.config_parse.restype = ctypes.c_int
    return library


_free = ctypes.CDLL(None).free
_free.argtypes = [ctypes.c_void_p]


def _extract(value: str, flags: int) -> list[str]:
    buffer = ctypes.create_string_buffer(value.encode("utf-8"))
    cursor = ctypes.c_char_p(ctypes.addressof(buffer))
    found: list[str] = []
    while True:
        word = ctypes.c_void_p()
        result = _library().extract_first_word(ctypes.byref(cursor), ctypes.byref(word), None, flags)
        if result < 0:
            raise ValueError(f"systemd cannot split {value!r}: {os.strerror(-result)}")
        if result == 0:
            return found
        assert word.value is not None
        found.append(ctypes.string_at(word.value).decode("utf-8"))
        _free(word.value)


@cache
def _flags() -> tuple[int, int]:
    """(UNQUOTE, CUNESCAPE) bits of this library, found by behaviour."""
    unquote = [1 << bit for bit in range(10) if _safe_extract('"a b"', 1 << bit) == ["a b"]]
    cunescape = [1 << bit for bit in range(10) if _safe_extract("\\x41", 1 << bit) == ["A"]]
    assert len(unquote) == 1 and len(cunescape) == 1, f"extract_first_word flags not as in systemd 252: {unquote}, {cunescape}"
    return unquote[0], cunescape[0]


def _safe_extract(value: str, flags: int) -> list[str] | None:
    try:
        return _extract(value, flags)
    except ValueError:
        return None


def words(value: str, *, c_escapes: bool) -> list[str]:
    """The words systemd's extract_first_word makes of *value* with unquoting (and C escapes for command lines)."""
    unquote, cunescape = _flags()
    return _extract(value, unquote | (cunescape if c_escapes else 0))


def settings(text: str) -> list[tuple[str, str, str]]:
    """Every (section, key, value) systemd's config_parse reads from *text* as a unit file."""
    seen: list[tuple[str, str, str]] = []

    @_CALLBACK
    def record(unit: bytes, filename: bytes, line: int, section: bytes, section_line: int, key: bytes, ltype: int, value: bytes,
               data: int, userdata: int) -> int:
        seen.append((section.decode("utf-8"), key.decode("utf-8"), value.decode("utf-8")))
        return 0

    @_LOOKUP
    def lookup(table: int, section: bytes, key: bytes, ret_func: ctypes._Pointer[ctypes.c_void_p], ret_ltype: ctypes._Pointer[ctypes.c_int],
               ret_data: ctypes._Pointer[ctypes.c_void_p], userdata: int) -> int:
        ret_func[0] = ctypes.cast(record, ctypes.c_void_p).value
        ret_ltype[0] = 0
        ret_data[0] = None
        return 1  # every key is known: record it

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".service") as unit:
        unit.write(text)
        unit.flush()
        result = _library().config_parse(b"attack.service", unit.name.encode(), None, _SECTIONS, lookup, None, 0, None, None)
    assert result >= 0, f"config_parse failed: {os.strerror(-result)}"
    return seen
