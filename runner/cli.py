"""The ``ghostrunner`` command: parse arguments, call the runner, print JSON.

Commands: ``run`` (one slot, for timers and manual triggers), ``serve`` (the
scheduler), ``simulate`` (a virtual agent life), ``demo``, ``status`` (what the
logs say; its own exit codes, see the command), ``systemd render`` (units). Results go to stdout as
JSON; logs go to stderr, except under ``serve`` where they go to stdout for
journald. User errors are one line on stderr.

Exit codes: 0 ok; 1 a run failed (or another runner error); 2 usage
(unknown agent or routine, bad option); 73 the journal's filesystem is
read-only; 74 its disk is full (or another I/O error); 75 busy (another
scheduler holds the lock, or the journal's writer lock stayed busy);
77 permission denied on the journal; 78 configuration error; a journal
error, the code ``ghostjournal`` gives it (3 no journal, 4 conflict, ...).
An error's code is its class's ``exit_code`` (runner.errors, journal.errors);
a run the filesystem refused exits with its JournalStorageError's code.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from journal import JournalError, JournalStorageError
from runner.config import CONFIG_ENVVAR, DURATION_EXPECTED, RunnerConfig, load_config, parse_duration
from runner.errors import NoScheduledTimeError, RunnerError, UnitRenderError, quoted
from runner.logs import configure_logging

if TYPE_CHECKING:
    from runner.simulate import SimulationSummary

__all__ = ["cli", "main"]

_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)

#: The errnos by which the filesystem refuses (read-only, full, denied, failing): one line and their
#: JournalStorageError's exit code. Any other OSError of the runner's own files is a bug and keeps its traceback.
_REFUSALS: Final = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM})
_ERRNO_BY_NAME: Final = {name: code for code, name in errno.errorcode.items()}


def _fault_exit_code(fault: str) -> int:
    """The exit code of a run the filesystem refused with errno *fault* (``ENOSPC``): its JournalStorageError's."""
    return JournalStorageError.class_for(_ERRNO_BY_NAME.get(fault, 0)).exit_code


def _simulation_exit_code(summaries: Sequence[SimulationSummary]) -> int:
    """The exit code of a simulation: a refused journal's, else 1 when a run failed, else 0."""
    faults = [summary.fault for summary in summaries if summary.fault]
    return _fault_exit_code(faults[0]) if faults else 1 if any(summary.outcomes.get("failed") for summary in summaries) else 0


class _OneLineUsageError(click.UsageError):
    """A usage error (exit 2) shown as one line, ``ghostrunner: error: ...``, like every other user error.

    Click's own shows the usage, a hint and the message on several lines; every usage error
    of ghostrunner (a bad option value, an unknown command or option, a missing argument)
    passes through :class:`_Group`, which turns it into this one.
    """

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message(), error.ctx)

    def show(self, file: Any = None) -> None:
        click.echo(f"ghostrunner: error: {self.format_message()}", err=True)


def _one_line(error: click.UsageError) -> click.UsageError:
    """*error* as a one-line usage error; the help that a bare ``ghostrunner`` shows stays as it is."""
    if isinstance(error, _OneLineUsageError | click.exceptions.NoArgsIsHelpError):
        return error
    return _OneLineUsageError(error)


class _Group(click.Group):
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # the group's own options (ghostrunner --bogus)
            converted = _one_line(exc)
            if converted is exc:
                raise
            raise converted from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (RunnerError, JournalError) as exc:
            # The one place that reads an error's exit code: one line on stderr, then that code.
            click.echo(f"ghostrunner: error: {exc}", err=True)
            raise click.exceptions.Exit(exc.exit_code) from exc
        except click.UsageError as exc:  # the subcommands' options and their own usage errors
            converted = _one_line(exc)
            if converted is exc:
                raise
            raise converted from exc


class _Settings:
    def __init__(self, config_path: Path | None, log_level: str | None) -> None:
        self.config_path = config_path
        self.log_level = log_level

    def config(self, override: Path | None) -> RunnerConfig:
        path = override or self.config_path
        if path is None and CONFIG_ENVVAR in os.environ and not os.environ[CONFIG_ENVVAR].strip():
            # click reads an empty variable as unset: a script whose variable came out empty
            # would silently run the embedded defaults' agent into ./ghostjournal-data.
            raise click.UsageError(f"${CONFIG_ENVVAR} is set but empty; name a configuration file, or unset it to use the embedded defaults")
        return load_config(path)


