"""systemd units for a configuration: the ``serve`` service, or a timer per (agent, routine).

``render_units`` fills the templates in ``runner/data/systemd/`` (``@NAME@``
placeholders) from a validated configuration:

* ``ghostrunner.service``: ``Type=notify`` service running ``serve``;
* ``ghostrunner-run-ROUTINE@.service`` and ``ghostrunner-run-ROUTINE@.timer``:
  a oneshot service and a timer template per routine; the instance is the
  agent (``ghostrunner-run-evening@motoko.timer``), so each (agent, routine)
  gets its own timer, activating ``ghostrunner run ROUTINE --agent AGENT``;
* ``ghostrunner-timers.target``: wants every configured timer instance.

Both styles run as the dedicated system user ``ghostrunner`` (not
``DynamicUser=``: journals are long-lived data an operator reads and backs
up, and may live outside the state directory under a fixed owner), with
``StateDirectory=ghostrunner`` (``/var/lib/ghostrunner``) and strict
sandboxing. Network access follows the configured backends: none for
simulated agents only, loopback only when every openai backend is local.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from itertools import pairwise
from pathlib import Path, PurePosixPath
from typing import Final
from urllib.parse import urlsplit

from runner.config import RunnerConfig
from runner.oncalendar import skipped_local_times, to_on_calendar
from runner.slots import cron_trigger, fire_times

__all__ = ["STATE_DIRECTORY", "Rendering", "default_exec_argv", "render_units", "systemd_escape", "write_units"]

STATE_DIRECTORY: Final = PurePosixPath("/var/lib/ghostrunner")
WATCHDOG_SECONDS: Final = 60
_STOP_MARGIN: Final = timedelta(seconds=30)
_HIDDEN_BY_PROTECT_HOME: Final = ("/home", "/root", "/run/user")
_PLACEHOLDER: Final = re.compile(r"@([A-Z_]+)@")


@dataclass(frozen=True, slots=True)
class Rendering:
    """Rendered unit files and what the operator should know about them.

    Attributes:
        files: unit file name to its text, in a stable order.
        timers: the timer instances to enable (``ghostrunner-run-evening@motoko.timer``).
        warnings: deployment problems found while rendering (one line each).
    """

    files: dict[str, str]
    timers: tuple[str, ...]
    warnings: tuple[str, ...]


def systemd_escape(text: str) -> str:
    """Escape *text* for use in a unit name, as ``systemd-escape`` does (``%I`` undoes it)."""
    out = []
    for position, char in enumerate(text):
        if char == "/":
            out.append("-")
        elif (char.isascii() and char.isalnum()) or char in ":_" or (char == "." and position > 0):
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
    return "".join(out)


def _quote(word: str) -> str:
    """One unit-file command-line word: ``%`` doubled, quoted when it holds spaces or quotes."""
    word = word.replace("%", "%%")
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"' if re.search(r"[\s\"'\\;]", word) else word


def _seconds(delta: timedelta) -> str:
    return f"{max(1, int(delta.total_seconds()))}s"


def _template(name: str) -> str:
    return (resources.files("runner") / "data" / "systemd" / f"{name}.in").read_text(encoding="utf-8")


def _fill(template: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _PLACEHOLDER.sub(replace, template)


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _network_lines(config: RunnerConfig) -> list[str]:
    backends = [agent.backend for agent in config.agents.values()]
    if all(backend.type == "simulated" for backend in backends):
        return ["# Simulated agents only: no network at all.", "RestrictAddressFamilies=AF_UNIX", "IPAddressDeny=any"]
    lines = ["RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"]
    if any(backend.type == "command" for backend in backends):
        return [*lines, "# A command backend may need the network: no IP address restriction."]
    if all(_is_loopback(backend.base_url) for backend in backends if backend.type == "openai"):
        return [*lines, "# Every openai backend is on this host: loopback only.", "IPAddressDeny=any", "IPAddressAllow=localhost"]
    return [*lines, "# An openai backend is on another host: no IP address restriction."]


def _write_paths(config: RunnerConfig) -> list[str]:
    """Directories the runner writes outside the state directory (journal roots, the lock file's directory), minimal."""
    wanted = {PurePosixPath(agent.journal_root) for agent in config.agents.values()} | {PurePosixPath(config.lock_file).parent}
    outside = {path for path in wanted if not path.is_relative_to(STATE_DIRECTORY)}
    return sorted(str(path) for path in outside if not any(path != other and path.is_relative_to(other) for other in outside))


def _sandbox(config: RunnerConfig) -> str:
    has_command = any(agent.backend.type == "command" for agent in config.agents.values())
    write_paths = _write_paths(config)
    lines = [
        "ProtectSystem=strict",
        *(["ReadWritePaths=" + " ".join(_quote(path) for path in write_paths)] if write_paths else []),
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
        *_network_lines(config),
    ]
    return "\n".join(lines)


def _identity(user: str) -> str:
    return "\n".join([
        f"User={user}",
        f"Group={user}",
        f"StateDirectory={STATE_DIRECTORY.name}",
        "StateDirectoryMode=0700",
        f"WorkingDirectory={STATE_DIRECTORY}",
        "UMask=0077",
        "Environment=PYTHONUNBUFFERED=1",
        "# Secrets for hosted backends (api_key_env), if any: VAR=value lines, mode 0600.",
        "EnvironmentFile=-/etc/ghostrunner/env",
    ])


def _delay_for(config: RunnerConfig, schedule: str, wanted: timedelta, today: date) -> timedelta:
    """*wanted*, capped at a quarter of the schedule's shortest gap so a late start still lands in its own slot."""
    trigger = cron_trigger(schedule, config.timezone)
    start = datetime(today.year, today.month, today.day, tzinfo=config.timezone)
    moments = list(fire_times(trigger, start, start + timedelta(days=8)))
    # Real time between fires: subtracting two times of one ZoneInfo gives wall-clock time, an hour off across a change.
    gaps = [later.astimezone(UTC) - earlier.astimezone(UTC) for earlier, later in pairwise(moments)]
    return min([wanted, *(gap / 4 for gap in gaps)])


def _home_warnings(config: RunnerConfig, exec_argv: Sequence[str], config_path: str) -> list[str]:
    paths = [("the --exec program", exec_argv[0]), ("the configuration", config_path)]
    paths += [(f"agent {agent.name!r}'s journal", str(agent.journal_root)) for agent in config.agents.values()]
    paths += [(f"agent {agent.name!r}'s command backend", agent.backend.command[0]) for agent in config.agents.values()
              if agent.backend.type == "command" and agent.backend.command[0].startswith("/")]
    return [
        f"{what} {path!r} is under {hidden}, which ProtectHome=yes hides from the service; install it elsewhere (e.g. /usr/local, /etc/ghostrunner, /var/lib/ghostrunner)"
        for what, path in paths for hidden in _HIDDEN_BY_PROTECT_HOME if PurePosixPath(path).is_relative_to(hidden)
    ]


def render_units(
    config: RunnerConfig, *, exec_argv: Sequence[str], config_path: str, user: str = "ghostrunner",
    randomized_delay: timedelta = timedelta(seconds=60), today: date | None = None,
) -> Rendering:
    """Render every unit for *config*.

    Args:
        config: the validated configuration.
        exec_argv: how units start the runner, e.g. ``["/usr/local/bin/ghostrunner"]``; the first word is an absolute path.
        config_path: the absolute path units pass to ``--config`` (where the file is installed).
        user: the system user the units run as.
        randomized_delay: the timers' RandomizedDelaySec (capped per routine to a quarter of its shortest gap).
        today: the date DST checks start from (default: today).

    Raises:
        ValueError: *exec_argv* or *config_path* is not absolute.
        ScheduleNotExpressibleError: a routine's schedule has no OnCalendar= equivalent.
    """
    if not exec_argv or not exec_argv[0].startswith("/"):
        raise ValueError(f"the command units run must start with an absolute path, got {' '.join(exec_argv)!r}; pass --exec /usr/local/bin/ghostrunner")
    if not config_path.startswith("/"):
        raise ValueError(f"the configuration path units pass to --config must be absolute, got {config_path!r}")
    today = today or date.today()
    agents = sorted(config.agents)
    common = {
        "HEADER": f"Rendered by `ghostrunner systemd render` for {config_path}; change the configuration and render again.",
        "EXEC": " ".join(_quote(word) for word in exec_argv),
        "CONFIG": _quote(config_path),
        "AGENTS": ", ".join(agents),
        "IDENTITY": _identity(user),
        "SANDBOX": _sandbox(config),
    }
    files = {"ghostrunner.service": _fill(_template("ghostrunner.service"), {
        **common, "WATCHDOG_SEC": f"{WATCHDOG_SECONDS}s", "STOP_TIMEOUT_SEC": _seconds(config.shutdown_timeout + _STOP_MARGIN),
    })}
    warnings = _home_warnings(config, exec_argv, config_path)
    timers = []
    routines = sorted({name for agent in config.agents.values() for name in agent.routines})
    for name in routines:
        routine = config.routines[name]
        values = {
            **common, "ROUTINE": name, "SCHEDULE": routine.schedule, "TIMEZONE": config.timezone.key,
            "ON_CALENDAR": "OnCalendar=" + to_on_calendar(name, routine.schedule, config.timezone),
            "RUN_TIMEOUT_SEC": _seconds(config.run_timeout + _STOP_MARGIN),
            "RANDOMIZED_DELAY_SEC": _seconds(_delay_for(config, routine.schedule, randomized_delay, today)),
        }
        files[f"ghostrunner-run-{name}@.service"] = _fill(_template("ghostrunner-run@.service"), values)
        files[f"ghostrunner-run-{name}@.timer"] = _fill(_template("ghostrunner-run@.timer"), values)
        skipped = skipped_local_times(name, routine.schedule, config.timezone, today)
        if skipped:
            warnings.append(
                f"routine {name!r} ({routine.schedule}) is due at {skipped[0]:%Y-%m-%d %H:%M}, a time {config.timezone.key} skips for "
                "daylight saving: its timer will not fire that day (serve runs it after the gap); pick a time outside the gap"
            )
    for agent in agents:
        timers += [f"ghostrunner-run-{name}@{systemd_escape(agent)}.timer" for name in config.agents[agent].routines]
    files["ghostrunner-timers.target"] = _fill(_template("ghostrunner-timers.target"), {**common, "TIMERS": " ".join(timers)})
    return Rendering(files=files, timers=tuple(timers), warnings=tuple(warnings))


def write_units(rendering: Rendering, out: Path) -> list[Path]:
    """Write the rendered files into *out* (created if missing); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendering.files.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def default_exec_argv() -> list[str]:
    """How units start this installation: the ``ghostrunner`` script beside this interpreter, else ``python -m runner``."""
    script = Path(sys.executable).parent / "ghostrunner"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "runner"]
