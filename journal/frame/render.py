"""Text for a person at a terminal: tables and labelled lines, safe to print whatever the data holds.

Both commands print JSON when their output is piped or ``--json`` is given,
and what these functions make when stdout is a terminal (as ``gh`` and
``sqlite-utils`` do). They are pure: they take the very documents the JSON
path prints and return a string.

Journal text is data written by agents, so everything shown passes through
:func:`journal.terminal.printable`: a control character (an ANSI escape, a carriage return,
a line break inside a cell), a bidirectional override or a lone surrogate is
shown as ``\\uXXXX``, so an entry can neither repaint the terminal nor fake
a row of the table.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Final

from journal.terminal import printable

__all__ = ["clip", "counted", "labelled", "short_times", "table", "table_or_records", "text_width"]

_ELLIPSIS: Final = "…"


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in {"Mn", "Me", "Cf"}:
        return 0
    return 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1


def text_width(text: str) -> int:
    """How many terminal columns *text* (already :func:`printable`) takes: wide East Asian characters count two."""
    return len(text) if text.isascii() else sum(_char_width(char) for char in text)


def clip(text: str, width: int) -> str:
    """*text* cut to at most *width* columns, ending in an ellipsis when cut."""
    if text_width(text) <= width:
        return text
    if width <= 0:
        return ""
    kept, used = [], 0
    for char in text:
        size = _char_width(char)
        if used + size > width - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + _ELLIPSIS


def _pad(text: str, width: int) -> str:
    return text + " " * (width - text_width(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, width: int | None = None, flexible: Sequence[int] = ()) -> str:
    """Columns separated by two spaces under upper-case *headers*; ``None`` shows as ``-``.

    Args:
        headers: the column titles.
        rows: the cells, each turned into :func:`printable` text on one line.
        width: the terminal's width; when the table is wider, the *flexible* columns are clipped to fit,
            each to no fewer than 12 columns (so a very narrow terminal still wraps), the others never.
        flexible: the indexes of the columns that give way, the last one first: the first is the text the table
            is read for (a voice, a snippet), which keeps what the others leave of the width (a theme gives way before it).

    Returns:
        The table without a final newline; an empty *rows* gives the header line alone.
    """
    cells = [[printable("-" if cell is None else str(cell)) for cell in row] for row in rows]
    heads = [header.upper() for header in headers]
    widths = [max([text_width(head), *(text_width(row[i]) for row in cells)]) for i, head in enumerate(heads)]
    for column in reversed(flexible):
        if width is None:
            break
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        if excess <= 0:
            break
        widths[column] = max(widths[column] - excess, min(widths[column], 12))
        cells = [[clip(cell, widths[column]) if i == column else cell for i, cell in enumerate(row)] for row in cells]
    lines = ["  ".join(_pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip() for row in [heads, *cells]]
    return "\n".join(lines)


def table_or_records(headers: Sequence[str], rows: Sequence[Sequence[object]], *, width: int | None, keys: int = 2) -> str:
    """The :func:`table` of *rows* where it fits *width* columns; else each row as a record, so that no line wraps into the next row.

    A record is the row's first *keys* cells on one line, then each other cell on a line of its own after its header, indented;
    an empty cell is left out (a row's header says what each line is, so no column needs keeping). Nothing is cut, as no cell of
    these tables is text to give way (a status or a history has no column like a voice).

    Returns:
        The table or the records (a blank line between two), without a final newline; an empty *rows* gives the header line alone.
    """
    shown = table(headers, rows)
    if width is None or not rows or max(text_width(line) for line in shown.splitlines()) <= width:
        return shown
    records = []
    for row in rows:
        cells = ["-" if cell is None else str(cell) for cell in row]
        fields = labelled([(header, cell) for header, cell in zip(headers[keys:], cells[keys:], strict=True) if cell])
        records.append("  ".join(printable(cell) for cell in cells[:keys]) + "".join(f"\n  {line}" for line in fields.splitlines()))
    return "\n\n".join(records)


def counted(number: int, one: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``: *number* and its noun, *many* (default: *one* and an ``s``) unless it is one."""
    return f"{number} {one if number == 1 else many or one + 's'}"


def short_times(stamps: Sequence[str], zone: tzinfo, now: datetime) -> list[str]:
    """ISO 8601 times as a person reads them in a table: to the minute, in *zone*, leaving out the year when it is plain.

    All in *now*'s year (in *zone*): ``MM-DD HH:MM``; else ``YYYY-MM-DD HH:MM`` for every one, so a column reads one way.
    The zone is not in the cells; the table says it once (see :func:`journal.frame.zone_name`). A time that *zone*
    cannot show (the first hours of year 1 west of UTC, the last of 9999 east of it) is shown in UTC, marked ``Z``.
    """
    year = now.astimezone(zone).year
    local: list[tuple[datetime, str]] = []
    for stamp in stamps:
        moment = datetime.fromisoformat(stamp)
        try:
            local.append((moment.astimezone(zone), ""))
        except OverflowError:
            local.append((moment.astimezone(UTC), "Z"))
    with_year = any(moment.year != year for moment, _ in local)
    return [
        (f"{moment.year:04d}-" if with_year else "") + f"{moment.month:02d}-{moment.day:02d} {moment.hour:02d}:{moment.minute:02d}{mark}"
        for moment, mark in local
    ]


def labelled(pairs: Sequence[tuple[str, object]]) -> str:
    """``label: value`` lines with the values aligned; ``None`` values are left out, lists are joined by commas."""
    shown = [(label, ", ".join(map(str, value)) if isinstance(value, list) else str(value)) for label, value in pairs if value is not None]
    if not shown:
        return ""
    size = max(len(label) for label, _ in shown) + 1
    return "\n".join(f"{(label + ':').ljust(size)} {printable(value)}".rstrip() for label, value in shown)
