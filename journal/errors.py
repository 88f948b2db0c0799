"""The journal's exception tree.

Every error the library raises on purpose derives from :class:`JournalError`,
and each one also subclasses the builtin it refines, so callers can catch
either::

    JournalError
    ├── EntryValidationError (ValueError)     a payload breaks entry schema v1
    ├── InvalidEntryIdError (ValueError)      an id with path, glob or length trouble
    ├── EntryNotFoundError (LookupError)      no entry with that id
    ├── DuplicateEntryError                   a supplied id already exists
    │   └── ClientKeyTakenError               no longer raised: a client_key is one agent's (kept for callers that catch it)
    ├── JournalNotFoundError (FileNotFoundError)  no journal at the root
    ├── UnsafePathError (PermissionError)     a symlink or path escape was refused
    │   └── OutputPathError                   a command's output path was refused (in a journal, not a file, another file)
    ├── ManifestError                         manifest.json unreadable or unsupported
    ├── EraseKeyError (ValueError)            erase.key is damaged (empty, no key, or no regular file)
    ├── IndexStateError                       the derived index could not be repaired
    ├── IntegrityError                        verify found problems (files or index)
    ├── ImportStreamError (ValueError)        an import stream is truncated, changed or holds a bad line
    ├── ImportSourceError (ValueError)        a journal directory to import is no ghostjournal 0.1.1 one, or holds a bad entry file
    ├── ImportConflictError                   imported entries clash with held ones (skipped, never overwritten)
    ├── EntryFileError                        a canonical entry file is corrupt or foreign
    ├── LockTimeoutError (TimeoutError)       the writer lock stayed busy
    ├── JournalClosedError (RuntimeError)     a call on a closed Journal, or one inherited through fork
    ├── JournalStorageError (OSError)         the filesystem refused a read or write (errno, path, fix)
    │   ├── DiskFullError                     no space left (ENOSPC) or over quota (EDQUOT)
    │   ├── ReadOnlyFilesystemError           the filesystem is mounted read-only (EROFS)
    │   └── StoragePermissionError (PermissionError)  this user may not write there (EACCES, EPERM)
    └── SemanticUnavailableError              semantic search asked for but not possible
        └── ModelNotFoundError (FileNotFoundError)  no local copy of the embedding model

Messages quote the offending value and say what was expected. Each class
carries, as ``exit_code``, the exit code ``ghostjournal`` and ``ghostrunner``
end with when it reaches them: 1 unless the class says otherwise; 2 usage (an
output path refused); 3 not found (no entry, no journal); 4 conflict (duplicate, manifest); 65 invalid data;
73 read-only filesystem; 74 disk full or another I/O error; 75 lock busy;
77 permission denied.
"""

from __future__ import annotations

import errno as _errno
import os
import shlex
from pathlib import Path
from typing import ClassVar

from journal.terminal import printable

__all__ = [
    "AmbiguousEntryIdError",
    "ClientKeyTakenError",
    "DiskFullError",
    "DuplicateEntryError",
    "EntryFileError",
    "EntryNotFoundError",
    "EntryValidationError",
    "EraseKeyError",
    "ImportConflictError",
    "ImportSourceError",
    "ImportStreamError",
    "IndexStateError",
    "IntegrityError",
    "InvalidEntryIdError",
    "JournalError",
    "JournalNotFoundError",
    "JournalStorageError",
    "LockTimeoutError",
    "ManifestError",
    "ModelNotFoundError",
    "OutputPathError",
    "ProposalDecidedError",
    "ProposalNotFoundError",
    "ReadOnlyFilesystemError",
    "SemanticUnavailableError",
    "StoragePermissionError",
    "UnsafePathError",
    "restored_error",
]