def _config_option(function: Any) -> Any:
    return click.option(
        "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help=f"Configuration TOML (default: ${CONFIG_ENVVAR}, else the embedded defaults).",
    )(function)


class _TimeOptionError(click.BadParameter):
    """A bad time option: a usage error (exit 2), shown as one line by :class:`_Group` like every other."""


#: Times the runner accepts on its command line (UTC). The schedules find no fire time before
#: 1970 (APScheduler works in POSIX time); the margin below year 9999 leaves room for what a
#: run computes from a time: a routine's window (at most 100 years) or a simulation of up
#: to 100 years. Outside, datetime arithmetic would end in OverflowError.
_EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(9000, 1, 1, tzinfo=UTC)
#: Longest simulation or demo, in days (100 years; see _LATEST).
_MAX_DAYS: Final = 36525


def _parse_time(text: str, config: RunnerConfig, option: str) -> datetime:
    """*text* as an aware time; without an offset it is read in the configured timezone (a repeated time: its first occurrence).

    An empty or blank value is an error, never "now" or the default: a script whose variable came out empty must not run another slot.
    """
    try:
        moment = datetime.fromisoformat(text.strip()) if text.strip() else None
    except ValueError:
        moment = None
    if moment is None:
        raise _TimeOptionError(f"expected an ISO 8601 date or time such as 2026-09-05T16:00 or 2026-09-05T16:00+02:00, got {quoted(text)}",
                               param_hint=option)
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=config.timezone)
    try:
        in_range = _EARLIEST <= moment < _LATEST  # compares in UTC, which overflows near years 1 and 9999
    except OverflowError:
        in_range = False
    if not in_range:
        raise _TimeOptionError(f"expected a time from 1970-01-01 to 8999-12-31 (UTC), got {quoted(text)}", param_hint=option)
    return moment


def _is_date_only(text: str) -> bool:
    """Whether *text* names a day without a time (``2026-03-29``); ISO 8601 also separates a time by a space, not only by ``T``."""
    try:
        date.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def _duration(text: str, option: str) -> timedelta:
    """*text* as a duration (``90s``, ``1h30m``); anything else is a usage error naming *option*."""
    try:
        return parse_duration(text)
    except ValueError:
        raise click.BadParameter(f"expected {DURATION_EXPECTED}, got {quoted(text)}", param_hint=option) from None


def _raise_storage_failure(exc: OSError, path: Path, action: str) -> None:
    """Raise a one-line error for a file of the runner that the filesystem refused (full, read-only, no permission).

    Any other OSError is not the filesystem refusing but a bug, and keeps its traceback.
    """
    if exc.errno in _REFUSALS:
        named = exc.filename if isinstance(exc.filename, str) and os.path.isabs(exc.filename) else path
        raise JournalStorageError.for_errno(named, exc.errno, action) from exc


def _echo(text: str) -> None:
    """Print *text* to stdout; a stdout that cannot take it (a full disk) is one clear error, not a traceback."""
    try:
        click.echo(text)
    except OSError as exc:
        if exc.errno == errno.EPIPE or not exc.errno:
            raise  # click ends quietly when the reader of a pipe has gone
        # What is still buffered would fail again at exit, as a stray "Exception ignored" report.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise JournalStorageError.for_errno("<stdout>", exc.errno, "write the output to") from None


def _echo_json(data: Any) -> None:
    _echo(json.dumps(data, ensure_ascii=False))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", envvar=CONFIG_ENVVAR, type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=f"Configuration TOML (or ${CONFIG_ENVVAR}); without one, the embedded defaults (agent motoko, simulated).")
@click.option("--log-level", type=_LEVELS, default=None, help="Lowest log level written (default: info; warning for simulate).")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, log_level: str | None) -> None:
    """Run reflective routines for scheduled agents and keep their journals."""
    ctx.obj = _Settings(config_path, log_level)


