"""The operator's commands of ``ghostrunner``: ``pause``, ``resume`` and ``history``.

Each parses its options, calls the library (:mod:`runner.run.pauses`,
:mod:`runner.monitor.history`) and renders; :mod:`runner.cli.cli` adds them to its group.
``history`` renders through :func:`render_history`, a table on a terminal and
JSON otherwise, kept in one function so that a shared renderer can replace it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import click

from journal.frame.clikit import echo, json_text, output_option, wants_json
from runner.cli.fleet import fleet_option, runs_input
from runner.cli.support import Settings, config_option, echo_json, parse_time, raise_storage_failure
from runner.cli.views import input_line
from runner.run.pauses import PauseBook, PauseChange

if TYPE_CHECKING:
    from runner.monitor.history import History

__all__ = ["EXIT_BUSY", "OPERATE_COMMANDS", "render_history"]

#: The exit code of a ``run`` that ended ``busy`` (EX_TEMPFAIL: another run of the slot is working; try again later).
EXIT_BUSY: Final = 75
_ERROR_WIDTH: Final = 72


def _change(settings: Settings, config_path: Path | None, act: Callable[[PauseBook], PauseChange]) -> None:
    book = PauseBook(settings.config(config_path))
    try:
        change = act(book)
    except OSError as exc:
        raise_storage_failure(exc, book.path, "write the pause file")
        raise
    if wants_json():
        echo_json(change.to_dict())
    else:
        echo(_show_change(change))


def _show_change(change: PauseChange) -> str:
    """What a pause or resume did, for a person: the change (or that there was none), then what is paused now."""
    what = change.agent if change.routine is None else f"{change.agent} {change.routine}"
    done = f"{change.action}d {what}" if change.changed else f"{what}: nothing to {change.action}"
    return f"{done}; {change.agent}'s paused routines: {', '.join(change.paused_routines) or 'none'}"


def _pause_command(short_help: str) -> Callable[[Callable[[Settings, str, str | None, Path | None], None]], click.Command]:
    """The one form of ``pause`` and ``resume``: AGENT [ROUTINE], ``--config``, ``--json/--text``, the group's settings."""

    def make(function: Callable[[Settings, str, str | None, Path | None], None]) -> click.Command:
        command: Any = click.pass_obj(function)
        for decorate in (output_option, config_option, click.argument("routine", required=False), click.argument("agent")):
            command = decorate(command)
        made: click.Command = click.command(short_help=short_help)(command)
        return made

    return make


@_pause_command("Pause an agent, or one of its routines.")
def pause(settings: Settings, agent: str, routine: str | None, config_path: Path | None) -> None:
    """Pause AGENT (all its routines) or its ROUTINE: its runs are skipped, reason "paused", until resumed.

    Kept in the runner's state directory; every run checks it when it starts,
    so serve and the timers honour it at their next fire, without a restart.
    Prints what changed: as text on a terminal, as JSON when piped.

    Example: ghostrunner pause motoko evening
    """
    _change(settings, config_path, lambda book: book.pause(agent, routine))


@_pause_command("Resume an agent, or one of its routines.")
def resume(settings: Settings, agent: str, routine: str | None, config_path: Path | None) -> None:
    """Resume AGENT (all its routines, however paused) or its ROUTINE (also out of a pause of the whole agent).

    Example: ghostrunner resume motoko
    """
    _change(settings, config_path, lambda book: book.resume(agent, routine))


def _duration(milliseconds: float | None) -> str:
    if milliseconds is None:
        return "-"
    return f"{milliseconds:.0f} ms" if milliseconds < 1000 else f"{milliseconds / 1000:.1f} s"


def render_history(history: History, tz: tzinfo, *, as_json: bool, from_fleet: bool) -> str:
    """*history* as one JSON array of slots, or as a table for a person."""
    if as_json:
        return json_text([slot.to_dict() for slot in history.slots])
    rows = [("LAST RUN", "AGENT", "ROUTINE", "SLOT", "OUTCOME", "ATTEMPTS", "DURATION", "SPENT", "ERROR")]
    for slot in history.slots:
        deciding, error = slot.deciding, slot.error or ""
        rows.append(
            (
                f"{slot.runs[0].finished.astimezone(tz):%Y-%m-%d %H:%M:%S}",
                slot.agent,
                slot.routine,
                slot.slot or "?",
                deciding.outcome.value,
                str(len(slot.runs)),
                _duration(deciding.duration_ms),
                slot.spend.shown(),
                error if len(error) <= _ERROR_WIDTH else error[: _ERROR_WIDTH - 1] + "\u2026",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += ["", f"{len(history.slots)} slots; {input_line(history.digest.counts(), from_fleet=from_fleet)}"]
    return "\n".join(lines)


@click.command(short_help="List each slot's runs, newest first.")
@config_option
@click.option(
    "--log",
    "log_file",
    type=click.File("r", encoding="utf-8", errors="replace"),
    default=None,
    help="JSON log lines to read ('-' for stdin, the default when it is a pipe).",
)
@click.option("--agent", default=None, help="Only this agent's slots.")
@click.option("--routine", default=None, help="Only this routine's slots.")
@click.option("--since", "since_text", default=None, help="Only runs that finished at or after this time (ISO 8601).")
@output_option
@fleet_option
@click.pass_obj
def history(
    settings: Settings,
    config_path: Path | None,
    log_file: IO[str] | None,
    agent: str | None,
    routine: str | None,
    since_text: str | None,
    from_fleet: bool,
) -> None:
    """List each slot's runs from the runner's logs, newest first: outcome, attempts, duration and error.

    Reads the same input as status. A table on a terminal; one JSON array of
    slots when piped (or with --json). Each slot in JSON also lists its runs.

    Example: journalctl -u ghostrunner -o cat --since -2d | ghostrunner history --agent motoko --json
    """
    config = settings.config(config_path)
    since: datetime | None = parse_time(since_text, config, "--since") if since_text is not None else None
    from runner.monitor.history import build_history

    found = build_history(runs_input(config, log_file, from_fleet, "history"), agent=agent, routine=routine, since=since)
    echo(render_history(found, config.timezone, as_json=wants_json(), from_fleet=from_fleet))


#: The commands this module adds to ``ghostrunner``.
OPERATE_COMMANDS: Final = (pause, resume, history)