def restored_error(cls: type[BaseException], args: tuple[object, ...], state: dict[str, object]) -> BaseException:
    """An error of *cls* with *args* and attributes *state*, made without calling its ``__init__`` (how errors unpickle)."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class JournalError(Exception):
    """Root of every error the journal raises on purpose.

    Every one pickles round trip (simulate's worker processes send errors
    back): an exception pickles as its class called with its ``args``, which
    the ``__init__`` of most of these classes does not take, so the message
    and the attributes are restored without calling it.
    """

    #: The exit code of the command line tools for this error (sysexits.h where one fits); subclasses refine it.
    exit_code: ClassVar[int] = 1

    def __reduce__(self) -> tuple[object, ...]:
        return (restored_error, (type(self), self.args, dict(self.__dict__)))


class EntryValidationError(JournalError, ValueError):
    """A payload does not satisfy entry schema v1.

    Attributes:
        field: dotted path of the offending field, e.g. ``signals.novelty``.
        expected: what the schema wants there.
        got: a short rendering of what was supplied.
    """

    exit_code: ClassVar[int] = 65  # EX_DATAERR

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

    exit_code: ClassVar[int] = 65  # EX_DATAERR

    def __init__(self, entry_id: object) -> None:
        self.entry_id = entry_id
        shown = repr(entry_id) if not isinstance(entry_id, str) or len(entry_id) <= 80 else repr(entry_id[:80] + "…")
        super().__init__(
            f"invalid entry id {shown}: expected 1-128 characters of letters, digits, '_' or '-', starting with a letter or digit"
        )


class EntryNotFoundError(JournalError, LookupError):
    """No entry has the requested id (with *as_prefix*: nor an id starting with it)."""

    exit_code: ClassVar[int] = 3  # not found

    def __init__(self, entry_id: str, *, as_prefix: bool = False) -> None:
        self.entry_id = entry_id
        if as_prefix:
            super().__init__(f"no entry with id {entry_id!r}: it is no entry's id nor the start of one (it matches 0 entries)")
        else:
            super().__init__(f"no entry with id {entry_id!r}")


class AmbiguousEntryIdError(JournalError, LookupError):
    """The start of an id given for an entry is the start of more than one entry's id."""

    exit_code: ClassVar[int] = 2  # usage: the argument names no one entry

    def __init__(self, prefix: str, matches: int) -> None:
        self.prefix = prefix
        self.matches = matches
        super().__init__(f"entry id prefix {prefix!r} matches {matches} entries; give more of the id, or the whole of it")


class DuplicateEntryError(JournalError):
    """An append supplied an id that already names another entry."""

    exit_code: ClassVar[int] = 4  # conflict

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(
            f"an entry with id {entry_id!r} already exists; omit 'id' to get a fresh one, or use 'client_key' for idempotent retries"
        )


class ClientKeyTakenError(DuplicateEntryError):
    """Once raised when an append's client_key was held by another agent's entry; no append raises it any more.

    A client_key is unique per agent (index layout 8): an agent's append with a key another agent
    holds stores its own entry. The class stays so that code which catches it keeps importing.
    """

    def __init__(self, client_key: str, agent: str) -> None:
        self.client_key = client_key
        self.agent = agent
        JournalError.__init__(self, f"client_key {client_key!r} is held by an entry of another agent than {agent!r}")


class ProposalNotFoundError(JournalError, LookupError):
    """No pending supersede proposal says that *newer* may update *older* (of the agent asked for), nor any decision on it."""

    exit_code: ClassVar[int] = 3  # not found

    def __init__(self, older: str, newer: str) -> None:
        self.older = older
        self.newer = newer
        super().__init__(
            f"no pending proposal that entry {newer!r} updates entry {older!r}; 'ghostjournal proposals' lists the pending ones"
        )


class ProposalDecidedError(JournalError):
    """A proposal was already decided the other way: accepting a rejected one, or rejecting an accepted one."""

    exit_code: ClassVar[int] = 4  # conflict

    def __init__(self, older: str, newer: str, decision: str, entry_id: str) -> None:
        self.older = older
        self.newer = newer
        self.decision = decision
        self.entry_id = entry_id
        super().__init__(
            f"the proposal that entry {newer!r} updates entry {older!r} was already {decision} by entry {entry_id!r};"
            " a decision stands (erase that entry to decide again)"
        )


class JournalNotFoundError(JournalError, FileNotFoundError):
    """The root holds no journal (and creation was not asked for).

    Attributes:
        root: the directory looked in.
        chosen_by: what chose it when no root was given (``$GHOSTJOURNAL_ROOT``, an agent's state directory), else None.
    """

    exit_code: ClassVar[int] = 3  # not found

    def __init__(self, root: Path, chosen_by: str | None = None) -> None:
        self.root = root
        self.chosen_by = chosen_by
        create = _shell_line(["ghostjournal", "--root", str(root), "init"])
        if chosen_by is None:
            super().__init__(f"no journal at {str(root)!r}; create one with: {create}")
        else:
            # Found by the rule, not given: say what chose the place, and how to name another.
            super().__init__(
                f"no journal at {str(root)!r} ({chosen_by}); pass --root PATH for another journal, or create this one with: {create}"
            )


