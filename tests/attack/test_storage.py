"""Storage that follows no link and trusts no file: attacks on the journal's own paths.

Each test plants the real thing (a symlink, a FIFO, a device, a sparse file,
a restored copy, a deleted or truncated file, a foreign owner, a umask) and
asserts the promise: a clear one-line error naming the path or a reported
skip, the foreign file unchanged byte for byte, nothing lost, no traceback.
Anything that could hang on the old code runs in a subprocess with a bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import journal as journal_package
from journal import EntryFileError, Journal, UnsafePathError
from tests._support import tree_digest

Payload = Callable[..., dict[str, Any]]

WORKTREE = Path(journal_package.__file__).resolve().parent.parent
NOBODY = 65534
TIMEOUT = 20  # seconds; every subprocess here finishes in well under one (a hang of the old code fails fast)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GHOSTJOURNAL_ROOT"}
    env["PYTHONPATH"] = f"{WORKTREE}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(WORKTREE)
    return env


def _python(
    code: str, *, uid: int | None = None, umask: int | None = None, memory_limit: int | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run *code* in a fresh interpreter, bounded in time.

    With *uid*, the child imports the journal and the CLI first and then drops
    to that user (and group) before running *code*: the interpreter itself
    lives where only root may read.
    """
    # Everything the child will import lazily is imported before it drops privileges.
    prelude = "import os, sys, json, sqlite3, logging, encodings.ascii, encodings.latin_1, journal, journal.api, journal.cli.cli\n"
    if umask is not None:
        prelude += f"os.umask({umask})\n"
    if memory_limit is not None:
        prelude += f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({memory_limit}, {memory_limit}))\n"
    if uid is not None:
        prelude += f"os.setgroups([])\nos.setgid({uid})\nos.setuid({uid})\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], input=stdin or "", capture_output=True, text=True, timeout=TIMEOUT, env=_env(), check=False
    )


