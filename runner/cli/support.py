"""The frame every ``ghostrunner`` command runs in: one-line errors and their exit codes, settings, shared options.

Every error reaches the user as one line, ``ghostrunner: error: ...``:
:class:`OneLineGroup` (journal.frame.clikit's frame, shared with ``ghostjournal``)
turns click's usage errors into such a line (exit 2) and is the one place
that reads a runner or journal error's ``exit_code``. Values of options are
parsed here: times (journal.frame.timeinput's forms, read in the configured
timezone, within 1970..8999) and durations.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import click

from journal import JournalError, JournalStorageError
from journal.frame import parse_time_input, refuse_inside_journals
from journal.frame.clikit import CommandGroup, NamedPath, after_command, echo, json_text, terminal_width
from runner import (
    CONFIG_ENVVAR,
    DURATION_EXPECTED,
    RunnerConfig,
    RunnerError,
    load_config,
    parse_duration,
)
from runner.cron.slots import EARLIEST_TIME, LATEST_TIME
from runner.errors import quoted

if TYPE_CHECKING:
    from runner.run.simulate import SimulationSummary

__all__ = [
    "LOG_LEVELS",
    "MAX_DAYS",
    "OneLineGroup",
    "Settings",
    "TimeOptionError",
    "config_option",
    "echo_json",
    "fault_exit_code",
    "is_date_only",
    "log_input",
    "parse_duration_option",
    "parse_time",
    "raise_storage_failure",
    "screen_width",
    "simulation_exit_code",
    "write_rendered",
]

#: The values of ``--log-level``.
LOG_LEVELS: Final = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)

#: The errnos by which the filesystem refuses (read-only, full, denied, failing): one line and their
#: JournalStorageError's exit code. Any other OSError of the runner's own files is a bug and keeps its traceback.
_REFUSALS: Final = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM})
_ERRNO_BY_NAME: Final = {name: code for code, name in errno.errorcode.items()}


def fault_exit_code(fault: str) -> int:
    """The exit code of a run the filesystem refused with errno *fault* (``ENOSPC``): its JournalStorageError's."""
    return JournalStorageError.class_for(_ERRNO_BY_NAME.get(fault, 0)).exit_code


def simulation_exit_code(summaries: Sequence[SimulationSummary]) -> int:
    """The exit code of a simulation: a refused journal's, else 1 when a run failed, else 0."""
    faults = [summary.fault for summary in summaries if summary.fault]
    return fault_exit_code(faults[0]) if faults else 1 if any(summary.outcomes.get("failed") for summary in summaries) else 0


class OneLineGroup(CommandGroup):
    """The command group: every usage, runner and journal error ends the command as one line on stderr."""

    prog = "ghostrunner"
    errors = (RunnerError, JournalError)


class Settings:
    """The group's options, shared by its commands: the configuration file (and its override) and the log level."""

    def __init__(self, config_path: Path | None, log_level: str | None) -> None:
        self.config_path = config_path
        self.log_level = log_level

    def config(self, override: Path | None, *, text: str | None = None) -> RunnerConfig:
        """The configuration: a command's own --config, else the group's (or its variable), else the embedded defaults.

        With *text* (a ``serve`` worker's), that is the file's content as serve holds it.
        """
        path = override or self.config_path
        if text is not None and path is not None:
            return load_config(path, text=text)
        if path is None and CONFIG_ENVVAR in os.environ and not os.environ[CONFIG_ENVVAR].strip():
            # click reads an empty variable as unset: a script whose variable came out empty
            # would silently run the embedded defaults' agent into its journal.
            raise click.UsageError(
                f"${CONFIG_ENVVAR} is set but empty; name a configuration file, or unset it to use the embedded defaults"
            )
        return load_config(path)


def config_option(function: Any) -> Any:
    """A command's own ``--config``: the group's option after the command (the same value, or the group's is not given)."""
    return click.option(
        "--config",
        "config_path",
        type=NamedPath("a configuration file", dir_okay=False, path_type=Path),
        default=None,
        callback=after_command,
        help=f"Configuration TOML (default: ${CONFIG_ENVVAR}, else the embedded defaults). Given before the command too, it must be the same file.",
    )(function)


