"""The runner's state directory: what ``ghostrunner`` keeps between runs besides the journals.

It holds the pause file (:mod:`runner.pauses`) and the per-(agent, routine)
slot locks (:mod:`runner.slot_lock`). Its path is ``runner.lock_file`` with
``.state`` for the suffix (``/var/lib/ghostrunner/serve.lock`` gives
``/var/lib/ghostrunner/serve.state/``): one per deployment, beside the
scheduler's lock, in the directory the rendered units already open for
writing, and shared by ``serve``, the timers and manual runs of the same
configuration.

The directory is created ``0700`` when first needed. A symbolic link or a
non-directory in its place is refused (nothing is written through it);
files in it are replaced atomically (temporary file, fsync, rename, fsync of
the directory), so a reader sees the old file or the new one, never a part.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from runner.config import RunnerConfig
from runner.errors import StateFileError

__all__ = ["ensure_state_dir", "state_dir", "write_atomically"]


def state_dir(config: RunnerConfig) -> Path:
    """The state directory of *config*'s deployment (it may not exist yet)."""
    lock = config.lock_file
    return lock.with_name(lock.stem + ".state") if lock.suffix else lock.with_name(lock.name + ".state")


def ensure_state_dir(path: Path) -> Path:
    """Create the state directory *path* (``0700``) if it is missing, and return it.

    Raises:
        StateFileError: something other than a directory (a symlink, a file) is at *path*.
        OSError: the filesystem refused to create it (read-only, full, no permission).
    """
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise StateFileError(path, f"the runner's state directory is {what}",
                             "move it away; ghostrunner creates the directory itself (it lives beside runner.lock_file)")
    return path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the file *path* with *data* durably: a reader sees the old content or the new, never a part.

    Raises:
        OSError: the filesystem refused the write.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
