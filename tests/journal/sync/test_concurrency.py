"""Concurrency, tested with real processes: four writers with overlapping client keys and a reader that reindexes.

All five children (``_child.py``) open the journal, report ``ready`` and wait
for a ``go`` line on stdin, so they really start together; the reader stops
when its stdin is closed after the writers have exited. Nothing sleeps.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

from journal import Journal
from tests.journal._inspect import entries_on_disk, index_rows

CHILD = Path(__file__).parents[1] / "_child.py"
WRITERS = 4
APPENDS = 200
PAUSED, PAUSE_AFTER = 3, 100  # writer 3's keys k-300..k-349 are its own and come after its pause


def _keys(writer: int) -> list[str]:
    return [f"k-{(i + 50 * writer) % 400}" for i in range(APPENDS)]


def _spawn(spec: dict[str, Any], stderr: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
    )


def test_four_writers_and_a_reindexing_reader_leave_one_entry_per_key(tmp_path: Path) -> None:
    """Four processes appending 200 entries each with overlapping client keys, while a fifth searches and reindexes, leave exactly one entry per key and an index equal to a fresh rebuild."""
    root = tmp_path / "journal"
    Journal(root).close()
    expected_keys = {key for w in range(WRITERS) for key in _keys(w)}
    assert len(expected_keys) == 350  # keys overlap: 800 appends, 350 distinct keys

    errs = {name: (tmp_path / f"{name}.stderr").open("w+") for name in [*(f"writer-{w}" for w in range(WRITERS)), "reader"]}
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for w in range(WRITERS):
            payloads = [
                {"kind": "note", "agent": "crowd", "theme": "concurrent writer", "voice": f"concurrent writer {w} entry {key}",
                 "tags": [f"writer-{w}"], "client_key": key}
                for key in _keys(w)
            ]
            spec = {"mode": "append", "root": str(root), "payloads": payloads, "barrier": True, "pause_after": PAUSE_AFTER if w == PAUSED else None}
            procs[f"writer-{w}"] = _spawn(spec, errs[f"writer-{w}"])
        procs["reader"] = _spawn({"mode": "reader", "root": str(root)}, errs["reader"])
        for name, proc in procs.items():  # barrier: everyone has opened the journal ...
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n", f"{name} did not get ready"
        for proc in reversed(procs.values()):  # ... then all start at once (the reader first)
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        # The writer lock is not fair, so a reindex may wait out a whole burst of appends. To be sure
        # one reindex runs while appends are still to come, one writer pauses after PAUSE_AFTER
        # appends (outside the lock, journal open) until the reader has finished its first reindex.
        reader = procs["reader"]
        assert reader.stdout is not None
        first = reader.stdout.readline()
        assert first.startswith("reindexed "), f"reader said {first!r}"
        paused = procs[f"writer-{PAUSED}"]
        assert paused.stdin is not None
        paused.stdin.write("continue\n")
        paused.stdin.flush()
        outputs = {name: procs[name].communicate(timeout=120)[0] for name in procs if name != "reader"}
        reader_out = first + reader.communicate(timeout=120)[0]  # closing its stdin tells it the writers are done
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    errors = {}
    for name, handle in errs.items():
        handle.seek(0)
        errors[name] = handle.read()
        handle.close()

    for name, proc in procs.items():
        assert proc.returncode == 0 and errors[name] == "", f"{name} exited {proc.returncode}: {errors[name]}"

    # Every writer got an answer for each of its keys, and all writers agree on each key's entry.
    ids: dict[str, set[str]] = {}
    for w in range(WRITERS):
        lines = [line for line in outputs[f"writer-{w}"].splitlines() if line != "paused"]
        assert outputs[f"writer-{w}"].count("paused") == (w == PAUSED)
        assert [line.split()[0] for line in lines] == _keys(w), f"writer-{w} did not report every append in order"
        for line in lines:
            key, entry_id = line.split()
            ids.setdefault(key, set()).add(entry_id)
    split = {key: found for key, found in ids.items() if len(found) != 1}
    assert split == {}, f"writers got different entries for the same client_key: {split}"
    returned = {key: found.pop() for key, found in ids.items()}

    summary = json.loads(reader_out.splitlines()[-1])
    counts = summary["reindex_counts"]
    assert reader_out.splitlines()[:-1] == [f"reindexed {n}" for n in counts], reader_out
    assert summary["reindexes"] >= 3 and summary["searches"] >= 1, summary
    assert counts[0] <= len(expected_keys) - 50, f"the first reindex did not run while appends were still to come: {summary}"
    assert counts == sorted(counts) and counts[-1] == len(expected_keys), f"a reindex lost entries: {counts}"
    visible = summary["visible_counts"]
    assert visible == sorted(visible) and visible[-1] == len(expected_keys), f"entries vanished from list(): {visible}"

    # Exactly one entry file per distinct key, and the index rows (read before anything reopens
    # the journal) are exactly those files.
    files, temps = entries_on_disk(root)
    disk_rows = sorted((data["id"], rel, data.get("client_key")) for rel, data in files.items())
    assert Counter(key for _, _, key in disk_rows) == Counter(expected_keys), "not exactly one entry file per client_key"
    assert temps == [], f"temp files left behind by appends that returned: {temps}"
    rows = index_rows(root)
    assert rows == disk_rows, "the index differs from the entry files"
    with Journal(root) as journal:
        listed = journal.list()
        assert len(listed) == len(expected_keys)
        assert {e.client_key: e.id for e in listed} == returned

    # The index equals a fresh rebuild of a copy, and so do query results.
    copy = tmp_path / "rebuilt"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "index")
    with Journal(copy) as rebuilt, Journal(root) as journal:
        assert rebuilt.skipped == []
        assert index_rows(copy) == rows
        assert [e.id for e in journal.list()] == [e.id for e in rebuilt.list()]
        for query in ("concurrent writer", "writer-2", "entry k-123"):
            ours = sorted((h.entry_id, round(h.score, 9)) for h in journal.search(query, k=1000))
            assert ours == sorted((h.entry_id, round(h.score, 9)) for h in rebuilt.search(query, k=1000)), query


OPENER = """
import sys
from journal import Journal
sys.stdin.readline()
with Journal(sys.argv[1]) as journal:
    journal.append({"kind": "note", "agent": "a", "theme": "t", "voice": "v", "client_key": "same"})
print("ok", flush=True)
"""


def test_processes_creating_the_same_new_journal_at_once_all_succeed(tmp_path: Path) -> None:
    """Six processes that open a journal which does not exist yet, released together, all open it and agree on one entry."""
    for attempt in range(12):
        root = tmp_path / f"new-{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
        for proc in procs:  # release them together: each is already blocked on its stdin
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=60) for proc in procs]
        assert [(proc.returncode, out) for proc, (out, _) in zip(procs, results, strict=True)] == [(0, "ok\n")] * 6, [err for _, err in results]
        with Journal(root) as journal:
            assert [e.client_key for e in journal.list()] == ["same"]
