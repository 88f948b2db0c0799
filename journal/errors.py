"""The journal's exception tree.

Every error the library raises on purpose derives from :class:`JournalError`,
and each one also subclasses the builtin it refines, so callers can catch
either::

    JournalError
    ├── EntryValidationError (ValueError)     a payload breaks entry schema v1
    ├── InvalidEntryIdError (ValueError)      an id with path, glob or length trouble
    ├── EntryNotFoundError (LookupError)      no entry with that id
    ├── DuplicateEntryError                   a supplied id already exists
    ├── JournalNotFoundError (FileNotFoundError)  no journal at the root
    ├── UnsafePathError (PermissionError)     a symlink or path escape was refused
    ├── ReadOnlyJournalError (PermissionError)  an append to a journal this process may only read
    ├── ManifestError                         manifest.json unreadable or unsupported
    ├── IndexStateError                       the derived index could not be repaired
    ├── EntryFileError                        a canonical entry file is corrupt or foreign
    ├── LockTimeoutError (TimeoutError)       the writer lock stayed busy
    └── SemanticUnavailableError              semantic search asked for but not possible
        └── ModelNotFoundError (FileNotFoundError)  no local copy of the embedding model

Messages quote the offending value and say what was expected.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DuplicateEntryError",
    "EntryFileError",
    "EntryNotFoundError",
    "EntryValidationError",
    "IndexStateError",
    "InvalidEntryIdError",
    "JournalError",
    "JournalNotFoundError",
    "LockTimeoutError",
    "ManifestError",
    "ModelNotFoundError",
    "ReadOnlyJournalError",
    "SemanticUnavailableError",
    "UnsafePathError",
]


class JournalError(Exception):
    """Root of every error the journal raises on purpose."""


class EntryValidationError(JournalError, ValueError):
    """A payload does not satisfy entry schema v1.

    Attributes:
        field: dotted path of the offending field, e.g. ``signals.novelty``.
        expected: what the schema wants there.
        got: a short rendering of what was supplied.
    """

    def __init__(self, field: str, expected: str, got: str | None = None) -> None:
        self.field = field
        self.expected = expected
        self.got = got
        subject = "entry" if field.startswith("(") else f"entry field {field!r}"
        message = f"{subject}: expected {expected}"
        if got is not None:
            message += f", got {got}"
        super().__init__(message)


class InvalidEntryIdError(JournalError, ValueError):
    """An entry id that could be read as a path, a glob or is too long."""

    def __init__(self, entry_id: object) -> None:
        self.entry_id = entry_id
        shown = repr(entry_id) if not isinstance(entry_id, str) or len(entry_id) <= 80 else repr(entry_id[:80] + "…")
        super().__init__(
            f"invalid entry id {shown}: expected 1-128 characters of letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )


class EntryNotFoundError(JournalError, LookupError):
    """No entry has the requested id."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"no entry with id {entry_id!r}")


class DuplicateEntryError(JournalError):
    """An append supplied an id that already names another entry."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(
            f"an entry with id {entry_id!r} already exists; omit 'id' to get a fresh one, "
            "or use 'client_key' for idempotent retries"
        )


class JournalNotFoundError(JournalError, FileNotFoundError):
    """The root holds no journal (and creation was not asked for)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        super().__init__(f"no journal at {str(root)!r}; create one with 'ghostjournal --root {root} init'")


class UnsafePathError(JournalError, PermissionError):
    """A symlink or a path leading outside the journal was refused."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refused {str(path)!r}: {reason}")


class ReadOnlyJournalError(JournalError, PermissionError):
    """An append to a journal opened read-only (this process may not write its files)."""

    def __init__(self, root: Path, reason: str) -> None:
        self.root = root
        self.reason = reason
        super().__init__(
            f"journal {str(root)!r} is read-only for this user (uid {os.geteuid()}): {reason}; "
            f"append as the journal's owner, or give this user the journal (chown -R USER {root})"
        )


class ManifestError(JournalError):
    """manifest.json is missing fields, corrupt, or of a newer format."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"manifest {str(path)!r}: {reason}")


class IndexStateError(JournalError):
    """The derived index is in a state the journal could not repair."""


class EntryFileError(JournalError):
    """An entry file is unreadable, not JSON, or not a valid entry."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"entry file {str(path)!r}: {reason}")


class LockTimeoutError(JournalError, TimeoutError):
    """The writer lock was held by another process for longer than allowed."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(
            f"the journal's writer lock {str(path)!r} stayed busy for {timeout:g} s; "
            "another writer is running, try again later"
        )


class SemanticUnavailableError(JournalError):
    """Semantic (embedding) search was asked for but cannot run; the message says what fixes it.

    Attributes:
        reason: what is missing.
        fix: the command or setting that provides it.
    """

    def __init__(self, reason: str, fix: str) -> None:
        self.reason = reason
        self.fix = fix
        super().__init__(f"semantic search is not available: {reason}; {fix}")


class ModelNotFoundError(SemanticUnavailableError, FileNotFoundError):
    """No local copy of the embedding model was found (the journal never downloads one by itself).

    Attributes:
        model: the model name or path that was asked for.
        looked_in: the places searched, in order.
    """

    def __init__(self, model: str, looked_in: list[str], fix: str) -> None:
        self.model = model
        self.looked_in = looked_in
        super().__init__(f"embedding model {model!r} was not found offline (looked in: {'; '.join(looked_in)})", fix)
