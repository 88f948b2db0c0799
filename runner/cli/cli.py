"""The ``ghostrunner`` command: parse arguments, call the runner, print JSON.

Commands: ``run`` (one slot, for timers and manual triggers), ``serve`` (the
scheduler), ``simulate`` (a virtual agent life), ``demo``, ``status`` (what the
logs say; its own exit codes, see the command), ``systemd render`` (units),
and ``pause``, ``resume``, ``history`` (:mod:`runner.cli.operate`). Results go to stdout as
JSON when it is not a terminal (or with --json), as text on a terminal; logs go to stderr, except under
``serve`` where they go to stdout for journald. User errors are one line on stderr.

Exit codes: 0 ok; 1 a run failed (or another runner error); 2 usage
(unknown agent or routine, bad option, a refused output path: journal.errors.OutputPathError); 73 the journal's filesystem is
read-only; 74 its disk is full (or another I/O error); 75 busy (another
scheduler holds the lock, the journal's writer lock stayed busy, or a run
ended ``busy``: another run of its slot held the slot lock);
77 permission denied on the journal; 78 configuration error, or a run
the backend refused for good (HTTP 401/403/404 or another 4xx); a journal
error, the code ``ghostjournal`` gives it (3 no journal, 4 conflict, ...).
143 stopped by SIGTERM, unwound first (see journal.frame.clikit; serve stops on it with 0).
An error's code is its class's ``exit_code`` (runner.errors, journal.errors);
a run the filesystem refused exits with its JournalStorageError's code.
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click
import structlog

from journal.frame import table_or_records, write_output
from journal.frame.clikit import (
    NamedPath,
    echo,
    force_option,
    json_text,
    once_each,
    out_option,
    output_option,
    terminal_width,
    version_option,
    wants_json,
)
from runner import CONFIG_ENVVAR, NoScheduledTimeError, UnitRenderError, configure_logging, run_at
from runner.cli.backup import backup
from runner.cli.fleet import fleet, fleet_option, ledger_of, runs_input
from runner.cli.k8s import K8S_COMMANDS
from runner.cli.operate import EXIT_BUSY, OPERATE_COMMANDS
from runner.cli.support import (
    LOG_LEVELS,
    MAX_DAYS,
    OneLineGroup,
    Settings,
    TimeOptionError,
    config_option,
    echo_json,
    fault_exit_code,
    is_date_only,
    parse_duration_option,
    parse_time,
    raise_storage_failure,
    screen_width,
    simulation_exit_code,
    write_rendered,
)
from runner.cli.views import TerminalProgress, input_line, reach_back_hint, show_run, show_simulation
from runner.errors import ConfigError, quoted
from runner.run import settle_fallbacks
from runner.run.contract import Outcome
from runner.run.demo import DEMO_DAYS, DEMO_START
from runner.run.pauses import paused_or_unknown
from runner.run.provenance import allow_mixing, describe_calls
from runner.settings import RunnerConfig

if TYPE_CHECKING:
    from runner.monitor.status import StatusReport

# What only serve, simulate, demo, status, report and systemd render use is imported in those commands: a
# `ghostrunner run` process (a timer's, a CronJob's, each of serve's runs) loads only what a run needs.

__all__ = ["cli", "main"]


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    envvar=CONFIG_ENVVAR,
    type=NamedPath("a configuration file", dir_okay=False, path_type=Path),
    default=None,
    help=f"Configuration TOML (or ${CONFIG_ENVVAR}); without one, the embedded defaults (agent motoko, simulated).",
)
@click.option(
    "--log-level",
    type=LOG_LEVELS,
    default=None,
    help="Lowest log level written (default: info; warning for simulate, and for run on a terminal).",
)
@version_option("ghostrunner")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, log_level: str | None) -> None:
    """Run reflective routines for scheduled agents and keep their journals.

    Results are text on a terminal and JSON when piped (or with --json). --config and --log-level may
    also follow the command.
    """
    ctx.obj = Settings(config_path, log_level)


@cli.command(short_help="Run one routine once for one agent.")
@click.argument("routine")
@click.option("--agent", required=True, help="The configured agent to run it for.")
@click.option(
    "--at",
    "at_text",
    default=None,
    help="The time whose slot to run (a date, a time in runner.timezone, an ISO 8601 time with an offset, or -12h; default now). "
    "It is snapped to the latest scheduled time at or before it.",
)
@click.option("--dry-run", is_flag=True, help="Build and validate the entry, print it, append nothing.")
@click.option("--mix-simulated", is_flag=True, help="Write into a journal holding the other sort of entries (simulated or real) anyway.")
@click.option("--run-id", default=None, hidden=True)
@click.option("--config-on-stdin", "config_on_stdin", is_flag=True, hidden=True)  # serve's workers: the text of --config as serve holds it
@config_option
@output_option
@click.pass_obj
def run(
    settings: Settings,
    routine: str,
    agent: str,
    at_text: str | None,
    dry_run: bool,
    mix_simulated: bool,
    run_id: str | None,
    config_on_stdin: bool,
    config_path: Path | None,
) -> None:
    """Run ROUTINE once for one agent and print the outcome (JSON when piped).

    Safe to repeat: a slot that already has its entry reports "duplicate".

    Example: ghostrunner run evening --agent motoko --at 2026-09-05T21:00
    """
    # On a terminal the result says what the run's info lines would (they are for logs: serve's workers and timers log them all).
    configure_logging(stream=sys.stderr, level=settings.log_level or ("warning" if sys.stderr.isatty() else "info"))
    # SIGTERM unwinds the run (journal.frame.clikit.CommandGroup), killing a command backend's process group
    # on the way, instead of vanishing mid-call; the journal guarantees a complete entry or none either way.
    config = settings.config(config_path, text=sys.stdin.read() if config_on_stdin else None)
    config = allow_mixing(config) if mix_simulated else config
    at = parse_time(at_text, config, "--at") if at_text is not None else None
    as_json = wants_json()
    try:
        # The result is printed (what serve reads) the moment its run.finished is logged, before a
        # signal can end the process; a RunInterrupted has been printed already and just exits.
        result = run_at(
            config,
            agent,
            routine,
            at=at,
            dry_run=dry_run,
            run_id=run_id,
            on_result=lambda finished: echo(finished.to_json_line() if as_json else show_run(finished.to_dict(), terminal_width())),
            ledger=ledger_of(config),
        )
    except NoScheduledTimeError as exc:
        raise TimeOptionError(str(exc), param_hint="--at") from None
    # 78 (EX_CONFIG): the backend refused for good (a key, a model, a URL to fix); systemd restarts a timer run on 1, never on 78.
    sys.exit(
        EXIT_BUSY
        if result.outcome is Outcome.BUSY
        else 0
        if result.is_ok
        else fault_exit_code(result.fault)
        if result.fault
        else 78
        if result.permanent
        else 1
    )


@cli.command(short_help="Run the scheduler until SIGTERM or SIGINT.")
@config_option
@click.pass_obj
def serve(settings: Settings, config_path: Path | None) -> None:
    """Run the scheduler until SIGTERM or SIGINT; logs JSON lines to stdout. SIGHUP rereads the configuration.

    Each run executes as a `ghostrunner run` worker process, at most max_concurrent_runs
    at once. On start the most recent missed slot of each agent and routine (within
    catchup_grace; up to catchup_max) runs, and older missed slots are logged as missed.
    Under a Type=notify systemd unit it reports READY=1, STOPPING=1 and
    watchdog pings at half of WatchdogSec=.

    Example: ghostrunner serve --config /etc/ghostrunner/ghostrunner.toml
    """
    configure_logging(stream=sys.stdout, level=settings.log_level or "info")
    config = settings.config(config_path)
    if config.fleet is not None:
        raise ConfigError(
            config.source,
            "fleet",
            "no [fleet] table for serve (the fleet's beat schedules these agents, and both would run "
            "every slot): run ghostrunner fleet beat and fleet worker, or remove [fleet]",
            "a [fleet] table",
        )
    from runner.schedule.notify import Notifier
    from runner.schedule.scheduler import Scheduler

    notifier = Notifier.from_environ()
    interval = notifier.watchdog_seconds / 2 if notifier.watchdog_seconds else None
    try:
        code = Scheduler(config, log_stream=sys.stdout, notify=notifier.notify, watchdog_interval=interval).serve()
    except OSError as exc:
        raise_storage_failure(exc, config.lock_file, "serve with the lock file")
        raise
    sys.exit(code)


def _simulation_options(function: Any) -> Any:
    """``--real-backends`` and ``--mix-simulated``, shared by simulate and demo."""
    function = click.option(
        "--mix-simulated",
        is_flag=True,
        help="Write into a journal that holds real entries (or, for a real backend, simulated ones) anyway.",
    )(function)
    return click.option(
        "--real-backends", is_flag=True, help="Simulate agents on openai or command backends too: one backend call per slot."
    )(function)


@cli.command(name="simulate", short_help="Live DAYS days of routines on a virtual clock.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="AGENT",
    callback=once_each,
    help="Agent to simulate (repeatable, each once; default: every configured agent).",
)
@click.option("--days", type=click.IntRange(min=1, max=MAX_DAYS), required=True, help="How many days of virtual time.")
@click.option(
    "--start", "start_text", default=None, help="First day (YYYY-MM-DD, in the configured timezone); default: DAYS days before today."
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Worker processes for several agents (default: config or CPU count)."
)
@_simulation_options
@config_option
@output_option
@click.pass_obj
def simulate_command(
    settings: Settings,
    agents: tuple[str, ...],
    days: int,
    start_text: str | None,
    workers: int | None,
    real_backends: bool,
    mix_simulated: bool,
    config_path: Path | None,
) -> None:
    """Live DAYS days of the agents' routines on a virtual clock, as fast as possible; print a summary.

    Every slot runs in time order through the same code as `run`; re-running
    the same simulation appends nothing new. Agents on a real backend need
    --real-backends (it says how many calls it makes); progress is drawn on
    stderr when it is a terminal.

    Example: ghostrunner simulate --agent motoko --days 28 --start 2026-08-01
    """
    configure_logging(stream=sys.stderr, level=settings.log_level or "warning")
    config = settings.config(config_path)
    config = allow_mixing(config) if mix_simulated else config
    first: date | datetime | None = None
    if start_text is not None:
        first = parse_time(start_text, config, "--start")
        first = first.date() if is_date_only(start_text) else first
    from runner.run.simulate import check_backends, simulate, simulation_window

    start, end = simulation_window(days, config.timezone, first)
    names = list(agents) or sorted(config.agents)
    _announce_backend_calls(check_backends(config, names, start, end, real_backends=real_backends), config, "simulate")
    config = _settle_memory(config, names, "simulate")
    progress = TerminalProgress(sys.stderr)
    try:
        summaries = simulate(config, names, start, end, workers=workers, real_backends=real_backends, on_progress=progress)
    finally:
        progress.close()
    totals: Counter[str] = Counter()
    for summary in summaries:
        totals.update(summary.outcomes)
    document = {
        "start": start.isoformat(),
        "end": end.isoformat(),
        "runs": sum(totals.values()),
        "outcomes": dict(sorted(totals.items())),
        "agents": [summary.to_dict() for summary in summaries],
    }
    if wants_json():
        echo_json(document)
    else:
        echo(show_simulation(document, terminal_width()))
    sys.exit(simulation_exit_code(summaries))


@cli.group(short_help="systemd units for this configuration.")
def systemd() -> None:
    """systemd units for this configuration: the serve service, or timers."""


@systemd.command(short_help="Write the systemd units into OUT.")
@config_option
# A str, checked before it becomes a Path: Path("") is ".", so an empty --out wrote the units into the working directory.
@click.option("--out", "out_text", required=True, help="Directory to write the units into.")
@click.option(
    "--exec",
    "exec_text",
    default=None,
    help="How units start ghostrunner (absolute path, shell-like words). Default: the ghostrunner script beside this Python.",
)
@click.option("--installed-config", default=None, help="The --config path the units use (default: the configuration file's absolute path).")
@click.option("--user", default="ghostrunner", show_default=True, help="The system user the units run as.")
@click.option(
    "--randomized-delay", "delay_text", default="60s", show_default=True, help="The timers' RandomizedDelaySec (capped per routine)."
)
@click.option("--strict", is_flag=True, help="Write nothing and exit 78 if render has any warning.")
@click.pass_obj
def render(
    settings: Settings,
    config_path: Path | None,
    out_text: str,
    exec_text: str | None,
    installed_config: str | None,
    user: str,
    delay_text: str,
    strict: bool,
) -> None:
    """Write ghostrunner.service, a timer and oneshot template per routine, ghostrunner-timers.target and, with a [backup] table, ghostrunner-backup.service and .timer into OUT.

    With a [fleet] table, write the fleet's units instead: ghostrunner-fleet-beat.service
    and ghostrunner-fleet-worker@.service (an instance per shard), never serve's or the
    timers' (beside the fleet they would run every slot again); an OUT holding those is refused,
    and so is one holding a fleet's units when rendering serve's and the timers.

    Cron schedules become OnCalendar= in the configured timezone; a schedule
    that cannot be expressed is refused. Values that cannot go into a unit
    safely (control characters, relative paths, a user name systemd would
    ignore) are refused: exit 78 for a configuration key, 2 for an option.
    Files in OUT that are symbolic links or were not written by render are
    never replaced. Warnings (paths the sandbox hides, such as /home or /tmp,
    on the way to the program too: its links, its #! interpreter, a venv's
    base Python) go to stderr, one line each; the units are still written,
    unless --strict, which then writes none and exits 78.

    Example: ghostrunner systemd render --config /etc/ghostrunner/ghostrunner.toml --out /etc/systemd/system
    """
    from runner.deploy.systemd.units import default_exec_argv, render_units, write_units

    # An empty value (a script's variable that came out empty) is an error, never the default or the working directory.
    for option, text in (("--out", out_text), ("--exec", exec_text), ("--installed-config", installed_config)):
        if text is not None and not text.strip():
            raise click.BadParameter(f"expected a non-empty value, got {quoted(text)}", param_hint=option)
    out = Path(out_text)
    config = settings.config(config_path)
    if config.config_file is None:
        raise click.UsageError("systemd units need a configuration file the service can read; pass --config FILE")
    delay = parse_duration_option(delay_text, "--randomized-delay")
    try:
        argv = shlex.split(exec_text) if exec_text else default_exec_argv()
    except ValueError as exc:
        raise UnitRenderError("--exec", f"{quoted(exec_text)} is not a command line ({exc}); quote words as a shell would") from None
    rendering = render_units(
        config, exec_argv=argv, config_path=installed_config or str(config.config_file), user=user, randomized_delay=delay
    )
    write_rendered(rendering, out, write_units, noun="unit", strict=strict, journals=config.journals())
    if rendering.fleet_services:
        beat, *workers = rendering.fleet_services
        echo(f"\nbeat:   systemctl enable --now {beat}   # on one host or two")
        echo("worker: systemctl enable --now ghostrunner-fleet-worker@SHARD.service   # on each shard's host: " + " ".join(workers))
    else:
        echo("\nserve:  systemctl enable --now ghostrunner.service")
        echo("timers: systemctl enable --now ghostrunner-timers.target   # " + " ".join(rendering.timers))
    if config.backup is not None:
        echo(f"backup: systemctl enable --now ghostrunner-backup.timer   # into {config.backup.dir}, with either of them")


def _render_status(report: StatusReport, tz: Any, *, from_fleet: bool, width: int | None = None) -> str:
    """The pairs as a table, or as one record a pair where the table is wider than *width* (a terminal's), then their errors,
    missed slots, what was read and the verdict."""

    def when(record: Any) -> str:
        if record is None:
            return "-"
        return f"{record.slot or '?'} ({record.outcome}, {record.finished.astimezone(tz):%Y-%m-%d %H:%M})"

    def spent(pair: Any, window: str) -> str:
        return pair.spend[window].shown() if window in pair.spend else "-"

    headers = ["agent", "routine", "state", "due slot", "last success", "last failure", "last run", "today", "7 days", "lateness"]
    rows = [
        (
            p.agent,
            p.routine,
            p.state.upper() if p.state != "ok" else "ok",
            p.due_slot or "-",
            when(p.last_success),
            when(p.last_failure),
            spent(p, "last_run"),
            spent(p, "today"),
            spent(p, "last_7_days"),
            p.lateness.shown(),
        )
        for p in report.pairs
    ]
    lines = [table_or_records(headers, rows, width=width, keys=4)]
    errors = [f"  {p.agent} {p.routine}: {p.problem}" for p in report.pairs if p.problem]
    errors += [
        f"  {p.agent} {p.routine}: {p.last_failure.error}" for p in report.pairs if p.last_failure is not None and p.last_failure.error
    ]
    if errors:
        lines += ["", "last errors:", *errors]
    missed = [f"  {p.agent} {p.routine}: " + ", ".join(f"{m.slot} ({m.reason or '?'})" for m in p.missed) for p in report.pairs if p.missed]
    if missed:
        lines += ["", "missed slots (recorded missed, not run; newest first):", *missed]
    lines += ["", input_line(report.input, from_fleet=from_fleet)]
    if report.unconfigured:
        lines.append("runs of pairs not in the configuration: " + ", ".join(report.unconfigured))
    from runner.monitor.status import EXIT_UNKNOWN

    hint = f" ({reach_back_hint(from_fleet=from_fleet)})" if report.exit_code == EXIT_UNKNOWN else ""
    lines.append(f"status: {report.verdict}{hint} (exit {report.exit_code})")
    return "\n".join(lines)


@cli.command(short_help="Each routine's last success, failure and lateness.")
@config_option
@click.option(
    "--log",
    "log_file",
    type=click.File("r", encoding="utf-8", errors="replace"),
    default=None,
    help="JSON log lines to read ('-' for stdin, the default when it is a pipe).",
)
@output_option
@click.option(
    "--now",
    "now_text",
    default=None,
    help="Judge as of this time (a date, a time in runner.timezone, an ISO 8601 time, or -1h; default now).",
)
@click.option(
    "--grace",
    "grace_text",
    default=None,
    help="How late a success may be before its slot is overdue (default: misfire_grace + run_timeout + 5m).",
)
@fleet_option
@click.pass_obj
def status(
    settings: Settings, config_path: Path | None, log_file: IO[str] | None, now_text: str | None, grace_text: str | None, from_fleet: bool
) -> None:
    """Report each agent and routine's last success, last failure and whether it is overdue, from the runner's logs.

    A table on a terminal (or with --text), one JSON document when piped (or with --json).

    Exit codes: 0 all well; 1 a routine's latest run failed, or serve found its agent's journal
    unusable (wins over overdue); 3 a routine's latest due slot has no success after the grace period;
    6 a due slot was recorded missed by serve (downtime, catchup_max, a late fire), nothing failed or is overdue;
    4 no runner events in the input; 5 unknown: what was read starts after a due slot.
    Malformed, oversized, too deeply nested and foreign lines are counted, never fatal.

    Example: journalctl -u ghostrunner -o cat --since -8d | ghostrunner status --config /etc/ghostrunner/ghostrunner.toml
    """
    from runner.monitor.status import build_report, read_log

    config = settings.config(config_path)
    lines = runs_input(config, log_file, from_fleet, "status")
    now = parse_time(now_text, config, "--now") if now_text is not None else datetime.now(config.timezone)
    grace = parse_duration_option(grace_text, "--grace") if grace_text is not None else None
    report = build_report(config, read_log(lines), now, grace, paused_or_unknown(config))
    echo(
        json_text(report.to_dict())
        if wants_json()
        else _render_status(report, config.timezone, from_fleet=from_fleet, width=screen_width())
    )
    sys.exit(report.exit_code)


@cli.command(name="report", short_help="Write the runs in the logs as an HTML page.")
@config_option
@click.option(
    "--log",
    "log_file",
    type=click.File("r", encoding="utf-8", errors="replace"),
    default=None,
    help="JSON log lines to read ('-' for stdin, the default when it is a pipe): what status and history read.",
)
@click.option(
    "--since",
    "since_text",
    default=None,
    help="Only runs that finished at or after this time (a date, a time in runner.timezone, an ISO 8601 time, or -7d).",
)
@click.option("--now", "now_text", default=None, help="Judge as of this time, as status does (default now).")
@click.option(
    "--grace", "grace_text", default=None, help="How late a success may be before its slot is late or overdue (status's default)."
)
@out_option("the report")
@force_option("runs report")
@fleet_option
@click.pass_obj
def report_command(
    settings: Settings,
    config_path: Path | None,
    log_file: IO[str] | None,
    since_text: str | None,
    now_text: str | None,
    grace_text: str | None,
    out: str,
    force: bool,
    from_fleet: bool,
) -> None:
    """Write the runs in the runner's logs as one self-contained HTML page: agent x routine by slot, each slot's runs.

    Reads the same input as status and history. The page's overall state and the exit code are
    status's (0 all well, 1 failed, 3 overdue, 6 missed, 4 no runner events, 5 unknown); a refused --out exits 2
    (inside a journal, a link, or a file no runs report wrote, without --force).

    Example: journalctl -u ghostrunner -o cat --since -8d | ghostrunner report --since -7d --out runs.html
    """
    from runner.monitor.report import RUNS_REPORT, build_run_report

    config = settings.config(config_path)
    since = parse_time(since_text, config, "--since") if since_text is not None else None
    now = parse_time(now_text, config, "--now") if now_text is not None else datetime.now(config.timezone)
    grace = parse_duration_option(grace_text, "--grace") if grace_text is not None else None
    lines = runs_input(config, log_file, from_fleet, "report --out runs.html")
    built = build_run_report(config, lines, now=now, since=since, grace=grace, paused=paused_or_unknown(config))
    written = write_output(out, built.html, kind=RUNS_REPORT, journals=config.journals(), force=force)
    if written is not None:
        click.echo(
            f"wrote {written} ({sum(built.states.values())} slots, {len(built.html)} bytes); status: {built.status.verdict}", err=True
        )
    sys.exit(built.status.exit_code)


@cli.command(short_help="Let an agent live some weeks in seconds.")
@click.option("--agent", default="motoko", show_default=True, help="The configured agent to simulate.")
@click.option(
    "--days", type=click.IntRange(min=7, max=MAX_DAYS), default=DEMO_DAYS, show_default=True, help="How many days of virtual time."
)
@click.option("--start", "start_text", default=DEMO_START.isoformat(), show_default=True, help="First day (YYYY-MM-DD).")
@_simulation_options
@config_option
@click.pass_obj
def demo(
    settings: Settings, agent: str, days: int, start_text: str, real_backends: bool, mix_simulated: bool, config_path: Path | None
) -> None:
    """Let an agent live some weeks in seconds, then show where it wrote, its digest and prompt context.

    Uses the embedded defaults unless a configuration is given; no network, no model
    (an agent on a real backend needs --real-backends).

    Example: ghostrunner demo --days 28
    """
    from runner.run.demo import run_demo
    from runner.run.simulate import check_backends, simulation_window

    configure_logging(stream=sys.stderr, level=settings.log_level or "warning")
    config = settings.config(config_path)
    config = allow_mixing(config) if mix_simulated else config
    config.agent(agent)
    start, _ = simulation_window(days, config.timezone, parse_time(start_text, config, "--start").astimezone(config.timezone).date())
    end = start + timedelta(days=days)
    _announce_backend_calls(check_backends(config, [agent], start, end, real_backends=real_backends, command="demo"), config, "demo")
    config = _settle_memory(config, [agent], "demo")
    progress = TerminalProgress(sys.stderr, label="demo")
    try:
        report = run_demo(config, agent, start, days, real_backends=real_backends, on_progress=progress)
    finally:
        progress.close()
    echo(report.render())
    sys.exit(simulation_exit_code([report.simulation]))


def _settle_memory(config: RunnerConfig, agents: list[str], command: str) -> RunnerConfig:
    """*config* with the agents whose hybrid memory falls back here made lexical, said in one line before any progress is drawn."""
    config, fallback = settle_fallbacks(config, agents)
    if fallback is not None:
        if sys.stderr.isatty():
            click.echo(fallback.note(command), err=True)
        for agent in fallback.agents:  # where stderr is a log: its own lines, never plain text status counts as malformed
            _log_off_terminal("memory.fallback", agent=agent, memory="lexical", reason=fallback.reason)
    return config


def _announce_backend_calls(calls: dict[str, int], config: Any, command: str) -> None:
    """Say how many backend calls an allowed simulation of real backends makes, before it makes them: one line on a terminal, a
    ``simulate.backend_calls`` line of the command's log where stderr is a log."""
    if calls:
        described = f"up to {describe_calls(calls, config)}, one per slot"
        if sys.stderr.isatty():
            click.echo(f"ghostrunner: {command} makes {described.replace(', one', ' backend calls, one', 1)}", err=True)
        _log_off_terminal("simulate.backend_calls", command=command, calls=dict(calls), message=described)


def _log_off_terminal(event: str, **fields: Any) -> None:
    """Log *event* where stderr is no terminal (a file, a pipe, the journal): a simulation's stderr is a log that status and report
    read, in which a plain line would count as malformed; on a terminal the command's own short line says it."""
    if not sys.stderr.isatty():
        structlog.get_logger().warning(event, **fields)


for _command in (*OPERATE_COMMANDS, fleet, *K8S_COMMANDS, backup):
    cli.add_command(_command)


def main() -> None:
    """Entry point of the ``ghostrunner`` console script."""
    cli()
