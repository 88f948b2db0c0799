"""systemd units for a configuration: the ``serve`` service, or a timer per (agent, routine); or, for a fleet, its beat and workers.

``render_units`` fills the templates in ``runner/data/systemd/`` (``@NAME@``
placeholders) from a validated configuration:

* ``ghostrunner.service``: ``Type=notify`` service running ``serve``;
* ``ghostrunner-run-ROUTINE@.service`` and ``ghostrunner-run-ROUTINE@.timer``:
  a oneshot service and a timer template per routine; the instance is the
  agent (``ghostrunner-run-evening@motoko.timer``), so each (agent, routine)
  gets its own timer, activating ``ghostrunner run ROUTINE --agent AGENT``;
* ``ghostrunner-timers.target``: wants every configured timer instance;
* with a ``[backup]`` table only, ``ghostrunner-backup.service`` (oneshot
  ``ghostrunner backup --into DIR``) and ``ghostrunner-backup.timer``, apart
  from the target: backups suit both deployments.

A configuration with a ``[fleet]`` table gets neither ``serve`` (which
refuses it) nor the timers (beside the fleet each would run every slot a
second time), but the fleet's own services, which conflict with both:

* ``ghostrunner-fleet-beat.service``: ``ghostrunner fleet beat``;
* ``ghostrunner-fleet-worker@.service``: ``ghostrunner fleet worker --shard
  SHARD``, the instance naming the shard (``ghostrunner-fleet-worker@east``),
  with ``KillMode=mixed`` so that a stop lets its runs in flight finish;
* the backup units, as above.

They have the same sandbox, their network limited to the broker's address
(and, for a worker, what its backends need, as above). Writing them into a
directory that holds a ``serve`` unit or timers is refused
(:func:`write_units`).

Both styles run as the dedicated system user ``ghostrunner`` (not
``DynamicUser=``: journals are long-lived data an operator reads and backs
up, and may live outside the state directory under a fixed owner), with
``StateDirectory=ghostrunner`` (``/var/lib/ghostrunner``) and strict
sandboxing. Network access follows the configured backends: none for
simulated agents only, loopback only when every openai backend is local.

Every value that goes into a unit is checked and quoted by systemd's own
rules (:mod:`runner.deploy.unitsyntax`), because a unit is run by root; paths are
compared and written only after lexical normalisation. Symbolic links are not
resolved into the units: units are often rendered before the directories
exist or on another host, and systemd follows links itself when it sets up
``ReadWritePaths=``. Where a path exists on this host, its resolved target is
classified too, so a link into ``/home`` or ``/tmp`` still gets its warning,
and the programs the units start are followed to what they need to start
(:mod:`runner.deploy.systemd._reach`: links, ``#!`` interpreters, a venv's base Python).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Final, Protocol
from urllib.parse import urlsplit

from journal.frame import is_loopback_url
from runner.cron.oncalendar import skipped_local_times, to_on_calendar
from runner.deploy.restarts import STOPPED_STATUS, SYSTEMD_NO_RESTART_STATUSES, restart_plan, shortest_gap
from runner.deploy.systemd._reach import HIDDEN, startup_warnings
from runner.deploy.unitsyntax import (
    STATE_DIRECTORY,
    absolute_path,
    checked_lines,
    checked_text,
    description,
    exec_program,
    exec_word,
    normal_path,
    path_word,
    systemd_escape,
    unit_name,
)
from runner.deploy.written import RENDERED_MARKER, write_unit_files
from runner.errors import UnitRenderError, quoted
from runner.settings.config import BackupConfig, FleetConfig, RunnerConfig

__all__ = ["STATE_DIRECTORY", "Rendering", "default_exec_argv", "refuse_warnings", "render_units", "systemd_escape", "write_units"]

WATCHDOG_SECONDS: Final = 60
_STOP_MARGIN: Final = timedelta(seconds=30)
_PLACEHOLDER: Final = re.compile(r"@([A-Z_]+)@")
#: User names systemd accepts in User= in every mode (its strict rule); anything else it ignores, running the unit as root.
_USER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,30}")
#: Directories a ReadWritePaths= entry should never open whole (a journal root of "/etc", a lock file "/serve.lock").
_SYSTEM_DIRECTORIES: Final = frozenset({"/", "/etc", "/usr", "/boot", "/efi", "/opt", "/run", "/var", "/var/lib"})


@dataclass(frozen=True, slots=True)
class Rendering:
    """Rendered unit files and what the operator should know about them.

    Attributes:
        files: unit file name to its text, in a stable order.
        timers: the timer instances to enable (``ghostrunner-run-evening@motoko.timer``); none for a fleet.
        warnings: deployment problems found while rendering (one line each).
        fleet_services: for a fleet, the services to enable (the beat, and a worker instance per shard); else empty.
    """

    files: dict[str, str]
    timers: tuple[str, ...]
    warnings: tuple[str, ...]
    fleet_services: tuple[str, ...] = ()


def _key(table: str, name: str, *rest: str) -> str:
    """A configuration key naming *name*; a name that is not a plain word (only through the Python API) is quoted."""
    return ".".join([table, name if re.fullmatch(r"[A-Za-z0-9_.@-]+", name) else repr(name), *rest])


def _seconds(delta: timedelta) -> str:
    return f"{max(1, int(delta.total_seconds()))}s"


def _template(name: str) -> str:
    return (resources.files("runner") / "data" / "systemd" / f"{name}.in").read_text(encoding="utf-8")


def _fill(template: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _PLACEHOLDER.sub(replace, template)


def _network_lines(config: RunnerConfig) -> list[str]:
    backends = [agent.backend for agent in config.agents.values()]
    if all(backend.type == "simulated" for backend in backends):
        return list(_NO_NETWORK)
    lines = ["RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"]
    if any(backend.type == "command" for backend in backends):
        return [*lines, "# A command backend may need the network: no IP address restriction."]
    if all(is_loopback_url(backend.base_url) for backend in backends if backend.type == "openai"):
        return [*lines, "# Every openai backend is on this host: loopback only.", "IPAddressDeny=any", "IPAddressAllow=localhost"]
    return [*lines, "# An openai backend is on another host: no IP address restriction."]


def _write_paths(paths: Sequence[str]) -> list[str]:
    """The normalised directories among *paths* that lie outside the state directory, minimal (no entry under another)."""
    outside = {PurePosixPath(path) for path in paths if not PurePosixPath(path).is_relative_to(STATE_DIRECTORY)}
    return sorted(str(path) for path in outside if not any(path != other and path.is_relative_to(other) for other in outside))


_NO_NETWORK: Final = ("# Simulated agents only: no network at all.", "RestrictAddressFamilies=AF_UNIX", "IPAddressDeny=any")


def _sandbox(config: RunnerConfig, write_paths: Sequence[str], *, offline: bool = False, network: Sequence[str] | None = None) -> str:
    """The sandbox settings; *offline* for a unit that runs no backend (the backup, the beat): only CPython runs, and no network
    unless *network* (its lines) says otherwise."""
    has_command = not offline and any(agent.backend.type == "command" for agent in config.agents.values())
    if network is None:
        network = ["# No backend runs here: no network at all.", *_NO_NETWORK[1:]] if offline else _network_lines(config)
    lines = [
        "ProtectSystem=strict",
        *(["ReadWritePaths=" + " ".join(path_word(path) for path in write_paths)] if write_paths else []),
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "NoNewPrivileges=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectHostname=yes",
        "RestrictNamespaces=yes",
        "RestrictRealtime=yes",
        "RestrictSUIDSGID=yes",
        "LockPersonality=yes",
        # CPython maps no writable+executable memory; a command backend may be a JIT runtime (node, java).
        "MemoryDenyWriteExecute=" + ("no" if has_command else "yes"),
        "SystemCallArchitectures=native",
        "SystemCallFilter=@system-service",
        "SystemCallErrorNumber=EPERM",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "RemoveIPC=yes",
        *network,
    ]
    return "\n".join(lines)


def _identity(user: str) -> str:
    # A User= systemd cannot parse is ignored with a warning, and the unit then runs as root: refuse it here.
    if not _USER_NAME.fullmatch(checked_text(user, "--user")):
        raise UnitRenderError(
            "--user", f"expected a system user name (a letter or '_', then up to 30 letters, digits, '_' or '-'), got {quoted(user)}"
        )
    return "\n".join(
        [
            f"User={user}",
            f"Group={user}",
            f"StateDirectory={STATE_DIRECTORY.name}",
            "StateDirectoryMode=0700",
            f"WorkingDirectory={STATE_DIRECTORY}",
            "UMask=0077",
            "Environment=PYTHONUNBUFFERED=1",
            "# Secrets for hosted backends (api_key_env), if any: VAR=value lines, mode 0600.",
            "EnvironmentFile=-/etc/ghostrunner/env",
        ]
    )


def _delay_for(config: RunnerConfig, schedule: str, wanted: timedelta, today: date) -> timedelta:
    """*wanted*, capped at a quarter of the schedule's shortest gap so a late start still lands in its own slot."""
    return min(wanted, shortest_gap(config, schedule, today) / 4)


