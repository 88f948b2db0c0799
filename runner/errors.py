"""The runner's exception tree.

Every error the runner raises on purpose derives from :class:`RunnerError`::

    RunnerError
    ├── ConfigError (ValueError)          a configuration or persona file is invalid
    ├── NoScheduledTimeError (LookupError)  a routine has no scheduled time before the one asked for
    ├── BackendError                      a backend could not produce a valid reply; not worth another attempt
    │   ├── BackendTimeoutError (TimeoutError)          no reply in time: transient
    │   ├── BackendUnavailableError (ConnectionError)   unreachable, reset, HTTP 429 or 5xx: transient
    │   └── BackendReplyError (ValueError)              a reply that is not the JSON asked for: transient
    ├── IncompleteBackupError             ``backup`` could not copy every agent's journal, or a copy did not verify
    ├── MalformedResultError (ValueError) a worker's last stdout line is not a run result
    ├── MixedJournalError                 an agent's journal holds its past of the other sort, simulated or real
    ├── RealBackendsRefusedError          simulate or demo would call real backends without --real-backends
    ├── SchedulerBusyError                another scheduler holds the deployment lock
    ├── StateFileError (ValueError)       a file in the runner's state directory is not the runner's own (the pause file)
    ├── UnitRenderError (ValueError)      systemd or k8s render refused a value or an --out file
    └── UnknownNameError (LookupError)    an agent or routine the config does not define

    RunInterrupted (SystemExit)           a signal ended a run; in :mod:`runner.run.contract`, beside the RunResult it carries

Messages name the object, state what was expected, and say how to fix it.
Each class carries, as ``exit_code``, the exit code ``ghostrunner`` ends with
when it reaches the command line: 1 unless the class says otherwise; 2 an
unknown name or a bad option; 4 a journal holding an agent's past of the other sort, or a backup
that is not whole; 75 busy;
78 a configuration error (EX_CONFIG).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from journal.errors import restored_error

__all__ = [
    "BackendError",
    "BackendReplyError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "ConfigError",
    "IncompleteBackupError",
    "MalformedResultError",
    "MixedJournalError",
    "NoScheduledTimeError",
    "RealBackendsRefusedError",
    "RunnerError",
    "SchedulerBusyError",
    "StateFileError",
    "UnitRenderError",
    "UnknownNameError",
]


class RunnerError(Exception):
    """Root of every error the runner raises on purpose.

    Every one pickles round trip (simulate's and serve's worker processes send
    errors back): the message and attributes are restored without calling
    ``__init__``, whose arguments are not the exception's ``args``.
    """

    #: The exit code of ``ghostrunner`` for this error. Not a ClassVar: a UnitRenderError's depends on what it names.
    exit_code: int = 1

    def __reduce__(self) -> tuple[object, ...]:
        return (restored_error, (type(self), self.args, dict(self.__dict__)))


class ConfigError(RunnerError, ValueError):
    """A configuration (or persona) file breaks the rules.

    Attributes:
        source: the file (or ``<embedded defaults>``) the problem is in.
        key: the dotted key, e.g. ``agents.motoko.backend.type`` (empty for the whole file).
        expected: what the key wants.
        got: a short rendering of what was there, if anything.
    """

    exit_code = 78  # EX_CONFIG

    def __init__(self, source: str | Path, key: str, expected: str, got: str | None = None) -> None:
        self.source = str(source)
        self.key = key
        self.expected = expected
        self.got = got
        # A key is the file's own text: quoted when it holds a newline or other control, so the message stays one line.
        where = f"{self.source}: {key if key.isprintable() else repr(key)}" if key else self.source
        message = f"{where}: expected {expected}"
        if got is not None:
            message += f", got {got}"
        super().__init__(message)


class NoScheduledTimeError(RunnerError, LookupError):
    """A routine's schedule has no time at or before the one a run was asked for.

    Attributes:
        routine: the routine's name.
        schedule: its cron expression.
        at: the time asked for.
    """

    exit_code = 2  # usage: the time was given on the command line

    def __init__(self, routine: str, schedule: str, at: datetime) -> None:
        self.routine = routine
        self.schedule = schedule
        self.at = at
        super().__init__(f"routine {routine!r} ({schedule}) has no scheduled time at or before {at.isoformat()}")


class BackendError(RunnerError):
    """A backend failed: unreachable, refused, timed out, or replied with something unusable.

    A plain BackendError is permanent (HTTP 401/403/404 or another 4xx, a
    redirect, a missing API key, a helper that cannot start or exits non-zero):
    the same request would fail the same way, so it is not retried. The
    subclasses that set :attr:`is_transient` are worth another attempt.

    Attributes:
        backend: the backend's name (``openai``, ``command``, ``simulated``).
        reason: what went wrong, in one line.
        agent: the agent whose backend it is, once the engine has named it (else None).
    """

    #: Whether another attempt of the same request may succeed (a run retries it; a slot gets later runs).
    is_transient: ClassVar[bool] = False

    def __init__(self, backend: str, reason: str) -> None:
        self.backend = backend
        self.reason = reason
        self.agent: str | None = None
        super().__init__(self._message())

    def _message(self) -> str:
        who = f"{self.backend} backend" if self.agent is None else f"{self.backend} backend (agent {self.agent})"
        return f"{who}: {self.reason}"

    def with_reason(self, reason: str) -> BackendError:
        """This error (its class and attributes kept), its reason now *reason* (a redacted one)."""
        self.reason = reason
        self.args = (self._message(),)
        return self

    def for_agent(self, agent: str) -> BackendError:
        """This error, its message now naming *agent* too (the engine knows the agent, a backend may not)."""
        self.agent = agent
        self.args = (self._message(),)
        return self


class BackendTimeoutError(BackendError, TimeoutError):
    """A backend did not answer within its timeout."""

    is_transient = True

    def __init__(self, backend: str, timeout: float, limit: str = "the backend's timeout") -> None:
        self.timeout = timeout
        super().__init__(backend, f"no reply within {timeout:g} s ({limit})")


class BackendUnavailableError(BackendError, ConnectionError):
    """A backend could not answer now: connection refused or reset, HTTP 429 or 5xx, a helper that exited 75.

    Attributes:
        retry_after: the seconds the server asked to wait (``Retry-After``), or None.
    """

    is_transient = True

    def __init__(self, backend: str, reason: str, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(backend, reason)


class BackendReplyError(BackendError, ValueError):
    """A backend answered, but not with the JSON object of entry fields asked for (retried once, with a correction)."""

    is_transient = True


class MalformedResultError(RunnerError, ValueError):
    """A line that should hold a run's result (the last stdout line of ``ghostrunner run``) does not.

    Attributes:
        reason: what is wrong with the line.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"not a run result line: {reason}")


