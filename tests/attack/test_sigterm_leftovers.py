"""SIGTERM (``systemctl stop``, a shutdown, ``kill``) while a command writes under a hidden temporary name: exit 143, nothing left behind.

Every command writes its output (a backup's directory, an export, a report, rendered units) under a
hidden name first and renames it into place. By default SIGTERM would end the process at once and
leave that hidden copy for good; the commands unwind instead (journal.frame.clikit.CommandGroup).

Backup and export wait for the journal's writer lock with their temporary already made, so the test
holds the lock, waits for the temporary to appear and signals from outside. A report or a set of units is
written in an instant, so the command runs under a wrapper that signals its own process as the
temporary is about to be renamed into place: the real handler, the real unwinding, at the one moment
the temporary exists.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.frame import replace_durably
from tests._support import SIMPLE_AGENT, ghostrunner, terminated_while_locked, wait_for_marker, write_config

#: Runs ``ghostjournal`` or ``ghostrunner`` (argv[1]) with argv[2:], and SIGTERMs itself right before a hidden file is renamed into $AT_DIR.
_AT_RENAME = """
import os, signal, sys
at = os.path.realpath(os.environ["AT_DIR"])
real = {"rename": os.rename, "replace": os.replace}
def directory_of(path, fd):
    return os.path.realpath(os.readlink(f"/proc/self/fd/{fd}") if fd is not None else os.path.dirname(os.path.abspath(path)))
