"""Text for a terminal: whatever an entry holds, it cannot act on the terminal or break a table's rows."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from journal.frame.render import clip, short_times, table, table_or_records, text_width
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


def test_the_text_column_gives_way_last() -> None:
    """flexible=(text, theme): the theme is cut (down to 12) before the text loses a column; the text keeps the rest."""
    lines = table(["id", "theme", "voice"], [["x", "t" * 30, "v" * 30]], width=40, flexible=(2, 1)).splitlines()
    assert lines[1] == "x   " + "t" * 11 + "…  " + "v" * 21 + "…"


def test_short_times_leave_out_the_year_only_when_every_time_is_this_years() -> None:
    """Like ls -l: a column of this year's times leaves the year out; one older time puts it back in every row."""
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    assert short_times(["2026-03-01T08:05:09Z", "2026-12-07T11:00:00Z"], UTC, now) == ["03-01 08:05", "12-07 11:00"]
    assert short_times(["2026-03-01T08:05:09Z", "2025-12-31T23:59:59Z"], UTC, now) == ["2026-03-01 08:05", "2025-12-31 23:59"]


def test_a_time_the_zone_cannot_show_is_shown_in_utc_marked_z() -> None:
    """The first hours of year 1 have no time west of UTC: shown in UTC with a Z, never a traceback."""
    now = datetime(2026, 12, 7, tzinfo=UTC)
    assert short_times(["0001-01-01T01:00:00Z"], ZoneInfo("America/New_York"), now) == ["0001-01-01 01:00Z"]


@PROPERTY
@given(rows=st.lists(st.lists(hostile, min_size=4, max_size=4), min_size=1, max_size=5), width=st.integers(40, 200))
def test_a_table_too_wide_becomes_one_record_a_row_and_nothing_is_cut(rows: list[list[str]], width: int) -> None:
    """The table where it fits; else one record a row: its two key cells on a line, then a line for each non-empty other cell after
    its header, the cell whole; whatever the cells hold, a record cannot fake another or a line of its own."""
    headers = ["a", "b", "c", "d"]
    shown = table_or_records(headers, rows, width=width)
    whole = table(headers, rows)
    if all(text_width(line) <= width for line in whole.split("\n")):
        assert shown == whole
        return
    records = shown.split("\n\n")
    assert len(records) == len(rows)
    for record, row in zip(records, rows, strict=True):
        lines = record.split("\n")
        assert lines[0] == "  ".join(printable(cell) for cell in row[:2])
        kept = [(header, printable(cell)) for header, cell in zip(headers[2:], row[2:], strict=True) if cell]
        assert len(lines) == 1 + len(kept)
        for line, (header, cell) in zip(lines[1:], kept, strict=True):
            assert line.startswith(f"  {header}:") and line.endswith(cell.rstrip())
    assert table_or_records(headers, rows, width=None) == whole  # no width (a pipe): the table, however wide
