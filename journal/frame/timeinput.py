"""Times typed on a command line: one parser for ``ghostjournal`` and ``ghostrunner``.

Accepted forms (:data:`TIME_FORMS` says the same in one line, for messages and help)::

    2026-01-01                    a date: the start of that day in the zone
    2026-01-01T09:30, 09:30:15    a wall-clock time without an offset, read in the zone
    2026-01-01T09:30+02:00, ...Z  an aware ISO 8601 time, taken as written
    -7d, -12h, -30m, -1d12h       relative: that long before now (w, d, h, m, s; exact elapsed time)
    now

The zone is the caller's: ``ghostjournal`` passes :func:`local_zone` (the
system's), ``ghostrunner`` its configured ``runner.timezone``.

Daylight-saving rules, never silent:

- a wall-clock time that a change skips (Berlin, 2026-03-29 02:30) does not
  exist and is an error naming it and the two offsets around the gap;
- a wall-clock time that a change repeats (Berlin, 2026-10-25 02:30) means
  its first occurrence (the earlier instant, PEP 495 ``fold=0``), as cron and
  systemd read it; give an offset to mean the second. (Such a result, like any
  time in a fold, compares unequal with ``==`` to every time of another zone,
  as PEP 495 rules; compare in UTC.)
- a date whose midnight is skipped (Santiago, 2026-09-06) starts at the
  first moment that day has (01:00).

Errors are ``ValueError``: argument misuse, as the library's own since/until
checks; a command line turns them into a usage error naming the option.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["TIME_FORMS", "local_zone", "named_zone", "parse_time_input", "zone_name"]

#: What a time option accepts, for error messages and help texts.
TIME_FORMS: Final = (
    "a date (2026-01-01), a time without an offset (2026-01-01T09:30), an ISO 8601 time with one "
    "(2026-01-01T09:30+02:00 or ...Z), a relative time (-7d, -12h, -30m) or 'now'"
)

_RELATIVE: Final = re.compile(r"-(?:(\d{1,7})w)?(?:(\d{1,7})d)?(?:(\d{1,9})h)?(?:(\d{1,11})m)?(?:(\d{1,12})s)?")
_UNITS: Final = ("weeks", "days", "hours", "minutes", "seconds")
#: Where a system keeps its zone files; /etc/localtime is usually a link into one of them.
_ZONEINFO_DIRS: Final = ("/usr/share/zoneinfo/", "/usr/lib/zoneinfo/", "/usr/share/lib/zoneinfo/")


def local_zone() -> tzinfo:
    """The system's local time zone, with its daylight-saving rules.

    ``$TZ`` when it names an IANA zone (``Europe/Berlin``, ``:Europe/Berlin``),
    else the zone ``/etc/localtime`` links to (or the zone file it is), else UTC.
    A ``$TZ`` that is not a zone name (a POSIX rule such as ``JST-9``) is read
    as the C library reads it, at its current UTC offset.
    """
    tz = os.environ.get("TZ")
    if tz is not None:
        name = tz.removeprefix(":").strip()
        if not name:
            return UTC  # the C library's reading of an empty TZ
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            offset = datetime.now().astimezone().tzinfo  # the C library reads a POSIX TZ rule; its current offset is what it gives
            return offset if offset is not None else UTC
    localtime = Path("/etc/localtime")
    try:
        target = str(localtime.resolve(strict=True))
    except OSError:
        return UTC
    for directory in _ZONEINFO_DIRS:
        if target.startswith(directory):
            try:
                return ZoneInfo(target.removeprefix(directory))
            except (ZoneInfoNotFoundError, ValueError, OSError):
                break
    try:
        with localtime.open("rb") as file:
            return ZoneInfo.from_file(file, key="localtime")
    except (OSError, ValueError):
        return UTC


def named_zone(name: str) -> ZoneInfo:
    """The IANA time zone called *name* (``Europe/Berlin``, ``UTC``), with its daylight-saving rules.

    Raises:
        ValueError: no such zone on this system; the message quotes *name* and says what is expected.
    """
    try:
        return ZoneInfo(name.strip())  # refuses an absolute path or one with "..": a key is never a file of the caller's choosing
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"expected an IANA time zone name such as Europe/Berlin or UTC, got {_quoted(name)}") from None


def zone_name(zone: tzinfo) -> str:
    """A zone's name for messages: its IANA key, else what it calls itself now."""
    key = getattr(zone, "key", None)
    return key if isinstance(key, str) else str(datetime.now(zone).tzname())


