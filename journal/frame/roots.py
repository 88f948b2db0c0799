"""Where a journal is when no root is given: the one rule ``ghostjournal`` and ``ghostrunner`` both follow.

1. A root given outright wins: ``ghostjournal --root``; for ``ghostrunner``,
   a ``journal_root`` in its configuration (the runner's or the agent's).
2. Else ``$GHOSTJOURNAL_ROOT``: one journal directory, which every agent's
   entries go to and are read from (each agent's reads stay its own); set
   but empty or blank, it is an error, never a default.
3. Else, for an agent, its own journal in the state directory: ``AGENT``
   under ``$STATE_DIRECTORY`` (systemd sets it for a unit with
   ``StateDirectory=``; the first entry of a list), else under
   ``$XDG_STATE_HOME/ghostjournal``, else ``~/.local/state/ghostjournal``.
   Relative values of the variables are ignored, as the XDG specification
   says: they would mean the current directory.
4. Else there is no journal to open, and the caller says so.

The library itself never guesses a path (``Journal(root)`` takes one); the
two commands find journals through this module alone, so they cannot come to differ.
An agent's name becomes one path component only when it is a valid agent
name (the entry schema's), so ``--agent`` can never name a directory beside
or above another agent's journal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from journal.files import is_agent_name

__all__ = ["ROOT_ENVVAR", "STATE_SUBDIRECTORY", "JournalPlace", "PlaceError", "journal_place", "state_home"]

#: The variable naming the journal when no root is given outright.
ROOT_ENVVAR: Final = "GHOSTJOURNAL_ROOT"
#: The directory below ``$XDG_STATE_HOME`` (or ``~/.local/state``) that agents' journals go to.
STATE_SUBDIRECTORY: Final = "ghostjournal"


class PlaceError(ValueError):
    """A value the rule cannot use: an agent name that is no agent's, a blank ``$GHOSTJOURNAL_ROOT``.

    Attributes:
        source: what gave the value, as a command names it (``--agent``, ``$GHOSTJOURNAL_ROOT``).
        expected: what it must be.
        got: the value.
        fix: what to do, if the expectation does not say it (``""`` otherwise).
    """

    def __init__(self, source: str, expected: str, got: str, fix: str = "") -> None:
        self.source = source
        self.expected = expected
        self.got = got
        self.fix = fix
        super().__init__(f"{source}: {self.problem}")

    @property
    def problem(self) -> str:
        """``expected ..., got ...`` and the fix, without the source."""
        return f"expected {self.expected}, got {self.got!r}" + (f"; {self.fix}" if self.fix else "")


@dataclass(frozen=True, slots=True)
class JournalPlace:
    """A journal directory and what chose it, as a message names it.

    Attributes:
        root: the journal directory (it may not exist yet).
        chosen_by: how it was found, e.g. ``$GHOSTJOURNAL_ROOT`` or ``the journal of agent 'motoko' in $XDG_STATE_HOME/ghostjournal``.
    """

    root: Path
    chosen_by: str


def state_home(environ: Mapping[str, str] | None = None) -> tuple[Path, str] | None:
    """The state directory that holds each agent's journal, and the variable that gave it; None when no variable gives an absolute path."""
    env = os.environ if environ is None else environ
    unit_state = env.get("STATE_DIRECTORY", "").split(":")[0]
    if os.path.isabs(unit_state):
        return Path(unit_state), "$STATE_DIRECTORY"
    xdg = env.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / STATE_SUBDIRECTORY, f"$XDG_STATE_HOME/{STATE_SUBDIRECTORY}"
    home = env.get("HOME", "")
    if os.path.isabs(home):
        return Path(home) / ".local" / "state" / STATE_SUBDIRECTORY, f"~/.local/state/{STATE_SUBDIRECTORY}"
    return None


def journal_place(agent: str | None = None, environ: Mapping[str, str] | None = None) -> JournalPlace | None:
    """The journal to use when no root is given outright (steps 2 and 3 of the rule above); None when there is none.

    ``$GHOSTJOURNAL_ROOT`` relative to the current directory is made absolute
    here, so that a process started elsewhere (a worker) opens the same one.

    Args:
        agent: the agent whose journal is wanted, if any.
        environ: the environment (default ``os.environ``).

    Raises:
        PlaceError: *agent* is no valid agent name (it would not be one directory of the state directory), or
            ``$GHOSTJOURNAL_ROOT`` is set but empty or blank.
    """
    env = os.environ if environ is None else environ
    if agent is not None and not is_agent_name(agent):
        raise PlaceError("--agent", "an agent name of 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit", agent)
    if ROOT_ENVVAR in env:
        named = env[ROOT_ENVVAR]
        if not named.strip():
            # A script's variable that came out empty: Path("") is the current directory, and falling
            # through to the state directory would write where nobody asked; either is a guess.
            raise PlaceError(
                f"${ROOT_ENVVAR}", "a journal directory", named, "an empty value is not the current directory: unset it, or name one"
            )
        return JournalPlace(Path(os.path.abspath(named)), f"${ROOT_ENVVAR}")
    if agent is None:
        return None
    home = state_home(env)
    if home is None:
        return None
    base, variable = home
    return JournalPlace(base / agent, f"the journal of agent {agent!r} in {variable}")
