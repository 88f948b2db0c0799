"""``backup``: a copy that is itself a journal, of one instant while a real process appends, verified, refusing any existing target."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from tests._support import entry_files, tree_digest
from tests.journal._busy import busy_writer
from tests.journal._fakes import FakeEncoder
from tests.journal._readme import run_readme_block


def _payload(n: int, agent: str = "alice") -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "theme": f"harbour {n}", "voice": f"The harbour lights, evening {n}.",
            "ts": f"2026-09-{1 + n % 9:02d}T0{n % 3}:00:00Z", "client_key": f"{agent}:{n}"}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "--root", str(root), "backup", "--json", *args], capture_output=True, text=True, check=False, timeout=120)


def test_the_copy_is_a_journal_with_the_same_entries_vectors_and_answers(tmp_path: Path) -> None:
    """The backup opens as a journal: the same entry files, every vector, the same hybrid hits, and its verify (in the report) is clean."""
    root = tmp_path / "j"
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        for n in range(12):
            journal.append(_payload(n))
        expected = [(h.entry.id, h.score) for h in journal.search("harbour lights", k=5, mode="hybrid")]
    done = _cli(root, "--out", str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == 12 and report["verify"]["ok"] is True
    assert entry_files(tmp_path / "copy") == entry_files(root)
    with Journal(tmp_path / "copy", enable_nn=True, encoder=FakeEncoder()) as copy:
        assert copy.embed().embedded == 0  # every vector came with the index
        assert [(h.entry.id, h.score) for h in copy.search("harbour lights", k=5, mode="hybrid")] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "j"]  # no partial directory left beside it


def test_a_backup_while_another_process_appends_is_one_instants_copy(tmp_path: Path) -> None:
    """Backups taken while a real writer appends each verify clean: their index and files are of the same instant."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        for n in range(20):
            journal.append(_payload(n))
    with busy_writer(root) as writer, Journal(root) as journal:
        for round_ in range(4):
            seen = len(writer.wait_for_more())
            report = journal.backup(tmp_path / f"copy-{round_}")
            assert report.verify.is_clean, report.verify.to_dict()
            assert report.files >= 20 + seen
    source = entry_files(root)
    for round_ in range(4):
        copied = entry_files(tmp_path / f"copy-{round_}")
        assert all(source[name] == digest for name, digest in copied.items())


@pytest.mark.parametrize("planted", ["directory", "journal", "file", "symlink", "fifo", "inside"])
def test_a_target_that_exists_or_lies_inside_the_journal_is_refused(tmp_path: Path, planted: str) -> None:
    """A backup never writes into or over anything: an existing directory, journal, file, symlink or FIFO, or a path in the journal, is one line, exit 1."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        journal.append(_payload(1))
    target = root / "backups" if planted == "inside" else tmp_path / "target"
    if planted == "directory":
        target.mkdir()
    elif planted == "journal":
        Journal(target).close()
    elif planted == "file":
        target.write_text("keep")
    elif planted == "symlink":
        target.symlink_to(tmp_path)
    elif planted == "fifo":
        os.mkfifo(target)
    before = tree_digest(tmp_path)
    done = _cli(root, "--out", str(target))
    assert done.returncode == 2 and done.stderr.startswith("ghostjournal: error: refused ") and done.stderr.count("\n") == 1
    assert tree_digest(tmp_path) == before


def test_the_readme_backup_commands_run_as_written(tmp_path: Path) -> None:
    """The backup block of docs/ghostjournal.md: a backup whose verify is clean, and the copy opened as a journal."""
    with Journal(tmp_path / "journal") as journal:
        for n in range(3):
            journal.append(_payload(n))
    outputs = [json.loads(output) for output in run_readme_block("Backing up while agents write: `ghostjournal backup`", tmp_path, lines=2, page="docs/ghostjournal.md")]
    assert outputs[0]["verify"]["ok"] is True and outputs[0]["files"] == 3
    assert len(outputs[1]) == 1


@pytest.mark.parametrize("where", ["missing/deeper", "a-file"])
def test_a_backup_into_a_directory_that_is_not_there_says_to_create_it(tmp_path: Path, where: str) -> None:
    """--out under a directory that does not exist, or under a file, is one line saying to create the directory (exit 74),
    never a hint to look for I/O errors in dmesg; nothing is written."""
    with Journal(tmp_path / "journal") as journal:
        journal.append(_payload(1))
    (tmp_path / "a-file").write_text("not a directory")
    done = _cli(tmp_path / "journal", "--out", str(tmp_path / where / "copy"))
    assert done.returncode == 74 and done.stderr.count("\n") == 1, done.stderr
    assert "create that directory first" in done.stderr and "dmesg" not in done.stderr, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "journal"]


def _copy_in(source: Path, target: Path, how: str) -> None:
    """Copy every file of *source* over *target*, deleting nothing there: as ``cp -a``, ``shutil.copytree`` or rsync (a new file renamed over the old) would."""
    if how == "cp -a":
        subprocess.run(["cp", "-a", f"{source}/.", str(target)], check=True, timeout=60)
    elif how == "copytree":
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        for directory, _, names in os.walk(source):
            into = target / Path(directory).relative_to(source)
            into.mkdir(exist_ok=True)
            for name in names:
                temporary = into / f".{name}.copying"
                shutil.copy2(Path(directory) / name, temporary)
                os.replace(temporary, into / name)
            shutil.copystat(directory, into)


def _backed_up_then_appended(tmp_path: Path) -> tuple[Path, Path, str]:
    """A journal of three entries, its backup, then two newer entries: the journal, the backup, and the id of the first newer one."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        for n in range(3):
            journal.append(_payload(n))
        assert journal.backup(tmp_path / "copy").verify.is_clean
        newer = journal.append(_payload(3)).id
        journal.append(_payload(4))
    return root, tmp_path / "copy", newer


