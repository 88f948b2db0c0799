"""Paused agents and routines: ``ghostrunner pause`` / ``resume``, kept in the state directory's ``pauses.json``.

A pause names an agent (all its routines) or one (agent, routine). Every run
reads the file when it starts (``ghostrunner run`` and so each timer run;
``serve`` before it starts a run's worker, so that a paused run starts no
process), so a pause or resume takes effect at the next fire, without a
restart; a paused run is ``skipped`` with the reason ``paused`` and asks no
backend. ``status`` shows a paused pair as ``paused``.

The file is the runner's own::

    {"format": "ghostrunner-pauses", "version": 1,
     "paused": [{"agent": "motoko", "routine": null, "since": "2026-09-05T10:00:00+00:00"},
                {"agent": "batou", "routine": "evening", "since": "..."}]}

It is replaced atomically, and read-modify-write changes are serialised by a
lock file beside it, so two ``pause`` commands at once lose neither. No file
means nothing is paused. A file that is not the runner's (not that JSON, too
large) is an error naming it; a run then fails rather than guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import filelock

from journal import JournalStorageError
from runner.errors import StateFileError
from runner.settings.config import RunnerConfig
from runner.settings.state_dir import ensure_state_dir, hand_over, state_dir, write_atomically

__all__ = ["PAUSE_FILE", "Pause", "PauseBook", "PauseChange", "pause_of", "paused_or_unknown"]

PAUSE_FILE: Final = "pauses.json"
_FORMAT: Final = "ghostrunner-pauses"
_VERSION: Final = 1
_MAX_BYTES: Final = 1 << 20
#: How long ``pause`` and ``resume`` wait for another one's change of the file; it takes milliseconds.
_CHANGE_WAIT_SECONDS: Final = 30.0
_FIX: Final = "it is ghostrunner's own file; remove it to resume every agent and routine, then pause again what should stay paused"


@dataclass(frozen=True, slots=True)
class Pause:
    """One pause: *agent* as a whole (``routine`` None) or one of its routines, since when (ISO 8601)."""

    agent: str
    routine: str | None
    since: str

    def covers(self, agent: str, routine: str) -> bool:
        """Whether this pause holds *agent*'s *routine*."""
        return self.agent == agent and self.routine in (None, routine)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"agent": self.agent, "routine": self.routine, "since": self.since}