def _location_warnings(what: str, raw: str, normal: str) -> list[str]:
    """Warnings for a path the service needs that its sandbox hides, lexically or (where it exists here) through a link."""
    warnings = []
    real = os.path.realpath(raw)
    if real != os.path.realpath(normal):  # a '..' after a symbolic link: the kernel goes up from the link's target
        warnings.append(
            f"{what} {raw!r} has '..' after a symbolic link: on this host it is {real!r}, but units name it {normal!r}; "
            "write the path without '..'"
        )
    seen = set()
    for location in dict.fromkeys([normal, real]):
        for hidden, setting in HIDDEN:
            if hidden in seen or not PurePosixPath(location).is_relative_to(hidden):
                continue
            seen.add(hidden)
            named = repr(raw) if location == raw else f"{raw!r} (that is {location!r})"
            if setting == "ProtectHome=yes":
                warnings.append(
                    f"{what} {named} is under {hidden}, which {setting} hides from the service; "
                    "install it elsewhere (e.g. /usr/local, /etc/ghostrunner, /var/lib/ghostrunner)"
                )
            else:
                warnings.append(
                    f"{what} {named} is under {hidden}, which {setting} replaces with the service's own empty directory, "
                    "removed when it stops (what it writes there is lost); keep it elsewhere (e.g. /var/lib/ghostrunner)"
                )
    return warnings


