"""Asking a routine's gate whether its slot has anything to do, before any journal or model is touched.

The gate (:mod:`runner.settings._gate`) runs as a command backend's program
runs (:func:`runner.backends.command.run_program`): in its own session, cut
off at its timeout with everything it started, without any agent's API key in
its environment. It is told the slot's identity in its environment
(``GHOSTRUNNER_AGENT``, ``GHOSTRUNNER_ROUTINE``, ``GHOSTRUNNER_SLOT``,
``GHOSTRUNNER_SCHEDULED``, ``GHOSTRUNNER_CLIENT_KEY``) and as one JSON object
on stdin (``agent``, ``routine``, ``slot``, ``scheduled``, ``client_key``). Its
exit status decides:

* 0: run the slot as usual;
* :data:`NOTHING_TO_DO` (100): nothing to do; the run ends ``skipped`` with the
  reason ``gate``, asks no backend and appends nothing;
* anything else fails the run, as a command backend's program would: 75
  (try again later), death by a signal and the timeout are transient (the slot
  may be run again), any other status, or a program that cannot start, is
  permanent (exit 78).

A **callable** gate (``gate = {callable = "module:function"}``) is a Python
function, called with the same object (a dict of those five strings) in a
Python process of its own, started as a gate's program is, so that its time
limit and environment are a program's: :data:`CALL_SCRIPT` imports it (the
configuration's directory first on the import path, instead of the working
directory) and turns its answer into the exit status. ``True`` runs the slot,
``False`` means nothing to do; any other value, an exception, or a module or
name that cannot be imported fails the run for good, the exception's type and
message in the run's error; raising :class:`TimeoutError` or
:class:`ConnectionError` fails it for now (status 75: the slot may be run again).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Final

from runner.backends.base import CallBudget, one_line
from runner.backends.command import TEMPFAIL_STATUS, run_program
from runner.errors import BackendError
from runner.processes import signal_name
from runner.run.contract import RunIdentity
from runner.settings.config import Gate, RunnerConfig

__all__ = ["CALL_SCRIPT", "NOTHING_TO_DO", "GateAnswer", "ask_gate"]

#: The exit status by which a gate says "nothing to do".
NOTHING_TO_DO: Final = 100

#: What the Python process of a callable gate runs (``python -c CALL_SCRIPT module:function DIRECTORY``).
CALL_SCRIPT: Final = f"""
import importlib, json, sys
sys.path[:] = [sys.argv[2], *(entry for entry in sys.path if entry not in ("", "."))]
try:
    slot = json.load(sys.stdin)
    module, _, name = sys.argv[1].partition(":")
    target = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    answer = target(slot)
except (TimeoutError, ConnectionError) as exc:
    print(f"{{type(exc).__name__}}: {{exc}}", file=sys.stderr)
    sys.exit({TEMPFAIL_STATUS})
except Exception as exc:
    print(f"{{type(exc).__name__}}: {{exc}}", file=sys.stderr)
    sys.exit(1)
if answer is True:
    sys.exit(0)
if answer is False:
    sys.exit({NOTHING_TO_DO})
print(f"it returned {{answer!r:.200}}, not True (run the slot) or False (nothing to do)", file=sys.stderr)
sys.exit(2)
"""


@dataclass(frozen=True, slots=True)
class GateAnswer:
    """What the gate said: ``go`` (run the slot), else nothing to do, or ``error`` (the run fails; ``permanent`` if for good)."""

    go: bool
    error: str | None = None
    permanent: bool = False


def ask_gate(config: RunnerConfig, gate: Gate, identity: RunIdentity) -> GateAnswer:
    """Run *gate* for the run of *identity* and say what it answered (see the module)."""
    if gate.target is not None:
        command = [sys.executable, "-c", CALL_SCRIPT, gate.target, gate.directory]
        where = f"the gate of routine {identity.routine!r} (callable {gate.target!r})"
    else:
        command = list(gate.command)
        where = f"the gate of routine {identity.routine!r} ({command[0]!r})"
    fields = {name: getattr(identity, name) for name in ("agent", "routine", "slot", "scheduled", "client_key")}
    hidden = tuple(sorted({agent.backend.api_key_env for agent in config.agents.values() if agent.backend.api_key_env}))
    budget = CallBudget(time.monotonic() + gate.timeout, gate.timeout, "the gate's timeout")
    try:
        ran = run_program(
            command,
            json.dumps(fields).encode("utf-8"),
            budget,
            name="gate",
            hidden_env=hidden,
            env={f"GHOSTRUNNER_{name.upper()}": value for name, value in fields.items()},
        )
    except OSError as exc:
        return GateAnswer(go=False, error=f"{where} cannot start: {exc.strerror or exc}", permanent=True)
    except BackendError as exc:  # it flooded stdout, which no gate needs
        return GateAnswer(go=False, error=f"{where}: {exc.reason}", permanent=True)
    if not ran.exited:
        return GateAnswer(go=False, error=f"{where} did not exit within {gate.timeout:g} s; it and what it started were killed")
    code = ran.returncode
    if code == 0:
        return GateAnswer(go=True)
    if code == NOTHING_TO_DO:
        return GateAnswer(go=False)
    lines = [line for line in ran.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    tail = one_line(lines[-1]) if lines else "no message on stderr"
    how = f"signal {signal_name(-code)}" if code < 0 else f"status {code}"
    transient = code == TEMPFAIL_STATUS or code < 0
    return GateAnswer(
        go=False,
        error=f"{where} exited with {how} (0 runs the slot, {NOTHING_TO_DO} skips it): {tail}",
        permanent=not transient,
    )
