"""The ``ghostjournal`` command's argument types and shared options: text, times, windows, the root path, the entry input."""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from typing import IO, Any

import click

from journal.api import MAX_K
from journal.errors import EntryValidationError
from journal.files.entry import KINDS, MAX_INPUT_BYTES
from journal.frame.clikit import NamedPath, TimeParam, after_command
from journal.frame.timeinput import local_zone

__all__ = [
    "KIND",
    "K_RANGE",
    "REPORT_TIME",
    "TEXT",
    "TIME",
    "RootPath",
    "agent_option",
    "as_of_option",
    "current_only_option",
    "floor_option",
    "read_input",
    "window_options",
]


class _Text(click.types.StringParamType):
    """A string argument that can be written as UTF-8.

    Bytes of argv that are not UTF-8 reach Python as lone surrogates
    (surrogateescape); SQLite, JSON output and the terminal would each fail on
    them with a traceback, so they are refused here as a usage error.
    """

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            self.fail(f"expected UTF-8 text, got an invalid byte at character {exc.start}", param, ctx)
        return text


TEXT = _Text()
K_RANGE = click.IntRange(min=1, max=MAX_K)
KIND = click.Choice(KINDS)


def read_input(source: IO[bytes]) -> bytes:
    """At most MAX_INPUT_BYTES of *source*; one byte more is read only to tell that the input is too long."""
    raw = source.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        # Exit 65 like an oversized entry: the data is wrong, not the command line.
        raise EntryValidationError(
            "(entry)", f"at most {MAX_INPUT_BYTES} bytes of JSON input (the entry file itself at most 1 MiB)", "more"
        )
    return raw


#: Dates and times without an offset are read in the system's local zone (TZ, else /etc/localtime).
TIME = TimeParam(lambda ctx: local_zone())
#: ``report``'s: read in its --tz when given (an eager option, so parsed first), else in the local zone.
REPORT_TIME = TimeParam(lambda ctx: _given_zone(ctx) or local_zone())


def _given_zone(ctx: click.Context | None) -> tzinfo | None:
    """The --tz parsed so far; absent, None (click may hold a sentinel there, not None)."""
    zone = ctx.params.get("zone") if ctx is not None else None
    return zone if isinstance(zone, tzinfo) else None


def window_options(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option("--until", type=TIME, help="Only entries before this time: a date, a local time, an ISO time, or -7d.")(
        function
    )
    function = click.option("--since", type=TIME, help="Only entries at or after this time: a date, a local time, an ISO time, or -7d.")(
        function
    )
    with_agent: Callable[..., Any] = agent_option("Only this agent's entries.")(function)
    return with_agent


def agent_option(
    help: str,  # noqa: A002 - click's own name for it
    *,
    required: bool = False,
    check: Callable[[str], str] | None = None,
    expose_value: bool = True,
) -> Callable[[Any], Any]:
    """A command's ``--agent``, which the group's ``--agent`` (before the command) also gives; two different ones are a usage error.

    The agent also picks the journal when no root is given (see :mod:`journal.frame.roots`), so it is set on
    the settings object too. *check* refuses a value (a blank name) with :class:`click.BadParameter`. Without
    *expose_value*, the command reads the agent from the settings object alone.
    """

    def chosen(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            if check is not None:
                check(value)
            after_command(ctx, param, value)  # refuses another value before the command, and sets the settings' agent
            return value
        before: str | None = getattr(ctx.obj, "agent", None)
        if before is None and required:
            raise click.MissingParameter(ctx=ctx, param=param)
        return before

    return click.option("--agent", type=TEXT, callback=chosen, expose_value=expose_value, help=help)


def as_of_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--as-of",
        "as_of",
        type=TIME,
        help="Answer from the journal as it stood at this ISO 8601 time: later entries and their corrections left out.",
    )(function)


def current_only_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--current-only", is_flag=True, help="Leave out entries that a later entry supersedes.")(function)


def floor_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--floor/--no-floor",
        default=True,
        show_default=True,
        help="With --nn, leave out entries found by meaning alone below the model's relevance floor (cosine 0.30 for the default model);"
        " --no-floor needs --nn.",
    )(function)


def rerank_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--rerank/--no-rerank",
        default=True,
        show_default=True,
        help="Raise each entry by its neighbours' scores (entries it continues or that continue it, and those written just before"
        " or after it); --no-rerank ranks by the words (and meaning) alone.",
    )(function)


class RootPath(NamedPath):
    """A journal directory; an empty or blank value is refused, never read as the current directory.

    Path("") is ".", so `--root "$UNSET_VARIABLE"` would otherwise create or write a journal wherever the
    command happens to run.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("a journal directory", hint="an empty value is not the current directory; pass --root .", **kwargs)
