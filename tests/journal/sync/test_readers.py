"""Readers never wait for a writer: a held writer lock and an open write transaction block no read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import Journal, LockTimeoutError

HOLDER = textwrap.dedent(
    """
    import sys
    from journal import Journal
    j = Journal(sys.argv[1])
    j._keeper.lock.acquire()
    with j._keeper.index.transaction() as conn:
        conn.execute("INSERT INTO state (key, value) VALUES ('held-by-writer', 'x')")
        print("holding", flush=True)
        sys.stdin.readline()
    """
)


def test_reads_go_on_while_another_process_holds_the_writer(root: Path, make_payload: Callable[..., dict[str, Any]]) -> None:
    """With the writer lock and an SQLite write transaction held elsewhere, every read answers at once."""
    with Journal(root) as journal:
        entry = journal.append(make_payload(client_key="k"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        with Journal(root, lock_timeout=0.2) as reader:
            assert reader.get(entry.id) == entry
            assert [e.id for e in reader.list()] == [entry.id]
            assert reader.search("harbor")[0].entry_id == entry.id
            assert reader.digest(agent="motoko").count == 1
            assert entry.id in reader.prompt_context("harbor")
            assert [h.entry_id for h in reader.relate(entry.id)] == []
            with pytest.raises(LockTimeoutError, match=r"stayed busy for 0\.2 s"):
                reader.append(make_payload())
    finally:
        holder.communicate("\n", timeout=30)
    assert holder.returncode == 0
