"""Writing rendered unit files into a directory, all of them or none, never through a link or over a file render did not write."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from runner.errors import RunnerError, UnitRenderError

__all__ = ["RENDERED_MARKER", "write_unit_files"]

#: The first line of every unit render writes; a file in --out without it is not render's to replace.
RENDERED_MARKER: Final = "# Rendered by `ghostrunner systemd render`"


def write_unit_files(files: Mapping[str, str], out: Path) -> list[Path]:
    """Write *files* (unit file name to text) into *out*, created if missing; return their paths.

    The contract is :func:`runner.units.write_units`'s.
    """
    for name in files:
        if "/" in name or name.startswith("."):
            raise UnitRenderError("--out", f"{name!r} is not a unit file name render may write")
    try:
        out.mkdir(parents=True, exist_ok=True)
        directory = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        try:
            info: os.stat_result | None = os.lstat(out)
        except OSError:  # missing, or a name the filesystem refuses (ENAMETOOLONG): the first error says why
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise UnitRenderError("--out", f"{str(out)!r} is a symbolic link (to {os.readlink(out)!r}); render writes through no link: "
                                  "pass the directory itself") from None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise UnitRenderError("--out", f"{str(out)!r} is not a directory; pass the directory to write the units into") from None
        _refused(exc, out, "write the units into")
        raise RunnerError(f"cannot write the units into {str(out)!r}: {exc.strerror}") from None
    try:
        for name in files:
            _check_replaceable(directory, out / name, name)
        # Every file is written to its temporary name first, and only then are all renamed: a disk
        # that fills (or any write that fails) leaves the old set of units as it was, never half a new set.
        staged: list[tuple[str, str]] = []
        try:
            for name, text in files.items():
                staged.append((name, _stage_one(directory, out / name, name, text)))
            for name, temporary in staged:
                try:
                    os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
                except OSError as exc:
                    _refused(exc, out / name, "write the unit")
                    raise RunnerError(f"cannot write {str(out / name)!r}: {exc.strerror}") from None
        finally:
            for _, temporary in staged:
                with contextlib.suppress(OSError):  # renamed into place
                    os.unlink(temporary, dir_fd=directory)
        return [out / name for name in files]
    finally:
        os.close(directory)


#: errno names of a filesystem that refuses, which the CLI turns into exit 73, 74 or 77 (see runner.cli).
_REFUSALS: Final = ("EROFS", "ENOSPC", "EDQUOT", "EIO", "EACCES", "EPERM")


def _refused(exc: OSError, path: Path, action: str) -> None:
    """Raise the journal's storage error (exit 73, 74 or 77 with its errno) when *exc* is the filesystem refusing."""
    from errno import errorcode

    from journal import JournalStorageError

    if errorcode.get(exc.errno or 0) in _REFUSALS:
        raise JournalStorageError.for_errno(path, exc.errno or 0, action,
                                            "no unit was replaced; fix that and render again") from None


def _check_replaceable(directory: int, path: Path, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(name, dir_fd=directory)
        raise UnitRenderError("--out", f"{str(path)!r} is a symbolic link (to {target!r}); render writes through no link: remove it "
                              f"(systemctl unmask or disable {name} if systemctl made it) and render again")
    if not stat.S_ISREG(info.st_mode):
        raise UnitRenderError("--out", f"{str(path)!r} is not a regular file; remove it and render again")
    marker = RENDERED_MARKER.encode("utf-8")
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
        try:
            head = os.read(descriptor, len(marker))
        finally:
            os.close(descriptor)
    except OSError as exc:
        _refused(exc, path, "read the unit")
        raise RunnerError(f"cannot read {str(path)!r} to see whether render wrote it: {exc.strerror}; nothing was written") from None
    if head != marker:
        raise UnitRenderError("--out", f"{str(path)!r} exists and was not written by ghostrunner systemd render; render replaces only "
                              "its own units: move that file away (or choose another --out) and render again")


def _stage_one(directory: int, path: Path, name: str, text: str) -> str:
    """Write *text* whole to a temporary name beside *name*; return that name (the caller renames it into place)."""
    temporary = f".{name}.{os.getpid()}.tmp"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory)
        try:
            os.fchmod(descriptor, 0o644)  # whatever the umask: systemd and the operator read units
            data = text.encode("utf-8")
            while data:
                data = data[os.write(descriptor, data):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        _refused(exc, path, "write the unit")
        raise RunnerError(f"cannot write {str(path)!r}: {exc.strerror}; no unit was replaced") from None
    return temporary