class RealBackendsRefusedError(RunnerError):
    """A simulation would call real backends, and was not told it may.

    Attributes:
        command: ``simulate`` or ``demo``.
        calls: the most backend calls each agent on a real backend would make.
        described: the calls, per agent and backend, as the message shows them.
    """

    exit_code = 2  # usage: the command needs --real-backends for these agents

    def __init__(self, command: str, calls: Mapping[str, int], described: str) -> None:
        self.command = command
        self.calls = calls
        self.described = described
        super().__init__(
            f"{command} would make up to {described} backend calls, one per slot; pass --real-backends to make them, "
            'or simulate agents on backend = "simulated"'
        )


class MixedJournalError(RunnerError):
    """An agent would write simulated entries into a journal holding real ones, or the reverse.

    Attributes:
        agent: the agent.
        journal_root: its journal.
        is_simulated: whether the agent's entries are simulated.
    """

    exit_code = 4  # conflict, as ghostjournal's: the journal's contents refuse the write

    def __init__(self, agent: str, journal_root: Path, is_simulated: bool) -> None:
        self.agent = agent
        self.journal_root = journal_root
        self.is_simulated = is_simulated
        if is_simulated:
            what = (
                f'agent {agent!r} is simulated (backend = "simulated"), but its journal {str(journal_root)!r} holds real entries of '
                f"{agent!r} (not marked meta.simulated); simulated entries would mix with them"
            )
        else:
            what = (
                f"agent {agent!r} is not simulated, but its journal {str(journal_root)!r} holds simulated entries of {agent!r} "
                "(meta.simulated: true, from simulate or demo); its prompt contexts would recall them as its own past"
            )
        super().__init__(
            f"{what}: give the agent another journal_root, or set agents.{agent}.mix_simulated = true "
            "(--mix-simulated for run, simulate and demo) to write there anyway"
        )


