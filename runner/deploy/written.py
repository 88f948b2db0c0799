"""Writing rendered files (systemd units, Kubernetes manifests) into a directory, all of them or none, never through a link or over a
file render did not write."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from runner.errors import RunnerError, UnitRenderError

__all__ = ["RENDERED_MARKER", "UNIT_FILES", "RenderedKind", "write_unit_files"]

#: The first line of every unit render writes; a file in --out without it is not render's to replace.
RENDERED_MARKER: Final = "# Rendered by `ghostrunner systemd render`"


@dataclass(frozen=True, slots=True)
class RenderedKind:
    """What one render command writes, and how it knows a file in --out for one it wrote before.

    Attributes:
        noun: what a file is called in messages ("unit", "manifest").
        command: the command that writes them, for the message about a file it did not write.
        head_size: how many bytes of an existing file *is_own* is shown (at most).
        is_own: whether a file that begins with these bytes was written by *command*.
        link_hint: what the message about a symbolic link adds, ``{name}`` being the file's name.
    """

    noun: str
    command: str
    head_size: int
    is_own: Callable[[bytes], bool]
    link_hint: str = ""


UNIT_FILES: Final = RenderedKind(
    "unit",
    "ghostrunner systemd render",
    len(RENDERED_MARKER.encode("utf-8")),
    lambda head: head == RENDERED_MARKER.encode("utf-8"),
    " (systemctl unmask or disable {name} if systemctl made it)",
)


def write_unit_files(files: Mapping[str, str], out: Path, kind: RenderedKind = UNIT_FILES) -> list[Path]:
    """Write *files* (file name to text) into *out*, created if missing; return their paths.

    The contract is :func:`runner.deploy.systemd.units.write_units`'s, for files of *kind*.
    """
    noun = kind.noun
    for name in files:
        if "/" in name or name.startswith("."):
            raise UnitRenderError("--out", f"{name!r} is not a {noun} file name render may write")
    try:
        out.mkdir(parents=True, exist_ok=True)
        directory = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        try:
            info: os.stat_result | None = os.lstat(out)
        except OSError:  # missing, or a name the filesystem refuses (ENAMETOOLONG): the first error says why
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise UnitRenderError(
                "--out",
                f"{str(out)!r} is a symbolic link (to {os.readlink(out)!r}); render writes through no link: pass the directory itself",
            ) from None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise UnitRenderError("--out", f"{str(out)!r} is not a directory; pass the directory to write the {noun}s into") from None
        _refused(exc, out, f"write the {noun}s into", noun)
        raise RunnerError(f"cannot write the {noun}s into {str(out)!r}: {exc.strerror}") from None
    try:
        for name in files:
            _check_replaceable(directory, out / name, name, kind)
        # Every file is written to its temporary name first, and only then are all renamed: a disk
        # that fills (or any write that fails) leaves the old set of files as it was, never half a new set.
        staged: list[tuple[str, str]] = []
        try:
            for name, text in files.items():
                staged.append((name, _stage_one(directory, out / name, name, text, noun)))
            for name, temporary in staged:
                try:
                    os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
                except OSError as exc:
                    _refused(exc, out / name, f"write the {noun}", noun)
                    raise RunnerError(f"cannot write {str(out / name)!r}: {exc.strerror}") from None
        finally:
            for _, temporary in staged:
                with contextlib.suppress(OSError):  # renamed into place
                    os.unlink(temporary, dir_fd=directory)
        return [out / name for name in files]
    finally:
        os.close(directory)


#: errno names of a filesystem that refuses, which the CLI turns into exit 73, 74 or 77 (see runner.cli.cli).
_REFUSALS: Final = ("EROFS", "ENOSPC", "EDQUOT", "EIO", "EACCES", "EPERM")


def _refused(exc: OSError, path: Path, action: str, noun: str) -> None:
    """Raise the journal's storage error (exit 73, 74 or 77 with its errno) when *exc* is the filesystem refusing."""
    from errno import errorcode

    from journal import JournalStorageError

    if errorcode.get(exc.errno or 0) in _REFUSALS:
        raise JournalStorageError.for_errno(path, exc.errno or 0, action, f"no {noun} was replaced; fix that and render again") from None


def _check_replaceable(directory: int, path: Path, name: str, kind: RenderedKind) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(name, dir_fd=directory)
        raise UnitRenderError(
            "--out",
            f"{str(path)!r} is a symbolic link (to {target!r}); render writes through no link: remove it"
            f"{kind.link_hint.format(name=name)} and render again",
        )
    if not stat.S_ISREG(info.st_mode):
        raise UnitRenderError("--out", f"{str(path)!r} is not a regular file; remove it and render again")
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
        try:
            head = os.read(descriptor, kind.head_size)
        finally:
            os.close(descriptor)
    except OSError as exc:
        _refused(exc, path, f"read the {kind.noun}", kind.noun)
        raise RunnerError(f"cannot read {str(path)!r} to see whether render wrote it: {exc.strerror}; nothing was written") from None
    if not kind.is_own(head):
        raise UnitRenderError(
            "--out",
            f"{str(path)!r} exists and was not written by {kind.command}; render replaces only "
            f"its own {kind.noun}s: move that file away (or choose another --out) and render again",
        )


def _stage_one(directory: int, path: Path, name: str, text: str, noun: str) -> str:
    """Write *text* whole to a temporary name beside *name*; return that name (the caller renames it into place)."""
    temporary = f".{name}.{os.getpid()}.tmp"
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory)
        try:
            os.fchmod(descriptor, 0o644)  # whatever the umask: systemd (or kubectl) and the operator read them
            data = text.encode("utf-8")
            while data:
                data = data[os.write(descriptor, data) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except BaseException as exc:  # SIGTERM's SystemExit too: no half-written temporary file stays beside the units
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        if not isinstance(exc, OSError):
            raise
        _refused(exc, path, f"write the {noun}", noun)
        raise RunnerError(f"cannot write {str(path)!r}: {exc.strerror}; no {noun} was replaced") from None
    return temporary
