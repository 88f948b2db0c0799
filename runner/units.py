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

Every value that goes into a unit is checked and quoted by systemd's own
rules, because a unit is run by root: a line break in a path would start a
new directive (``ExecStartPre=+...`` runs as root, outside the sandbox).
So ``render_units`` refuses control characters (C0, DEL, C1, U+2028/U+2029,
and lone surrogates) in every value, with :class:`UnitRenderError` naming the
field, and writes ``ExecStart=`` words in double quotes with C escapes, ``%%``
and ``$$``, paths in ``ReadWritePaths=`` quoted with ``%%``, and ``%%`` in
``Description=``.

Paths are compared and written only after lexical normalisation
(``os.path.normpath``: ``..``, ``.``, ``//`` and a trailing ``/`` resolved;
systemd ignores a path that still holds ``..``). Symbolic links are not
resolved into the units: units are often rendered before the directories
exist or on another host, and systemd follows links itself when it sets up
``ReadWritePaths=``. Where a path exists on this host, its resolved target is
classified too, so a link into ``/home`` or ``/tmp`` still gets its warning.
Relative paths are refused: units run in ``/var/lib/ghostrunner``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
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
from runner.errors import RunnerError, UnitRenderError, quoted
from runner.oncalendar import skipped_local_times, to_on_calendar
from runner.slots import cron_trigger, fire_times

__all__ = ["STATE_DIRECTORY", "Rendering", "default_exec_argv", "render_units", "systemd_escape", "write_units"]

STATE_DIRECTORY: Final = PurePosixPath("/var/lib/ghostrunner")
WATCHDOG_SECONDS: Final = 60
_STOP_MARGIN: Final = timedelta(seconds=30)
_PLACEHOLDER: Final = re.compile(r"@([A-Z_]+)@")
#: What the sandbox hides from the service, and which setting hides it.
_HIDDEN: Final = (
    ("/home", "ProtectHome=yes"), ("/root", "ProtectHome=yes"), ("/run/user", "ProtectHome=yes"),
    ("/tmp", "PrivateTmp=yes"), ("/var/tmp", "PrivateTmp=yes"),
)
#: Characters no unit value may hold: C0 (line feed, carriage return and NUL end a unit-file line), DEL, C1,
#: the Unicode line and paragraph separators, lone surrogates (an undecodable file name; not writable as UTF-8),
#: and the noncharacters U+FDD0..U+FDEF and U+xFFFE/U+xFFFF, which systemd's UTF-8 check refuses ("not UTF-8
#: clean"), silently dropping the whole setting.
_FORBIDDEN: Final = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17)) + "]"
)
#: A word systemd reads back unchanged without quotes (no whitespace, quote, backslash or ';').
_BARE_WORD: Final = re.compile(r"[A-Za-z0-9/._+:@,=%~-]+")
#: User names systemd accepts in User= in every mode (its strict rule); anything else it ignores, running the unit as root.
_USER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,30}")
#: Unit names: systemd's character set, at most 255 bytes (a longer or odder name is an invalid unit).
_UNIT_NAME: Final = re.compile(r"[A-Za-z0-9:_.\\-]+@?[A-Za-z0-9:_.\\-]*\.(?:service|timer|target)")
_UNIT_NAME_MAX: Final = 255
#: Directories a ReadWritePaths= entry should never open whole (a journal root of "/etc", a lock file "/serve.lock").
_SYSTEM_DIRECTORIES: Final = frozenset({"/", "/etc", "/usr", "/boot", "/efi", "/opt", "/run", "/var", "/var/lib"})
_PATH_MAX: Final = 4095  # bytes, without the terminating NUL
_NAME_MAX: Final = 255  # bytes per path component
#: The first line of every unit render writes; a file in --out without it is not render's to replace.
_RENDERED_MARKER: Final = "# Rendered by `ghostrunner systemd render`"


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


