"""Run ``ghostjournal`` or ``ghostrunner`` as the unprivileged uid/gid 65534 ("nobody").

Root bypasses file permissions, so a permission-denied fault needs a process
that dropped root. The interpreter and its packages may live where nobody may
not read (under ``/root``), so every module is imported first, as root, and
only then are the ids dropped and the command's ``main`` called.

Usage: ``python _as_nobody.py ghostjournal|ghostrunner ARGS...``
"""

from __future__ import annotations

import codecs
import importlib
import os
import pkgutil
import sys

NOBODY = 65534


#: The servers of two extras, which no command run here starts: the MCP SDK and Celery are most of what the
#: preload would import (1,192 modules and 1.7 s of CPU a command with them, 611 and 0.6 s without), and a
#: command that did reach them would fail here with ModuleNotFoundError, not pass unseen.
_NOT_PRELOADED = ("journal.mcp", "runner.fleet")


def _preload() -> None:
    for name in ("ascii", "utf-8", "latin-1", "utf-16", "utf-32"):  # codecs are imported lazily too
        codecs.lookup(name)
    for package in ("journal", "runner", "routines", "click"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if info.name.endswith(("__main__", "_winconsole")) or info.name == "journal.encoding.semantic":
                continue
            if any(info.name == name or info.name.startswith(f"{name}.") for name in _NOT_PRELOADED):
                continue
            importlib.import_module(info.name)


def main() -> None:
    command, *args = sys.argv[1:]
    _preload()
    entry = importlib.import_module({"ghostjournal": "journal.cli.cli", "ghostrunner": "runner.cli.cli"}[command])
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    sys.argv = [command, *args]
    entry.main()


if __name__ == "__main__":
    main()
