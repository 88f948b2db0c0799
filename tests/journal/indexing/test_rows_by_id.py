"""Index rows asked for by id are looked up by id, whatever window they are asked in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from journal import Journal
from journal.indexing.index import Index, Window

START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def _steps(index: Index, window: Window, ids: list[str]) -> tuple[list[str], int]:
    """The ids :meth:`Index.rows` gives for *ids* in *window*, and how many SQLite VM instructions the read took."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    index.conn.set_progress_handler(tick, 1)
    try:
        found = [row.id for row in index.rows(window, ids=ids)]
    finally:
        index.conn.set_progress_handler(None, 1)
    return found, count[0]


def test_rows_asked_by_id_in_an_agents_window_are_looked_up_by_id_never_by_walking_the_agents_entries(tmp_path: Path) -> None:
    """A hit's row read scoped to an agent costs what the unscoped read costs: SQLite walked every entry of the agent's time
    index instead (the order it gives), so the read of a search's few hits grew with the agent's journal. The same rows come back."""
    payloads = [
        {"kind": "note", "agent": "batou" if n % 10 == 0 else "motoko", "theme": "t", "voice": f"entry {n}",
         "ts": (START + timedelta(minutes=n)).isoformat()}
        for n in range(400)
    ]  # fmt: skip
    with Journal(tmp_path / "j", redact="off") as journal:
        ids = [outcome.entry.id for outcome in journal.append_many(payloads)]
        index = journal._keeper.index
        asked = [ids[5], ids[10], ids[201], ids[399]]  # ids[10] is batou's
        every, unscoped = _steps(index, Window(), asked)
        scoped, steps = _steps(index, Window(agent="motoko"), asked)
        assert scoped == [entry_id for entry_id in every if entry_id != ids[10]] and len(scoped) == 3
        assert steps < 2 * unscoped + 50, (steps, unscoped)
        since = (START + timedelta(minutes=100)).isoformat()
        windowed, steps = _steps(index, Window(agent="motoko", kind="note", since=since), asked)
        assert windowed == [ids[399], ids[201]] and steps < 2 * unscoped + 50, (steps, unscoped)