def _text(value: str, field: str, source: str | None = None) -> str:
    """*value* unchanged, if it holds no character that would end a unit-file line or hide in one.

    Raises:
        UnitRenderError: naming *field* and the value, when it holds a control character.
    """
    found = _FORBIDDEN.search(value)
    if found:
        raise UnitRenderError(field, (
            f"{value!r} holds the character U+{ord(found.group()):04X}, which no systemd unit may carry "
            "(after a line break systemd reads the rest as new settings); remove it"), source)
    return value


def _normal(path: str) -> str:
    """*path* normalised lexically; POSIX leaves a leading '//' to the system, and Linux reads it as '/'."""
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def _path(value: str, field: str, source: str | None = None) -> str:
    """*value* as the absolute, lexically normalised path units name (``..``, ``.``, ``//``, a trailing ``/`` resolved).

    Raises:
        UnitRenderError: *value* holds a control character, is relative, or is longer than systemd accepts.
    """
    _text(value, field, source)
    if not value.startswith("/"):
        raise UnitRenderError(field, f"expected an absolute path, got {value!r}; units run in {STATE_DIRECTORY}, not where render runs",
                              source)
    normal = _normal(value)
    encoded = normal.encode("utf-8")
    if len(encoded) > _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(b"/")):
        raise UnitRenderError(field, f"{quoted(value)} is longer than systemd accepts ({_PATH_MAX} bytes, {_NAME_MAX} per name)", source)
    return normal


