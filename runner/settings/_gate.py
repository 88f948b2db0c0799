"""A routine's ``gate``: a cheap program asked before the model whether the slot has anything to do.

Layout (in a routine's table)::

    [routines.pulse-4h]
    gate = ["./anything-new.sh"]                               # or a table:
    gate = {command = ["./anything-new.sh", "--quick"], timeout = "20s"}
    gate = {callable = "mygates:anything_new", timeout = "20s"}    # a Python function

The program is checked at load: a path (relative to the configuration's
directory) must name an executable file, a bare name must be found on
``PATH``; anything else is refused in one line naming the key (exit 78). A
``callable`` is ``module:function`` (the function may be dotted, a method of a
class); its module is looked for at load in the configuration's directory,
then on the runner's own import path, and one found in neither is refused the
same way. What a gate is told and what its answer means: :mod:`runner.run.gate`.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import shutil
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

__all__ = ["DEFAULT_GATE_TIMEOUT", "Gate", "read_gate"]

#: How long a gate may run unless its table says: it is meant to be cheap.
DEFAULT_GATE_TIMEOUT: Final = 30.0
_MAX_GATE_TIMEOUT: Final = timedelta(hours=1)
_TARGET: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", re.ASCII)


@dataclass(frozen=True, slots=True)
class Gate:
    """A routine's gate: the program and its arguments (or a Python callable's ``module:function``), and the seconds it may take."""

    command: tuple[str, ...]
    timeout: float = DEFAULT_GATE_TIMEOUT
    #: A callable gate's ``module:function``, called in a Python process of its own (:mod:`runner.run.gate`); None for a program.
    target: str | None = None
    #: Where a callable gate's module is looked for first: the configuration's directory.
    directory: str = ""


def read_gate(reader: Any, value: object, key: str) -> Gate:
    """The gate *value* of the routine whose ``gate`` key is *key*.

    Raises:
        ConfigError: not a list of strings or such a table, a timeout out of range, or a program that is missing or not executable.
    """
    timeout = DEFAULT_GATE_TIMEOUT
    if isinstance(value, dict):
        data = reader.table(value, key, ("command", "callable", "timeout"))
        if "timeout" in data:
            duration = reader.duration(data["timeout"], f"{key}.timeout")
            if not timedelta(0) < duration <= _MAX_GATE_TIMEOUT:
                raise reader.fail(f"{key}.timeout", "a duration from 1s to 1h", data["timeout"])
            timeout = duration.total_seconds()
        if "callable" in data:
            if "command" in data:
                raise reader.fail(key, "a command or a callable, not both", "both")
            return _callable_gate(reader, data["callable"], f"{key}.callable", timeout)
        value, key = data.get("command"), f"{key}.command"
    if not isinstance(value, list) or not value or not all(isinstance(part, str) and part and "\x00" not in part for part in value):
        raise reader.fail(key, "a non-empty list of strings without NUL characters (the program and its arguments)", value)
    program = value[0]
    if "/" in program:
        path = program if os.path.isabs(program) else str(reader.files_base / program)
        if not os.path.isfile(path):
            raise reader.fail(key, f"a gate program that exists (looked for {path!r})", program)
        if not os.access(path, os.X_OK):
            raise reader.fail(key, f"an executable gate program ({path!r} is not executable: chmod +x it)", program)
    else:
        found = shutil.which(program)
        if found is None:
            raise reader.fail(key, "a gate program found on PATH, or a path to one", program)
        path = program
    return Gate((path, *value[1:]), timeout)


def _callable_gate(reader: Any, value: object, key: str, timeout: float) -> Gate:
    """The gate of a Python callable named by *value*, ``module:function``, its module found (never imported) at load."""
    if not isinstance(value, str) or not _TARGET.fullmatch(value):
        raise reader.fail(key, "a Python callable as 'module:function' (dotted names allowed on either side)", value)
    directory = str(reader.files_base)
    top = value.split(":", 1)[0].split(".", 1)[0]
    # Only the top-level module is looked for: finding a submodule would run its package's code, which is the gate's to run.
    if importlib.machinery.PathFinder.find_spec(top, [directory, *sys.path]) is None and top not in sys.builtin_module_names:
        raise reader.fail(key, f"a callable whose module is in the configuration's directory or importable ({top!r} was not found)", value)
    return Gate((), timeout, target=value, directory=directory)