def parse_time_input(
    text: str, *, zone: tzinfo, now: datetime, earliest: datetime | None = None, latest: datetime | None = None
) -> datetime:
    """*text* (one of the forms in the module docstring) as an aware time.

    Args:
        text: what the user typed; surrounding blanks are ignored, an empty value is an error (never "now").
        zone: where a date or a time without an offset is read.
        now: the aware present, for ``now`` and relative times.
        earliest, latest: a narrower range than years 1-9999 (UTC) that the caller can handle,
            ``earliest`` inclusive and ``latest`` exclusive, both aware.

    Returns:
        An aware datetime whose UTC time falls in years 1-9999; an aware input keeps its offset;
        a date, a wall-clock time, a relative time and ``now`` are in *zone*.

    Raises:
        ValueError: *text* is none of the forms, a wall-clock time that does not exist in *zone*,
            or a time outside years 1-9999 in UTC (or *earliest*..*latest*); the message quotes *text*, cut to 60 characters.
    """
    if now.tzinfo is None:
        raise ValueError(f"now must be an aware datetime, got {now.isoformat()!r}")
    value = text.strip()
    match = _RELATIVE.fullmatch(value)
    moment = None if match else _parse_iso(value)
    if value != "now" and not (match and any(match.groups())) and moment is None:
        raise ValueError(f"expected {TIME_FORMS}, got {_quoted(text)}")
    try:
        if value == "now":
            result = now.astimezone(zone)
        elif match:
            # In UTC: an aware datetime's own arithmetic is wall-clock arithmetic, which -7d across a DST change would make 167 or 169 hours.
            delta = timedelta(**{unit: int(amount) for unit, amount in zip(_UNITS, match.groups(), strict=True) if amount})
            result = (now.astimezone(UTC) - delta).astimezone(zone)
        elif isinstance(moment, datetime):
            result = moment if moment.tzinfo is not None else _wall_clock(moment, zone, text)
        else:
            assert moment is not None  # noqa: S101 - narrows for mypy: the None case was refused above
            result = _start_of_day(moment, zone, text)
        result.astimezone(UTC)  # overflows when the UTC time falls outside years 1-9999
        in_range = (earliest is None or result >= earliest) and (latest is None or result < latest)
    except OverflowError:
        in_range = False
    if not in_range:
        if earliest is None and latest is None:
            raise ValueError(f"expected a time within years 1-9999 in UTC, got {_quoted(text)}")
        first = f"{earliest:%Y-%m-%d}" if earliest is not None else "0001-01-01"
        last = f"{latest - timedelta(days=1):%Y-%m-%d}" if latest is not None else "9999-12-31"
        raise ValueError(f"expected a time from {first} to {last} (UTC), got {_quoted(text)}")
    return result


def _parse_iso(value: str) -> date | datetime | None:
    """A date (``2026-01-01``) or a datetime (naive or aware) in ISO 8601, or None for anything else."""
    if not value or not value[:1].isdigit():
        return None  # fromisoformat accepts a few forms no user means, such as a leading sign or blank
    try:
        return (
            date.fromisoformat(value)
            if len(value) <= 10 and "T" not in value.upper() and ":" not in value
            else datetime.fromisoformat(value)
        )
    except ValueError:
        return None


def _wall_clock(naive: datetime, zone: tzinfo, text: str) -> datetime:
    """*naive* read in *zone*: its first occurrence when repeated; an error when a change skips it.

    Raises:
        ValueError: a change skips *naive*.
        OverflowError: *naive* in *zone* falls outside years 1-9999 in UTC.
    """
    first = naive.replace(tzinfo=zone, fold=0)
    back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)  # an OverflowError is the caller's: out of range
    if back != naive:
        before, after = first.utcoffset(), naive.replace(tzinfo=zone, fold=1).utcoffset()
        raise ValueError(
            f"{_quoted(text.strip())} does not exist in {zone_name(zone)}: the clocks skip it (UTC offset {_offset(before)} before, "
            f"{_offset(after)} after); give the offset you mean, e.g. {naive.isoformat()}{_offset(before)}"
        )
    return first


def _start_of_day(day: date, zone: tzinfo, text: str) -> datetime:
    """The first moment of *day* in *zone*: midnight, or where midnight is skipped, the end of the gap."""
    midnight = datetime.combine(day, time(0))
    try:
        return _wall_clock(midnight, zone, text)
    except ValueError:
        pass  # midnight is skipped
    # The skipped span lies between the two readings of midnight; find, to the second, the first
    # instant whose wall clock has reached that day (the wall clock only moves forward across a gap).
    low = int(midnight.replace(tzinfo=zone, fold=1).timestamp())
    high = int(midnight.replace(tzinfo=zone, fold=0).timestamp())
    low, high = min(low, high), max(low, high)
    while low < high:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) >= midnight:
            high = middle
        else:
            low = middle + 1
    return datetime.fromtimestamp(low, zone)


def _quoted(text: str) -> str:
    """*text* for a message: repr (control characters escaped, one line), cut to 60 characters."""
    return repr(text) if len(text) <= 60 else repr(text[:60]) + "\u2026"


def _offset(delta: timedelta | None) -> str:
    seconds = int((delta or timedelta()).total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")