def render_units(
    config: RunnerConfig,
    *,
    exec_argv: Sequence[str],
    config_path: str,
    user: str = "ghostrunner",
    randomized_delay: timedelta = timedelta(seconds=60),
    today: date | None = None,
) -> Rendering:
    """Render every unit for *config*.

    Args:
        config: the validated configuration.
        exec_argv: how units start the runner (``--exec``), e.g. ``["/usr/local/bin/ghostrunner"]``; the first word is an absolute path.
        config_path: the absolute path units pass to ``--config`` (``--installed-config``: where the file is installed).
        user: the system user the units run as (``--user``).
        randomized_delay: the timers' RandomizedDelaySec (capped per routine to a quarter of its shortest gap).
        today: the date DST checks start from (default: today).

    Raises:
        UnitRenderError: a value cannot go into a unit as it is (a control character, a relative path, a user name systemd
            would ignore, ...); its ``field`` is the option (``--exec``) or, with ``source``, the configuration key.
        ScheduleNotExpressibleError: a routine's schedule has no OnCalendar= equivalent.
    """
    source = config.source
    for word in exec_argv:
        checked_text(word, "--exec")
    if not exec_argv or not exec_argv[0].startswith("/"):
        raise UnitRenderError(
            "--exec",
            f"the command units run must start with an absolute path, got {quoted(' '.join(exec_argv))}; "
            "pass --exec /usr/local/bin/ghostrunner",
        )
    program = exec_program(exec_argv[0])
    installed = absolute_path(config_path, "--installed-config")
    today = today or date.today()  # noqa: DTZ011 - the host's date only picks where the DST checks start
    agents = sorted(config.agents)
    for agent in agents:
        checked_text(agent, _key("agents", agent), source)
    roots = {
        agent: absolute_path(str(config.agents[agent].journal_root), _key("agents", agent, "journal_root"), source) for agent in agents
    }
    lock_file = absolute_path(str(config.lock_file), "runner.lock_file", source)
    write_paths = _write_paths([*roots.values(), str(PurePosixPath(lock_file).parent)])
    common = {
        "HEADER": f"{RENDERED_MARKER.removeprefix('# ')} for {installed}; change the configuration and render again.",
        "EXEC": " ".join([program, *(exec_word(word, "--exec") for word in exec_argv[1:])]),
        "CONFIG": exec_word(installed, "--installed-config"),
        "AGENTS": description(", ".join(agents)),
        "IDENTITY": _identity(user),
        "SANDBOX": _sandbox(config, write_paths),
        "STOPPED": str(STOPPED_STATUS),
        "NO_RESTART": " ".join(str(status) for status in SYSTEMD_NO_RESTART_STATUSES),
    }
    warnings = _warnings(
        config,
        exec_argv,
        program_normal=absolute_path(exec_argv[0], "--exec"),
        config_path=config_path,
        installed=installed,
        roots=roots,
        lock_file=lock_file,
        user=user,
    )
    warnings += [
        f"ReadWritePaths={path} (for a journal root or the lock file's directory) opens {path} to the service for writing, "
        "undoing much of ProtectSystem=strict; give the journal and the lock file directories of their own"
        for path in write_paths
        if path in _SYSTEM_DIRECTORIES
    ]
    if config.fleet is not None:
        files, services = _fleet_units(config, config.fleet, common, write_paths, warnings)
    else:
        files, timers = _serve_and_timers(config, common, warnings, randomized_delay, today)
    if config.backup is not None:
        files |= _backup_units(
            config,
            config.backup,
            common,
            write_paths=[*roots.values(), str(PurePosixPath(lock_file).parent)],
            warnings=warnings,
            today=today,
        )
    if config.fleet is not None:
        return Rendering(files=files, timers=(), warnings=tuple(warnings), fleet_services=services)
    return Rendering(files=files, timers=timers, warnings=tuple(warnings))