def signalling(name):
    def wrapped(src, dst, *args, **kwargs):
        if os.path.basename(os.fsdecode(src)).startswith(".") and directory_of(dst, kwargs.get("dst_dir_fd")) == at:
            print(f"SIGTERM before renaming into {os.path.basename(os.fsdecode(dst))}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
        return real[name](src, dst, *args, **kwargs)
    return wrapped
os.rename, os.replace = signalling("rename"), signalling("replace")
prog = sys.argv[1]
sys.argv = [prog, *sys.argv[2:]]
if prog == "ghostjournal":
    from journal.cli.cli import main
else:
    from runner.cli.cli import main
main()
"""


def _journal(root: Path, count: int = 30) -> None:
    with Journal(root) as journal:
        for number in range(count):
            journal.append({"kind": "note", "agent": "motoko", "theme": f"rain {number}", "voice": f"Rain on the roof, night {number}."})


def _names(directory: Path) -> set[str]:
    """Every name below *directory*, hidden ones too."""
    return {str(path.relative_to(directory)) for path in directory.rglob("*")}


def test_sigterm_during_a_journal_backup_removes_its_partial_copy(tmp_path: Path) -> None:
    """ghostjournal backup --out DIR stopped while its hidden .DIR.*.partial exists: exit 143, and the parent holds only what it held."""
    _journal(tmp_path / "journal")
    parent = tmp_path / "backups"
    parent.mkdir()
    (parent / "older").mkdir()
    before = _names(parent)
    done = terminated_while_locked(tmp_path / "journal", ["ghostjournal", "--root", str(tmp_path / "journal"), "backup", "--out", str(parent / "copy")], parent, ".copy.")
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert _names(parent) == before


#: An earlier export at --out: its manifest line alone (an export of no entries), which export replaces without --force.
YESTERDAY = b'{"entries":0,"ghostjournal_export":1}\n'


@pytest.mark.parametrize("program", ["ghostjournal", "ghostrunner"])
def test_a_backup_killed_with_sigkill_leaves_a_partial_copy_the_next_backup_removes(tmp_path: Path, program: str) -> None:
    """kill -9 while `ghostjournal backup --out DIR` (or `ghostrunner backup --out DIR`) waits for the writer lock (nothing unwinds): the
    next backup to DIR removes the hidden .DIR.*.partial the killed run left, and writes DIR; a partial copy another run is still writing
    is never taken for one."""
    _journal(tmp_path / "journal")
    parent = tmp_path / "backups"
    parent.mkdir()
    where = (["--root", str(tmp_path / "journal")] if program == "ghostjournal"
             else ["--config", str(write_config(tmp_path, SIMPLE_AGENT))])
    argv = [shutil.which(program) or program, *where, "backup", "--out", str(parent / "copy")]
    lock = os.open(tmp_path / "journal" / ".write.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        live = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_marker(parent, ".copy.")
        doomed = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # started while the live one's partial exists
        while len([name for name in os.listdir(parent) if name.startswith(".copy.")]) < 2:
            assert doomed.poll() is None and live.poll() is None, "a run ended before the kill"
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=60)
    finally:
        os.close(lock)
    _, error = live.communicate(timeout=120)
    assert live.returncode == 0, error  # the second run took the live run's partial for no abandoned copy
    assert len([name for name in os.listdir(parent) if name.startswith(".copy.")]) == 1, "the killed run left no partial copy"
    shutil.rmtree(parent / "copy")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(parent)) == ["copy"]


def test_sigterm_during_an_export_removes_its_temporary_file(tmp_path: Path) -> None:
    """ghostjournal export --out FILE stopped while its hidden temporary exists: exit 143, the old FILE as it was, no temporary."""
    _journal(tmp_path / "journal")
    out = tmp_path / "out"
    out.mkdir()
    (out / "journal.jsonl").write_bytes(YESTERDAY)
    done = terminated_while_locked(tmp_path / "journal", ["ghostjournal", "--root", str(tmp_path / "journal"), "export", "--out", str(out / "journal.jsonl")],
                                   out, ".journal.jsonl.")
    assert done.returncode == 143, done.stderr
    assert _names(out) == {"journal.jsonl"}
    assert (out / "journal.jsonl").read_bytes() == YESTERDAY


def test_an_export_killed_with_sigkill_leaves_a_temporary_the_next_export_removes(tmp_path: Path) -> None:
    """kill -9 while `export --out FILE` waits for the writer lock (nothing unwinds): the hidden .FILE.*.tmp it left (it would hold the
    journal's text) is removed by the next export to FILE, which writes FILE; one another export is still writing is never taken for
    one, and a file of another name, or a link, is left alone."""
    _journal(tmp_path / "journal")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".journal.jsonl.mine.tmp").write_text("kept\n")  # not mkstemp's eight characters: no temporary of an export
    (out / ".journal.jsonl.abcdefgh.tmp").symlink_to(out / ".journal.jsonl.mine.tmp")
    argv = [shutil.which("ghostjournal") or "ghostjournal", "--root", str(tmp_path / "journal"), "export", "--out", str(out / "journal.jsonl")]
    lock = os.open(tmp_path / "journal" / ".write.lock", os.O_RDWR)

    def temporaries() -> list[str]:
        return [name for name in os.listdir(out) if name.startswith(".journal.jsonl.") and not os.path.islink(out / name)
                and name != ".journal.jsonl.mine.tmp"]

    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        live = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while not temporaries():
            assert live.poll() is None, "the export ended before the kill"
        doomed = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # started while the live one's temporary exists
        while len(temporaries()) < 2:
            assert doomed.poll() is None and live.poll() is None, "an export ended before the kill"
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=60)
    finally:
        os.close(lock)
    _, error = live.communicate(timeout=120)
    assert live.returncode == 0, error  # the second run took the live run's temporary for an abandoned one
    assert len(temporaries()) == 1, "the killed export left no temporary"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == [".journal.jsonl.abcdefgh.tmp", ".journal.jsonl.mine.tmp", "journal.jsonl"]
    assert (out / ".journal.jsonl.mine.tmp").read_text() == "kept\n"


def _runner_config(tmp_path: Path) -> Path:
    config = write_config(tmp_path, SIMPLE_AGENT)
    done = ghostrunner("--config", str(config), "simulate", "--agent", "motoko", "--days", "2", "--start", "2026-09-01", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return config


@pytest.mark.parametrize("command", ["ghostjournal report", "ghostrunner report", "systemd render", "k8s render"])
def test_sigterm_as_the_output_is_renamed_into_place_leaves_no_temporary(tmp_path: Path, command: str) -> None:
    """A report or rendered units stopped with their temporary written: exit 143, the output directory as it was."""
    config = _runner_config(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("kept\n")
    args = {
        "ghostjournal report": ["ghostjournal", "--root", str(tmp_path / "journal"), "report", "--agent", "motoko", "--out", str(out / "r.html")],
        "ghostrunner report": ["ghostrunner", "report", "--config", str(config), "--log", str(_empty(tmp_path)), "--out", str(out / "r.html")],
        "systemd render": ["ghostrunner", "systemd", "render", "--config", str(config), "--out", str(out)],
        "k8s render": ["ghostrunner", "k8s", "render", "--config", str(config), "--image", "registry.example/ghostrunner:0.1.0", "--out", str(out)],
    }[command]
    script = tmp_path / "at_rename.py"
    script.write_text(_AT_RENAME)
    done = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
                          env={**os.environ, "AT_DIR": str(out)})
    assert "SIGTERM before renaming into" in done.stderr, done.stderr  # the temporary was made, and was about to take its name
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr
    assert _names(out) == {"old.txt"}


def _empty(tmp_path: Path) -> Path:
    log = tmp_path / "runs.log"
    log.write_text("")
    return log


def _stopped_right_after(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make ``tempfile.<name>`` send this process a real SIGTERM the moment it has made its temporary, as a stop at the worst time would."""
    make = getattr(tempfile, name)

    def made_then_stopped(*args: Any, **kwargs: Any) -> Any:
        made = make(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return made

    monkeypatch.setattr(tempfile, name, made_then_stopped)


@pytest.fixture
def sigterm_exits() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) in this process, as in either command (see journal.frame.clikit)."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(143)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("sigterm_exits")
def test_a_stop_just_after_a_backup_made_its_partial_directory_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM between making the hidden .DIR.*.partial and the copy's own cleanup (a few steps of Python): the stop still ends the
    backup, and the parent holds only what it held (the stop waits until the block that removes the partial directory is entered)."""
    _journal(tmp_path / "journal", count=3)
    parent = tmp_path / "backups"
    parent.mkdir()
    (parent / "older").mkdir()
    before = _names(parent)
    _stopped_right_after(monkeypatch, "mkdtemp")
    with Journal(tmp_path / "journal") as journal, pytest.raises(SystemExit):
        journal.backup(parent / "copy")
    assert _names(parent) == before


@pytest.mark.usefixtures("sigterm_exits")
def test_a_stop_just_after_an_output_made_its_temporary_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM the moment an output's hidden temporary file exists: the old file is as it was and no temporary is left."""
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    target.write_bytes(b"yesterday")
    _stopped_right_after(monkeypatch, "mkstemp")
    with pytest.raises(SystemExit):
        replace_durably(target, b"today")
    assert _names(target.parent) == {"report.html"} and target.read_bytes() == b"yesterday"
