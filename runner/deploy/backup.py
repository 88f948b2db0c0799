"""``ghostrunner backup``: one new directory holding an online backup of every configured agent's journal, the configuration and the pause file.

Each journal is copied by :meth:`journal.Journal.backup` (consistent as of
its own instant while the runner writes, then verified); the configuration
file is copied as it was read, and the pause file as it is. Everything goes
into a hidden directory beside the target, renamed to it when complete, so
a failure leaves no target. Restoring is copying a journal directory back (it
is a journal as it stands) and putting the files back in place.

Every backup holds ``ghostrunner-backup.json``, what it copied and whether
each copy verified. :func:`backup_into` names a new dated directory inside a
parent (the backup timer's ``--into``) and, with ``keep``, removes older
backups there; it removes only what this module made: a real directory (no
symbolic link is followed) with a dated name and that file in it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from journal import Journal, JournalNotFoundError
from journal.errors import JournalError, JournalStorageError, OutputPathError, UnsafePathError
from journal.frame import claim_partial_directory, dangling_link_fix, hold_stops, refuse_inside_journals, release_stops, replace_durably
from runner.run.pauses import PauseBook
from runner.settings import RunnerConfig

__all__ = ["MARKER", "DeploymentBackup", "backup_deployment", "backup_into", "prune_backups"]

#: The file every backup holds: its report, and the sign (for pruning) that ``ghostrunner backup`` made the directory.
MARKER: Final = "ghostrunner-backup.json"
_MADE_BY: Final = "ghostrunner backup"
#: The directories backup_into makes: the UTC time of the run, and a counter when two runs share a second.
_DATED: Final = re.compile(r"ghostrunner-backup-(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-(?P<n>[2-9]|[1-9][0-9]{1,2}))?")
#: What a run killed before it finished leaves: its hidden partial copy, or the hidden remains of an older backup it was removing.
_LEFTOVER: Final = re.compile(r"\.ghostrunner-backup-[0-9]{8}T[0-9]{6}Z(?:-[0-9]{1,3})?\.(?:[A-Za-z0-9_]{8}\.partial|removing)")
_MAX_SAME_SECOND: Final = 100
#: A marker larger than this is not one backup wrote.
_MARKER_MAX: Final = 1 << 20


@dataclass(slots=True)
class DeploymentBackup:
    """What :func:`backup_deployment` copied: each agent's journal (with its check), the configuration and the pause file."""

    out: str
    journals: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    #: The older backups backup_into removed (their names), for ``keep``.
    pruned: list[str] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        """True when every journal was copied (or is not made yet) and every copy verified clean."""
        return all("error" not in item and item.get("verify", {}).get("ok", True) for item in self.journals.values())

    @property
    def failed(self) -> dict[str, dict[str, Any]]:
        """The agents whose journal could not be copied, each with its journal's path and the reason."""
        return {name: item for name, item in self.journals.items() if "error" in item}

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"out": self.out, "ok": self.is_clean, "journals": self.journals, "files": self.files, "pruned": self.pruned}


def _reason(exc: BaseException) -> str:
    """One line saying why a journal could not be copied: the error's own message, or its errno's text and the path."""
    if isinstance(exc, JournalError) or not isinstance(exc, OSError) or not exc.strerror:
        return str(exc) or type(exc).__name__
    return f"{exc.strerror.lower()} ({exc.filename!r})" if exc.filename else exc.strerror.lower()


def _is_within(exc: BaseException, work: Path, *, inside: bool = True) -> bool:
    """True when the error names *work* (or, *inside*, a path in it), the backup being written or the scratch space, not a journal being read."""
    named = getattr(exc, "filename", None) or getattr(exc, "path", None)
    if not isinstance(named, str | os.PathLike):
        return False
    path = Path(os.path.abspath(named))
    return path == Path(os.path.abspath(work)) or (inside and Path(os.path.abspath(work)) in path.parents)


