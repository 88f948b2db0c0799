"""Hypothesis strategies for hostile input: JSON, TOML and text an attacker would send.

Reusable by every attack test: deep nesting (well past the parsers' recursion
limits), sizes at and beyond the limits, odd numbers (NaN, infinities, -0.0,
1e308, integers past 64 bits and at the 4,300-digit conversion limit,
booleans where numbers go), and text from every Unicode category, lone
surrogates, line and paragraph separators, markup and escapes included.

Large values are built from a few drawn numbers (``"x" * n``, nesting of
depth n), never drawn character by character, so examples stay cheap.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from hypothesis import strategies as st

__all__ = [
    "LINE_BREAKS",
    "ODD_NUMBERS",
    "SPECIAL_TEXT",
    "deep_json_text",
    "deep_value",
    "hostile_json_bytes",
    "hostile_payloads",
    "hostile_text",
    "hostile_toml",
    "hostile_values",
    "huge_integers",
    "odd_numbers",
]

#: Every boundary str.splitlines() splits on (\r\n is \r then \n).
LINE_BREAKS: Final = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

#: Characters that need escaping somewhere: JSON, markup, TOML, terminals, UTF-8.
SPECIAL_TEXT: Final = (
    *LINE_BREAKS, "\x00", "\x1b", "\x7f", "\t", '"', "\\", "'", "<", ">", "&", "</past_journal_entries>",
    "\ud800", "\udfff", "\udcff", "\ufeff", "\u200b", "\u202e", "\U0001f47b", "e\u0301", "[", "]", "{", "}", "#", "=", ".",
)

#: Numbers at the edges of what JSON, Python floats, SQLite integers and int/str conversion allow.
ODD_NUMBERS: Final = (
    math.nan, math.inf, -math.inf, -0.0, 0.0, 1e308, -1e308, 5e-324, 1.7976931348623157e308, 0.1,
    2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), True, False, 0, 1, -1,
)


def huge_integers() -> st.SearchStrategy[int]:
    """Integers of 4,300 digits (the most Python converts to text by default) and of 4,301, either sign.

    Built, not sampled: Hypothesis shows sampled values with repr(), which fails past 4,300 digits.
    """
    return st.builds(lambda digits, sign, exact: sign * (10**digits - (0 if exact else 1)), st.sampled_from([4300]), st.sampled_from([1, -1]), st.booleans())


def hostile_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text from every Unicode category (surrogates, controls, unassigned included), rich in SPECIAL_TEXT."""
    every_category = st.characters(codec=None, exclude_categories=())
    piece = st.one_of(st.sampled_from(SPECIAL_TEXT), st.text(every_category, max_size=8))
    return st.lists(piece, max_size=max(1, max_size // 4)).map("".join).filter(lambda text: len(text) <= max_size * 2)


def odd_numbers() -> st.SearchStrategy[int | float | bool]:
    """Edge numbers, plus arbitrary floats (NaN and infinities included) and wide integers."""
    return st.one_of(st.sampled_from(ODD_NUMBERS), st.floats(), st.integers(min_value=-(2**80), max_value=2**80), huge_integers())


def deep_value(depth: int, *, kind: str = "list") -> Any:
    """A value nested *depth* levels of arrays (kind="list") or objects (kind="dict"), built without recursion."""
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"x": value}
    return value


def deep_json_text(depth: int, *, kind: str = "list") -> str:
    """JSON text of *depth* nested levels; built as text, since json.dumps itself recurses."""
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return '{"x":' * depth + "1" + "}" * depth


def hostile_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """JSON-like values: hostile scalars and keys, moderately nested, and sometimes very deep or very long."""
    scalars = st.one_of(st.none(), odd_numbers(), hostile_text())
    nested = st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(hostile_text(max_size=12), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )
    deep = st.builds(deep_value, st.sampled_from([31, 32, 33, 64, 975, 5000]), kind=st.sampled_from(["list", "dict"]))
    long_text = st.builds(lambda n, c: c * n, st.sampled_from([200, 201, 2049, 100_000, 1024 * 1024 + 1]), st.sampled_from(["x", "é", "\ud800", '"', "\u2028"]))
    wide = st.builds(lambda n: list(range(n)), st.sampled_from([0, 1, 1000, 300_000]))
    return st.one_of(nested, deep, long_text, wide)


_BASE: Final = {"kind": "note", "agent": "motoko", "theme": "harbor light", "voice": "The harbor lights flickered."}
_FIELDS: Final = (
    "schema_version", "id", "ts", "kind", "agent", "voice", "theme", "tags", "mood", "anchors", "signals", "embedding", "client_key", "meta",
)
_TIMES: Final = (
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z",
    "2026-02-29T00:00:00Z", "2026-09-05T16:00:00+23:59", "2026-09-05T16:00:00", "",
)


def hostile_payloads() -> st.SearchStrategy[dict[str, Any]]:
    """A valid entry payload with one to three fields replaced, or added inside, by hostile values."""
    field_value = st.one_of(hostile_values(), st.sampled_from(_TIMES))

    def corrupt(changes: list[tuple[str, Any, bool]]) -> dict[str, Any]:
        payload: dict[str, Any] = {**_BASE, "meta": {}}
        for name, value, nest in changes:
            if nest and name in ("meta", "signals"):  # inside a free-form or structured object
                current = payload.get(name)
                payload[name] = {**(current if isinstance(current, dict) else {}), "x": value}
            elif nest and name in ("tags", "anchors", "embedding"):
                payload[name] = [value]
            else:
                payload[name] = value
        return payload

    change = st.tuples(st.sampled_from(_FIELDS), field_value, st.booleans())
    return st.lists(change, min_size=1, max_size=3).map(corrupt)


def hostile_json_bytes() -> st.SearchStrategy[bytes]:
    """Bytes handed to a JSON reader: hostile payloads in several encodings, deep brackets, broken UTF-8."""

    def encode(payload: dict[str, Any], ascii_only: bool, indent: int | None) -> bytes:
        try:
            text = json.dumps(payload, ensure_ascii=ascii_only, indent=indent)  # NaN and Infinity written as such
        except (ValueError, RecursionError):  # a 4,301-digit integer, or deeper than json.dumps goes
            text = json.dumps({**_BASE, "meta": {"unwritable": True}})
        return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes invalid UTF-8 bytes

    encoded = st.builds(encode, hostile_payloads(), st.booleans(), st.sampled_from([None, 2]))
    deep = st.builds(lambda n, kind: deep_json_text(n, kind=kind).encode(), st.sampled_from([32, 33, 975, 100_000]), st.sampled_from(["list", "dict"]))
    junk = st.binary(max_size=64)
    strings = st.sampled_from([b'"', b"[" * 50, b'{"a":' * 40, b"\xff\xfe", b"\xed\xa0\x80", b"NaN", b"1e309", b"-0", b"[1,]", b"\x00"])
    return st.one_of(encoded, deep, junk, strings)


def _toml_key(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # JSON string syntax is a TOML basic string (surrogates stay raw)


def hostile_toml() -> st.SearchStrategy[str]:
    """TOML documents: deep arrays and inline tables, long dotted keys and headers, huge strings, odd values.

    Each is a whole document for a configuration or persona loader; most are
    invalid for it, some are valid TOML of the wrong shape.
    """
    depth = st.sampled_from([31, 32, 33, 400, 1000, 100_000])
    deep_array = st.builds(lambda n: "x = " + "[" * n + "1" + "]" * n + "\n", depth)
    deep_table = st.builds(lambda n: "x = " + "{a = " * n + "1" + "}" * n + "\n", depth)
    dotted_key = st.builds(lambda n: ".".join(["a"] * n) + " = 1\n", depth)
    dotted_header = st.builds(lambda n: "[" + ".".join(["a"] * n) + "]\nb = 1\n", depth)
    stacked = st.builds(lambda n: "[" + ".".join(["r"] * n) + "]\n" + ".".join(["k"] * n) + " = " + "[" * n + "]" * n + "\n", st.sampled_from([10, 12, 20]))
    huge = st.builds(lambda n: 'x = "' + "y" * n + '"\n', st.sampled_from([1000, 1024 * 1024, 2 * 1024 * 1024]))
    value = st.one_of(
        st.sampled_from([
            "inf", "-inf", "nan", "1e400", "9" * 5000, "-0.0", "true", "1979-05-27T07:32:00Z", "0001-01-01T00:00:00+01:00", "[]", "{}",
            '"' + "a" * 300 + '"', '"America"', '"../../etc/passwd"', '"99999999999w"', "1" + "0" * 30,
        ]),
        hostile_text(max_size=20).map(_toml_key),
    )
    runner_keys = st.sampled_from(["run_timeout", "shutdown_timeout", "catchup_grace", "misfire_grace", "workers", "timezone", "journal_root", "lock_file",
                                   "catchup_max", "catchup_spread", "max_concurrent_runs"])
    runner_value = st.builds(lambda key, v: f'[runner]\n{key} = {v}\n[agents.a]\nbackend = "openai"\n', runner_keys, value)
    routine_value = st.builds(
        lambda key, v: f'[routines.evening]\n{key} = {v}\n[agents.a]\nbackend = "openai"\n',
        st.sampled_from(["window", "context_k", "context_chars", "schedule", "question"]), value,
    )
    free = st.builds(lambda key, v: f"{key} = {v}\n", hostile_text(max_size=12).map(_toml_key), value)
    return st.one_of(deep_array, deep_table, dotted_key, dotted_header, stacked, huge, runner_value, routine_value, free)
