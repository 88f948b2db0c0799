"""Text for a terminal: whatever an entry holds, it cannot act on the terminal or break a table's rows."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from journal.frame.render import clip, table, text_width
from journal.terminal import printable

PROPERTY = settings(max_examples=300, deadline=None)
hostile = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60) | st.sampled_from(
    ["\x1b[2J\x1b[H", "a\rb", "\u202eevil", "line\nbreak", "\u2028", "\x9b31m", "\ud800", "\t", "界界界", "e\u0301"])


def _acts_on_a_terminal(char: str) -> bool:
    return unicodedata.category(char) in {"Cc", "Zl", "Zp", "Cs"} or char in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@PROPERTY
@given(text=hostile)
def test_printable_leaves_nothing_that_acts_on_a_terminal(text: str) -> None:
    """No control character, line separator, bidirectional control or lone surrogate survives; everything else is kept."""
    shown = printable(text)
    assert not any(_acts_on_a_terminal(char) for char in shown)
    shown.encode("utf-8")  # no lone surrogate left: a UTF-8 terminal can take it (this raises otherwise)
    kept = "".join(char for char in text if not _acts_on_a_terminal(char))
    assert all(char in shown for char in kept)


@PROPERTY
@given(rows=st.lists(st.lists(hostile, min_size=3, max_size=3), max_size=6), width=st.integers(40, 200))
def test_a_table_has_one_line_per_row_and_fits_when_it_can(rows: list[list[str]], width: int) -> None:
    """One line per row plus the header, whatever the cells hold; the flexible columns give way until the table fits or reach 12."""
    lines = table(["a", "b", "c"], rows, width=width, flexible=(2, 1)).split("\n")
    assert len(lines) == len(rows) + 1 and lines[0].split() == ["A", "B", "C"]
    column_a = max([1, *(text_width(printable(row[0])) for row in rows)])
    if column_a + 2 * 12 + 4 <= width:
        assert all(text_width(line) <= width for line in lines), lines


@PROPERTY
@given(text=hostile.map(printable), width=st.integers(0, 30))
def test_clip_never_exceeds_its_width(text: str, width: int) -> None:
    """A clipped text takes at most *width* columns, and is the text itself when it fits."""
    clipped = clip(text, width)
    assert text_width(clipped) <= width
    assert (clipped == text) == (text_width(text) <= width)