def _fix(exc: OSError, directory: Path) -> str | None:
    """What to do about a target in *directory* whose path does not lead to a directory; None for the filesystem's own refusals
    (their hint fits)."""
    link = dangling_link_fix(exc.errno, directory)
    if link is not None:
        return link
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "name a path whose directories exist (a file is in the way, or a directory is missing)"
    return None


def _copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_durably(target, source.read_bytes())  # a private (0600) file, fsynced, whole or not at all


def _is_file(path: Path) -> bool:
    """Whether *path* is a file (followed through links); False where nothing is.

    Raises:
        JournalStorageError: it cannot be looked up (a directory on the way this user may not search,
            a symbolic link loop): Path.is_file() would say False to a loop, and raise PermissionError bare.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise JournalStorageError.for_errno(path, exc.errno or errno.EIO, "read") from None


_EXISTS: Final = "the backup directory exists; name a directory that does not exist yet (a backup never writes into or over anything)"


def backup_deployment(config: RunnerConfig, out: Path, *, reserved: bool = False) -> DeploymentBackup:
    """Copy every configured agent's journal into ``out/journals/<agent>``, the configuration into ``out/config/``, the pause file into ``out/state/``.

    *reserved*: *out* is an empty directory the caller made to claim its name; the finished copy replaces it.

    Raises:
        OutputPathError: *out* exists already (or, when *reserved*, was filled meanwhile), or lies inside a journal.
        JournalStorageError: the filesystem refused; nothing is left behind.
    """
    if not reserved and os.path.lexists(out):
        raise OutputPathError(out, _EXISTS)
    refuse_inside_journals(out, "the backup directory", config.journals())
    stops = hold_stops()
    try:
        work, claim = claim_partial_directory(out)  # first removing what a backup to the same directory killed before its rename left
    except BaseException as exc:
        release_stops(stops)
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):  # no such directory, a file where it belongs, a full disk
            raise JournalStorageError.for_errno(
                out.parent, exc.errno or errno.EIO, "write the backup into", _fix(exc, out.parent)
            ) from None
        raise
    try:
        release_stops(stops)  # a stop that came since the partial directory was made is raised here, where it is removed
        return _write_backup(config, out, work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # gone already unless the stop came before the copy began
        raise
    finally:
        os.close(claim)


def _write_backup(config: RunnerConfig, out: Path, work: Path) -> DeploymentBackup:
    report = DeploymentBackup(str(out))
    try:
        os.chmod(work, 0o700)
        (work / "journals").mkdir(mode=0o700)
        copied: dict[Path, str] = {}
        for name, agent in sorted(config.agents.items()):
            root = Path(agent.journal_root)
            real = Path(os.path.realpath(root))  # never raises: Path.resolve() raises RuntimeError on a symbolic link loop
            if real in copied:  # agents sharing one journal: copied once
                report.journals[name] = {"same_as": copied[real]}
                continue
            try:
                journal = Journal(root, create=False)
            except JournalNotFoundError:
                report.journals[name] = {"journal": str(root), "missing": True}
                continue
            except (JournalError, OSError) as exc:  # a file in its place, a foreign or corrupt manifest, no permission
                report.journals[name] = {"journal": str(root), "error": _reason(exc)}
                continue
            try:
                with journal:
                    made = journal.backup(work / "journals" / name)
            except (JournalError, OSError) as exc:
                if _is_within(exc, work) or _is_within(exc, Path(tempfile.gettempdir()), inside=False):
                    raise  # the backup's own directory or the scratch space (TMPDIR) refused: every other journal would fail the same way
                report.journals[name] = {"journal": str(root), "error": _reason(exc)}
                continue
            copied[real] = name
            report.journals[name] = {"journal": str(root), **made.to_dict(), "out": f"journals/{name}"}
        if config.config_file is not None:
            _copy_file(config.config_file, work / "config" / config.config_file.name)
            report.files.append(f"config/{config.config_file.name}")
        pauses = PauseBook(config).path
        if _is_file(pauses):
            _copy_file(pauses, work / "state" / pauses.name)
            report.files.append(f"state/{pauses.name}")
        replace_durably(work / MARKER, json.dumps({"made_by": _MADE_BY, **report.to_dict()}, indent=2).encode("utf-8") + b"\n")
        try:
            os.rename(work, out)  # over nothing, or over the empty directory that reserved the name
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise OutputPathError(out, _EXISTS) from None  # made meanwhile, by another backup or anyone
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
        raise
    return report


def _open_parent(parent: Path) -> int:
    try:
        return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(parent):
            raise OutputPathError(
                parent, "the backups' directory is a symbolic link; name the directory itself (backups follow no link)"
            ) from None
        if os.path.lexists(parent):
            raise OutputPathError(parent, "the backups' directory is not a directory") from None
        # Not there though its making raised nothing: a link that points nowhere on its way (mkdir's exist_ok let it pass).
        raise JournalStorageError.for_errno(parent, exc.errno or errno.EIO, "make the backups' directory", _fix(exc, parent)) from None


def backup_into(config: RunnerConfig, parent: Path, *, keep: int | None = None, now: datetime | None = None) -> DeploymentBackup:
    """Back up into a new ``ghostrunner-backup-YYYYMMDDTHHMMSSZ`` directory of *parent* (made if missing); then, with *keep*, prune.

    Pruning happens only after a backup that verified clean, so a run that found a problem never removes
    an older backup: it removes, through :func:`prune_backups`, what lies beyond the newest *keep* clean ones.

    Raises:
        OutputPathError: *parent* is a symbolic link, not a directory, or inside a journal.
        UnsafePathError: every dated name of this second is taken.
        JournalStorageError: the filesystem refused; nothing is left behind.
    """
    refuse_inside_journals(parent, "the backups' directory", config.journals())
    try:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass  # something that is no directory (a link, a FIFO, a file): _open_parent says what
    except OSError as exc:  # a file where a directory above it belongs, a full or read-only disk
        raise JournalStorageError.for_errno(parent, exc.errno or errno.EIO, "make the backups' directory", _fix(exc, parent)) from None
    fd = _open_parent(parent)
    try:
        _enter(fd)  # held until os.close(fd) below
        stamp = f"{(now or datetime.now(UTC)).astimezone(UTC):%Y%m%dT%H%M%SZ}"
        name = _reserve(
            fd, parent, [f"ghostrunner-backup-{stamp}", *(f"ghostrunner-backup-{stamp}-{n}" for n in range(2, _MAX_SAME_SECOND))]
        )
        try:
            report = backup_deployment(config, parent / name, reserved=True)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)  # the reservation, still empty: the backup never arrived
            raise
    finally:
        os.close(fd)
    if keep is not None and report.is_clean:
        report.pruned = prune_backups(parent, keep, made=name)
    return report


def _enter(parent_fd: int) -> None:
    """Take a shared lock on the backups' directory (its own descriptor) for this run; first, if no other run holds it, remove what
    runs killed before they finished left behind (their hidden partial copies, the empty dated directories they had claimed, the
    hidden remains of a removal), which only a run still alive could be writing.

    The lock is the kernel's (flock) on the directory itself: released however a run ends, a SIGKILL or a power cut included.
    """
    try:
        fcntl.flock(parent_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # another run is under way: what looks left behind may be its own
    else:
        _remove_leftovers(parent_fd)
    fcntl.flock(parent_fd, fcntl.LOCK_SH)  # from exclusive (or waiting for a run removing leftovers) to shared: runs go on side by side


def _remove_leftovers(parent_fd: int) -> list[str]:
    """Remove from the backups' directory what only an interrupted run leaves: see :func:`_enter`. Returns the names removed."""
    removed = []
    with os.scandir(parent_fd) as listing:
        entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
    for name, is_dir in entries:
        if not is_dir:
            continue
        if _LEFTOVER.fullmatch(name):
            try:
                shutil.rmtree(name, dir_fd=parent_fd)  # fd-based: a symbolic link inside is removed, never followed
            except OSError:
                continue  # what stays keeps its hidden name, never taken for a backup; the new backup goes on
            removed.append(name)
        elif _is_dated(name) and _marker(parent_fd, name) is None:
            try:
                os.rmdir(name, dir_fd=parent_fd)  # only an empty one: a claimed name whose backup never arrived
            except OSError:
                continue  # not empty: a look-alike, never backup's to remove
            removed.append(name)
    return removed