def _serve_and_timers(
    config: RunnerConfig, common: dict[str, str], warnings: list[str], randomized_delay: timedelta, today: date
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The serve service, and a timer and oneshot service per routine with the target wanting each instance; *warnings* gets DST gaps."""
    source = config.source
    agents = sorted(config.agents)
    files = {
        "ghostrunner.service": _fill(
            _template("ghostrunner.service"),
            {
                **common,
                "WATCHDOG_SEC": f"{WATCHDOG_SECONDS}s",
                "STOP_TIMEOUT_SEC": _seconds(config.shutdown_timeout + _STOP_MARGIN),
            },
        )
    }
    timers = []
    routines = sorted({name for agent in config.agents.values() for name in agent.routines})
    timezone = checked_text(config.timezone.key, "runner.timezone", source)
    for name in routines:
        routine = config.routines[name]
        field = _key("routines", name)
        service = unit_name(f"ghostrunner-run-{checked_text(name, field, source)}@.service", field, source)
        values = {
            **common,
            "ROUTINE": name,
            "SCHEDULE": checked_text(routine.schedule, f"{field}.schedule", source),
            "TIMEZONE": timezone,
            "ROUTINE_ARG": exec_word(name, field, source),
            "ROUTINE_DESCRIPTION": description(name),
            "ON_CALENDAR": checked_lines(
                "OnCalendar=" + to_on_calendar(name, routine.schedule, config.timezone), f"{field}.schedule", source
            ),
            "RUN_TIMEOUT_SEC": _seconds(config.run_timeout + _STOP_MARGIN),
            # 0 is a delay of its own (none), unlike the timeouts, where 0 would mean "no limit".
            "RANDOMIZED_DELAY_SEC": f"{int(_delay_for(config, routine.schedule, randomized_delay, today).total_seconds())}s",
        }
        restarts = restart_plan(config, routine.schedule, config.run_timeout + _STOP_MARGIN, today)
        values |= {"START_LIMITS": restarts.unit_lines(), "RESTART": restarts.service_lines()}
        files[service] = _fill(_template("ghostrunner-run@.service"), values)
        files[service.removesuffix(".service") + ".timer"] = _fill(_template("ghostrunner-run@.timer"), values)
        skipped = skipped_local_times(name, routine.schedule, config.timezone, today)
        if skipped:
            warnings.append(
                f"routine {name!r} ({routine.schedule}) is due at {skipped[0]:%Y-%m-%d %H:%M}, a time {config.timezone.key} skips for "
                "daylight saving: its timer will not fire that day (serve runs it after the gap); pick a time outside the gap"
            )
    for agent in agents:
        for name in config.agents[agent].routines:
            instance = f"ghostrunner-run-{name}@{systemd_escape(agent)}"
            unit_name(f"{instance}.service", _key("agents", agent), source)  # the timer starts this name, two bytes longer
            timers.append(unit_name(f"{instance}.timer", _key("agents", agent), source))
    files["ghostrunner-timers.target"] = _fill(_template("ghostrunner-timers.target"), {**common, "TIMERS": " ".join(timers)})
    return files, tuple(timers)


#: The units of serve and of the timers: a directory of a fleet's units holds none of them, or every slot would run twice.
_SERVE_AND_TIMERS: Final = ("ghostrunner.service", "ghostrunner-timers.target", "ghostrunner-run-*")
#: The fleet's units: a directory of serve's and the timers' units holds none of them, for the same reason.
_FLEET_UNITS: Final = ("ghostrunner-fleet-*",)


def _broker_address(broker: str) -> str | None:
    """What ``IPAddressAllow=`` can name for the broker's host: its IP address, or ``localhost``; None for a host name."""
    host = urlsplit(broker).hostname or ""
    if host == "localhost":
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def _fleet_network(config: RunnerConfig, address: str | None, *, runs_backends: bool) -> list[str]:
    """The network lines of a fleet unit: the broker's *address* alone, and for a worker (*runs_backends*) what its backends need."""
    lines = ["RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"]
    if address is None:
        return [*lines, "# fleet.broker names a host, not an address: no IP address restriction."]
    allowed = [address]
    what = "The broker only"
    if runs_backends:
        backends = [agent.backend for agent in config.agents.values()]
        if any(backend.type == "command" for backend in backends):
            return [*lines, "# A command backend may need the network: no IP address restriction."]
        openai = [backend.base_url for backend in backends if backend.type == "openai"]
        if not all(is_loopback_url(url) for url in openai):
            return [*lines, "# An openai backend is on another host: no IP address restriction."]
        if openai:
            allowed, what = ["localhost", address], "The broker, and the openai backends on this host"
    return [*lines, f"# {what}: nothing else.", "IPAddressDeny=any", "IPAddressAllow=" + " ".join(dict.fromkeys(allowed))]


def _fleet_units(
    config: RunnerConfig, fleet: FleetConfig, common: dict[str, str], write_paths: Sequence[str], warnings: list[str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The beat's service and the workers' template; the services to enable (the beat, a worker per shard); *warnings* gets a broker
    whose address the units cannot name."""
    address = _broker_address(fleet.broker)
    if address is None:
        warnings.append(
            f"fleet.broker {fleet.broker!r} names its host, and IPAddressAllow= takes addresses: the fleet's units cannot limit "
            "their network to the broker, so they get no IP address restriction; name the broker by its IP address"
        )
    beat = {**common, "SANDBOX": _sandbox(config, [], offline=True, network=_fleet_network(config, address, runs_backends=False))}
    worker = {
        **common,
        "SANDBOX": _sandbox(config, write_paths, network=_fleet_network(config, address, runs_backends=True)),
        # A stop lets the runs in flight finish: each takes at most run_timeout.
        "STOP_TIMEOUT_SEC": _seconds(max(config.run_timeout, config.shutdown_timeout) + _STOP_MARGIN),
    }
    files = {
        "ghostrunner-fleet-beat.service": _fill(_template("ghostrunner-fleet-beat.service"), beat),
        "ghostrunner-fleet-worker@.service": _fill(_template("ghostrunner-fleet-worker@.service"), worker),
    }
    workers = [unit_name(f"ghostrunner-fleet-worker@{shard}.service", f"fleet.shards.{shard}", config.source) for shard in fleet.shards]
    return files, ("ghostrunner-fleet-beat.service", *workers)


def _backup_units(
    config: RunnerConfig, backup: BackupConfig, common: dict[str, str], *, write_paths: list[str], warnings: list[str], today: date
) -> dict[str, str]:
    """``ghostrunner-backup.service`` and ``.timer`` for the ``[backup]`` table; what the sandbox would hide is added to *warnings*.

    The service opens each journal as the runs do (it takes the journal's lock and brings its index up to date
    before copying), so it writes where they write, and into the backup directory.
    """
    source = config.source
    directory = absolute_path(str(backup.dir), "backup.dir", source)
    paths = _write_paths([*write_paths, directory])
    warnings += _location_warnings("the backup directory", str(backup.dir), directory)
    if os.path.islink(directory):
        warnings.append(
            f"backup.dir {directory!r} is a symbolic link on this host, and backup --into refuses a link (it follows none): "
            f"every backup would fail; name the directory it points to ({os.path.realpath(directory)!r})"
        )
    if directory in _SYSTEM_DIRECTORIES:
        warnings.append(
            f"backup.dir {directory!r} is a system directory: ReadWritePaths={directory} would open it to the backup service "
            "for writing; give the backups a directory of their own (e.g. /var/backups/ghostrunner)"
        )
    values = {
        **common,
        "SANDBOX": _sandbox(config, paths, offline=True),
        "BACKUP_DIR": exec_word(directory, "backup.dir", source),
        "BACKUP_DIR_DESCRIPTION": description(directory),
        "KEEP": "" if backup.keep is None else f" --keep {backup.keep}",
        "SCHEDULE": checked_text(backup.schedule, "backup.schedule", source),
        "TIMEZONE": config.timezone.key,
        "ON_CALENDAR": checked_lines("OnCalendar=" + to_on_calendar("backup", backup.schedule, config.timezone), "backup.schedule", source),
    }
    skipped = skipped_local_times("backup", backup.schedule, config.timezone, today)
    if skipped:
        warnings.append(
            f"backup.schedule ({backup.schedule}) is due at {skipped[0]:%Y-%m-%d %H:%M}, a time {config.timezone.key} skips "
            "for daylight saving: the backup timer will not fire that day; pick a time outside the gap"
        )
    return {name: _fill(_template(name), values) for name in ("ghostrunner-backup.service", "ghostrunner-backup.timer")}


def _warnings(
    config: RunnerConfig,
    exec_argv: Sequence[str],
    *,
    program_normal: str,
    config_path: str,
    installed: str,
    roots: dict[str, str],
    lock_file: str,
    user: str,
) -> list[str]:
    """What the sandbox would hide from the service (under /home, /root, /run/user, /tmp, /var/tmp), and a unit running as root.

    The programs the units start (--exec, a command backend) are followed to what they need on this host: links,
    #! interpreters, a venv's base installation (:mod:`runner.deploy.systemd._reach`), and the files their arguments name.
    """
    paths = [("the --exec program", exec_argv[0], program_normal), ("the configuration", config_path, installed)]
    programs = [("the --exec program", list(exec_argv))]
    for name, agent in sorted(config.agents.items()):
        paths.append((f"the journal of agent {name!r}", str(agent.journal_root), roots[name]))
        if agent.backend.type == "command":
            programs.append((f"the command backend of agent {name!r}", list(agent.backend.command)))
        if agent.backend.type == "command" and agent.backend.command[0].startswith("/"):
            paths.append((f"the command backend of agent {name!r}", agent.backend.command[0], normal_path(agent.backend.command[0])))
    paths.append(("the lock file", str(config.lock_file), lock_file))
    warnings = [warning for what, raw, normal in paths for warning in _location_warnings(what, raw, normal)]
    for what, argv in programs:  # an absolute program's own path is warned about above; a bare name's, found on the PATH, is not
        known = [normal_path(argv[0]), os.path.realpath(argv[0])] if argv[0].startswith("/") else []
        warnings += startup_warnings(what, argv, known=known)
        # An argument naming a file here is one the program opens (a backend script): hidden, the start fails all the same.
        warnings += [
            warning
            for word in argv[1:]
            if word.startswith("/") and os.path.exists(word)
            for warning in _location_warnings(f"{what}: its argument", word, normal_path(word))
        ]
    if config.config_file is not None and normal_path(str(config.config_file)) != installed:
        # Relative paths in the configuration resolve beside the file that is read: render read this one, the service reads *installed*.
        here = PurePosixPath(normal_path(str(config.config_file))).parent
        beside = [normal for what, raw, normal in paths[2:] if PurePosixPath(normal).is_relative_to(here)]
        warnings += [
            f"{path!r} lies beside the configuration render read ({str(config.config_file)!r}), but the units read {installed!r}: "
            f"if the configuration names it relatively, the service looks beside {installed!r} instead; render from the "
            "installed file, or write absolute paths"
            for path in beside
        ]
    if user == "root":
        warnings.append(
            "--user root: the units would run as root; create a system user (useradd --system ghostrunner) and render without --user"
        )
    return warnings


class _Warned(Protocol):
    @property
    def warnings(self) -> tuple[str, ...]: ...


def refuse_warnings(rendering: _Warned, noun: str = "unit") -> None:
    """``--strict``: a rendering with warnings is refused whole, since each names a *noun* that would not work as meant.

    Raises:
        UnitRenderError: with exit code 78 (EX_CONFIG), when *rendering* (units, or manifests) has warnings.
    """
    if rendering.warnings:
        count = len(rendering.warnings)
        raise UnitRenderError(
            "--strict",
            f"render found {count} problem{'s' if count > 1 else ''} (the warning{'s' if count > 1 else ''} "
            f"above) and wrote no {noun}; fix them, or render without --strict",
            exit_code=78,
        )


def write_units(rendering: Rendering, out: Path) -> list[Path]:
    """Write the rendered files into *out* (created if missing); return their paths.

    A fleet's units are not written into a directory that holds a unit of ``serve`` or of the timers
    (``ghostrunner.service``, ``ghostrunner-timers.target``, ``ghostrunner-run-*``), nor those into one holding
    the fleet's (``ghostrunner-fleet-*``): enabled side by side, each would run every slot a second time, and
    removing a unit that may be running is the operator's step.

    Render usually runs as root into ``/etc/systemd/system``, so it writes nothing through a symbolic link (neither
    *out* itself nor a unit file in it) and replaces only files it wrote before (their first line is the
    render marker). Every target is checked before the first is written; each file is written whole to a
    temporary name and renamed over the old one, mode 0644.

    Raises:
        UnitRenderError: *out* or a file in it is a symbolic link, not a regular file, or a file render did not write;
            or *out* holds units of the other way of running slots (serve and the timers, or a fleet).
        RunnerError: the directory or a file cannot be written (the operating system's reason).
    """
    if rendering.fleet_services:
        serve_units = "ghostrunner.service ghostrunner-timers.target 'ghostrunner-run-*.timer'"
        _refuse_other_units(out, _SERVE_AND_TIMERS, "units of serve or the timers", "the fleet", serve_units)
    else:
        fleet_units = "ghostrunner-fleet-beat.service 'ghostrunner-fleet-worker@*.service'"
        _refuse_other_units(out, _FLEET_UNITS, "units of a fleet", "serve or the timers", fleet_units)
    return write_unit_files(rendering.files, out)


def _refuse_other_units(out: Path, patterns: tuple[str, ...], what: str, beside: str, disable: str) -> None:
    """Refuse an *out* holding files of *patterns*: *what*, enabled *beside* the units rendered now, would run every slot twice."""
    try:
        names = sorted(os.listdir(out)) if os.path.isdir(out) and not os.path.islink(out) else []
    except OSError:
        return  # write_unit_files says why the directory cannot be used
    found = [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise UnitRenderError(
            "--out",
            f"{str(out)!r} holds {what} ({shown}), which beside {beside} would run every slot a second time; "
            f"stop and disable them (systemctl disable --now {disable}), remove them, and render again",
        )


def default_exec_argv() -> list[str]:
    """How units start this installation: the ``ghostrunner`` script beside this interpreter, else ``python -m runner``."""
    script = Path(sys.executable).parent / "ghostrunner"
    return [str(script)] if os.path.isfile(script) else [sys.executable, "-m", "runner"]  # Path.is_file() raises PermissionError bare
