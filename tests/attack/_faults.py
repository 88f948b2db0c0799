"""Real filesystem faults for tests: tmpfs and read-only bind mounts (root only), filling a filesystem, running as nobody."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from pathlib import Path

__all__ = ["AS_NOBODY", "NOBODY", "Mounts", "fill"]

NOBODY = 65534
#: Runs its arguments as uid 65534 (see the script).
AS_NOBODY = Path(__file__).with_name("_as_nobody.py")


class Mounts:
    """tmpfs and bind mounts made by one test, all unmounted by the fixture's finalizer."""

    def __init__(self) -> None:
        self.points: list[Path] = []

    def _point(self) -> Path:
        # Outside pytest's tmp_path, whose parent is 0700 root: uid 65534 must be able to reach it.
        point = Path(tempfile.mkdtemp(prefix="gj-fault-", dir="/tmp"))
        point.chmod(0o755)
        return point

    def tmpfs(self, *, size_kib: int = 1024) -> Path:
        point = self._point()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,nr_inodes=4096,mode=0755", "tmpfs", str(point)], check=True)
        self.points.append(point)
        return point

    def read_only(self, source: Path) -> Path:
        """A read-only bind mount of *source* (the source itself stays writable)."""
        point = self._point()
        subprocess.run(["mount", "--bind", str(source), str(point)], check=True)
        self.points.append(point)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(point)], check=True)
        return point

    def release(self) -> None:
        for point in reversed(self.points):
            subprocess.run(["umount", str(point)], check=False)
            if os.path.ismount(point):
                # Still busy (a file a failing test left open): detach it anyway, so no run leaves mounts behind.
                subprocess.run(["umount", "--lazy", str(point)], check=False)
            if not os.path.ismount(point):
                point.rmdir()


def fill(mount: Path, *, leave_pages: int = 0) -> None:
    """Fill the filesystem at *mount* to the brim with a filler file, then free exactly *leave_pages* pages."""
    page = os.statvfs(mount).f_frsize
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"x" * page)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        size = os.fstat(fd).st_size
        os.ftruncate(fd, (-(-size // page) - leave_pages) * page)
    finally:
        os.close(fd)
    assert os.statvfs(mount).f_bfree == leave_pages, "the tmpfs is not filled as the test needs"