def _cli(
    root: Path, *args: str, uid: int | None = None, memory_limit: int | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``ghostjournal --root ROOT ARGS`` in a subprocess (optionally as *uid*)."""
    argv = ["ghostjournal", "--root", str(root), *args]
    code = f"sys.argv = {argv!r}\ntry:\n    journal.cli.cli.main()\nexcept SystemExit as exc:\n    sys.exit(exc.code)\n"
    return _python(code, uid=uid, memory_limit=memory_limit, stdin=stdin)


def _one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _digest(path: Path) -> str | dict[str, str]:
    return tree_digest(path) if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()


def _entry_hashes(root: Path) -> dict[str, str]:
    """Hashes of the regular ``*.json`` files below entries/; anything else is never opened (a FIFO would block)."""
    found = {}
    for path in (root / "entries").rglob("*.json"):
        if stat.S_ISREG(os.lstat(path).st_mode):
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _foreign_db(path: Path) -> Path:
    """Another application's SQLite database, with a table and a row of its own."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('alice')")
    conn.close()
    return path


def _journal_with_entries(root: Path, make_payload: Payload, count: int = 2) -> list[str]:
    with Journal(root) as journal:
        return [journal.append(make_payload(client_key=f"key-{i}", theme=f"theme {i}")).id for i in range(count)]


def _entry_file(root: Path, entry_id: str) -> Path:
    return next((root / "entries").rglob(f"{entry_id}.json"))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that another user can traverse (pytest's tmp_path is root's own, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="gj-attack-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


# -- 0. a journal is never created inside another -------------------------------------------------------------------


@pytest.mark.parametrize("inside", ["entries/x", "index/nested/deeper", "models", "sub", "via-link/y"])
def test_no_journal_is_created_inside_another(root: Path, tmp_path: Path, make_payload: Payload, inside: str) -> None:
    """`init` or Journal() at a root below a journal's (reached directly or through a symbolic link) is refused in one line naming
    that journal, and creates nothing: the other journal keeps every byte and still opens."""
    with Journal(root) as journal:
        journal.append(make_payload())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "via-link").symlink_to(root)
    target = (tmp_path / "elsewhere" if inside.startswith("via-link") else root) / inside
    before = tree_digest(root)
    with pytest.raises(UnsafePathError, match=f"inside the journal {str(root)!r}"):
        Journal(target)
    done = subprocess.run([sys.executable, "-m", "journal.cli.cli", "--root", str(target), "init"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and f"inside the journal {str(root)!r}" in done.stderr, done.stderr
    assert tree_digest(root) == before
    with Journal(root, create=False) as journal:
        assert len(journal.list()) == 1


# -- 1. a symlink at any journal path is refused; its target stays unchanged -----------------

LINKED_PATHS = [
    "index/journal.sqlite3", "index/journal.sqlite3-wal", "index/journal.sqlite3-shm", "index",
    ".write.lock", "manifest.json", "entries", "models", "entries/.generation",
]


@pytest.mark.parametrize("name", LINKED_PATHS)
def test_symlink_at_a_journal_path_is_refused_and_its_target_unchanged(
    root: Path, tmp_path: Path, make_payload: Payload, name: str
) -> None:
    """A link planted at a journal path is never followed: open, append and reindex refuse it by name, and the target keeps every byte."""
    _journal_with_entries(root, make_payload)
    planted = root / name
    foreign = tmp_path / "other-app"
    foreign.mkdir()
    if name == "index/journal.sqlite3":
        target = _foreign_db(foreign / "app.sqlite3")
    elif planted.is_dir():
        target = foreign / "data"
        shutil.copytree(planted, target)
    else:
        target = foreign / "app.sqlite3-side"
        target.write_bytes(bytes(range(256)) * 64)  # 16 KiB that a WAL or shm writer would overwrite
    if planted.is_dir():
        shutil.rmtree(planted)
    elif planted.exists():
        planted.unlink()
    planted.symlink_to(target)
    before = _digest(target)

    with pytest.raises(UnsafePathError, match="symlink") as refused, Journal(root) as journal:  # noqa: PT012 - open, append and reindex each meet the link
        journal.append(make_payload(client_key="after-the-link"))
        journal.reindex()
    assert planted.name in str(refused.value)
    result = _cli(root, "append", stdin=json.dumps(make_payload(client_key="from-the-cli")))
    line = _one_clean_line(result)
    assert result.returncode == 1 and str(planted) in line and "symlink" in line
    assert _digest(target) == before
    if name == "index/journal.sqlite3":
        with contextlib.closing(sqlite3.connect(target)) as conn, conn:
            assert conn.execute("SELECT name FROM users").fetchall() == [("alice",)]
        conn.close()


@pytest.mark.parametrize("name", [*LINKED_PATHS, "erase.key"])
def test_a_link_at_a_journal_path_is_refused_by_export_backup_and_erase_as_a_link(
    root: Path, tmp_path: Path, make_payload: Payload, name: str
) -> None:
    """Export (to a file and to stdout), backup and erase meet a planted link as append does: exit 1 and one line naming
    the link, never a made-up I/O error (exit 74, "check dmesg"); no output is left, and the link's target keeps every byte."""
    ids = _journal_with_entries(root, make_payload)
    with Journal(root) as journal:
        journal.erase([ids[0]], reason="an erase key to copy")
    planted = root / name
    target = tmp_path / "other-app"
    if planted.is_dir():
        shutil.copytree(planted, target)
        shutil.rmtree(planted)
    else:
        target.write_bytes(bytes(range(256)) * 64)
        planted.unlink(missing_ok=True)
    planted.symlink_to(target)
    before = _digest(target)
    commands = {
        "export": ["export", "--out", str(tmp_path / "out.jsonl")],
        "export-stdout": ["export", "--out", "-"],
        "backup": ["backup", "--out", str(tmp_path / "copy")],
        "erase": ["erase", ids[1], "--reason", "gone", "--yes"],
    }
    # The one command that reads none of the file: an export copies the entries, never the erase key.
    reads = {command for command in commands if not (name == "erase.key" and command.startswith("export"))}
    for command, args in commands.items():
        result = _cli(root, *args)
        if command not in reads:
            assert result.returncode == 0, (command, result.stderr)
            continue
        line = _one_clean_line(result)
        assert result.returncode == 1, (command, line)
        assert str(planted) in line and "symlink" in line and "EIO" not in line, (command, line)
    assert not (tmp_path / "out.jsonl").exists() or name == "erase.key"
    assert not (tmp_path / "copy").exists()
    assert _digest(target) == before


FILE_PATHS = [
    "index/journal.sqlite3", "index/journal.sqlite3-wal", "index/journal.sqlite3-shm",
    ".write.lock", "manifest.json", "entries/.generation",
]


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("name", FILE_PATHS)
def test_fifo_or_device_at_a_journal_file_is_refused_without_hanging(root: Path, make_payload: Payload, name: str, kind: str) -> None:
    """A FIFO or character device where a journal file belongs gives exit 1 and one line naming it; nothing blocks."""
    _journal_with_entries(root, make_payload)
    planted = root / name
    planted.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(planted, 0o600)
    else:
        os.mknod(planted, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # the null device: reads nothing, swallows writes
    entries_before = _entry_hashes(root)  # the planted .generation is left out: reading it would block this test
    result = _cli(root, "append", stdin=json.dumps(make_payload(client_key="blocked")))
    line = _one_clean_line(result)
    assert result.returncode == 1, result
    assert str(planted) in line and ("FIFO" in line if kind == "fifo" else "character device" in line)
    assert stat.S_ISFIFO(os.lstat(planted).st_mode) if kind == "fifo" else stat.S_ISCHR(os.lstat(planted).st_mode)
    assert _entry_hashes(root) == entries_before


# -- 2. FIFOs, devices, sparse giants and links named <id>.json are skipped, never read -------

def test_reindex_skips_a_fifo_entry_file_instead_of_hanging(root: Path, make_payload: Payload) -> None:
    """A FIFO named like an entry is reported as skipped; reindex returns (it used to block forever holding the writer lock)."""
    kept = _journal_with_entries(root, make_payload)
    fifo = _entry_file(root, kept[0]).with_name("fifo-entry.json")
    os.mkfifo(fifo, 0o600)
    result = _cli(root, "reindex")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["indexed"] == 2
    assert [s["path"] for s in report["skipped"]] == [f"entries/{fifo.relative_to(root / 'entries')}"]
    assert "FIFO" in report["skipped"][0]["reason"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_entry_file_replaced_by_a_fifo_or_device_is_refused_on_get_and_skipped_on_list(root: Path, make_payload: Payload) -> None:
    """get() of an id whose file became a FIFO gives a clear error at once; list and search skip it and report it."""
    fifo_id, device_id, *_ = _journal_with_entries(root, make_payload, count=3)
    fifo = _entry_file(root, fifo_id)
    device = _entry_file(root, device_id)
    fifo.unlink()
    os.mkfifo(fifo, 0o600)
    device.unlink()
    os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    code = f"""
j = journal.Journal({str(root)!r})
for entry_id in {[fifo_id, device_id]!r}:
    try:
        j.get(entry_id)
    except journal.UnsafePathError as exc:
        print("refused", exc)
print("listed", len(j.list()), len(j.search("theme")))
print("skipped", sorted(s.reason.split(" is ")[1].split(",")[0] for s in j.skipped))
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "a FIFO" in lines[0] and str(fifo.name) in lines[0]
    assert "a character device" in lines[1] and str(device.name) in lines[1]
    assert lines[2] == "listed 1 1"
    assert lines[3] == "skipped ['a FIFO', 'a character device']"


def test_huge_sparse_entry_file_is_skipped_without_being_read(root: Path, make_payload: Payload) -> None:
    """A sparse file of 4 GiB named like an entry is skipped by its size; reindex runs within a 1 GiB address space."""
    _journal_with_entries(root, make_payload)
    giant = next((root / "entries").rglob("*.json")).with_name("giant.json")
    subprocess.run(["truncate", "-s", "4G", str(giant)], check=True)
    result = _cli(root, "reindex", memory_limit=1 << 30)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["indexed"] == 2
    assert len(report["skipped"]) == 1 and "larger than an entry file can be" in report["skipped"][0]["reason"]
    assert giant.stat().st_size == 4 << 30


def test_symlinked_entry_file_is_skipped_and_its_target_unread(root: Path, tmp_path: Path, make_payload: Payload) -> None:
    """An entry name that is a symlink to a valid entry elsewhere is skipped as a symlink; the target is untouched."""
    ids = _journal_with_entries(root, make_payload)
    original = _entry_file(root, ids[0])
    outside = tmp_path / "outside.json"
    outside.write_bytes(original.read_bytes())
    before = outside.read_bytes()
    original.unlink()
    original.symlink_to(outside)
    with Journal(root) as journal:
        skipped: list[str] = []
        assert journal.reindex(on_skip=lambda item: skipped.append(item.reason)) == 1
        assert skipped and "symlink" in skipped[0]
        with pytest.raises(journal_package.EntryNotFoundError):  # a symlink is no entry: the rebuilt index has no row for it
            journal.get(ids[0])
    assert outside.read_bytes() == before


# -- 4. a deleted or truncated entry file is skipped with a report; everything else works -----

def _damage(path: Path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    else:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_reads_skip_an_entry_whose_file_was_deleted_or_truncated(
    root: Path, make_payload: Payload, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """list, search, prompt_context, relate and digest keep working, without the damaged entry, and report its file."""
    with Journal(root) as journal:
        first = journal.append(make_payload(ts="2026-03-01T08:00:00Z", theme="harbor first"))
        damaged = journal.append(make_payload(ts="2026-03-02T08:00:00Z", theme="harbor damaged", signals={"continuity_refs": [first.id]}))
        refs = {"continuity_refs": [damaged.id, first.id]}
        last = journal.append(make_payload(ts="2026-03-03T08:00:00Z", theme="harbor last", signals=refs))
    damaged_path = _entry_file(root, damaged.id)
    _damage(damaged_path, how)
    rel = f"entries/{damaged_path.relative_to(root / 'entries')}"
    caplog.set_level(logging.WARNING, logger="journal")
    with Journal(root) as journal:  # a new process's view: no reindex in between
        if how == "deleted":
            with pytest.raises(journal_package.EntryNotFoundError):
                journal.get(damaged.id)
        else:
            with pytest.raises(EntryFileError, match=damaged.id):
                journal.get(damaged.id)
        assert [e.id for e in journal.list(limit=2)] == [last.id, first.id]
        assert {h.entry_id for h in journal.search("harbor")} == {first.id, last.id}
        context = journal.prompt_context("harbor", k=3)
        assert first.id in context and last.id in context and damaged.id not in context
        assert [h.entry_id for h in journal.relate(last.id)] == [first.id]
        assert journal.digest().count == 2
        assert [s.path for s in journal.skipped] == [rel]
        with pytest.raises(journal_package.EntryNotFoundError):  # its row is gone now; the warning named the file
            journal.get(damaged.id)
    assert any(rel in record.getMessage() for record in caplog.records if record.levelno == logging.WARNING)
    with Journal(root) as journal:  # and the repair holds for the next reader
        assert [e.id for e in journal.list()] == [last.id, first.id]


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_digest_leaves_out_an_entry_whose_file_is_gone(root: Path, make_payload: Payload, how: str) -> None:
    """A digest, computed from the index alone, still leaves out an entry whose file was deleted (or emptied)."""
    with Journal(root) as journal:
        kept = journal.append(make_payload(theme="kept"))
        gone = journal.append(make_payload(theme="gone"))
    path = _entry_file(root, gone.id)
    if how == "deleted":
        path.unlink()
    else:
        path.write_bytes(b"")
    with Journal(root) as journal:
        digest = journal.digest()
        assert digest.count == 1
        assert digest.themes and "gone" not in repr(digest.themes)
        assert [e.id for e in journal.list()] == [kept.id]


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_append_with_a_client_key_whose_file_is_gone_stores_a_new_entry(root: Path, make_payload: Payload, how: str) -> None:
    """The files decide: once the key's file is gone (or holds no entry) the key is free, and the retry stores one new entry."""
    with Journal(root) as journal:
        original = journal.append(make_payload(client_key="slot-1"))
        other = journal.append(make_payload(client_key="slot-2"))
    _damage(_entry_file(root, original.id), how)
    with Journal(root) as journal:
        retried = journal.append_with_result(make_payload(client_key="slot-1"))
        assert not retried.is_duplicate and retried.entry.id != original.id
        again = journal.append_with_result(make_payload(client_key="slot-1"))
        assert again.is_duplicate and again.entry.id == retried.entry.id
        assert journal.find_by_client_key("slot-1") == retried.entry
        assert journal.append_with_result(make_payload(client_key="slot-2")).entry.id == other.id
        assert sorted(e.id for e in journal.list()) == sorted([retried.entry.id, other.id])


def test_find_by_client_key_of_a_deleted_file_is_none(root: Path, make_payload: Payload) -> None:
    """find_by_client_key answers from the files: a key whose file was deleted holds no entry."""
    with Journal(root) as journal:
        entry = journal.append(make_payload(client_key="gone-key"))
    _entry_file(root, entry.id).unlink()
    with Journal(root) as journal:
        assert journal.find_by_client_key("gone-key") is None


# -- 5. exactly-once survives a restore of index/, with or without the lock file -------------

@pytest.mark.parametrize("with_lock", [True, False], ids=["index-and-lock", "index-only"])
def test_retry_after_restoring_an_older_index_copy_is_still_a_duplicate(
    root: Path, tmp_path: Path, make_payload: Payload, with_lock: bool
) -> None:
    """Copy index/ (and .write.lock), append more, restore the copy in the same boot: a retried key still gets its first entry."""
    with Journal(root) as journal:
        journal.append(make_payload(client_key="before-the-copy"))
    backup = tmp_path / "backup"
    shutil.copytree(root / "index", backup / "index")
    shutil.copy2(root / ".write.lock", backup / ".write.lock")
    with Journal(root) as journal:
        first = journal.append(make_payload(client_key="after-the-copy"))
        journal.append(make_payload(client_key="later"))
    shutil.rmtree(root / "index")
    shutil.copytree(backup / "index", root / "index")
    if with_lock:
        shutil.copy2(backup / ".write.lock", root / ".write.lock")
    # The retry comes from a fresh process, as a runner's next run does.
    code = f"""
j = journal.Journal({str(root)!r})
result = j.append_with_result({make_payload(client_key="after-the-copy")!r})
print(json.dumps([result.entry.id, result.is_duplicate, len(j.list())]))
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [first.id, True, 3]
    keys = [json.loads(p.read_bytes()).get("client_key") for p in (root / "entries").rglob("*.json")]
    assert sorted(keys) == ["after-the-copy", "before-the-copy", "later"]


# -- 6. modes as the README states, whatever the umask --------------------------------------

@pytest.mark.parametrize("umask", [0o000, 0o077, 0o022])
def test_files_and_directories_get_the_stated_modes_whatever_the_umask(tmp_path: Path, make_payload: Payload, umask: int) -> None:
    """Directories 0700 and files 0600, the lock, the index and its -wal/-shm included, under umask 0, 077 and 022."""
    root = tmp_path / "journal"
    code = f"""
j = journal.Journal({str(root)!r})
j.append({make_payload(client_key="k")!r})
modes = {{}}
for dirpath, dirs, files in os.walk({str(root)!r}):
    for name in dirs + files:
        full = os.path.join(dirpath, name)
        modes[os.path.relpath(full, {str(root)!r})] = oct(os.lstat(full).st_mode & 0o7777)
modes["."] = oct(os.lstat({str(root)!r}).st_mode & 0o7777)
print(json.dumps(modes))
"""
    result = _python(code, umask=umask)
    assert result.returncode == 0, result.stderr
    modes = json.loads(result.stdout)
    required = (".write.lock", "manifest.json", "index/journal.sqlite3", "index/journal.sqlite3-wal", "index/journal.sqlite3-shm")
    assert set(required) <= set(modes)
    wrong = {path: mode for path, mode in modes.items() if mode != (oct(0o700) if (root / path).is_dir() else oct(0o600))}
    assert wrong == {}


# -- 3. root keeps the journal's owner; a reader without write access still reads -----------

def _owners(root: Path) -> set[tuple[int, int]]:
    found = {(os.lstat(root).st_uid, os.lstat(root).st_gid)}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            info = os.lstat(os.path.join(dirpath, name))
            found.add((info.st_uid, info.st_gid))
    return found


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid, follow_symlinks=False)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def test_root_read_after_index_deleted_keeps_the_service_users_ownership(open_dir: Path, make_payload: Payload) -> None:
    """A root read rebuilds index/ as the journal's owner, so the service user's next append still works."""
    root = open_dir / "journal"
    _journal_with_entries(root, make_payload)
    _chown_tree(root, NOBODY)
    shutil.rmtree(root / "index")
    result = _cli(root, "list")  # as root
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 2
    assert _owners(root) == {(NOBODY, NOBODY)}
    # Root appends too (a root-run repair or routine): the new day dirs and files are the owner's.
    with Journal(root) as journal:
        journal.append(make_payload(ts="2031-07-04T12:00:00Z", client_key="root-append"))
    assert _owners(root) == {(NOBODY, NOBODY)}
    result = _cli(root, "append", stdin=json.dumps(make_payload(client_key="service-run")), uid=NOBODY)
    assert result.returncode == 0, result.stderr
    result = _cli(root, "list", uid=NOBODY)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 4


@pytest.mark.parametrize("index_state", ["present", "deleted"])
def test_reader_without_write_access_can_still_read(open_dir: Path, make_payload: Payload, index_state: str) -> None:
    """Another user with read access only lists, searches and gets, whether index/ is there or gone; nothing is written."""
    root = open_dir / "journal"
    ids = _journal_with_entries(root, make_payload)
    if index_state == "deleted":
        shutil.rmtree(root / "index")
    for dirpath, _dirs, files in os.walk(root):  # readable by others, writable by its owner (root) alone
        os.chmod(dirpath, 0o755)  # noqa: S103 - readable by others is what this test sets up
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)
    before = tree_digest(root)
    for args in (("list",), ("search", "theme"), ("get", ids[0])):
        result = _cli(root, *args, uid=NOBODY)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert {e["id"] for e in json.loads(_cli(root, "list", uid=NOBODY).stdout)} == set(ids)
    assert tree_digest(root) == before
    # A write is refused as the permission problem it is (exit 77, one line naming the owner and mode), without the read fallback.
    refused = _cli(root, "append", stdin=json.dumps(make_payload()), uid=NOBODY)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 77 and len(lines) == 1, refused.stderr
    assert "permission denied (EACCES)" in lines[0] and "is owned by root (uid 0)" in lines[0] and "in-memory" not in refused.stderr
    assert "Traceback" not in refused.stderr
    assert tree_digest(root) == before


# -- hostile bytes in one entry file never break the reads of the others --------------------

@pytest.fixture(scope="module")
def three_entry_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "journal"
    with Journal(root) as journal:
        for i in range(3):
            payload = {"kind": "note", "agent": "motoko", "theme": f"tide {i}", "voice": f"tide tables, day {i}", "client_key": f"day-{i}"}
            journal.append(payload)
    return root


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(min_value=0.0, max_value=1.0), noise=st.binary(max_size=64), mode=st.sampled_from(["truncate", "replace", "append"]))
def test_any_damage_to_one_entry_file_leaves_every_other_entry_readable(
    three_entry_journal: Path, cut: float, noise: bytes, mode: str
) -> None:
    """Truncated at any byte, overwritten or extended with any bytes: the other entries still list, search and fill a context."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "journal"
        shutil.copytree(three_entry_journal, root, symlinks=True)
        files = sorted((root / "entries").rglob("*.json"))
        victim = files[1]
        data = victim.read_bytes()
        damaged = {"truncate": data[: int(len(data) * cut)], "replace": noise, "append": data + noise}[mode]
        victim.write_bytes(damaged)
        others = {json.loads(p.read_bytes())["id"] for p in files if p != victim}
        with Journal(root) as journal:
            listed = {e.id for e in journal.list()}
            searched = {h.entry_id for h in journal.search("tide tables", k=5)}
            context = journal.prompt_context("tide", k=5)
            assert others <= listed and others <= searched
            assert all(entry_id in context for entry_id in others)
            assert len(listed) - len(others) <= 1
            if damaged != data and len(listed) == 2:
                assert [s.path for s in journal.skipped] == [f"entries/{victim.relative_to(root / 'entries')}"]
