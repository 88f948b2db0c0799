"""What a read asks for: its scope (agent, kind, time window, as of when, current only) and its checked arguments."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from journal.errors import EntryValidationError
from journal.files.entry import Entry, check_utc_range, parse_timestamp, show_value, utc_key
from journal.indexing.index import Window

__all__ = ["Scope", "bound", "cutoff", "positive", "shown_key"]


@dataclass(frozen=True, slots=True)
class Scope:
    """What a read asked for, checked against each entry as loaded from its file."""

    agent: str | None = None
    kind: str | None = None
    since: str | None = None
    until: str | None = None
    #: The journal as it stood at a time: an exclusive key from :func:`cutoff`. Later
    #: entries are out of scope, and so are the supersessions they declare.
    as_of: str | None = None
    #: Leave out entries that an entry of their agent (within *as_of*) supersedes.
    current_only: bool = False

    @property
    def upper(self) -> str | None:
        """The exclusive upper key of the entries in scope: the earlier of *until* and *as_of*."""
        if self.as_of is None or self.until is None:
            return self.until if self.as_of is None else self.as_of
        return min(self.until, self.as_of)

    @property
    def window(self) -> Window:
        """The same scope as the index reads it, before any file is loaded."""
        return Window(kind=self.kind, agent=self.agent, since=self.since, until=self.upper)

    def misfit(self, entry: Entry) -> str | None:
        """Which asked-for field the entry's file does not match, or None."""
        if self.agent is not None and entry.agent != self.agent:
            return "agent"
        if self.kind is not None and entry.kind != self.kind:
            return "kind"
        key = utc_key(entry.timestamp)
        upper = self.upper
        if (self.since is not None and key < self.since) or (upper is not None and key >= upper):
            return "ts"
        return None


def cutoff(as_of: datetime | str | None) -> str | None:
    """The exclusive key of "written at or before *as_of*" (see :attr:`Scope.as_of`).

    Keys have one fixed width, so the key of *as_of* followed by NUL sorts
    above its own key and below the key of every later time.
    """
    key = bound(as_of, "as_of")
    return None if key is None else key + "\x00"


def shown_key(key: str | None) -> str | None:
    """A cutoff key as the UTC time it stands for."""
    return None if key is None else key.rstrip("\x00")


def bound(value: datetime | str | None, name: str) -> str | None:
    """A since/until bound as a sortable UTC key; naive times are refused."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_timestamp(value, name)
        except EntryValidationError as exc:
            raise ValueError(
                f"{name} must be an ISO 8601 time with seconds and a timezone such as '2026-09-05T16:00:00Z' "
                f"or '2026-09-05T16:00:00+02:00', within years 1-9999 in UTC, got {show_value(value)}"
            ) from exc
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime or ISO 8601 string, got {show_value(value)}")
    try:
        check_utc_range(value, name)
    except EntryValidationError as exc:
        raise ValueError(f"{name} must fall within years 1-9999 in UTC, got {value.isoformat()!r}") from exc
    return utc_key(value)


def positive(value: int, name: str, maximum: int) -> int:
    """*value* if it is an integer in 1..*maximum*; else a ValueError naming *name*."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        shown = show_value(value) if not isinstance(value, int) or abs(value) <= 10**30 else "an integer beyond 10**30"
        raise ValueError(f"{name} must be a positive integer of at most {maximum:,}, got {shown}")
    return value
