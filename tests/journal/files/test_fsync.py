"""The fsync helper: the caller's work overlaps a real fsync on a helper thread."""

from __future__ import annotations

import errno
import gc
import os
import signal
import threading
from pathlib import Path

import pytest

from journal.files._fsync import FsyncHelper


def test_work_runs_on_the_calling_thread_while_the_helper_fsyncs(tmp_path: Path) -> None:
    helper = FsyncHelper()
    fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"data")
        ran_on = []

        def work() -> str:
            ran_on.append(threading.get_ident())
            return "result"

        assert helper.fsync_while(fd, work) == "result"
        assert ran_on == [threading.get_ident()]
    finally:
        os.close(fd)
        helper.close()


def test_a_failed_fsync_is_raised_after_the_work_ran() -> None:
    helper = FsyncHelper()
    read_end, write_end = os.pipe()  # fsync of a pipe fails with EINVAL
    try:
        ran = []
        with pytest.raises(OSError) as failure:  # noqa: PT011 - its errno is checked below
            helper.fsync_while(write_end, lambda: ran.append(True))
        assert ran == [True]
        assert failure.value.errno == errno.EINVAL
    finally:
        os.close(read_end)
        os.close(write_end)
        helper.close()


def test_an_error_of_the_work_is_raised_once_the_fsync_returned(tmp_path: Path) -> None:
    helper = FsyncHelper()
    fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT, 0o600)

    def work() -> None:
        raise LookupError("from the work")

    try:
        with pytest.raises(LookupError, match="from the work"):
            helper.fsync_while(fd, work)
        assert helper.fsync_while(fd, lambda: 7) == 7  # the helper still serves after an error
    finally:
        os.close(fd)
        helper.close()


def test_a_forked_child_starts_its_own_helper_thread(tmp_path: Path) -> None:
    helper = FsyncHelper()
    fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        helper.fsync_while(fd, lambda: None)  # the parent's thread is running now
        pid = os.fork()
        if pid == 0:  # the child has no copy of that thread; a call must not wait for it forever
            signal.alarm(20)  # a hang ends the child with SIGALRM instead of hanging the test
            code = 0 if helper.fsync_while(fd, lambda: "child") == "child" else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
        helper.close()


def test_the_helper_thread_ends_on_close_and_when_the_helper_is_dropped(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        before = {t for t in threading.enumerate() if t.name == "journal-fsync"}
        closed, dropped = FsyncHelper(), FsyncHelper()
        closed.fsync_while(fd, lambda: None)
        dropped.fsync_while(fd, lambda: None)
        started = {t for t in threading.enumerate() if t.name == "journal-fsync"} - before
        assert len(started) == 2
        closed.close()
        del dropped  # never closed: collecting it must still let its thread end
        gc.collect()
        for thread in started:
            thread.join(timeout=60)
            assert not thread.is_alive()
    finally:
        os.close(fd)