def _shell_line(argv: list[str]) -> str:
    """*argv* as one line a shell runs as it is: each argument shell-quoted, and one holding a control character (a line break) in
    bash's $'...' form, so the line stays one and can be pasted. Never wrapped in repr(), whose escapes a shell would not undo."""

    def quoted(argument: str) -> str:
        if argument.isprintable():
            return shlex.quote(argument)
        escaped = "".join(
            char if char.isprintable() and char not in "\\'" else f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\U{ord(char):08x}"
            for char in argument
        )
        return f"$'{escaped}'"

    return " ".join(quoted(argument) for argument in argv)


class UnsafePathError(JournalError, PermissionError):
    """A symlink or a path leading outside the journal was refused."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refused {str(path)!r}: {reason}")


class OutputPathError(UnsafePathError):
    """Where a command was told to write its output (``--out``, ``--into``, ``--to``) is refused before anything is written.

    It lies inside a journal, is no regular file (a link, a FIFO, a directory), or is a file the command did
    not write before and was not told to replace.
    """

    exit_code: ClassVar[int] = 2  # usage: the operator named the path, and another one fixes it


class ManifestError(JournalError):
    """manifest.json is missing fields, corrupt, or of a newer format."""

    exit_code: ClassVar[int] = 4  # conflict: a manifest of a newer or foreign format

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"manifest {str(path)!r}: {reason}")


class EraseKeyError(JournalError, ValueError):
    """The journal's erase key (``erase.key`` in its root, made by the first erase, copied by ``backup``) is damaged.

    Every erase, backup and import that meets a tombstone needs the key, so each refuses before it writes anything.

    Attributes:
        path: the key file.
        reason: what is wrong with it.
    """

    exit_code: ClassVar[int] = 65  # EX_DATAERR

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"erase key {str(path)!r}: {reason}; copy erase.key back from a backup of this journal (a backup holds the same key),"
            " or, with no backup, move it away: the next erase makes a new key, and an import then no longer matches"
            " the tombstones made with the old one (each is reported as a conflict)"
        )


class IndexStateError(JournalError):
    """The derived index is in a state the journal could not repair."""


class IntegrityError(JournalError):
    """A check of the journal (``verify``) found problems; the report names each with its file and fix.

    Attributes:
        problems: how many.
        counts: how many of each kind.
    """

    exit_code: ClassVar[int] = 4  # conflict: the files or the index are not what the journal wrote

    def __init__(self, problems: int, counts: dict[str, int], *, repaired: bool = False) -> None:
        self.problems = problems
        self.counts = counts
        kinds = ", ".join(f"{count} {kind}" for kind, count in counts.items())
        fix = (
            "these remain after the repair; each one's fix is in the report"
            if repaired
            else "each one's fix is in the report; 'ghostjournal verify --repair' rebuilds the index and moves files that are no entry to quarantine/"
        )
        super().__init__(f"verify found {problems} problem{'s' if problems != 1 else ''} ({kinds}); {fix}")


class ImportStreamError(JournalError, ValueError):
    """An import stream that cannot be imported whole: a bad line, no manifest at its end, or bytes its manifest's hash does not match.

    Attributes:
        line: the line (1-based) the problem is at.
        reason: what is wrong there.
    """

    exit_code: ClassVar[int] = 65  # EX_DATAERR

    def __init__(self, line: int, reason: str, fix: str | None = None) -> None:
        self.line = line
        self.reason = reason
        self.fix = fix
        super().__init__(f"import stream line {line}: {reason}; nothing was imported" + (f" ({fix})" if fix else ""))


class ImportSourceError(JournalError, ValueError):
    """A journal directory that cannot be imported whole: not a ghostjournal 0.1.1 journal, or an entry file in it that cannot be read or mapped.

    Attributes:
        path: the directory, or the file (below the directory) the problem is at.
        reason: what is wrong there.
        fix: what to do about it, or None.
    """

    exit_code: ClassVar[int] = 65  # EX_DATAERR

    def __init__(self, path: Path | str, reason: str, fix: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.fix = fix
        # A name in the directory may hold a line break or a terminal escape: the message stays one printable line.
        super().__init__(f"{printable(str(path))}: {reason}; nothing was imported" + (f" ({fix})" if fix else ""))


class ImportConflictError(JournalError):
    """An import found entries whose id or client_key the journal holds with other bytes; they were skipped.

    Attributes:
        conflicts: how many.
        (*source* names what was imported: "the stream", or "the journal directory" of ghostjournal 0.1.1.)
    """

    exit_code: ClassVar[int] = 4  # conflict

    def __init__(self, conflicts: int, source: str = "the stream") -> None:
        self.conflicts = conflicts
        super().__init__(
            f"{conflicts} entr{'ies' if conflicts != 1 else 'y'} of {source} clash{'' if conflicts != 1 else 'es'} with entries this journal holds "
            "(listed in the summary); "
            "they were skipped and nothing was overwritten: import into another journal, or rename the agent with --agent-map"
        )


class EntryFileError(JournalError):
    """An entry file is unreadable, not JSON, or not a valid entry.

    ``holder`` is the agent of the valid entry the file holds in another
    entry's place (a swapped or restored file), else None: a read scoped to
    one agent tells that agent no more of another agent's entry than this.
    """

    def __init__(self, path: Path | str, reason: str, *, holder: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.holder = holder
        super().__init__(f"entry file {str(path)!r}: {reason}")


class LockTimeoutError(JournalError, TimeoutError):
    """The writer lock was held by another process for longer than allowed."""

    exit_code: ClassVar[int] = 75  # EX_TEMPFAIL: try again later

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(
            f"the journal's writer lock {str(path)!r} stayed busy for {timeout:g} s; another writer is running, try again later"
        )


class JournalClosedError(JournalError, RuntimeError):
    """A call on a Journal after its close(), or in a process that inherited it through fork."""

    def __init__(self, root: Path | str, reason: str) -> None:
        self.root = root
        self.reason = reason
        super().__init__(f"journal {str(root)!r} {reason}")


class JournalStorageError(JournalError, OSError):
    """The filesystem refused to store or read part of the journal.

    Raised instead of a bare OSError or sqlite3 error, so that a full disk, a
    read-only mount or a permission problem reads as one line that names the
    path, the errno and the fix. Use :meth:`for_errno` to get the subclass
    that fits the errno.

    Attributes:
        path: the file or directory the operation was on.
        errno: the errno value (``errno.ENOSPC``, ...), as for any OSError.
        errno_name: its symbolic name, e.g. ``"ENOSPC"``.
        action: what was being done, e.g. ``"write the entry file"``.
        fix: how to make the operation possible.
    """

    exit_code: ClassVar[int] = 74  # EX_IOERR: any I/O error without a code of its own

    fix_hint: ClassVar[str] = "check the filesystem (dmesg shows I/O errors) and try again"

    def __init__(self, path: Path | str, errno_code: int, action: str, fix: str | None = None) -> None:
        self.path = path
        self.errno_name = _errno.errorcode.get(errno_code, f"errno {errno_code}")
        self.action = action
        self.fix = fix or self.fix_hint
        message = f"cannot {action} {str(path)!r}: {os.strerror(errno_code).lower()} ({self.errno_name}); {self.fix}"
        super().__init__(message)
        # Set after OSError.__init__, which would otherwise parse the message as (errno, strerror).
        self.errno = errno_code
        self.strerror = os.strerror(errno_code)
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        # Picklable (simulate's worker processes send errors back), unlike an OSError with these arguments.
        return (type(self), (self.path, self.errno, self.action, self.fix))

    @staticmethod
    def for_errno(path: Path | str, errno_code: int, action: str, fix: str | None = None) -> JournalStorageError:
        """The storage error of the subclass that fits *errno_code*."""
        return JournalStorageError.class_for(errno_code)(path, errno_code, action, fix)

    @staticmethod
    def class_for(errno_code: int) -> type[JournalStorageError]:
        """The subclass for *errno_code* (``errno.ENOSPC``, ...); JournalStorageError itself for any other errno."""
        kinds: dict[int, type[JournalStorageError]] = {
            _errno.ENOSPC: DiskFullError,
            _errno.EDQUOT: DiskFullError,
            _errno.EROFS: ReadOnlyFilesystemError,
            _errno.EACCES: StoragePermissionError,
            _errno.EPERM: StoragePermissionError,
        }
        return kinds.get(errno_code, JournalStorageError)


class DiskFullError(JournalStorageError):
    """The filesystem has no space left (ENOSPC), or this user's quota is used up (EDQUOT)."""

    exit_code: ClassVar[int] = 74  # EX_IOERR

    fix_hint: ClassVar[str] = "free space on that filesystem (or raise the quota), then try again"


class ReadOnlyFilesystemError(JournalStorageError):
    """The filesystem holding the journal is mounted read-only (EROFS)."""

    exit_code: ClassVar[int] = 73  # EX_CANTCREAT

    fix_hint: ClassVar[str] = "remount that filesystem read-write, or keep the journal on a writable one"


class StoragePermissionError(JournalStorageError, PermissionError):
    """This user may not write (or read) there (EACCES, EPERM)."""

    exit_code: ClassVar[int] = 77  # EX_NOPERM

    fix_hint: ClassVar[str] = "run as the journal's owner, or give this user write access to the journal directory"


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