@cli.command()
@click.argument("routine")
@click.option("--agent", required=True, help="The configured agent to run it for.")
@click.option("--at", "at_text", default=None, help="The time whose slot to run (ISO 8601; default now). It is snapped to the latest scheduled time at or before it.")
@click.option("--dry-run", is_flag=True, help="Build and validate the entry, print it, append nothing.")
@click.option("--run-id", default=None, hidden=True)
@_config_option
@click.pass_obj
def run(settings: _Settings, routine: str, agent: str, at_text: str | None, dry_run: bool, run_id: str | None, config_path: Path | None) -> None:
    """Run ROUTINE once for one agent and print the outcome as JSON.

    Safe to repeat: a slot that already has its entry reports "duplicate".

    Example: ghostrunner run evening --agent motoko --at 2026-09-05T21:00
    """
    configure_logging(stream=sys.stderr, level=settings.log_level or "info")
    # SIGTERM unwinds the run (killing a command backend's process group on the way) instead of
    # vanishing mid-call; the journal guarantees a complete entry or none either way.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    from runner.engine import run_at

    config = settings.config(config_path)
    at = _parse_time(at_text, config, "--at") if at_text is not None else None
    try:
        # The result is printed (what serve reads) the moment its run.finished is logged, before a
        # signal can end the process; a RunInterrupted has been printed already and just exits.
        result = run_at(config, agent, routine, at=at, dry_run=dry_run, run_id=run_id, on_result=lambda finished: _echo_json(finished.to_dict()))
    except NoScheduledTimeError as exc:
        raise _TimeOptionError(str(exc), param_hint="--at") from None
    sys.exit(0 if result.is_ok else _fault_exit_code(result.fault) if result.fault else 1)


@cli.command()
@_config_option
@click.pass_obj
def serve(settings: _Settings, config_path: Path | None) -> None:
    """Run the scheduler until SIGTERM or SIGINT; logs JSON lines to stdout.

    Each run executes as a `ghostrunner run` worker process. On start the most
    recent missed slot of each agent and routine (within catchup_grace) runs once.
    Under a Type=notify systemd unit it reports READY=1, STOPPING=1 and
    watchdog pings at half of WatchdogSec=.

    Example: ghostrunner serve --config /etc/ghostrunner/ghostrunner.toml
    """
    configure_logging(stream=sys.stdout, level=settings.log_level or "info")
    from runner.notify import Notifier
    from runner.scheduler import Scheduler

    config = settings.config(config_path)
    notifier = Notifier.from_environ()
    interval = notifier.watchdog_seconds / 2 if notifier.watchdog_seconds else None
    try:
        code = Scheduler(config, log_stream=sys.stdout, notify=notifier.notify, watchdog_interval=interval).serve()
    except OSError as exc:
        _raise_storage_failure(exc, config.lock_file, "serve with the lock file")
        raise
    sys.exit(code)


@cli.command()
@click.option("--agent", "agents", multiple=True, help="Agent to simulate (repeatable; default: every configured agent).")
@click.option("--days", type=click.IntRange(min=1, max=_MAX_DAYS), required=True, help="How many days of virtual time.")
@click.option("--start", "start_text", default=None, help="First day (YYYY-MM-DD, in the configured timezone); default: DAYS days before today.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Worker processes for several agents (default: config or CPU count).")
@_config_option
@click.pass_obj
def simulate(settings: _Settings, agents: tuple[str, ...], days: int, start_text: str | None, workers: int | None, config_path: Path | None) -> None:
    """Live DAYS days of the agents' routines on a virtual clock, as fast as possible; print a summary.

    Every slot runs in time order through the same code as `run`; re-running
    the same simulation appends nothing new.

    Example: ghostrunner simulate --agent motoko --days 28 --start 2026-08-01
    """
    configure_logging(stream=sys.stderr, level=settings.log_level or "warning")
    from runner.simulate import simulate as simulate_agents
    from runner.simulate import simulation_window

    config = settings.config(config_path)
    first: date | datetime | None = None
    if start_text is not None:
        first = _parse_time(start_text, config, "--start")
        first = first.date() if _is_date_only(start_text) else first
    start, end = simulation_window(days, config.timezone, first)
    summaries = simulate_agents(config, list(agents) or sorted(config.agents), start, end, workers=workers)
    totals: Counter[str] = Counter()
    for summary in summaries:
        totals.update(summary.outcomes)
    _echo_json({
        "start": start.isoformat(), "end": end.isoformat(), "runs": sum(totals.values()), "outcomes": dict(sorted(totals.items())),
        "agents": [summary.to_dict() for summary in summaries],
    })
    sys.exit(_simulation_exit_code(summaries))


@cli.group()
def systemd() -> None:
    """systemd units for this configuration: the serve service, or timers."""


