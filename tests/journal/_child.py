"""Child process for the crash and concurrency tests (run with ``sys.executable``; not a test module).

Usage: ``python _child.py '<json spec>'``. The spec's ``mode`` is one of:

``append``
    ``{"mode": "append", "root": ..., "payloads": [...], "barrier": bool, "pause_after": n | null,
    "crash": {"step": "write_temp" | "insert_entry" | "commit", "key": ...} | null}``.
    Opens ``journal.Journal(root)``, prints ``ready``; with ``barrier`` it then
    waits for one line on stdin. Appends every payload in order and prints
    ``<client_key> <entry_id>`` (flushed) after each append that returned.
    With ``pause_after``, it prints ``paused`` after that many appends and
    waits for another line on stdin before going on.
    With ``crash``, one library step function is wrapped *in this process*
    (the library has no fault hooks): the original runs, then, when it handled
    the entry whose client_key is ``crash.key``, the process prints
    ``CRASH <step>`` and kills itself with SIGKILL.

``busy``
    ``{"mode": "busy", "root": ..., "start": n, "trace": bool}``: appends
    ``key-n``, ``key-(n+1)``, ... without end, printing ``<client_key> <entry_id>``
    after each returned append, until it is killed. With ``trace`` it also
    prints ``@<step> <client_key>`` after each step of an append (insert_entry,
    write_temp, link, publish), so the parent can aim its kill at a phase.

``reader``
    ``{"mode": "reader", "root": ...}``: prints ``ready``, waits for one line
    on stdin, then calls reindex() in a loop, printing ``reindexed <count>``
    after each, while a second thread with its own handle runs search() and
    list() (checking that no entry ever vanishes), until stdin is closed and
    at least three reindexes ran; then reindexes and lists once more and
    ends with a JSON summary of what it did, with timings.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import journal
import journal.files.store
import journal.indexing.index


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _die(step: str) -> None:
    _say(f"CRASH {step}")
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(step: str, key: str) -> None:
    """Wrap one step function so that the process SIGKILLs itself at that step of the append for *key*.

    An append writes and fsyncs the temp file while the index rows are staged
    in an open transaction, then links the file to its name and commits while
    the directory is fsynced.
    """
    if step == "write_temp":
        original_write_temp = journal.files.store.EntryStore.write_temp

        def write_temp(self: Any, entry: Any, **kwargs: Any) -> Any:
            pending = original_write_temp(self, entry, **kwargs)  # temp file fsynced, rows staged
            if entry.client_key == key:
                _die(step)
            return pending

        journal.files.store.EntryStore.write_temp = write_temp  # type: ignore[method-assign]
    elif step == "insert_entry":
        original_insert = journal.indexing.index.Index.insert_entry

        def insert_entry(self: Any, conn: Any, entry: Any, rel_path: str) -> None:
            original_insert(self, conn, entry, rel_path)  # INSERTs executed, not committed
            if entry.client_key == key:
                if not conn.in_transaction:
                    sys.stderr.write("insert_entry ran outside an open transaction\n")
                    sys.exit(3)
                _die(step)

        journal.indexing.index.Index.insert_entry = insert_entry  # type: ignore[method-assign]
    elif step == "commit":
        original_publish = journal.files.store.EntryStore.publish

        def publish(self: Any, pending: Any, **kwargs: Any) -> None:
            commit = kwargs.get("meanwhile")

            def die_before_commit() -> None:  # the file is linked to its final name by now
                if pending.entry.client_key == key:
                    _die(step)
                if commit is not None:
                    commit()

            original_publish(self, pending, meanwhile=die_before_commit)

        journal.files.store.EntryStore.publish = publish  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown crash step {step!r}")


def _append_mode(spec: dict[str, Any]) -> None:
    crash = spec.get("crash")
    if crash:
        _arm(crash["step"], crash["key"])
    with journal.Journal(spec["root"]) as j:
        _say("ready")
        if spec.get("barrier"):
            sys.stdin.readline()
        for number, payload in enumerate(spec["payloads"]):
            if number == spec.get("pause_after"):
                _say("paused")
                sys.stdin.readline()  # outside the writer lock, with the journal still open
            entry = j.append(payload)
            _say(f"{payload['client_key']} {entry.id}")


def _trace() -> None:
    """Print ``@<step> <client_key>`` after each step of an append, so a parent can aim its kill."""
    store, index = journal.files.store.EntryStore, journal.indexing.index.Index
    write_temp, publish, insert_entry = store.write_temp, store.publish, index.insert_entry

    def traced_write_temp(self: Any, entry: Any, **kwargs: Any) -> Any:
        pending = write_temp(self, entry, **kwargs)
        _say(f"@write_temp {entry.client_key}")
        return pending

    def traced_publish(self: Any, pending: Any, **kwargs: Any) -> None:
        commit = kwargs.get("meanwhile")

        def traced_commit() -> None:
            _say(f"@link {pending.entry.client_key}")
            if commit is not None:
                commit()

        publish(self, pending, meanwhile=traced_commit)
        _say(f"@publish {pending.entry.client_key}")

    def traced_insert_entry(self: Any, conn: Any, entry: Any, rel_path: str) -> None:
        insert_entry(self, conn, entry, rel_path)
        _say(f"@insert_entry {entry.client_key}")

    store.write_temp = traced_write_temp  # type: ignore[method-assign]
    store.publish = traced_publish  # type: ignore[method-assign]
    index.insert_entry = traced_insert_entry  # type: ignore[method-assign]


def _busy_mode(spec: dict[str, Any]) -> None:
    n = int(spec["start"])
    if spec.get("trace"):
        _trace()
    with journal.Journal(spec["root"]) as j:
        while True:
            key = f"key-{n}"
            entry = j.append(
                {"kind": "pulse", "agent": "busy", "theme": "busy writer", "voice": f"busy writer entry {key}", "client_key": key}
            )
            _say(f"{key} {entry.id}")
            n += 1


def _search_loop(root: str, stop: threading.Event, summary: dict[str, Any]) -> None:
    """Search and list through a handle of its own, concurrently with the reindexes of the main thread."""
    with journal.Journal(root) as j:
        while not stop.is_set():
            for query in ("concurrent writer", "k-7 OR NEAR(", "entry"):
                began = time.perf_counter()
                hits = j.search(query, k=20)
                summary["search_seconds_max"] = max(summary["search_seconds_max"], round(time.perf_counter() - began, 4))
                summary["searches"] += 1
                summary["hits"] += len(hits)
                for hit in hits:
                    if hit.entry.id != hit.entry_id:
                        raise AssertionError(f"hit {hit.entry_id} loaded entry {hit.entry.id}")
            entries = j.list()  # loads every listed file: no row may point at a missing or partial file
            keys = [e.client_key for e in entries]
            if len(keys) != len(set(keys)):
                raise AssertionError(f"list() shows a client_key twice: {sorted(keys)}")
            if summary["visible_counts"] and len(entries) < summary["visible_counts"][-1]:
                raise AssertionError(f"entries vanished from list(): {summary['visible_counts'][-1]} -> {len(entries)}")
            summary["visible_counts"].append(len(entries))


def _reader_mode(spec: dict[str, Any]) -> None:
    summary: dict[str, Any] = {"reindexes": 0, "reindex_counts": [], "reindex_seconds": [], "searches": 0, "hits": 0,
                               "search_seconds_max": 0.0, "visible_counts": []}
    stop, searching = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()

    def search() -> None:
        try:
            _search_loop(spec["root"], searching, summary)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread
            failures.append(exc)

    with journal.Journal(spec["root"]) as j:
        _say("ready")
        sys.stdin.readline()
        threading.Thread(target=wait_for_eof, daemon=True).start()
        searcher = threading.Thread(target=search)
        searcher.start()
        try:
            while (not stop.is_set() or summary["reindexes"] < 3) and not failures:
                began = time.perf_counter()
                count = j.reindex()
                summary["reindex_seconds"].append(round(time.perf_counter() - began, 4))
                summary["reindexes"] += 1
                summary["reindex_counts"].append(count)
                _say(f"reindexed {count}")
                if j.skipped:
                    raise AssertionError(f"reindex skipped files: {j.skipped}")
        finally:
            searching.set()
            searcher.join()
        if failures:
            raise failures[0]
        # The writers are done: one last reindex and list() must see all of their entries.
        summary["reindex_counts"].append(j.reindex())
        summary["reindexes"] += 1
        _say(f"reindexed {summary['reindex_counts'][-1]}")
        summary["visible_counts"].append(len(j.list()))
    _say(json.dumps(summary))


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec.get("named_temp") and hasattr(os, "O_TMPFILE"):
        del os.O_TMPFILE  # as on a system without unnamed files: the store falls back to named temp files
    {"append": _append_mode, "busy": _busy_mode, "reader": _reader_mode}[spec["mode"]](spec)


if __name__ == "__main__":
    main()
