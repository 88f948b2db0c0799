"""Text made safe to show on a terminal: what an agent wrote, or a file name, can neither repaint the screen nor fake a line.

At the bottom of the journal's layers, so that an error message quoting a
file's name escapes it as the tables of the command line escape an entry.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["printable"]

#: Characters that reorder or hide text on a terminal (bidirectional embeddings, overrides and isolates).
_BIDI: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _is_shown_escaped(char: str) -> bool:
    category = unicodedata.category(char)
    # Cc: C0, DEL and C1 controls; Zl/Zp: U+2028/U+2029, which some terminals break lines at; Cs: lone surrogates.
    return category in {"Cc", "Zl", "Zp", "Cs"} or char in _BIDI


def printable(text: str) -> str:
    """*text* with every character that could act on a terminal written as ``\\uXXXX``; tabs too, so columns stay put."""
    if text.isprintable():  # the common case: nothing to escape (isprintable is False for every character escaped)
        return text
    return "".join(f"\\u{ord(char):04x}" if _is_shown_escaped(char) else char for char in text)