def log_input(log_file: IO[str] | None, command: str) -> IO[str]:
    """The log a command reads: --log FILE, else stdin when it is a pipe; a terminal's stdin is a usage error."""
    if log_file is not None:
        return log_file
    if sys.stdin.isatty():
        raise click.UsageError(f"no log to read: pipe it in (journalctl -u ghostrunner -o cat | ghostrunner {command}) or pass --log FILE")
    return click.open_file("-", errors="replace")  # stdin in its own encoding, a bad byte read as U+FFFD


class TimeOptionError(click.BadParameter):
    """A bad time option: a usage error (exit 2), shown as one line by :class:`OneLineGroup` like every other."""


#: Longest simulation or demo, in days (100 years; see runner.cron.slots.LATEST_TIME).
MAX_DAYS: Final = 36525


def parse_time(text: str, config: RunnerConfig, option: str, *, now: datetime | None = None) -> datetime:
    """*text* as an aware time (journal.frame.timeinput's forms); a date or a time without an offset is read in the configured timezone.

    A repeated wall-clock time is its first occurrence; one that a change skips is an error. An empty
    or blank value is an error, never "now" or the default: a script whose variable came out empty must
    not run another slot.
    """
    try:
        return parse_time_input(
            text, zone=config.timezone, now=now or datetime.now(config.timezone), earliest=EARLIEST_TIME, latest=LATEST_TIME
        )
    except ValueError as exc:
        raise TimeOptionError(str(exc), param_hint=option) from None


def screen_width() -> int | None:
    """The terminal's width when stdout is one, else ``None``: a table printed with ``--text`` into a pipe or a file is kept whole
    (a script cuts its columns), while on a terminal a table too wide for it becomes records rather than wrapping into its next row."""
    try:
        on_terminal = sys.stdout.isatty()
    except ValueError:  # a closed stdout
        on_terminal = False
    return terminal_width() if on_terminal else None


def is_date_only(text: str) -> bool:
    """Whether *text* names a day without a time (``2026-03-29``); ISO 8601 also separates a time by a space, not only by ``T``."""
    try:
        date.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def parse_duration_option(text: str, option: str) -> timedelta:
    """*text* as a duration (``90s``, ``1h30m``); anything else is a usage error naming *option*."""
    try:
        return parse_duration(text)
    except ValueError:
        raise click.BadParameter(f"expected {DURATION_EXPECTED}, got {quoted(text)}", param_hint=option) from None


def raise_storage_failure(exc: OSError, path: Path, action: str) -> None:
    """Raise a one-line error for a file of the runner that the filesystem refused (full, read-only, no permission).

    Any other OSError is not the filesystem refusing but a bug, and keeps its traceback. The journal's own errors (they are
    OSErrors too) already say what was refused and how to fix it: the caller re-raises them as they are.
    """
    if isinstance(exc, JournalError):
        return
    if exc.errno in _REFUSALS:
        named = exc.filename if isinstance(exc.filename, str) and os.path.isabs(exc.filename) else path
        raise JournalStorageError.for_errno(named, exc.errno, action) from exc


def write_rendered(
    rendering: Any, out: Path, write: Callable[[Any, Path], list[Path]], *, noun: str, strict: bool, journals: Mapping[str, Path]
) -> None:
    """What both render commands do with a rendering: refuse it under --strict if it warns, or an *out* inside a journal
    (one of *journals*, or any other: exit 2), else write it into *out*, say what was written, then warn on stderr
    (after the files: a refused --out is the one line of its error)."""
    refuse_inside_journals(out, f"the {noun}s' directory", journals)
    warnings = [f"ghostrunner: warning: {warning}" for warning in rendering.warnings]
    if strict and warnings:
        click.echo("\n".join(warnings), err=True)
        from runner.deploy.systemd.units import refuse_warnings

        refuse_warnings(rendering, noun)
    try:
        written = write(rendering, out)
    except OSError as exc:
        raise_storage_failure(exc, out, f"write the {noun}s into")
        raise
    for path in written:
        echo(f"wrote {path}")
    for warning in warnings:
        click.echo(warning, err=True)


def echo_json(data: Any) -> None:
    """Print *data* as one line of JSON to stdout, as :func:`echo` does."""
    echo(json_text(data))