def _reserve(parent_fd: int, parent: Path, names: list[str]) -> str:
    """The first of *names* not yet in *parent*, claimed by making it (an empty directory): two runs started
    within one second, in two processes, cannot both take it, as they could by looking first."""
    for name in names:
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            continue
        return name
    raise UnsafePathError(parent / names[-1], f"{len(names)} backups were started within one second; {_EXISTS}")


def _marker(parent: int, name: str) -> dict[str, Any] | None:
    """The marker of the directory *name* in *parent*, if it is a real directory holding a regular marker file backup wrote."""
    try:
        directory = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    try:
        descriptor = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None
    finally:
        os.close(directory)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = os.read(descriptor, _MARKER_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    try:
        marker = json.loads(data) if len(data) <= _MARKER_MAX else None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes, which no marker backup wrote is
        return None
    if not isinstance(marker, dict) or marker.get("made_by") != _MADE_BY or not isinstance(marker.get("ok"), bool):
        return None
    return marker


def _is_dated(name: str) -> re.Match[str] | None:
    """The match of *name* if it is one backup_into writes: ASCII digits of a real UTC time (``strftime`` writes no other)."""
    match = _DATED.fullmatch(name)
    if match is None:
        return None
    try:
        datetime.strptime(match.group("stamp").replace("Z", "+0000"), "%Y%m%dT%H%M%S%z")  # the Z is UTC
    except ValueError:
        return None
    return match


def prune_backups(parent: Path, keep: int, *, made: str | None = None) -> list[str]:
    """Remove the backups of *parent* older than its newest *keep* clean ones; return the names removed, oldest first.

    Only a directory :func:`backup_into` made counts: a dated name, a real directory (a symbolic link,
    to a backup or anything else, is left alone and never followed) and a marker file backup wrote.
    Anything else in *parent* is never looked into or removed. A backup that did not verify is kept while it
    is newer than the *keep*-th clean one. *made*, the backup the calling run just made, is never removed, even when
    backups dated later (made while the clock was ahead) outnumber *keep*. Each is renamed to a hidden name before its removal, so that one
    removed halfway is never taken for a backup.

    Raises:
        OutputPathError: *parent* is a symbolic link or not a directory.
        OSError: a removal failed (what was removed before stays removed).
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    fd = _open_parent(parent)
    try:
        found = []
        with os.scandir(fd) as listing:
            for entry in listing:
                match = _is_dated(entry.name)
                if match is None or not entry.is_dir(follow_symlinks=False):
                    continue
                marker = _marker(fd, entry.name)
                if marker is not None:
                    found.append(((match.group("stamp"), int(match.group("n") or 1)), entry.name, marker["ok"]))
        found.sort(reverse=True)
        clean, doomed = 0, []
        for _key, name, ok in found:
            if clean >= keep and name != made:
                doomed.append(name)
            clean += ok
        removed = []
        for name in reversed(doomed):
            hidden = f".{name}.removing"
            try:
                os.rename(name, hidden, src_dir_fd=fd, dst_dir_fd=fd)
            except FileNotFoundError:
                continue  # another run pruning at the same moment took it first, and removes it
            shutil.rmtree(hidden, dir_fd=fd)  # fd-based: a symbolic link inside is removed, never followed
            removed.append(name)
        return removed
    finally:
        os.close(fd)
