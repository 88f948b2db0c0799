"""WAL checkpoints run on a background thread, not inside an append."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from journal import Journal
from journal.index import _CHECKPOINT_EVERY


def _rows_in_database_file(root: Path, scratch: Path) -> int:
    """Entries the database file itself holds, without what still waits in its WAL."""
    scratch.mkdir()
    shutil.copyfile(root / "index" / "journal.sqlite3", scratch / "copy.sqlite3")  # the -wal file stays behind
    with contextlib.closing(sqlite3.connect(scratch / "copy.sqlite3")) as conn:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def _append(journal: Journal, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        journal.append({"kind": "pulse", "agent": "a", "theme": "checkpoint", "voice": f"entry number {n}", "client_key": f"k{n}"})


def test_appends_hand_the_checkpoint_to_the_background(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    with Journal(root) as journal:
        # Opening the journal built its index (one commit); far fewer pages than the
        # automatic checkpoint's threshold follow, so only the thread can checkpoint.
        _append(journal, _CHECKPOINT_EVERY - 10)
        journal.wait_idle()
        assert _rows_in_database_file(root, tmp_path / "before") == 0  # everything is still in the WAL
        _append(journal, 20, start=_CHECKPOINT_EVERY - 10)  # one of these commits asks for a checkpoint
        journal.wait_idle()
        assert _rows_in_database_file(root, tmp_path / "after") >= _CHECKPOINT_EVERY - 10
        assert len(journal.list()) == _CHECKPOINT_EVERY + 10


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_checkpoints_with_a_thread_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    with Journal(root) as journal:
        _append(journal, _CHECKPOINT_EVERY)  # the parent's checkpoint thread is running now
        journal.wait_idle()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child waiting on the parent's thread would hang: end it instead
            try:
                _append(journal, _CHECKPOINT_EVERY, start=_CHECKPOINT_EVERY)
                journal.wait_idle()
                code = 0 if _rows_in_database_file(root, tmp_path / "child") > _CHECKPOINT_EVERY + 10 else 1
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert len(journal.list()) == 2 * _CHECKPOINT_EVERY