@systemd.command()
@_config_option
# A str, checked before it becomes a Path: Path("") is ".", so an empty --out wrote the units into the working directory.
@click.option("--out", "out_text", required=True, help="Directory to write the units into.")
@click.option("--exec", "exec_text", default=None,
              help="How units start ghostrunner (absolute path, shell-like words). Default: the ghostrunner script beside this Python.")
@click.option("--installed-config", default=None, help="The --config path the units use (default: the configuration file's absolute path).")
@click.option("--user", default="ghostrunner", show_default=True, help="The system user the units run as.")
@click.option("--randomized-delay", "delay_text", default="60s", show_default=True, help="The timers' RandomizedDelaySec (capped per routine).")
@click.pass_obj
def render(settings: _Settings, config_path: Path | None, out_text: str, exec_text: str | None, installed_config: str | None, user: str,
           delay_text: str) -> None:
    """Write ghostrunner.service, a timer and oneshot template per routine, and ghostrunner-timers.target into OUT.

    Cron schedules become OnCalendar= in the configured timezone; a schedule
    that cannot be expressed is refused. Values that cannot go into a unit
    safely (control characters, relative paths, a user name systemd would
    ignore) are refused: exit 78 for a configuration key, 2 for an option.
    Files in OUT that are symbolic links or were not written by render are
    never replaced. Warnings (paths the sandbox hides, such as /home or /tmp)
    go to stderr, one line each; the units are still written.

    Example: ghostrunner systemd render --config /etc/ghostrunner/ghostrunner.toml --out /etc/systemd/system
    """
    from runner.units import default_exec_argv, render_units, write_units

    # An empty value (a script's variable that came out empty) is an error, never the default or the working directory.
    for option, text in (("--out", out_text), ("--exec", exec_text), ("--installed-config", installed_config)):
        if text is not None and not text.strip():
            raise click.BadParameter(f"expected a non-empty value, got {quoted(text)}", param_hint=option)
    out = Path(out_text)
    config = settings.config(config_path)
    if config.config_file is None:
        raise click.UsageError("systemd units need a configuration file the service can read; pass --config FILE")
    delay = _duration(delay_text, "--randomized-delay")
    try:
        argv = shlex.split(exec_text) if exec_text else default_exec_argv()
    except ValueError as exc:
        raise UnitRenderError("--exec", f"{quoted(exec_text)} is not a command line ({exc}); quote words as a shell would") from None
    rendering = render_units(config, exec_argv=argv, config_path=installed_config or str(config.config_file), user=user,
                             randomized_delay=delay)
    try:
        written = write_units(rendering, out)
    except OSError as exc:
        _raise_storage_failure(exc, out, "write the units into")
        raise
    for path in written:
        click.echo(f"wrote {path}")
    for warning in rendering.warnings:
        click.echo(f"ghostrunner: warning: {warning}", err=True)
    click.echo("\nserve:  systemctl enable --now ghostrunner.service")
    click.echo("timers: systemctl enable --now ghostrunner-timers.target   # " + " ".join(rendering.timers))


