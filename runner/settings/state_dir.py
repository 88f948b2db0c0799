"""The runner's state directory: what ``ghostrunner`` keeps between runs besides the journals.

It holds the pause file (:mod:`runner.run.pauses`) and the per-(agent, routine)
slot locks (:mod:`runner.run.slot_lock`). Its path is ``runner.lock_file`` with
``.state`` for the suffix (``/var/lib/ghostrunner/serve.lock`` gives
``/var/lib/ghostrunner/serve.state/``): one per deployment, beside the
scheduler's lock, in the directory the rendered units already open for
writing, and shared by ``serve``, the timers and manual runs of the same
configuration.

The directory is created ``0700`` when first needed. A symbolic link or a
non-directory in its place is refused (nothing is written through it);
files in it are replaced atomically (temporary file, fsync, rename, fsync of
the directory), so a reader sees the old file or the new one, never a part.
Root working in a directory owned by another user (``sudo ghostrunner pause``
beside a service's state) hands what it creates to that user, so the
service's own runs can still read the pause file and open the slot locks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from journal.frame import replace_durably
from runner.errors import StateFileError
from runner.settings.config import RunnerConfig

__all__ = ["ensure_state_dir", "hand_over", "state_dir", "write_atomically"]


def state_dir(config: RunnerConfig) -> Path:
    """The state directory of *config*'s deployment (it may not exist yet)."""
    lock = config.lock_file
    return lock.with_name(lock.stem + ".state") if lock.suffix else lock.with_name(lock.name + ".state")


def _owner_of(directory: Path) -> tuple[int, int] | None:
    """Whom a file root creates in *directory* must belong to: the directory's owner, if that is not root (None: keep it)."""
    if os.geteuid() != 0:
        return None  # only root can give a file away, and any other user's files are rightly its own
    info = os.stat(directory)
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def hand_over(path: Path) -> None:
    """Give *path* (just created by this process) to the owner of its directory when root created it there."""
    owner = _owner_of(path.parent)
    if owner is not None and os.lstat(path).st_uid != owner[0]:
        os.chown(path, *owner, follow_symlinks=False)


def ensure_state_dir(path: Path) -> Path:
    """Create the state directory *path* (``0700``) if it is missing, and return it.

    Raises:
        StateFileError: something other than a directory (a symlink, a file) is at *path*.
        OSError: the filesystem refused to create it (read-only, full, no permission).
    """
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    else:
        hand_over(path)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise StateFileError(
            path,
            f"the runner's state directory is {what}",
            "move it away; ghostrunner creates the directory itself (it lives beside runner.lock_file)",
        )
    return path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the file *path* with *data* durably, owned as :func:`hand_over` would own it: a reader sees the old content or the new, never a part.

    Raises:
        OSError: the filesystem refused the write.
    """
    owner = _owner_of(path.parent)
    replace_durably(path, data, prepare=None if owner is None else lambda fd: os.fchown(fd, *owner))
