"""ghostjournal: a durable, local-first journal for scheduled agents.

    >>> from journal import Journal
    >>> j = Journal("./journal")
    >>> e = j.append({"kind": "note", "agent": "motoko", "theme": "light", "voice": "..."})
"""

from journal.api import MAX_K, MODES, AppendResult, EmbedResult, ExportManifest, ImportSummary, Journal, SkippedFile, VerifyReport
from journal.context import ContextRecord, PromptContext
from journal.embed import Encoder, EncoderIdentity, load_encoder
from journal.entry import (
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
from journal.errors import (
    ClientKeyTakenError,
    DiskFullError,
    DuplicateEntryError,
    EntryFileError,
    EntryNotFoundError,
    EntryValidationError,
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
    ReadOnlyFilesystemError,
    SemanticUnavailableError,
    StoragePermissionError,
    UnsafePathError,
)
from journal.progress import PROGRESS_ENVVAR, ProgressGate, StderrProgress, progress_after, reporting_slow
from journal.retrieval import Digest, Hit
from journal.verify import Problem

__all__ = [
    "KINDS",
    "MAX_ENTRY_BYTES",
    "MAX_K",
    "MODES",
    "PROGRESS_ENVVAR",
    "SCHEMA_VERSION",
    "AppendResult",
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
    "ExportManifest",
    "Hit",
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
    "progress_after",
    "reporting_slow",
    "validate_payload",
]