@dataclass(frozen=True, slots=True)
class PauseChange:
    """What a ``pause`` or ``resume`` did: the pair (or agent) named, whether the file changed, and the agent's paused routines now."""

    agent: str
    routine: str | None
    action: str
    changed: bool
    paused_routines: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (what the commands print)."""
        return {
            "agent": self.agent,
            "routine": self.routine,
            "action": self.action,
            "changed": self.changed,
            "paused_routines": list(self.paused_routines),
        }


def _parse(path: Path, data: bytes) -> tuple[Pause, ...]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise StateFileError(path, "the pause file is not JSON", _FIX) from None
    if not isinstance(document, dict) or document.get("format") != _FORMAT or document.get("version") != _VERSION:
        raise StateFileError(path, f"the pause file is not a {_FORMAT} file of version {_VERSION}", _FIX)
    records = document.get("paused")
    if not isinstance(records, list):
        raise StateFileError(path, "the pause file has no 'paused' list", _FIX)
    pauses = []
    for record in records:
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("agent"), str)
            or not isinstance(record.get("since"), str)
            or not isinstance(record.get("routine"), str | None)
        ):
            raise StateFileError(path, "the pause file holds a record that is not {agent, routine, since}", _FIX)
        pauses.append(Pause(record["agent"], record["routine"], record["since"]))
    return tuple(pauses)


class PauseBook:
    """The pauses of one deployment (*config*'s state directory)."""

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.path = state_dir(config) / PAUSE_FILE

    def read(self) -> tuple[Pause, ...]:
        """Every pause in the file (none when there is no file).

        Raises:
            StateFileError: the file is not the runner's pause file.
            OSError: the filesystem refused the read (no permission).
        """
        try:
            with self.path.open("rb") as stream:
                data = stream.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return ()
        except IsADirectoryError:
            raise StateFileError(self.path, "the pause file is a directory", _FIX) from None
        except NotADirectoryError:
            raise StateFileError(
                self.path.parent,
                "the runner's state directory is not a directory",
                "move it away; ghostrunner creates the directory itself (it lives beside runner.lock_file)",
            ) from None
        if len(data) > _MAX_BYTES:
            raise StateFileError(self.path, f"the pause file is larger than {_MAX_BYTES} bytes", _FIX)
        return _parse(self.path, data)

    def is_paused(self, agent: str, routine: str) -> bool:
        """Whether *agent*'s *routine* is paused (as a pair, or with the whole agent).

        Raises:
            StateFileError, OSError: as :meth:`read`.
        """
        return any(pause.covers(agent, routine) for pause in self.read())

    def paused_pairs(self) -> frozenset[tuple[str, str]]:
        """The configured (agent, routine) pairs that are paused.

        Raises:
            StateFileError, OSError: as :meth:`read`.
        """
        pauses = self.read()
        return frozenset(
            (agent.name, name)
            for agent in self.config.agents.values()
            for name in agent.routines
            if any(pause.covers(agent.name, name) for pause in pauses)
        )

    def pause(self, agent: str, routine: str | None = None, *, now: datetime | None = None) -> PauseChange:
        """Pause *agent* (every routine) or its *routine*; pausing what is paused already changes nothing.

        Raises:
            UnknownNameError: *agent* is not configured, or does not run *routine*.
            StateFileError, OSError: as :meth:`read`, or the file could not be written.
        """
        self._check(agent, routine)
        since = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        with self._changing() as pauses:
            before = list(pauses)
            if routine is None:
                pauses[:] = [pause for pause in pauses if pause.agent != agent] + [Pause(agent, None, since)]
                changed = not any(pause.agent == agent and pause.routine is None for pause in before)
            else:
                changed = not any(pause.covers(agent, routine) for pause in before)
                if changed:
                    pauses.append(Pause(agent, routine, since))
            if not changed:
                pauses[:] = before
            return PauseChange(agent, routine, "pause", changed, self._paused_routines(agent, pauses))

    def resume(self, agent: str, routine: str | None = None) -> PauseChange:
        """Resume *agent* (every routine, however paused) or its *routine* (also out of a pause of the whole agent).

        Resuming one routine of an agent paused as a whole leaves its other
        configured routines paused, each as a pause of its own.

        Raises:
            UnknownNameError: *agent* is not configured, or does not run *routine*.
            StateFileError, OSError: as :meth:`read`, or the file could not be written.
        """
        self._check(agent, routine)
        with self._changing() as pauses:
            before = list(pauses)
            if routine is None:
                pauses[:] = [pause for pause in pauses if pause.agent != agent]
            else:
                whole = [pause for pause in pauses if pause.agent == agent and pause.routine is None]
                kept = [pause for pause in pauses if not pause.covers(agent, routine)]
                named = {pause.routine for pause in kept if pause.agent == agent}
                others = [name for name in self.config.agent(agent).routines if name != routine and name not in named]
                pauses[:] = kept + [Pause(agent, name, whole[0].since) for name in others if whole]
            return PauseChange(agent, routine, "resume", pauses != before, self._paused_routines(agent, pauses))

    def _check(self, agent: str, routine: str | None) -> None:
        settings = self.config.agent(agent)
        if routine is not None:
            self.config.routine_for(settings, routine)

    def _paused_routines(self, agent: str, pauses: list[Pause]) -> tuple[str, ...]:
        return tuple(name for name in self.config.agent(agent).routines if any(pause.covers(agent, name) for pause in pauses))

    @contextmanager
    def _changing(self) -> Iterator[list[Pause]]:
        """The pauses as a list to change in place, written back (only when changed) under the file's change lock."""
        directory = ensure_state_dir(self.path.parent)
        lock = filelock.FileLock(directory / f"{PAUSE_FILE}.lock", timeout=_CHANGE_WAIT_SECONDS, mode=0o600)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise StateFileError(
                Path(lock.lock_file),
                f"another pause or resume has held this lock for {_CHANGE_WAIT_SECONDS:g} s",
                "try again once it has finished",
            ) from None
        try:
            hand_over(Path(lock.lock_file))
            before = list(self.read())
            pauses = list(before)
            yield pauses
            if pauses != before:
                document = {"format": _FORMAT, "version": _VERSION, "paused": [pause.to_dict() for pause in pauses]}
                write_atomically(self.path, (json.dumps(document, ensure_ascii=False, indent=1) + "\n").encode())
        finally:
            lock.release()


def pause_of(config: RunnerConfig, agent: str, routine: str) -> tuple[bool, str | None, str | None]:
    """Whether a run of *agent*'s *routine* is paused, as ``(paused, error, fault)``; what every run asks first.

    A pause file that cannot be read gives its error (and, when the
    filesystem refused it, the errno name as *fault*): the run fails rather
    than guess whether it may call its backend.
    """
    book = PauseBook(config)
    try:
        return book.is_paused(agent, routine), None, None
    except StateFileError as exc:
        return False, str(exc), None
    except OSError as exc:
        refused = JournalStorageError.for_errno(
            book.path,
            exc.errno or 0,
            "read the pause file",
            "make the runner's state directory (beside runner.lock_file) readable by this user",
        )
        return False, str(refused), refused.errno_name


def paused_or_unknown(config: RunnerConfig) -> frozenset[tuple[str, str]] | None:
    """The configured pairs that are paused, or None when that cannot be known here (what ``status`` needs).

    None when the pause file cannot be read, and when there is no state
    directory at all: every run and every pause creates it, so its absence
    means ``status`` is reading shipped logs on another host.
    """
    if not state_dir(config).is_dir():
        return None
    try:
        return PauseBook(config).paused_pairs()
    except (StateFileError, OSError):
        return None