@pytest.mark.parametrize("index", ["kept", "lost"])
@pytest.mark.parametrize("how", ["cp -a", "copytree", "renamed"])
def test_a_backup_copied_in_over_the_live_journal_never_hides_a_newer_entry_or_stores_its_key_twice(tmp_path: Path, how: str, index: str) -> None:
    """A backup's files copied over the journal it was taken of, after newer appends and without deleting anything (over its index,
    or where its index was lost): the next open lists the newer entries, and retrying one's client_key returns it, no second entry."""
    root, copy, newer = _backed_up_then_appended(tmp_path)
    if index == "lost":
        shutil.rmtree(root / "index")
    _copy_in(copy, root, how)
    with Journal(root) as journal:
        assert len(journal.list(limit=100)) == 5
        again = journal.append_with_result(_payload(3))
        assert again.is_duplicate and again.entry.id == newer
    assert len(entry_files(root)) == 5


@pytest.mark.parametrize("recover", ["verify --repair", "reindex"])
def test_verify_reports_what_a_copied_in_backup_left_unindexed_and_repair_or_reindex_recovers_every_entry(tmp_path: Path, recover: str) -> None:
    """Checked as found (before any open catches the index up), the copied-in journal's newer entries are reported by id; after
    --repair or reindex the check is clean, every entry is listed and a retried key is a duplicate."""
    root, copy, newer = _backed_up_then_appended(tmp_path)
    _copy_in(copy, root, "cp -a")

    def run(*args: str, given: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ghostjournal", "--root", str(root), *args], input=given, capture_output=True, text=True, check=False, timeout=120)

    found = run("verify", "--json")
    assert found.returncode == 4, found.stderr
    missing = [p for p in json.loads(found.stdout)["problems"] if p["kind"] == "index_rows"]
    assert len(missing) == 1 and newer in missing[0]["detail"], found.stdout
    assert run(*recover.split(), "--json").returncode == 0
    assert run("verify", "--json").returncode == 0
    assert len(json.loads(run("list", "--json", "--limit", "100").stdout)) == 5
    retried = run("append", "--json", given=json.dumps(_payload(3)))
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["outcome"] == "duplicate" and json.loads(retried.stdout)["entry"]["id"] == newer, retried.stdout
    assert len(entry_files(root)) == 5


def test_a_backup_copied_back_in_place_of_a_lost_journal_verifies_clean_and_opens_without_rewriting_it(tmp_path: Path) -> None:
    """The restore the docs describe: the backup copied where the lost journal was verifies clean as found, and opens with every
    entry; a fresh backup itself opens caught up, a read writing nothing to it."""
    root, copy, _ = _backed_up_then_appended(tmp_path)
    before = tree_digest(copy)
    with Journal(copy) as journal:
        assert len(journal.list(limit=100)) == 3
    assert tree_digest(copy) == before
    shutil.rmtree(root)
    subprocess.run(["cp", "-a", str(copy), str(root)], check=True, timeout=60)
    checked = subprocess.run(["ghostjournal", "--root", str(root), "verify", "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert checked.returncode == 0, checked.stdout
    with Journal(root) as journal:
        assert len(journal.list(limit=100)) == 3
        assert journal.append_with_result(_payload(3)).is_duplicate is False


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_out_is_refused_naming_the_option_never_read_as_the_current_directory(tmp_path: Path, value: str) -> None:
    """--out "" (a script's variable that came out empty) is a usage error naming --out, exit 2; nothing is written where the command runs."""
    with Journal(tmp_path / "journal") as journal:
        journal.append(_payload(1))
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        ["ghostjournal", "--root", str(tmp_path / "journal"), "backup", "--out", value], capture_output=True, text=True, check=False, cwd=work, timeout=120
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"ghostjournal: error: Invalid value for '--out': expected a directory that does not exist yet, got {value!r}")
    assert "the backup directory exists" not in done.stderr and list(work.iterdir()) == []


@pytest.mark.parametrize("below", ["copy", "deeper/copy"])
def test_out_under_a_link_that_points_nowhere_says_so(tmp_path: Path, below: str) -> None:
    """--out through a symbolic link whose target is gone names the link and that it points nowhere (exit 74), never only
    "create that directory" (the link is there: creating it fails); nothing is written and the link is left as it was."""
    with Journal(tmp_path / "journal") as journal:
        journal.append(_payload(1))
    link = tmp_path / "backups"
    link.symlink_to(tmp_path / "unmounted")
    done = _cli(tmp_path / "journal", "--out", str(link / below))
    assert done.returncode == 74 and done.stderr.count("\n") == 1, done.stderr
    assert f"{str(link)!r} is a symbolic link that points nowhere ({str(tmp_path / 'unmounted')!r} does not exist)" in done.stderr
    assert "dmesg" not in done.stderr and "create that directory first" not in done.stderr, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["backups", "journal"] and link.is_symlink()
