"""A real systemd, booted as PID 1 of private namespaces over a throw-away overlay of ``/``.

The deployment tests run the README's own steps and the rendered units under it. The machine's
systemd is started as ``chroot ROOT /lib/systemd/systemd --system`` inside
``unshare --pid --fork --mount --uts --ipc --net``; ``ROOT`` is an overlay of ``/`` whose writes go
to a tmpfs of that mount namespace, so nothing the booted system writes reaches the host's disk,
and its mounts vanish with the namespace. It is told it is a container (``container=``), gets its
own ``/dev``, ``/run`` and ``/tmp``, a read-only ``/sys`` and ``/proc/sys`` (so it cannot tune the
host's kernel), and its own cgroup in each hierarchy, which :meth:`LiveSystem.close` removes.

The host reaches the booted system's files through ``/proc/PID/root`` and runs commands in it
with ``nsenter``.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

SYSTEMD = "/lib/systemd/systemd"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CGROUPS = Path("/sys/fs/cgroup")
#: Host units the booted copy must not start: databases nobody here needs (the fleet's tests start their
#: own redis-server on the loopback), a clock daemon that may set the (shared) system clock from a stamp
#: file, and a getty for a console that is /dev/null.
MASKED = ("postgresql.service", "redis-server.service", "systemd-timesyncd.service", "console-getty.service")

T = TypeVar("T")

# Runs as PID 1 of the new namespaces, then becomes systemd. $1: the base directory, $2: the masked units.
_BOOT = r"""
set -eu
base=$1; root=$1/root
mount -t tmpfs -o mode=0700 live "$base"
mkdir "$base/upper" "$base/work" "$root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$root"
mount -t proc proc "$root/proc"
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
mount -t sysfs -o ro sysfs "$root/sys"
if [ -e /sys/fs/cgroup/cgroup.procs ]; then  # cgroup2 only
    mount --bind /sys/fs/cgroup "$root/sys/fs/cgroup"