def _render_status(report: Any, tz: Any) -> str:
    def when(record: Any) -> str:
        if record is None:
            return "-"
        return f"{record.slot or '?'} ({record.outcome}, {record.finished.astimezone(tz):%Y-%m-%d %H:%M})"

    rows = [("AGENT", "ROUTINE", "STATE", "DUE SLOT", "LAST SUCCESS", "LAST FAILURE")]
    rows += [(p.agent, p.routine, p.state.upper() if p.state != "ok" else "ok", p.due_slot or "-", when(p.last_success), when(p.last_failure))
             for p in report.pairs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    errors = [f"  {p.agent} {p.routine}: {p.problem}" for p in report.pairs if p.problem]
    errors += [f"  {p.agent} {p.routine}: {p.last_failure.error}" for p in report.pairs if p.last_failure is not None and p.last_failure.error]
    if errors:
        lines += ["", "last errors:", *errors]
    counts = report.input
    lines += ["", f"input: {counts['lines']} lines, {counts['events']} runner events ({counts['runs']} runs), "
                  f"{counts['malformed']} malformed, {counts['foreign']} foreign"
              + (f"; from {counts['first']} to {counts['last']}" if counts["first"] else "")]
    if report.unconfigured:
        lines.append("runs of pairs not in the configuration: " + ", ".join(report.unconfigured))
    verdict = {0: "all well", 1: "something failed", 3: "something is overdue", 4: "no runner events in the input",
               5: "unknown: the log does not reach back to a due slot (feed more log)"}[report.exit_code]
    lines.append(f"status: {verdict} (exit {report.exit_code})")
    return "\n".join(lines)


@cli.command()
@_config_option
@click.option("--log", "log_file", type=click.File("r", encoding="utf-8", errors="replace"), default=None,
              help="JSON log lines to read ('-' for stdin, the default when it is a pipe).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the table.")
@click.option("--now", "now_text", default=None, help="Judge as of this time (ISO 8601; default now).")
@click.option("--grace", "grace_text", default=None, help="How late a success may be before its slot is overdue (default: misfire_grace + run_timeout + 5m).")
@click.pass_obj
def status(settings: _Settings, config_path: Path | None, log_file: Any, as_json: bool, now_text: str | None, grace_text: str | None) -> None:
    """Report each agent and routine's last success, last failure and whether it is overdue, from the runner's logs.

    Exit codes: 0 all well; 1 a routine's latest run failed, or serve found its agent's journal
    unusable (wins over overdue); 3 a routine's latest due slot has no success after the grace period;
    4 no runner events in the input; 5 unknown: the log starts after a due slot (feed more log).
    Malformed, oversized, too deeply nested and foreign lines are counted, never fatal.

    Example: journalctl -u ghostrunner -o cat --since -8d | ghostrunner status --config /etc/ghostrunner/ghostrunner.toml
    """
    from runner.status import build_report, read_log

    config = settings.config(config_path)
    if log_file is None:
        if sys.stdin.isatty():
            raise click.UsageError("no log to read: pipe it in (journalctl -u ghostrunner -o cat | ghostrunner status) or pass --log FILE")
        log_file = click.get_text_stream("stdin", errors="replace")
    now = _parse_time(now_text, config, "--now") if now_text is not None else datetime.now(config.timezone)
    grace = _duration(grace_text, "--grace") if grace_text is not None else None
    report = build_report(config, read_log(log_file), now, grace)
    _echo(json.dumps(report.to_dict(), ensure_ascii=False) if as_json else _render_status(report, config.timezone))
    sys.exit(report.exit_code)


def _render_demo(report: Any) -> str:
    week = report.last_week
    lines = [
        f"motoko's journal: {report.journal_root}",
        (f"simulated {report.simulation.runs} runs ({', '.join(f'{n} {o}' for o, n in report.simulation.outcomes.items())})"
         f" in {report.simulation.seconds:.1f} s; the journal holds {report.entries} entries"),
        "",
        f"digest of the last week ({week['count']} entries):",
        "  themes:  " + ", ".join(f"{t['theme']} ({t['count']})" for t in week["themes"][:5]),
        "  moods:   " + ", ".join(f"{m['mood']} ({m['count']})" for m in week["moods"][:5]),
        f"  novelty: mean {week['novelty']['mean']}, trend {week['novelty']['trend']}",
        (f"  continuity: {week['continuity']['links']} links; longest chain "
         f"{max((len(c) for c in week['continuity']['longest_chains']), default=0)} entries"),
        "",
        f"prompt context for {report.question!r}:",
        report.context,
        "",
        "Explore it: ghostjournal --root " + report.journal_root + " search 'harbour' --agent motoko",
    ]
    return "\n".join(lines)


@cli.command()
@click.option("--agent", default="motoko", show_default=True, help="The configured agent to simulate.")
@click.option("--days", type=click.IntRange(min=7, max=_MAX_DAYS), default=28, show_default=True, help="How many days of virtual time.")
@click.option("--start", "start_text", default="2026-08-03", show_default=True, help="First day (YYYY-MM-DD).")
@_config_option
@click.pass_obj
def demo(settings: _Settings, agent: str, days: int, start_text: str, config_path: Path | None) -> None:
    """Let an agent live some weeks in seconds, then show its digest and prompt context.

    Uses the embedded defaults unless a configuration is given; no network, no model.

    Example: ghostrunner demo --days 28
    """
    configure_logging(stream=sys.stderr, level=settings.log_level or "warning")
    from runner.demo import run_demo
    from runner.simulate import simulation_window

    config = settings.config(config_path)
    config.agent(agent)
    start, _ = simulation_window(days, config.timezone, _parse_time(start_text, config, "--start").astimezone(config.timezone).date())
    report = run_demo(config, agent, start, days)
    _echo(_render_demo(report))
    sys.exit(_simulation_exit_code([report.simulation]))


def main() -> None:
    """Entry point of the ``ghostrunner`` console script."""
    cli()