class IncompleteBackupError(RunnerError):
    """``ghostrunner backup`` wrote its directory, but without every agent's journal, or with a copy that did not verify.

    Attributes:
        out: the backup directory (it holds what could be copied, and its marker says which failed).
        failed: the agents whose journal could not be copied.
        problems: how many problems the copies' verify found.
    """

    exit_code = 4  # as ghostjournal's conflict: the backup is not what was asked for; --keep removed nothing

    def __init__(self, out: str, failed: list[str], problems: int) -> None:
        self.out = out
        self.failed = failed
        self.problems = problems
        parts = []
        if failed:
            parts.append(
                f"the journal of {len(failed)} agent{'s' if len(failed) != 1 else ''} ({', '.join(repr(name) for name in failed)}) "
                "could not be copied (each named above)"
            )
        if problems:
            parts.append(f"verify found {problems} problem{'s' if problems != 1 else ''} in the copies")
        super().__init__(
            f"the backup {out!r} is not whole: {'; '.join(parts)}; the other journals are in it, and --keep removed "
            "no older backup; fix each and back up again"
        )


class SchedulerBusyError(RunnerError):
    """Another ``ghostrunner serve`` already holds this deployment's lock."""

    exit_code = 75  # EX_TEMPFAIL: try again once the other one has stopped

    def __init__(self, lock_file: Path) -> None:
        self.lock_file = lock_file
        super().__init__(
            f"another ghostrunner scheduler holds {str(lock_file)!r}; run one scheduler per deployment (stop the other one first)"
        )


class FleetUnavailableError(RunnerError):
    """A fleet command cannot start: its extra is not installed, its Redis cannot be reached, or ``serve`` runs these agents.

    Exit 78 (EX_CONFIG), like every configuration problem: the fix is in the
    configuration or the host, never in a retry of the same start.
    """

    exit_code = 78

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}; {fix}")


class StateFileError(RunnerError, ValueError):
    """A file of the runner's state directory (the pause file) cannot be read as the runner's own.

    Attributes:
        path: the file.
        reason: what is wrong with it.
        fix: how to put it right.
    """

    def __init__(self, path: Path, reason: str, fix: str) -> None:
        self.path = path
        self.reason = reason
        self.fix = fix
        super().__init__(f"{str(path)!r}: {reason}; {fix}")


class UnitRenderError(RunnerError, ValueError):
    """``systemd render`` or ``k8s render`` refused: a value cannot go into a unit or manifest as it is, or a file cannot be written safely.

    Attributes:
        field: the configuration key (``agents.motoko.journal_root``) or the option (``--exec``, ``--out``) at fault.
        source: the configuration file, when *field* is one of its keys; None for an option.
    """

    def __init__(self, field: str, reason: str, source: str | None = None, *, exit_code: int | None = None) -> None:
        self.field = field
        self.source = source
        # A configuration key that cannot go into a unit is a configuration error (EX_CONFIG); a bad option is usage.
        self.exit_code = exit_code if exit_code is not None else 78 if source else 2
        super().__init__(f"{source}: {field}: {reason}" if source else f"{field}: {reason}")


#: Longest part of a bad value that an error message quotes; the rest is cut with "…".
QUOTE_LIMIT = 80


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """*value* quoted for an error message, cut to *limit* characters (a 1 MB option is not repeated whole).

    A string is shown by ``repr``, which escapes line breaks, control and other unprintable
    characters, so the message stays one line; anything else by its ``repr``, cut likewise.
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else repr(value[:limit]) + "\u2026"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "\u2026"


class UnknownNameError(RunnerError, LookupError):
    """An agent or routine that the configuration does not define."""

    exit_code = 2  # usage: the name was given on the command line

    def __init__(self, what: str, name: str, known: list[str], scope: str = "in the configuration") -> None:
        self.what = what
        self.name = name
        self.known = known
        super().__init__(f"no {what} {quoted(name)} {scope}; configured: {', '.join(known) or 'none'}")
