"""``export``: the entries' canonical bytes in (time, id) order and a manifest line, of one instant, scoped without a leak."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from journal.carry.export import MANIFEST_KEYS, MANIFEST_MEMBER
from journal.files.store import EntryStore
from tests._support import place_entries
from tests.journal._busy import busy_writer
from tests.journal._readme import run_readme_block


def _payload(n: int, agent: str = "alice", **extra: Any) -> dict[str, Any]:
    return {"kind": "note", "agent": agent, "theme": f"harbour {n}", "voice": f"The harbour lights, evening {n}.",
            "ts": f"2026-09-{1 + n % 9:02d}T0{n % 3}:00:00Z", "client_key": f"{agent}:{n}", **extra}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root / "entries")): p.read_bytes() for p in (root / "entries").rglob("*.json")}


def _split(stream: bytes) -> tuple[list[bytes], dict[str, Any]]:
    lines = stream.splitlines(keepends=True)
    return lines[:-1], json.loads(lines[-1])


def _cli(root: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ghostjournal", "--root", str(root), "export", *args], capture_output=True, check=False, timeout=120, cwd=cwd)


def test_jsonl_is_every_files_bytes_in_time_then_id_order_and_a_manifest_line(tmp_path: Path) -> None:
    """Each line is an entry file's bytes, ordered by time then id (equal times included); the last line names the journal, counts and hashes them."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        entries = [journal.append(_payload(n)) for n in range(12)]
        entries += [journal.append(_payload(n, agent="bob", ts="2026-09-02T01:00:00Z")) for n in range(20, 23)]
        journal_id = journal.manifest.journal_id
    done = _cli(root, "--out", "-")
    assert done.returncode == 0, done.stderr
    lines, manifest = _split(done.stdout)
    ordered = sorted(entries, key=lambda e: (e.timestamp, e.id))
    files = _files(root)
    assert lines == [files[EntryStore.rel_path_for(e)] for e in ordered]
    assert tuple(manifest) == tuple(sorted(MANIFEST_KEYS))
    assert manifest["journal_id"] == journal_id and manifest["schema_version"] == 1 and manifest["ghostjournal_export"] == 1
    assert manifest["entries"] == 15 and manifest["agents"] == {"alice": 12, "bob": 3}
    assert manifest["sha256"] == "sha256:" + hashlib.sha256(b"".join(lines)).hexdigest()
    assert done.stderr.decode().startswith("exported 15 entries (sha256:")


def test_tar_holds_each_file_at_its_path_and_the_manifest_last(tmp_path: Path) -> None:
    """--format tar: one member per entry file, bytes unchanged, mode 0600, then export-manifest.json with the same hash as the jsonl form."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        for n in range(5):
            journal.append(_payload(n))
    assert _cli(root, "--format", "tar", "--out", str(tmp_path / "j.tar")).returncode == 0
    jsonl = _cli(root, "--out", "-").stdout
    with tarfile.open(tmp_path / "j.tar") as archive:
        members = archive.getmembers()
        contents = {m.name: archive.extractfile(m).read() for m in members}  # type: ignore[union-attr]  # every member is a file
    assert [m.name for m in members][-1] == MANIFEST_MEMBER and all(m.mode == 0o600 for m in members)
    files = _files(root)
    assert {name.removeprefix("entries/"): data for name, data in contents.items() if name != MANIFEST_MEMBER} == files
    assert json.loads(contents[MANIFEST_MEMBER])["sha256"] == _split(jsonl)[1]["sha256"]


def test_an_agents_export_holds_nothing_of_another_agent(tmp_path: Path) -> None:
    """With --agent, no id of bob's appears anywhere, even as a link: the link is taken out and counted; a link out of the window is listed.

    The entry linking to bob's is placed by hand (append refuses such a link; an earlier version could write it).
    """
    root = tmp_path / "j"
    with Journal(root) as journal:
        bobs = journal.append(_payload(1, agent="bob", voice="bob's private words"))
        early = journal.append(_payload(2, ts="2026-08-01T00:00:00Z"))
        (linked,) = place_entries(journal, [_payload(3, ts="2026-09-05T00:00:00Z", signals={"continuity_refs": [bobs.id, early.id]})])
        plain = journal.append(_payload(4, ts="2026-09-06T00:00:00Z"))
    done = _cli(root, "--agent", "alice", "--since", "2026-09-01T00:00:00Z", "--out", "-")
    assert done.returncode == 0, done.stderr
    assert bobs.id.encode() not in done.stdout and b"bob" not in done.stdout
    lines, manifest = _split(done.stdout)
    assert [json.loads(line)["id"] for line in lines] == [linked.id, plain.id]
    assert json.loads(lines[0])["signals"] == {"continuity_refs": [early.id]}
    assert lines[1] == _files(root)[EntryStore.rel_path_for(plain)]  # an entry without such a link is exported byte for byte
    assert manifest["links_removed"] == [{"entry": linked.id, "links": 1}]
    assert manifest["links_outside"] == [{"entry": linked.id, "link": early.id}]
    assert manifest["agents"] == {"alice": 2} and manifest["agent"] == "alice"


def test_an_export_while_another_process_appends_is_one_instants(tmp_path: Path) -> None:
    """Exports taken while a real process appends hold every entry appended before they began and a gapless run of the writer's keys, each line whole."""
    root = tmp_path / "j"
    Journal(root).close()
    overlapped = 0
    with busy_writer(root) as writer, Journal(root) as journal:
        for _ in range(300):
            before = writer.wait_for_more()
            out = io.BytesIO()
            manifest = journal.export(out)
            lines, last = _split(out.getvalue())
            keys = [json.loads(line)["client_key"] for line in lines]  # every line a whole entry
            assert set(before) <= set(keys)
            assert sorted(keys, key=lambda k: int(k.split("-")[1])) == [f"key-{n}" for n in range(len(keys))]
            assert last["entries"] == len(lines) == manifest.entries
            # An entry's time is taken before it is published: one later than the export's instant was published after it began.
            instant = datetime.fromisoformat(last["exported_at"])
            assert all(datetime.fromisoformat(json.loads(line)["ts"]) <= instant for line in lines)
            overlapped += len(writer.appended) > len(before)
            if overlapped >= 5:
                break
    assert overlapped >= 5, "the writer never appended during an export"


