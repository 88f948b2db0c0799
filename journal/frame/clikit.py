"""The frame both commands run in: one error style, group options after the command, JSON or text output, times.

``ghostjournal`` and ``ghostrunner`` build their command groups on
:class:`CommandGroup`, so that:

- every error a user can cause ends the command as **one line** on stderr,
  ``<prog>: error: <message>``, with the error's exit code (2 for a usage
  error; click's own usage errors included, which otherwise print the usage, a
  hint and ``Error: ...`` on several lines); a usage error about the command
  line's shape (an unknown option or command, a missing argument) ends with
  where the help is;
- the group's options (``--root``, ``--nn``, ``--model``; ``--config``,
  ``--log-level``) are accepted after the command too. A value given in both
  places must be the same; two different ones are a usage error naming both;
- commands marked with :func:`output_option` print JSON when stdout is not a
  terminal or ``--json`` is given, and text for a person (``--text``) on a
  terminal, as ``gh`` does;
- SIGTERM (``systemctl stop``, a shutdown, ``kill``) ends a command by
  unwinding it, exit 143 (128 + 15), so that what it was writing to a hidden
  temporary name (a backup's partial copy, an export's or a report's file,
  rendered units) is removed on the way out; by default the signal would end
  the process at once and leave that behind for good. A command that stops
  on SIGTERM in its own way (``serve``, ``mcp``) sets its own handler.

Only the command modules (``journal.cli.cli``, ``runner.cli.cli`` and its support
module) and this one import click; ``import journal`` never does.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo
from typing import Any, ClassVar, Final, NoReturn

import click
from click.core import ParameterSource

from journal.errors import JournalStorageError
from journal.frame.timeinput import TIME_FORMS, named_zone, parse_time_input

__all__ = [
    "CommandGroup",
    "NamedPath",
    "TimeParam",
    "ZoneParam",
    "after_command",
    "echo",
    "force_option",
    "json_text",
    "once_each",
    "out_option",
    "output_option",
    "repeated_option",
    "terminal_width",
    "version_option",
    "wants_json",
    "warn",
]

_JSON_KEY: Final = "clikit.json"


class _OneLineUsageError(click.UsageError):
    """A usage error (exit 2) shown as one line, ``<prog>: error: ...``, like every other user error."""

    def __init__(self, error: click.UsageError, prog: str) -> None:
        message = error.format_message()
        ctx = error.ctx
        if ctx is not None and (not isinstance(error, click.BadParameter) or isinstance(error, click.MissingParameter)):
            # The shape of the command line is wrong: say where the help is. A bad value's message says the fix itself.
            message = message.rstrip()
            message = f"{message if message.endswith(('.', '?', '!')) else message + '.'} See '{ctx.command_path} --help'."
        super().__init__(message, ctx)
        self.prog = prog

    def show(self, file: Any = None) -> None:
        click.echo(f"{self.prog}: error: {self.format_message()}", err=True)


class CommandGroup(click.Group):
    """A root command group with one-line errors and its options repeatable after the command.

    Subclasses set :attr:`prog` (the command's name, the prefix of its messages) and :attr:`errors`
    (the exception classes whose ``exit_code`` ends a command).
    """

    prog: ClassVar[str] = ""
    errors: ClassVar[tuple[type[Exception], ...]] = ()
    _is_attached: bool = False

    def __init__(self, name: str | None = None, *args: Any, **kwargs: Any) -> None:
        # Named after the command, not the function that defines it: usage lines and hints then say "ghostjournal".
        super().__init__(self.prog or name, *args, **kwargs)

    def translate(self, exc: Exception) -> click.UsageError | None:
        """A usage error for an exception that is not in :attr:`errors`, or None to let it through (a bug)."""
        return None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command (see click); the group's options are attached to every command on the first call."""
        if not self._is_attached:
            self._is_attached = True
            for command in _walk(self):
                _attach(self, command)
            for command in (self, *_walk(self)):
                _refuse_repeats(command)
        kwargs.setdefault("prog_name", self.prog)
        previous = _unwind_on_sigterm()
        try:
            return super().main(*args, **kwargs)
        finally:
            if previous is not None:  # a test's in-process call leaves the test process's handler as it was
                signal.signal(signal.SIGTERM, previous)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # the group's own options (ghostjournal --bogus)
            raise self._one_line(exc) from exc
        except click.ClickException as exc:
            raise self._other(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except self.errors as exc:
            # The one place that reads an error's exit code: one line on stderr, then that code.
            click.echo(f"{self.prog}: error: {exc}", err=True)
            raise click.exceptions.Exit(getattr(exc, "exit_code", 1)) from exc
        except click.UsageError as exc:  # the commands' options and their own usage errors
            raise self._one_line(exc) from exc
        except click.ClickException as exc:  # a file option that cannot be opened
            raise self._other(exc) from exc
        except Exception as exc:
            usage = self.translate(exc)
            if usage is None:
                raise
            raise self._one_line(usage) from exc

    def _other(self, error: click.ClickException) -> click.exceptions.Exit:
        """Click's other errors (a file option that cannot be opened, exit 1) as the same one line, with their exit code."""
        click.echo(f"{self.prog}: error: {error.format_message()}", err=True)
        return click.exceptions.Exit(error.exit_code)

    def _one_line(self, error: click.UsageError) -> click.UsageError:
        if isinstance(error, _OneLineUsageError | click.exceptions.NoArgsIsHelpError):
            return error  # a bare command shows its help, as it should
        return _OneLineUsageError(error, self.prog)


def _exit_on_sigterm(signum: int, frame: object) -> NoReturn:
    sys.exit(128 + signum)  # SystemExit runs every finally and "except BaseException" cleanup on its way up


def _unwind_on_sigterm() -> Any:
    """Make SIGTERM raise SystemExit(143) in this process; return the handler it had (None: none to restore)."""
    if threading.current_thread() is not threading.main_thread():
        return None  # only the main thread may set a handler (an in-process call from a test's thread)
    return signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _walk(group: click.Group) -> Iterator[click.Command]:
    for command in group.commands.values():
        yield command
        if isinstance(command, click.Group):
            yield from _walk(command)


def _attach(group: click.Group, command: click.Command) -> None:
    """Give *command* a copy of each of *group*'s options it lacks (by name and by option string)."""
    taken = {param.name for param in command.params} | {opt for param in command.params for opt in param.opts}
    for option in group.params:
        if not isinstance(option, click.Option) or option.name in taken or set(option.opts) & taken or option.name in {"version", "help"}:
            continue
        command.params.append(repeated_option(option))


def _refuse_repeats(command: click.Command) -> None:
    """Make *command* refuse an option that takes one value given more than once (click keeps the last without a word: ``--at X
    --at Y`` ran Y's slot); options meant to repeat (``multiple``, ``count``) are left alone."""
    parse = command.parse_args

    def parse_args(ctx: click.Context, args: list[str]) -> list[str]:
        _, _, order = command.make_parser(ctx).parse_args(args=list(args))
        seen: set[str | None] = set()
        for param in order:
            if not isinstance(param, click.Option) or param.multiple or param.count or param.name in {"help", "version"}:
                continue
            if param.name in seen:
                flag = max(param.opts, key=len) + ("/" + max(param.secondary_opts, key=len) if param.secondary_opts else "")
                raise click.UsageError(f"{flag} is given more than once; give it once (only one value can hold)", ctx)
            seen.add(param.name)
        return parse(ctx, args)

    command.parse_args = parse_args  # type: ignore[method-assign]  # per command object: the commands are click's own classes


def repeated_option(option: click.Option, *, expose_value: bool = False) -> click.Option:
    """A command's copy of the group's *option*: same name, type and help, no default and no environment variable."""
    return click.Option(
        [str(option.name), *option.opts],
        type=None if option.is_flag else option.type,
        is_flag=option.is_flag,
        default=False if option.is_flag else None,
        metavar=option.metavar,
        help=option.help,
        expose_value=expose_value,
        callback=after_command,
    )


def after_command(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of an option that the group has too: the value after the command, checked against the one before it.

    Returns the value given after the command, or None when it was not given there (the group's value then
    stands). It is also set on the settings object (``ctx.obj``) under the option's name, where the group put its own.

    Raises:
        click.UsageError: both places give the option, with different values.
    """
    name = str(param.name)
    if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
        return None
    owner = ctx.parent
    while owner is not None and name not in owner.params:
        owner = owner.parent
    if owner is not None and owner.get_parameter_source(name) is ParameterSource.COMMANDLINE and owner.params[name] != value:
        flag = max(param.opts, key=len)
        raise click.UsageError(
            f"{flag} is given before the command as {str(owner.params[name])!r} and after it as {str(value)!r}; give it once",
            ctx,
        )
    if ctx.obj is not None and hasattr(ctx.obj, name):
        setattr(ctx.obj, name, value)
    return value


def once_each(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """The callback of a repeatable option whose values must differ: a value given twice would count twice.

    Raises:
        click.BadParameter: a value is given twice, naming it.
    """
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise click.BadParameter(f"expected each {param.metavar or 'value'} once, got {value!r} twice", ctx, param)
        seen.add(value)
    return values


def version_option(prog: str) -> Callable[[Any], Any]:
    """``-V``/``--version``: the installed distribution's version, from its metadata."""
    return click.version_option(None, "-V", "--version", package_name="ghostjournal", prog_name=prog, message="%(prog)s %(version)s")


#: A character Python decodes an undecodable byte of a file name into (os.fsdecode's surrogateescape).
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def json_text(value: Any, *, indent: int | None = None) -> str:
    """*value* as the JSON text both commands print: other scripts kept as they are, but a lone surrogate as its ``\\uXXXX`` escape.

    A file name that is not UTF-8 (a byte os.fsdecode keeps as a surrogate) would otherwise reach
    stdout as that raw byte, and the output would be no UTF-8 that a JSON reader takes; escaped,
    it reads back to the very name, which ``os.fsencode`` turns into the file's bytes.
    """
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", json.dumps(value, ensure_ascii=False, indent=indent))


def output_option(function: Any) -> Any:
    """``--json/--text``: the output's form; without either, JSON unless stdout is a terminal (see :func:`wants_json`)."""

    def remember(ctx: click.Context, param: click.Parameter, value: bool | None) -> None:
        if value is not None:
            ctx.meta[_JSON_KEY] = value

    return click.option(
        "--json/--text",
        "output_json",
        default=None,
        expose_value=False,
        callback=remember,
        help="Print JSON, or text for a person. Default: text on a terminal, JSON when piped.",
    )(function)


def out_option(what: str) -> Callable[[Any], Any]:
    """``--out FILE|-``: where a command writes *what* (a page of HTML); ``-`` (the default) is stdout, unless stdout is a terminal.

    The value reaches the command as ``out``; an empty one, or ``-`` onto a terminal, is a usage error.
    """

    def checked(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if not value.strip():
            raise click.BadParameter(f"expected a file name or - for stdout, got {value!r} (an empty value is not stdout)")
        if value == "-" and _is_terminal():
            raise click.BadParameter(f"stdout is a terminal and {what} is an HTML file: pass --out FILE, or pipe the output")
        return value

    return click.option(
        "--out",
        "out",
        default="-",
        show_default=True,
        callback=checked,
        help=f"The file to write {what} to (replaced whole, never through a symlink, into a FIFO or inside a journal), or - for stdout.",
    )


def force_option(what: str) -> Callable[[Any], Any]:
    """``--force``: replace a file at ``--out`` that is not an earlier *what* (see :mod:`journal.frame.outfile`); reaches the command as ``force``."""
    return click.option(
        "--force",
        "force",
        is_flag=True,
        help=f"Replace a file at --out that is not an earlier {what} (a file inside a journal, a link, a FIFO or a directory "
        "is refused all the same).",
    )


def wants_json() -> bool:
    """Whether this command prints JSON: as ``--json``/``--text`` said, else when stdout is not a terminal."""
    chosen = click.get_current_context().meta.get(_JSON_KEY)
    if chosen is not None:
        return bool(chosen)
    return not _is_terminal()


def _is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except ValueError:  # a closed stdout
        return False


def terminal_width() -> int:
    """The terminal's width in columns ($COLUMNS first, then the terminal itself, else 100)."""
    return max(shutil.get_terminal_size((100, 24)).columns, 40)


def warn(prog: str, message: str) -> None:
    """One warning line on stderr, ``<prog>: warning: ...``."""
    click.echo(f"{prog}: warning: {message}", err=True)


class NamedPath(click.Path):
    """A path option whose empty or blank value is refused, naming the option, never read as the current directory.

    ``Path("")`` is ``.``, so ``--out "$UNSET_VARIABLE"`` would otherwise write wherever the command happens to run.

    Args:
        expected: what the option names, for the message ("a directory that does not exist yet").
        hint: what to pass instead, added in parentheses (by default: that an empty value is not the current directory).
    """

    def __init__(self, expected: str, *, hint: str = "an empty value is not the current directory", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.expected = expected
        self.hint = hint

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"expected {self.expected}, got {value!r} ({self.hint})", param, ctx)
        return super().convert(value, param, ctx)


class TimeParam(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.4; subscripting it would fail on 8.1-8.3
    """A time option's value (see :mod:`journal.frame.timeinput`), read in a zone the command chooses.

    Args:
        zone: the zone of dates and of times without an offset, or a function of the context that gives it
            (``ghostrunner`` reads it from the configuration).
    """

    name = "time"

    def __init__(self, zone: tzinfo | Callable[[click.Context | None], tzinfo]) -> None:
        self._zone = zone

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        zone = self._zone if isinstance(self._zone, tzinfo) else self._zone(ctx)
        try:
            return parse_time_input(str(value), zone=zone, now=datetime.now(zone))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "TIME"

    def __repr__(self) -> str:
        return f"TimeParam({TIME_FORMS})"


class ZoneParam(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.4, as TimeParam
    """A time zone option's value: an IANA name (:func:`journal.frame.timeinput.named_zone`), else a one-line usage error."""

    name = "zone"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tzinfo:
        if isinstance(value, tzinfo):
            return value
        try:
            return named_zone(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "ZONE"


def echo(text: str) -> None:
    """Print *text* to stdout; a stdout that cannot take it (a full disk) is one clear error, not a traceback."""
    try:
        click.echo(text)
    except OSError as exc:
        if exc.errno == errno.EPIPE or not exc.errno:
            raise  # click ends quietly when the reader of a pipe has gone (ghostjournal list | head -1)
        # What is still buffered would fail again at exit, as a stray "Exception ignored" report.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise JournalStorageError.for_errno("<stdout>", exc.errno, "write the output to") from None
