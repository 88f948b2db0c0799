"""The public names of journal and runner: exactly these, each importable from the package, whatever the layout inside."""

from __future__ import annotations

import importlib

import pytest

JOURNAL = [
    "AmbiguousEntryIdError", "AppendResult", "BackupReport", "ClientKeyTakenError", "ContextRecord", "Digest", "DiskFullError",
    "DuplicateEntryError",
    "EmbedResult", "Encoder", "EncoderIdentity", "Entry", "EntryFileError", "EntryNotFoundError", "EntryValidationError",
    "EraseKeyError", "EraseResult", "ExportManifest", "Hit", "ImportSourceError", "ImportStreamError", "ImportSummary", "IndexStateError", "IntegrityError",
    "InvalidEntryIdError", "Journal", "JournalClosedError", "JournalError", "JournalNotFoundError", "JournalStorageError",
    "KINDS", "LockTimeoutError", "MAX_ENTRY_BYTES", "MAX_K", "MODES", "ManifestError", "ModelNotFoundError", "PROGRESS_ENVVAR",
    "Problem", "ProgressGate", "PromptContext", "ProposalDecidedError", "ProposalNotFoundError", "REDACT_MODES", "ReadOnlyFilesystemError", "SCHEMA_VERSION", "SemanticUnavailableError",
    "SkippedFile", "StderrProgress", "StoragePermissionError", "UnsafePathError", "VerifyReport", "canonical_json", "check_label",
    "json_nesting_depth", "json_type_name", "load_encoder", "make_redactor", "progress_after", "reporting_slow", "validate_payload",
]

RUNNER = [
    "AgentConfig", "Backend", "BackendError", "BackendReplyError", "BackendTimeoutError", "BackendUnavailableError",
    "CONFIG_ENVVAR", "ConfigError", "DURATION_EXPECTED", "DemoReport", "FleetUnavailableError", "KUBERNETES_VERSION", "Manifests",
    "NoScheduledTimeError", "Notifier", "OUTCOMES", "PauseBook", "ReflectionRequest", "Rendering", "RunInterrupted", "RunResult",
    "RunnerConfig", "RunnerError", "ScheduleNotExpressibleError", "Scheduler", "SchedulerBusyError", "SimulationSummary",
    "StateFileError", "StatusReport", "UnitRenderError", "UnknownNameError", "build_backend", "build_history", "build_report",
    "configure_logging", "default_exec_argv", "execute_run", "load_config", "parse_duration", "read_log", "refuse_warnings",
    "render_manifests", "render_units", "run_at", "run_demo", "run_slot", "simulate", "simulate_agent", "simulation_window",
    "write_manifests", "write_units",
]


@pytest.mark.parametrize(("package", "names"), [("journal", JOURNAL), ("runner", RUNNER)], ids=["journal", "runner"])
def test_public_names(package: str, names: list[str]) -> None:
    """The package's __all__ is exactly the pinned names, and each of them is there to import."""
    module = importlib.import_module(package)
    assert sorted(module.__all__) == names
    missing = [name for name in names if not hasattr(module, name)]  # what `from package import name` looks up
    assert missing == []