def _quoted(word: str) -> str:
    """*word* in double quotes, backslash and quote escaped, unless systemd reads it back unchanged bare."""
    if _BARE_WORD.fullmatch(word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _exec_word(word: str, field: str, source: str | None = None) -> str:
    """One ``ExecStart=`` argument that systemd hands to the program as *word*: ``%`` as ``%%``, ``$`` as ``$$``, quoted."""
    return _quoted(_text(word, field, source).replace("%", "%%").replace("$", "$$"))


def _exec_program(path: str) -> str:
    """The program of ``ExecStart=``: systemd takes it literally but for ``%`` specifiers, and refuses quotes and backslashes."""
    normal = _path(path, "--exec")
    bad = sorted(set(normal) & set("\"'\\$"))
    if bad:
        raise UnitRenderError("--exec", (
            f"the program path {path!r} holds {', '.join(repr(char) for char in bad)}, which systemd does not accept in (or expands"
            " differently from) an ExecStart= program; install the program under a plain path such as /usr/local/bin/ghostrunner"))
    return _quoted(normal.replace("%", "%%"))


def _path_word(path: str) -> str:
    """One entry of a path list such as ``ReadWritePaths=`` (already normalised): ``%`` as ``%%``, quoted."""
    return _quoted(path.replace("%", "%%"))


def _description(text: str) -> str:
    """``Description=`` text: systemd expands ``%`` specifiers there, so ``%`` becomes ``%%``."""
    return text.replace("%", "%%")


def _lines(block: str, field: str, source: str | None) -> str:
    """*block* (settings made from *field*, one a line), if no line of it holds a control character."""
    for line in block.split("\n"):
        _text(line, field, source)
    return block


def _key(table: str, name: str, *rest: str) -> str:
    """A configuration key naming *name*; a name that is not a plain word (only through the Python API) is quoted."""
    return ".".join([table, name if re.fullmatch(r"[A-Za-z0-9_.@-]+", name) else repr(name), *rest])


def _unit_name(name: str, field: str, source: str | None) -> str:
    if len(name.encode("utf-8")) > _UNIT_NAME_MAX or not _UNIT_NAME.fullmatch(name):
        raise UnitRenderError(field, f"the unit name {name!r} is not one systemd accepts (its characters, at most {_UNIT_NAME_MAX} bytes); "
                              "use a shorter name", source)
    return name


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


def _write_paths(paths: Sequence[str]) -> list[str]:
    """The normalised directories among *paths* that lie outside the state directory, minimal (no entry under another)."""
    outside = {PurePosixPath(path) for path in paths if not PurePosixPath(path).is_relative_to(STATE_DIRECTORY)}
    return sorted(str(path) for path in outside if not any(path != other and path.is_relative_to(other) for other in outside))


def _sandbox(config: RunnerConfig, write_paths: Sequence[str]) -> str:
    has_command = any(agent.backend.type == "command" for agent in config.agents.values())
    lines = [
        "ProtectSystem=strict",
        *(["ReadWritePaths=" + " ".join(_path_word(path) for path in write_paths)] if write_paths else []),
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
    # A User= systemd cannot parse is ignored with a warning, and the unit then runs as root: refuse it here.
    if not _USER_NAME.fullmatch(_text(user, "--user")):
        raise UnitRenderError("--user", f"expected a system user name (a letter or '_', then up to 30 letters, digits, '_' or '-'), "
                                        f"got {quoted(user)}")
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


def _location_warnings(what: str, raw: str, normal: str) -> list[str]:
    """Warnings for a path the service needs that its sandbox hides, lexically or (where it exists here) through a link."""
    warnings = []
    real = os.path.realpath(raw)
    if real != os.path.realpath(normal):  # a '..' after a symbolic link: the kernel goes up from the link's target
        warnings.append(f"{what} {raw!r} has '..' after a symbolic link: on this host it is {real!r}, but units name it {normal!r}; "
                        "write the path without '..'")
    seen = set()
    for location in dict.fromkeys([normal, real]):
        for hidden, setting in _HIDDEN:
            if hidden in seen or not PurePosixPath(location).is_relative_to(hidden):
                continue
            seen.add(hidden)
            named = repr(raw) if location == raw else f"{raw!r} (that is {location!r})"
            if setting == "ProtectHome=yes":
                warnings.append(f"{what} {named} is under {hidden}, which {setting} hides from the service; "
                                "install it elsewhere (e.g. /usr/local, /etc/ghostrunner, /var/lib/ghostrunner)")
            else:
                warnings.append(f"{what} {named} is under {hidden}, which {setting} replaces with the service's own empty directory, "
                                "removed when it stops (what it writes there is lost); keep it elsewhere (e.g. /var/lib/ghostrunner)")
    return warnings


def render_units(
    config: RunnerConfig, *, exec_argv: Sequence[str], config_path: str, user: str = "ghostrunner",
    randomized_delay: timedelta = timedelta(seconds=60), today: date | None = None,
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
        _text(word, "--exec")
    if not exec_argv or not exec_argv[0].startswith("/"):
        raise UnitRenderError("--exec", f"the command units run must start with an absolute path, got {' '.join(exec_argv)!r}; "
                                        "pass --exec /usr/local/bin/ghostrunner")
    program = _exec_program(exec_argv[0])
    installed = _path(config_path, "--installed-config")
    today = today or date.today()
    agents = sorted(config.agents)
    for agent in agents:
        _text(agent, _key("agents", agent), source)
    roots = {agent: _path(str(config.agents[agent].journal_root), _key("agents", agent, "journal_root"), source) for agent in agents}
    lock_file = _path(str(config.lock_file), "runner.lock_file", source)
    write_paths = _write_paths([*roots.values(), str(PurePosixPath(lock_file).parent)])
    common = {
        "HEADER": f"{_RENDERED_MARKER.removeprefix('# ')} for {installed}; change the configuration and render again.",
        "EXEC": " ".join([program, *(_exec_word(word, "--exec") for word in exec_argv[1:])]),
        "CONFIG": _exec_word(installed, "--installed-config"),
        "AGENTS": _description(", ".join(agents)),
        "IDENTITY": _identity(user),
        "SANDBOX": _sandbox(config, write_paths),
    }
    files = {"ghostrunner.service": _fill(_template("ghostrunner.service"), {
        **common, "WATCHDOG_SEC": f"{WATCHDOG_SECONDS}s", "STOP_TIMEOUT_SEC": _seconds(config.shutdown_timeout + _STOP_MARGIN),
    })}
    warnings = _warnings(config, exec_argv[0], program_normal=_path(exec_argv[0], "--exec"), config_path=config_path, installed=installed,
                         roots=roots, lock_file=lock_file, user=user)
    warnings += [f"ReadWritePaths={path} (for a journal root or the lock file's directory) opens {path} to the service for writing, "
                 "undoing much of ProtectSystem=strict; give the journal and the lock file directories of their own"
                 for path in write_paths if path in _SYSTEM_DIRECTORIES]
    timers = []
    routines = sorted({name for agent in config.agents.values() for name in agent.routines})
    timezone = _text(config.timezone.key, "runner.timezone", source)
    for name in routines:
        routine = config.routines[name]
        field = _key("routines", name)
        service = _unit_name(f"ghostrunner-run-{_text(name, field, source)}@.service", field, source)
        values = {
            **common, "ROUTINE": name, "SCHEDULE": _text(routine.schedule, f"{field}.schedule", source), "TIMEZONE": timezone,
            "ROUTINE_ARG": _exec_word(name, field, source), "ROUTINE_DESCRIPTION": _description(name),
            "ON_CALENDAR": _lines("OnCalendar=" + to_on_calendar(name, routine.schedule, config.timezone), f"{field}.schedule", source),
            "RUN_TIMEOUT_SEC": _seconds(config.run_timeout + _STOP_MARGIN),
            # 0 is a delay of its own (none), unlike the timeouts, where 0 would mean "no limit".
            "RANDOMIZED_DELAY_SEC": f"{int(_delay_for(config, routine.schedule, randomized_delay, today).total_seconds())}s",
        }
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
            _unit_name(f"{instance}.service", _key("agents", agent), source)  # the timer starts this name, two bytes longer
            timers.append(_unit_name(f"{instance}.timer", _key("agents", agent), source))
    files["ghostrunner-timers.target"] = _fill(_template("ghostrunner-timers.target"), {**common, "TIMERS": " ".join(timers)})
    return Rendering(files=files, timers=tuple(timers), warnings=tuple(warnings))


def _warnings(config: RunnerConfig, program: str, *, program_normal: str, config_path: str, installed: str, roots: dict[str, str],
              lock_file: str, user: str) -> list[str]:
    """What the sandbox would hide from the service (under /home, /root, /run/user, /tmp, /var/tmp), and a unit running as root."""
    paths = [("the --exec program", program, program_normal), ("the configuration", config_path, installed)]
    for name, agent in sorted(config.agents.items()):
        paths.append((f"agent {name!r}'s journal", str(agent.journal_root), roots[name]))
        if agent.backend.type == "command" and agent.backend.command[0].startswith("/"):
            paths.append((f"agent {name!r}'s command backend", agent.backend.command[0], _normal(agent.backend.command[0])))
    paths.append(("the lock file", str(config.lock_file), lock_file))
    warnings = [warning for what, raw, normal in paths for warning in _location_warnings(what, raw, normal)]
    if config.config_file is not None and _normal(str(config.config_file)) != installed:
        # Relative paths in the configuration resolve beside the file that is read: render read this one, the service reads *installed*.
        here = PurePosixPath(_normal(str(config.config_file))).parent
        beside = [normal for what, raw, normal in paths[2:] if PurePosixPath(normal).is_relative_to(here)]
        warnings += [f"{path!r} lies beside the configuration render read ({str(config.config_file)!r}), but the units read {installed!r}: "
                     f"if the configuration names it relatively, the service looks beside {installed!r} instead; render from the "
                     "installed file, or write absolute paths" for path in beside]
    if user == "root":
        warnings.append("--user root: the units would run as root; create a system user (useradd --system ghostrunner) "
                        "and render without --user")
    return warnings


def write_units(rendering: Rendering, out: Path) -> list[Path]:
    """Write the rendered files into *out* (created if missing); return their paths.

    Render usually runs as root into ``/etc/systemd/system``, so it writes nothing through a symbolic link (neither
    *out* itself nor a unit file in it) and replaces only files it wrote before (their first line is the
    render marker). Every target is checked before the first is written; each file is written whole to a
    temporary name and renamed over the old one, mode 0644.

    Raises:
        UnitRenderError: *out* or a file in it is a symbolic link, not a regular file, or a file render did not write.
        RunnerError: the directory or a file cannot be written (the operating system's reason).
    """
    for name in rendering.files:
        if "/" in name or name.startswith("."):
            raise UnitRenderError("--out", f"{name!r} is not a unit file name render may write")
    try:
        out.mkdir(parents=True, exist_ok=True)
        directory = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        try:
            info: os.stat_result | None = os.lstat(out)
        except OSError:  # missing, or a name the filesystem refuses (ENAMETOOLONG): the first error says why
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise UnitRenderError("--out", f"{str(out)!r} is a symbolic link (to {os.readlink(out)!r}); render writes through no link: "
                                  "pass the directory itself") from None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise UnitRenderError("--out", f"{str(out)!r} is not a directory; pass the directory to write the units into") from None
        _refused(exc, out, "write the units into")
        raise RunnerError(f"cannot write the units into {str(out)!r}: {exc.strerror}") from None
    try:
        for name in rendering.files:
            _check_replaceable(directory, out / name, name)
        # Every file is written to its temporary name first, and only then are all renamed: a disk
        # that fills (or any write that fails) leaves the old set of units as it was, never half a new set.
        staged: list[tuple[str, str]] = []
        try:
            for name, text in rendering.files.items():
                staged.append((name, _stage_one(directory, out / name, name, text)))
            for name, temporary in staged:
                try:
                    os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
                except OSError as exc:
                    _refused(exc, out / name, "write the unit")
                    raise RunnerError(f"cannot write {str(out / name)!r}: {exc.strerror}") from None
        finally:
            for _, temporary in staged:
                try:
                    os.unlink(temporary, dir_fd=directory)
                except OSError:
                    pass  # renamed into place
        return [out / name for name in rendering.files]
    finally:
        os.close(directory)


#: errno names of a filesystem that refuses, which the CLI turns into exit 73, 74 or 77 (see runner.cli).
_REFUSALS: Final = ("EROFS", "ENOSPC", "EDQUOT", "EIO", "EACCES", "EPERM")


def _refused(exc: OSError, path: Path, action: str) -> None:
    """Raise the journal's storage error (exit 73, 74 or 77 with its errno) when *exc* is the filesystem refusing."""
    from errno import errorcode

    from journal import JournalStorageError

    if errorcode.get(exc.errno or 0) in _REFUSALS:
        raise JournalStorageError.for_errno(path, exc.errno or 0, action,
                                            "no unit was replaced; fix that and render again") from None


def _check_replaceable(directory: int, path: Path, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(name, dir_fd=directory)
        raise UnitRenderError("--out", f"{str(path)!r} is a symbolic link (to {target!r}); render writes through no link: remove it "
                              f"(systemctl unmask or disable {name} if systemctl made it) and render again")
    if not stat.S_ISREG(info.st_mode):
        raise UnitRenderError("--out", f"{str(path)!r} is not a regular file; remove it and render again")
    marker = _RENDERED_MARKER.encode("utf-8")
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
        try:
            head = os.read(descriptor, len(marker))
        finally:
            os.close(descriptor)
    except OSError as exc:
        _refused(exc, path, "read the unit")
        raise RunnerError(f"cannot read {str(path)!r} to see whether render wrote it: {exc.strerror}; nothing was written") from None
    if head != marker:
        raise UnitRenderError("--out", f"{str(path)!r} exists and was not written by ghostrunner systemd render; render replaces only "
                              "its own units: move that file away (or choose another --out) and render again")


def _stage_one(directory: int, path: Path, name: str, text: str) -> str:
    """Write *text* whole to a temporary name beside *name*; return that name (the caller renames it into place)."""
    temporary = f".{name}.{os.getpid()}.tmp"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory)
        try:
            os.fchmod(descriptor, 0o644)  # whatever the umask: systemd and the operator read units
            data = text.encode("utf-8")
            while data:
                data = data[os.write(descriptor, data):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError as exc:
        try:
            os.unlink(temporary, dir_fd=directory)
        except OSError:
            pass
        _refused(exc, path, "write the unit")
        raise RunnerError(f"cannot write {str(path)!r}: {exc.strerror}; no unit was replaced") from None
    return temporary


def default_exec_argv() -> list[str]:
    """How units start this installation: the ``ghostrunner`` script beside this interpreter, else ``python -m runner``."""
    script = Path(sys.executable).parent / "ghostrunner"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "runner"]