@pytest.mark.parametrize("planted", ["symlink", "fifo", "journal", "directory"])
def test_an_output_that_is_a_symlink_fifo_or_journal_is_refused_and_left_alone(tmp_path: Path, planted: str) -> None:
    """--out at a symlink, a FIFO, an existing journal or a directory: one error line, nothing written, the thing there unchanged."""
    root = tmp_path / "j"
    with Journal(root) as journal:
        journal.append(_payload(1))
    target = tmp_path / "out"
    keep = tmp_path / "keep.txt"
    keep.write_text("keep")
    if planted == "symlink":
        target.symlink_to(keep)
    elif planted == "fifo":
        os.mkfifo(target)
    elif planted == "journal":
        Journal(target).close()
    else:
        target.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = _cli(root, "--out", str(target))
    assert done.returncode == 2 and done.stderr.decode().startswith("ghostjournal: error: refused ") and done.stderr.count(b"\n") == 1
    assert keep.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == before
    if planted == "journal":
        assert (target / "manifest.json").is_file()


def test_stdout_on_a_terminal_is_a_usage_error(tmp_path: Path) -> None:
    """--out - onto a terminal would flood it with JSON: refused with exit 2, as is an empty --out."""
    root = tmp_path / "j"
    Journal(root).close()
    empty = _cli(root, "--out", "")
    assert empty.returncode == 2 and b"an empty value is not stdout" in empty.stderr


def test_the_readme_export_commands_run_as_written(tmp_path: Path) -> None:
    """Each line of the export block of docs/ghostjournal.md runs on a journal in the working directory, exits 0, and writes what it says."""
    with Journal(tmp_path / "journal") as journal:
        for n in range(3):
            journal.append(_payload(n, agent="motoko"))
    outputs = run_readme_block("Carrying a journal: `ghostjournal export`", tmp_path, lines=3, page="docs/ghostjournal.md")
    assert json.loads(outputs[1])["entries"] == 3 and json.loads(outputs[1])["agent"] == "motoko"
    assert len((tmp_path / "journal.jsonl").read_bytes().splitlines()) == 4
    assert tarfile.is_tarfile(tmp_path / "journal.tar")


def test_an_output_under_a_link_that_points_nowhere_says_so(tmp_path: Path) -> None:
    """--out in a directory reached through a symbolic link whose target is gone names the link and that it points nowhere (exit 74)."""
    root = tmp_path / "j"
    Journal(root).close()
    link = tmp_path / "exports"
    link.symlink_to("gone")
    done = _cli(root, "--out", str(link / "all.jsonl"))
    stderr = done.stderr.decode()
    assert done.returncode == 74 and stderr.count("\n") == 1, stderr
    assert f"{str(link)!r} is a symbolic link that points nowhere ('gone' does not exist)" in stderr and "dmesg" not in stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["exports", "j"]