else  # its own tmpfs (systemd remounts it read-only), holding the host's hierarchies
    mount -t tmpfs -o mode=0755 cgroup "$root/sys/fs/cgroup"
    for hierarchy in /sys/fs/cgroup/*; do
        [ -L "$hierarchy" ] && { ln -s "$(readlink "$hierarchy")" "$root$hierarchy"; continue; }
        mkdir "$root$hierarchy" && mount --bind "$hierarchy" "$root$hierarchy"
    done
fi
mount -t tmpfs -o mode=0755 dev "$root/dev"
# Fresh nodes with their usual modes, not the host's (whose modes a host may have changed).
mknod -m 0666 "$root/dev/null" c 1 3
mknod -m 0666 "$root/dev/zero" c 1 5
mknod -m 0666 "$root/dev/full" c 1 7
mknod -m 0666 "$root/dev/random" c 1 8
mknod -m 0666 "$root/dev/urandom" c 1 9
mknod -m 0666 "$root/dev/tty" c 5 0
touch "$root/dev/console" && mount --bind /dev/null "$root/dev/console"
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
mount -t tmpfs -o mode=0755 run "$root/run"
mount -t tmpfs -o mode=1777 tmp "$root/tmp"
for unit in $2; do ln -sf /dev/null "$root/etc/systemd/system/$unit"; done
exec env -i container=ghostrunner-deploy-tests /usr/sbin/chroot "$root" /lib/systemd/systemd --system --unit=multi-user.target
"""


class BootError(AssertionError):
    """The booted system did not come up."""


def wait_until(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.1) -> T:
    """Poll *probe* until it returns something true; return that, or fail after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def _hierarchies() -> list[Path]:
    """The host's cgroup hierarchies (the cgroup2 root itself, or every v1/hybrid mount under it)."""
    if (CGROUPS / "cgroup.procs").exists():
        return [CGROUPS]
    return sorted(path for path in CGROUPS.iterdir() if not path.is_symlink() and (path / "cgroup.procs").exists())


def _cgroup_mounts() -> list[str]:
    """The host's mounts under /sys/fs/cgroup with their options (systemd remounts its own read-only)."""
    fields = (line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return sorted(" ".join(f[4:6] + f[-1:]) for f in fields if f[4].startswith(str(CGROUPS)))


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


class LiveSystem:
    """A booted systemd; :meth:`close` powers it off and removes every trace of it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory  # an empty temporary directory; close() removes it
        self.base = directory / "mnt"
        self.console = directory / "console.log"
        self.cgroup = directory.name  # unique, like the directory
        self._process: subprocess.Popen[bytes] | None = None
        self._cgroup_mounts: list[str] = []
        self.pid = 0
        self.namespace: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def boot(self, timeout: float = 60) -> str:
        """Start systemd and wait until it reports ``running`` or ``degraded``; return that state."""
        self.base.mkdir(mode=0o700)
        for hierarchy in _hierarchies():
            (hierarchy / self.cgroup).mkdir()
        # The shell joins its own cgroup in every hierarchy first, so that what systemd creates is
        # below it (systemd takes the cgroup it starts in as its root).
        # (A cpuset hierarchy refuses tasks in a cgroup without cpus; systemd does not use it.)
        join = " ".join(f"{{ echo $$ > {shlex.quote(str(h / self.cgroup / 'cgroup.procs'))}; }} 2>/dev/null || :;" for h in _hierarchies())
        # Should this process die without close(), unshare and then the booted system die with it.
        command = (f"{join} exec setpriv --pdeathsig KILL unshare --kill-child=SIGKILL --pid --fork --mount --uts --ipc --net --propagation private "
                   f"/bin/sh -c {shlex.quote(_BOOT)} boot {shlex.quote(str(self.base))} {shlex.quote(' '.join(MASKED))}")
        self._cgroup_mounts = _cgroup_mounts()
        with open(self.console, "wb") as console:
            self._process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=console,
                                             stderr=subprocess.STDOUT, env={"PATH": PATH}, start_new_session=True)
        self.pid = wait_until("systemd started as PID 1 of the new namespaces", self._find_systemd, 30, 0.05)
        self.namespace = _pid_namespace(self.pid)
        wait_until("systemd's private bus socket", lambda: self.path("/run/systemd/private").exists(), 30, 0.05)
        state = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=timeout).stdout.strip()
        if state not in ("running", "degraded"):
            raise BootError(f"systemd reached {state!r}, not running:\n{self.diagnostics()}")
        return state

    def _find_systemd(self) -> int | None:
        assert self._process is not None
        if self._process.poll() is not None:
            raise BootError(f"the boot ended with status {self._process.returncode}:\n{self.console.read_text(errors='replace')}")
        try:
            unshare_children = Path(f"/proc/{self._process.pid}/task/{self._process.pid}/children").read_text().split()
        except OSError:
            return None
        for child in unshare_children:  # unshare --fork's child is PID 1 inside; it execs systemd
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == "systemd":
                    return int(child)
            except OSError:
                pass
        return None

    def close(self) -> list[str]:
        """Power off (killing what is left), remove its cgroups and directories; return what was left behind."""
        problems: list[str] = []
        if self._process is not None and self._process.poll() is None:
            try:
                if self.pid:
                    self.run("systemctl", "poweroff", check=False, timeout=15)
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                problems.append("systemd did not power off within 30 s; killed")
                if self.pid:
                    os.kill(self.pid, signal.SIGKILL)  # PID 1 of a namespace takes the rest with it
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=30)
        if self.namespace is not None:
            try:
                wait_until("the booted system's processes gone", lambda: not self._processes_left(), 10)
            except AssertionError:
                stray = self._processes_left()
                problems.append(f"processes of the booted system still running: {stray}")
                for pid in stray:
                    os.kill(pid, signal.SIGKILL)
        problems += self._remove_cgroups()
        if _cgroup_mounts() != self._cgroup_mounts:
            problems.append(f"the host's cgroup mounts changed: {self._cgroup_mounts} -> {_cgroup_mounts()}")
        mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(self.base) in line]
        if mounts:
            problems.append(f"mounts of the booted system are visible on the host: {mounts}")
            return problems
        self.console.unlink(missing_ok=True)
        for directory in (self.base, self.directory):  # the base only ever held the tmpfs mount point
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError as error:
                problems.append(f"{directory} not removable: {error} (holds {os.listdir(directory)})")
        return problems

    def _processes_left(self) -> list[int]:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pid_namespace(int(p)) == self.namespace]

    def _remove_cgroups(self) -> list[str]:
        problems = []
        for hierarchy in _hierarchies():
            top = hierarchy / self.cgroup
            if not top.exists():
                continue
            for directory in sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True):
                try:
                    wait_until(f"cgroup {directory} removed", functools.partial(self._rmdir, directory), 10)
                except AssertionError:
                    problems.append(f"cgroup {directory} could not be removed")
        return problems

    @staticmethod
    def _rmdir(directory: Path) -> bool:
        try:
            directory.rmdir()
        except FileNotFoundError:
            return True
        except OSError:  # EBUSY while the last tasks are being reaped
            return False
        return True

    def diagnostics(self) -> str:
        failed = self.run("systemctl", "--failed", "--no-pager", check=False).stdout
        console = self.console.read_text(errors="replace")[-4000:] if self.console.exists() else ""
        return f"failed units:\n{failed}\nconsole:\n{console}"

    # -- inside the booted system ------------------------------------------------------------

    def path(self, inside: str) -> Path:
        """The host's view of *inside*, a path of the booted system."""
        assert inside.startswith("/"), inside
        return Path(f"/proc/{self.pid}/root") / inside.lstrip("/")

    def run(self, *argv: str, input: str | None = None, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:  # noqa: A002 - named like subprocess.run's input
        """Run *argv* in the booted system as root, with a plain environment."""
        command = ["nsenter", "-t", str(self.pid), "-m", "-p", "-u", "-i", "-n", "-r", "-w",
                   "/usr/bin/env", "-i", f"PATH={PATH}", "LANG=C.UTF-8", *argv]
        result = subprocess.run(command, check=False, input=input, capture_output=True, text=True, timeout=timeout, env={"PATH": PATH})
        if check and result.returncode != 0:
            raise AssertionError(f"{shlex.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def sh(self, script: str, **options: Any) -> subprocess.CompletedProcess[str]:
        return self.run("/bin/sh", "-euc", script, **options)

    def systemctl(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--no-pager", *args, **options)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        """systemctl show's properties of *unit* (raw values)."""
        out = self.systemctl("show", unit, *(f"--property={p}" for p in properties)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, *args: str) -> list[dict[str, Any]]:
        """The systemd journal's records (``journalctl -o json``) matching *args*."""
        self.run("journalctl", "--sync")
        out = self.run("journalctl", "--no-pager", "-o", "json", *args).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def events(self, *args: str) -> Iterator[dict[str, Any]]:
        """The runner's JSON log events among the journal records matching *args*."""
        for record in self.journal(*args):
            message = record.get("MESSAGE")
            if isinstance(message, str) and message.startswith("{"):
                try:
                    event = json.loads(message)
                except ValueError:
                    continue
                yield event
