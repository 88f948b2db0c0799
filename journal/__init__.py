"""ghostjournal: a durable, local-first journal for scheduled agents.

    >>> from journal import Journal
    >>> j = Journal("./journal")
    >>> e = j.append({"kind": "note", "agent": "motoko", "theme": "light", "voice": "..."})

Layers, bottom-up: a module imports from its own layer and those listed before it, never from one
listed after it (tests/test_layout.py holds every import to this, and finds no import circle)::

    terminal: text made safe to show on a terminal
    errors:   the exception tree
    progress: progress of slow work, never silent
    files:    entry files and their rules
    frame:    what both commands print and write: terminal text, times, output files, HTML pages
    indexing: the derived SQLite index and the views over its rows
    encoding: encoders and the semantic arm
    sync:     opening a journal, its index kept in step, appends, reads checked against the files
    checking: verify: the entry files, and the index against what a rebuild of them would make
    ranking:  search, relate, corrections, the prompt context
    carry:    export, import, backup
    api:      the Journal facade over all of the above
    mcp:      the MCP server
    pages:    the journal report and its charts
    cli:      the ghostjournal command
"""

from journal.api import (
    MAX_K,
    MODES,
    AppendResult,
    BackupReport,
    EmbedResult,
    EraseResult,
    ExportManifest,
    ImportSummary,
    Journal,
    SkippedFile,
    VerifyReport,
)
from journal.checking.verify import Problem
from journal.encoding import Encoder, EncoderIdentity, load_encoder
from journal.errors import (
    AmbiguousEntryIdError,
    ClientKeyTakenError,
    DiskFullError,
    DuplicateEntryError,
    EntryFileError,
    EntryNotFoundError,
    EntryValidationError,
    EraseKeyError,
    ImportSourceError,
    ImportStreamError,
    IndexStateError,
    IntegrityError,
    InvalidEntryIdError,
    JournalClosedError,
    JournalError,
    JournalNotFoundError,
    JournalStorageError,
    LockTimeoutError,
    ManifestError,
    ModelNotFoundError,
    ProposalDecidedError,
    ProposalNotFoundError,
    ReadOnlyFilesystemError,
    SemanticUnavailableError,
    StoragePermissionError,
    UnsafePathError,
)
from journal.files import REDACT_MODES, make_redactor
from journal.files.entry import (
    KINDS,
    MAX_ENTRY_BYTES,
    SCHEMA_VERSION,
    Entry,
    canonical_json,
    check_label,
    json_nesting_depth,
    json_type_name,
    validate_payload,
)
from journal.indexing.digest import Digest
from journal.progress import PROGRESS_ENVVAR, ProgressGate, StderrProgress, progress_after, reporting_slow
from journal.ranking.context import ContextRecord, PromptContext
from journal.ranking.hit import Hit

__all__ = [
    "KINDS",
    "MAX_ENTRY_BYTES",
    "MAX_K",
    "MODES",
    "PROGRESS_ENVVAR",
    "REDACT_MODES",
    "SCHEMA_VERSION",
    "AmbiguousEntryIdError",
    "AppendResult",
    "BackupReport",
    "ClientKeyTakenError",
    "ContextRecord",
    "Digest",
    "DiskFullError",
    "DuplicateEntryError",
    "EmbedResult",
    "Encoder",
    "EncoderIdentity",
    "Entry",
    "EntryFileError",
    "EntryNotFoundError",
    "EntryValidationError",
    "EraseKeyError",
    "EraseResult",
    "ExportManifest",
    "Hit",
    "ImportSourceError",
    "ImportStreamError",
    "ImportSummary",
    "IndexStateError",
    "IntegrityError",
    "InvalidEntryIdError",
    "Journal",
    "JournalClosedError",
    "JournalError",
    "JournalNotFoundError",
    "JournalStorageError",
    "LockTimeoutError",
    "ManifestError",
    "ModelNotFoundError",
    "Problem",
    "ProgressGate",
    "PromptContext",
    "ProposalDecidedError",
    "ProposalNotFoundError",
    "ReadOnlyFilesystemError",
    "SemanticUnavailableError",
    "SkippedFile",
    "StderrProgress",
    "StoragePermissionError",
    "UnsafePathError",
    "VerifyReport",
    "canonical_json",
    "check_label",
    "json_nesting_depth",
    "json_type_name",
    "load_encoder",
    "make_redactor",
    "progress_after",
    "reporting_slow",
    "validate_payload",
]
