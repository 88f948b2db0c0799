"""What this host says where journals go and what time it is, for a configuration that does not say.

* :func:`state_directory`: the directory agents' journals go to when neither
  ``journal_root`` nor ``$GHOSTJOURNAL_ROOT`` says: ``$STATE_DIRECTORY`` (set
  by systemd for a unit with ``StateDirectory=``), else
  ``$XDG_STATE_HOME/ghostjournal``, else ``~/.local/state/ghostjournal``;
  never the current directory (the rule of :mod:`journal.frame.roots`, which
  ``ghostjournal`` follows too).
* :func:`local_zone_name`: the system's local time zone as an IANA name
  (from ``$TZ``, else the ``/etc/localtime`` link, else ``/etc/timezone``),
  ``UTC`` when none of them names one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from journal.frame import STATE_SUBDIRECTORY, state_home
from runner.errors import ConfigError

__all__ = ["STATE_SUBDIRECTORY", "local_zone_name", "state_directory"]

_LOCALTIME: Final = Path("/etc/localtime")
_TIMEZONE_FILE: Final = Path("/etc/timezone")


def state_directory(source: str, environ: Mapping[str, str] | None = None) -> Path:
    """The directory journals go to without a configured ``journal_root`` (:func:`journal.frame.state_home`, the rule ``ghostjournal`` follows too).

    Relative values of the variables are ignored, as the XDG specification
    says (a relative one would mean the current directory).

    Args:
        source: the configuration it is for, which an error names.
        environ: the environment (default ``os.environ``).

    Raises:
        ConfigError: none of ``$STATE_DIRECTORY``, ``$XDG_STATE_HOME`` and ``$HOME`` gives an absolute path.
    """
    home = state_home(environ)
    if home is not None:
        return home[0]
    raise ConfigError(
        source,
        "runner.journal_root",
        "a journal_root, since this process has no state directory ($STATE_DIRECTORY, $XDG_STATE_HOME and $HOME "
        "are unset or not absolute paths)",
    )


def _zone_key(name: str) -> str | None:
    """The IANA key *name* stands for (a key, or a path into a zoneinfo tree), if it names a zone this Python can load."""
    if name.startswith("/"):
        _, marker, key = name.rpartition("/zoneinfo/")
        if not marker:
            return None
        name = key.removeprefix("posix/").removeprefix("right/")
    if not name or name.startswith("/") or ".." in name.split("/"):
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return name


def local_zone_name(environ: Mapping[str, str] | None = None, *, localtime: Path = _LOCALTIME, timezone_file: Path = _TIMEZONE_FILE) -> str:
    """The system's local time zone as an IANA name, such as ``Europe/Berlin``; ``UTC`` when it has none.

    ``$TZ`` wins when set, as it does for the C library (``:Europe/Berlin``,
    a path into a zoneinfo directory, or a name; an empty ``TZ`` or one that
    names no zone, such as a POSIX rule ``JST-9``, is UTC, as glibc reads it).
    Otherwise the target of the ``/etc/localtime`` link, else the name in
    ``/etc/timezone`` (Debian), else UTC.

    Args:
        environ: the environment (default ``os.environ``).
        localtime: the ``/etc/localtime`` to read.
        timezone_file: the ``/etc/timezone`` to read.
    """
    env = os.environ if environ is None else environ
    if "TZ" in env:
        return _zone_key(env["TZ"].removeprefix(":")) or "UTC"
    try:
        if localtime.is_symlink():
            # One link, not realpath: a zoneinfo tree may link the chosen name on to another
            # (US/Eastern -> America/New_York); the name the administrator chose is the one shown.
            key = _zone_key(os.path.normpath(os.path.join(localtime.parent, os.readlink(localtime))))
            if key is not None:
                return key
        named = timezone_file.read_text(encoding="utf-8", errors="replace")[:256].strip()
    except OSError:
        return "UTC"
    return _zone_key(named) or "UTC"
