"""Exit codes of both commands: each error carries its own, and a missing journal is 3 in ghostjournal and ghostrunner alike."""

from __future__ import annotations

import errno
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from journal import (
    DiskFullError,
    DuplicateEntryError,
    EntryNotFoundError,
    EntryValidationError,
    JournalError,
    JournalNotFoundError,
    JournalStorageError,
    LockTimeoutError,
    ManifestError,
    ReadOnlyFilesystemError,
    StoragePermissionError,
    UnsafePathError,
)
from journal.cli.cli import cli as journal_cli
from runner import (
    BackendError,
    ConfigError,
    FleetUnavailableError,
    NoScheduledTimeError,
    RunnerError,
    ScheduleNotExpressibleError,
    SchedulerBusyError,
    SimulationSummary,
    StateFileError,
    UnitRenderError,
    UnknownNameError,
)
from runner.cli.cli import cli as runner_cli

#: Every error a command can end with, and the exit code the README documents for it.
DOCUMENTED: list[tuple[RunnerError | JournalError, int]] = [
    (BackendError("openai", "refused"), 1),
    (ConfigError("ghostrunner.toml", "runner.timezone", "an IANA time zone", "'Mars'"), 78),
    (ScheduleNotExpressibleError("evening", "0 21 L * *", "'L'"), 78),
    (UnitRenderError("agents.motoko.journal_root", "expected an absolute path", "ghostrunner.toml"), 78),
    (UnitRenderError("--user", "expected a system user name"), 2),
    (UnitRenderError("--strict", "render found 1 problem (the warning above) and wrote no unit", exit_code=78), 78),
    (UnknownNameError("agent", "batou", ["motoko"]), 2),
    (NoScheduledTimeError("evening", "0 21 * * *", datetime(1970, 1, 1, tzinfo=UTC)), 2),
    (SchedulerBusyError(Path("/run/ghostrunner.lock")), 75),
    (FleetUnavailableError("cannot reach the fleet's Redis at redis://10.0.0.5:6379/0 (fleet.broker): refused", "start redis-server there"), 78),
    (StateFileError(Path("/var/lib/ghostrunner/serve.state/pauses.json"), "the pause file is not JSON", "remove it"), 1),
    (JournalNotFoundError(Path("/srv/journal")), 3),
    (EntryNotFoundError("e1"), 3),
    (DuplicateEntryError("e1"), 4),
    (ManifestError(Path("/srv/journal/manifest.json"), "format 9 is newer than supported"), 4),
    (EntryValidationError("voice", "a string", "3"), 65),
    (UnsafePathError("/srv/journal/entries", "a symlink"), 1),
    (LockTimeoutError(Path("/srv/journal/lock"), 60), 75),
    (ReadOnlyFilesystemError("/srv/journal", errno.EROFS, "write"), 73),
    (DiskFullError("/srv/journal", errno.ENOSPC, "write"), 74),
    (StoragePermissionError("/srv/journal", errno.EACCES, "write"), 77),
    (JournalStorageError("/srv/journal", errno.EIO, "write"), 74),
]


@pytest.mark.parametrize(("error", "code"), DOCUMENTED, ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value))
def test_each_error_carries_its_documented_exit_code(error: RunnerError | JournalError, code: int) -> None:
    """An error's ``exit_code`` is the code the README documents for it."""
    assert error.exit_code == code


@pytest.mark.parametrize(("error", "code"), DOCUMENTED, ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value))
def test_ghostrunner_ends_with_the_errors_exit_code_in_one_line(monkeypatch: pytest.MonkeyPatch, error: Exception, code: int) -> None:
    """Whatever error ends a ghostrunner command, the command exits with that error's code after one line on stderr."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("runner.run.demo.run_demo", refuse)  # the demo command imports it when it runs
    result = CliRunner().invoke(runner_cli, ["demo", "--days", "7"])
    assert result.exit_code == code, result.output
    assert result.stderr == f"ghostrunner: error: {error}\n"


def test_a_missing_journal_exits_3_in_both_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No journal at the root is exit 3 (not found) in ghostjournal and in ghostrunner."""
    missing = tmp_path / "nowhere"
    journal = CliRunner().invoke(journal_cli, ["--root", str(missing), "list"])

    def refuse(*args: object, **kwargs: object) -> None:
        raise JournalNotFoundError(missing)

    monkeypatch.setattr("runner.run.demo.run_demo", refuse)  # the demo command imports it when it runs
    runner = CliRunner().invoke(runner_cli, ["demo", "--days", "7"])
    assert (journal.exit_code, runner.exit_code) == (3, 3)
    assert journal.stderr == f"ghostjournal: error: {JournalNotFoundError(missing)}\n"
    assert runner.stderr == f"ghostrunner: error: {JournalNotFoundError(missing)}\n"


@pytest.mark.parametrize(("fault", "code"), [("EROFS", 73), ("ENOSPC", 74), ("EDQUOT", 74), ("EIO", 74), ("EACCES", 77), ("EPERM", 77),
                                             ("errno 999", 74)])
def test_a_simulation_the_filesystem_refused_exits_with_that_refusals_code(monkeypatch: pytest.MonkeyPatch, fault: str, code: int) -> None:
    """simulate exits with the code of the JournalStorageError its journal's filesystem refused with, whatever else failed."""
    refused = SimulationSummary("motoko", "2026-08-01T00:00:00+00:00", "2026-08-02T00:00:00+00:00", 2, {"failed": 2}, [], 0.1, fault)
    monkeypatch.setattr("runner.run.simulate.simulate", lambda *args, **kwargs: [refused])
    result = CliRunner().invoke(runner_cli, ["simulate", "--days", "1", "--start", "2026-08-01"])
    assert result.exit_code == code, result.output


def test_no_scheduled_time_is_a_usage_error_of_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """A routine with no scheduled time before --at is exit 2, one line naming --at, the routine and its schedule."""
    at = datetime(1970, 1, 1, 0, 30, tzinfo=UTC)

    def unscheduled(config: object, agent: str, routine: str, **kwargs: object) -> None:
        raise NoScheduledTimeError(routine, "0 21 * * *", at)

    monkeypatch.setattr("runner.cli.cli.run_at", unscheduled)
    handler = signal.getsignal(signal.SIGTERM)
    try:
        result = CliRunner().invoke(runner_cli, ["run", "evening", "--agent", "motoko", "--at", "1970-01-01T00:30Z"])
    finally:
        signal.signal(signal.SIGTERM, handler)  # run sets its own, which must not outlive the test
    assert result.exit_code == 2
    assert result.stderr == ("ghostrunner: error: Invalid value for --at: routine 'evening' (0 21 * * *) has no scheduled time "
                             "at or before 1970-01-01T00:30:00+00:00\n")
