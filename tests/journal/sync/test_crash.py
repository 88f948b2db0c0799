"""Crash safety, tested by really crashing: writer processes are killed with SIGKILL.

The child (``_child.py``) wraps one step function of an append in its own
process so that it kills itself right after that step; the library carries
no fault hooks. A second test SIGKILLs a busy writer at random moments,
chosen by counting its progress lines (returned appends and step traces),
never by sleeping.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from journal import EntryNotFoundError, Journal
from tests.journal._inspect import entries_on_disk, index_rows

CHILD = Path(__file__).parents[1] / "_child.py"
SEED = 20260905  # fixed, and printed in assertion messages, so a failure can be replayed
QUERIES = ("zeppelin", "crash", "busy writer", "retry", "entry before")


def _child(spec: dict[str, Any], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True, timeout=timeout, check=False)


def _payload(key: str, voice: str) -> dict[str, Any]:
    return {"kind": "note", "agent": "crasher", "theme": "crash test", "voice": voice, "client_key": key}


def _returned(lines: list[str]) -> dict[str, str]:
    """``<client_key> <entry_id>`` progress lines (complete lines only) as a dict."""
    result: dict[str, str] = {}
    for line in lines:
        if not line.endswith("\n") or line == "ready\n" or line.startswith(("CRASH ", "@")):
            continue
        key, entry_id = line.split()
        assert key not in result, f"append of {key} reported twice"
        result[key] = entry_id
    return result


def _by_key(journal: Journal) -> dict[str | None, list[str]]:
    found: dict[str | None, list[str]] = {}
    for entry in journal.list():
        found.setdefault(entry.client_key, []).append(entry.id)
    return found


def _assert_index_consistent(root: Path, scratch: Path, context: str) -> None:
    """The index rows equal the entry files on disk and a fresh rebuild of a copy; queries agree."""
    rows = index_rows(root)  # as the last writer left them, before anything reopens the journal
    files, _ = entries_on_disk(root)
    assert rows == sorted((data["id"], rel, data.get("client_key")) for rel, data in files.items()), f"{context}: index differs from entries/"
    shutil.copytree(root, scratch)
    shutil.rmtree(scratch / "index")
    with Journal(scratch) as rebuilt, Journal(root) as journal:
        assert rebuilt.skipped == [], f"{context}: rebuild skipped {rebuilt.skipped}"
        assert index_rows(scratch) == rows, f"{context}: index differs from a fresh rebuild"
        assert [e.id for e in journal.list()] == [e.id for e in rebuilt.list()], context
        for query in QUERIES:
            ours = sorted((h.entry_id, round(h.score, 9)) for h in journal.search(query, k=1000))
            theirs = sorted((h.entry_id, round(h.score, 9)) for h in rebuilt.search(query, k=1000))
            assert ours == theirs, f"{context}: search {query!r} differs from a fresh rebuild"


@pytest.mark.parametrize("retry_in", ["fresh process", "journal open before the crash"])
@pytest.mark.parametrize("step", ["insert_entry", "write_temp", "commit"])
def test_sigkill_at_each_append_step_leaves_no_or_one_complete_entry(tmp_path: Path, step: str, retry_in: str) -> None:
    """A writer SIGKILLed after one step of an append leaves no partial entry, loses no returned append, and a retry yields exactly one entry and a consistent index."""
    root = tmp_path / "journal"
    crash_key = f"crash-{step}"
    before = [_payload(f"before-{i}", f"entry before the crash, number {i}") for i in range(3)]
    original = _payload(crash_key, f"zeppelin original payload, killed after {step}")
    retry = _payload(crash_key, f"zeppelin retried payload after {step}")
    # A handle opened before the crash must catch up by itself when it retries (it cannot rely on reopening).
    survivor = Journal(root) if retry_in == "journal open before the crash" else None
    try:
        proc = _child({"mode": "append", "root": str(root), "payloads": [*before, original], "crash": {"step": step, "key": crash_key}})
        assert proc.returncode == -signal.SIGKILL, f"child ended with {proc.returncode}, not SIGKILL: {proc.stderr}"
        assert proc.stdout.splitlines()[-1] == f"CRASH {step}", proc.stdout
        returned = _returned(proc.stdout.splitlines(keepends=True))
        assert sorted(returned) == ["before-0", "before-1", "before-2"]

        # What the crash left behind, before anything reopens the journal.
        files, temps = entries_on_disk(root)
        crash_files = [rel for rel, data in files.items() if data.get("client_key") == crash_key]
        assert crash_key not in {key for _, _, key in index_rows(root)}, "the crashed append reached a committed index row"
        temp_ids: list[str] = []
        if step in ("insert_entry", "write_temp"):  # the index rows are staged while the temp file is fsynced
            assert crash_files == [], "an entry was published although the writer died before publishing"
            # Where O_TMPFILE works (Linux, ext4 here) the temp file had no name and died with
            # the process; a named fallback temp file is complete and fsynced, yet never an entry.
            assert len(temps) <= 1, f"more than the crashed append's temp file: {temps}"
            for temp in temps:
                temp_data = json.loads(temp.read_bytes())
                assert temp_data["client_key"] == crash_key
                temp_ids.append(temp_data["id"])
            published_id = None
        else:
            assert len(crash_files) == 1 and temps == [], (crash_files, temps)
            published_id = files[crash_files[0]]["id"]

        retried_id = None
        if survivor is not None:
            result = survivor.append_with_result(retry)
            retried_id = result.entry.id
            assert result.is_duplicate == (published_id is not None), f"retry after {step}: is_duplicate={result.is_duplicate}"
            assert _by_key(survivor).get(crash_key) == [retried_id]
    finally:
        if survivor is not None:
            survivor.close()
    if published_id is not None:
        assert retried_id in (None, published_id), "the retry did not return the entry the crashed append published"

    # Reopening works and shows every returned append, plus nothing or the one complete entry.
    expected = [retried_id or published_id] if (retried_id or published_id) else []
    with Journal(root) as journal:
        by_key = _by_key(journal)
        for key, entry_id in returned.items():
            assert by_key.get(key) == [entry_id], f"returned append {key} lost or changed: {by_key.get(key)}"
        assert by_key.get(crash_key, []) == expected, (by_key.get(crash_key), expected)
        assert [h.entry_id for h in journal.search("zeppelin")] == expected
        for temp_id in temp_ids:
            with pytest.raises(EntryNotFoundError):
                journal.get(temp_id)
        if published_id is not None:
            assert journal.get(published_id).voice == original["voice"]

    # A retry with the same client_key in a fresh process: the first published payload wins.
    again = _child({"mode": "append", "root": str(root), "payloads": [retry]})
    assert again.returncode == 0 and again.stderr == "", (again.returncode, again.stderr)
    fresh_id = _returned(again.stdout.splitlines(keepends=True))[crash_key]
    assert fresh_id == (retried_id or published_id or fresh_id), "a retry returned another entry than the first one stored"
    assert fresh_id not in temp_ids
    retried_id = fresh_id

    with Journal(root) as journal:
        result = journal.append_with_result(retry)  # and once more, in this process
        assert result.is_duplicate and result.entry.id == retried_id
        by_key = _by_key(journal)
        assert by_key.get(crash_key) == [retried_id], by_key.get(crash_key)
        assert journal.get(retried_id).voice == (original if published_id else retry)["voice"]
        assert [h.entry_id for h in journal.search("zeppelin")] == [retried_id]
        for key, entry_id in returned.items():
            assert by_key.get(key) == [entry_id]
        assert len(journal.list()) == 4
    files, temps = entries_on_disk(root)
    assert Counter(data.get("client_key") for data in files.values())[crash_key] == 1
    assert temps == [], "the next writer clears temp files a crash left behind"
    _assert_index_consistent(root, tmp_path / "rebuilt", f"crash at {step}, retry in {retry_in}")


def test_sigkill_after_a_named_temp_write_leaves_a_temp_file_the_next_writer_clears(tmp_path: Path) -> None:
    """Without unnamed files, a crash after the temp write leaves one complete hidden temp file, never an entry; the next append clears it."""
    root = tmp_path / "journal"
    crash = _payload("crash-named", "zeppelin written to a named temp file")
    proc = _child({"mode": "append", "root": str(root), "payloads": [crash], "named_temp": True, "crash": {"step": "write_temp", "key": "crash-named"}})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    files, temps = entries_on_disk(root)
    assert files == {} and len(temps) == 1
    assert json.loads(temps[0].read_bytes())["client_key"] == "crash-named"
    with Journal(root) as journal:
        assert journal.list() == []
        journal.append(_payload("after", "the next append"))
    assert entries_on_disk(root)[1] == []


def test_random_sigkill_of_busy_writer_keeps_every_returned_append(tmp_path: Path) -> None:
    """A busy writer SIGKILLed at random moments over several rounds never loses or duplicates a returned append, and retries give one entry per key."""
    rng = random.Random(SEED)
    root = tmp_path / "journal"
    returned: dict[str, str] = {}
    start = 0
    # Even rounds retry through a handle opened before the crash, odd rounds through a fresh one.
    with Journal(root) as long_lived:
        for round_no in range(8):
            # Kill right after the writer reports its wanted-th returned append, or the next
            # step of the following append, so kills land in every phase of an append.
            wanted, aim = rng.randint(5, 60), rng.choice(["returned", "@insert_entry", "@write_temp", "@link", "@publish"])
            context = f"seed={SEED} round={round_no} kill after {wanted} appends at {aim}"
            spec = {"mode": "busy", "root": str(root), "start": start, "trace": True}
            proc = subprocess.Popen([sys.executable, str(CHILD), json.dumps(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert proc.stdout is not None
                seen, count = [], 0
                while True:  # the kill moment is chosen by progress lines, not by time
                    line = proc.stdout.readline()
                    assert line.endswith("\n"), f"{context}: busy writer stopped early ({proc.poll()})"
                    seen.append(line)
                    step = line.split()[0] if line.startswith("@") else "returned"
                    count += step == "returned"
                    if count > wanted or (count == wanted and step == aim):
                        break
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                # read() on the same text stream, not communicate(): communicate() reads the raw
                # pipe and would lose the lines readline() has already buffered.
                with proc.stdout, proc.stderr:  # type: ignore[union-attr]
                    rest, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert proc.returncode == -signal.SIGKILL, f"{context}: {proc.returncode} {err}"
            assert err == "", f"{context}: {err}"
            this_round = _returned(seen + rest.splitlines(keepends=True))
            assert list(this_round) == [f"key-{n}" for n in range(start, start + len(this_round))], context
            assert len(this_round) >= wanted
            returned.update(this_round)
            in_flight = start + len(this_round)  # the key the writer was (or was about to be) appending

            files, temps = entries_on_disk(root)
            on_disk = Counter(data.get("client_key") for data in files.values())
            context += f" (in-flight key-{in_flight}: published={on_disk[f'key-{in_flight}']}, temp files={len(temps)})"
            assert max(on_disk.values()) == 1, f"{context}: duplicate files {[k for k, n in on_disk.items() if n > 1]}"
            context += ", retry via " + ("the handle opened before the crash" if round_no % 2 == 0 else "a fresh handle")
            with contextlib.nullcontext(long_lived) if round_no % 2 == 0 else Journal(root) as journal:
                by_key = _by_key(journal)
                for key, entry_id in returned.items():
                    assert by_key.get(key) == [entry_id], f"{context}: returned append {key} is {by_key.get(key)}, expected [{entry_id}]"
                for n in range(in_flight + 1):
                    key = f"key-{n}"
                    entry = journal.append({"kind": "pulse", "agent": "busy", "theme": "retry", "voice": f"retry of {key}", "client_key": key})
                    assert returned.setdefault(key, entry.id) == entry.id, f"{context}: retry of {key} gave another entry"
                by_key = _by_key(journal)
                assert sorted(by_key) == sorted(f"key-{n}" for n in range(in_flight + 1)), context
                assert all(len(ids) == 1 for ids in by_key.values()), f"{context}: {by_key}"
            files, _ = entries_on_disk(root)
            on_disk = Counter(data.get("client_key") for data in files.values())
            assert on_disk == Counter(f"key-{n}" for n in range(in_flight + 1)), f"{context}: not one file per key after the retries"
            _assert_index_consistent(root, tmp_path / f"rebuilt-{round_no}", context)
            start = in_flight + 1
