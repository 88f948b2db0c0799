"""The index is derived: it is rebuilt from the files, which are never changed."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal, SkippedFile
from journal.cli.cli import cli
from tests._support import entry_files, tree_digest

Payload = Callable[..., dict[str, Any]]

QUERIES = ["harbor light", "tide", "fog bell", "camera lens", "nothing matches this"]


def _fill(journal: Journal, make_payload: Payload) -> None:
    words = ["harbor", "light", "tide", "fog", "bell", "camera", "lens", "rain", "salt", "wire"]
    previous: dict[str, str] = {}  # by agent: an entry continues only its own agent's entries
    for i in range(30):
        agent = "motoko" if i % 4 else "batou"
        voice = " ".join(words[(i * 3 + j) % len(words)] for j in range(6))
        signals: dict[str, Any] = {"novelty": (i % 10) / 10}
        if agent in previous and i % 3:
            signals["continuity_refs"] = [previous[agent]]
        entry = journal.append(make_payload(voice=voice, theme=words[i % len(words)], agent=agent,
                                            ts=f"2026-09-{1 + i % 28:02d}T{i % 24:02d}:00:00Z", signals=signals, client_key=f"k{i}"))
        previous[agent] = entry.id


def _results(journal: Journal) -> Any:
    return (
        [e.to_dict() for e in journal.list()],
        [[(h.entry_id, round(h.score, 9), h.snippet) for h in journal.search(q, k=10)] for q in QUERIES],
        [[(h.entry_id, h.reason) for h in journal.relate(e.id)] for e in journal.list(limit=5)],
        journal.digest(agent="motoko").to_dict(),
        journal.prompt_context("harbor light", agent="motoko"),
    )


@pytest.mark.parametrize("how", ["open", "cli-reindex"])
def test_deleting_the_index_restores_identical_results(root: Path, make_payload: Payload, how: str) -> None:
    """After index/ is deleted, opening (or `ghostjournal reindex`) gives the same answers; entry bytes unchanged."""
    with Journal(root) as journal:
        _fill(journal, make_payload)
        before = _results(journal)
    files = entry_files(root)
    shutil.rmtree(root / "index")
    if how == "cli-reindex":
        (root / "index").mkdir()
        result = CliRunner().invoke(cli, ["--root", str(root), "reindex"], catch_exceptions=False)
        assert result.exit_code == 0
        assert '"indexed": 30' in result.stdout
    with Journal(root) as journal:
        assert _results(journal) == before
    assert entry_files(root) == files


@pytest.mark.parametrize("damage", ["garbage-header", "truncated", "zeroed-pages"])
def test_corrupt_index_is_detected_and_rebuilt(root: Path, make_payload: Payload, damage: str) -> None:
    """A corrupt SQLite file is detected on open or on use and rebuilt from the files."""
    with Journal(root) as journal:
        _fill(journal, make_payload)
        before = _results(journal)
        journal._keeper.index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db = root / "index" / "journal.sqlite3"
    data = bytearray(db.read_bytes())
    if damage == "garbage-header":
        data[:100] = b"not a database at all " * 4 + b"!" * 12
    elif damage == "truncated":
        data = data[: len(data) // 3]
    else:
        page = 4096
        for start in range(page, len(data), page * 2):
            data[start : start + page] = bytes(page)
    db.write_bytes(bytes(data))
    with Journal(root) as journal:
        assert _results(journal) == before
        journal._keeper.index.conn.execute("PRAGMA integrity_check").fetchone()


def test_corruption_reported_at_the_commit_stores_the_entry_once(root: Path, make_payload: Payload, monkeypatch: pytest.MonkeyPatch) -> None:
    """When SQLite reports corruption at the commit, the entry file is already published: the index is rebuilt, and the append is not repeated."""
    from journal.indexing.index import Index, IndexCorruptError

    real_commit = Index.commit
    reports: list[str] = []

    def commit(self: Index) -> None:
        if not reports:  # the first commit after the link is where SQLite says the file is damaged
            reports.append("malformed")
            raise IndexCorruptError("database disk image is malformed")
        real_commit(self)

    with Journal(root) as journal:
        monkeypatch.setattr(Index, "commit", commit)
        entry = journal.append(make_payload(voice="stored once despite the damage"))  # no client_key to catch a repeat
        monkeypatch.setattr(Index, "commit", real_commit)
        assert reports == ["malformed"]
        assert [e.id for e in journal.list()] == [entry.id]
        assert [h.entry_id for h in journal.search("damage")] == [entry.id]
    assert len(entry_files(root)) == 1


def test_foreign_and_corrupt_files_are_reported_and_left_alone(root: Path, make_payload: Payload) -> None:
    """reindex reports each foreign or corrupt file with its path and reason, and never touches it."""
    with Journal(root) as journal:
        good = journal.append(make_payload(ts="2026-09-05T10:00:00Z"))
    day = root / "entries" / "2026" / "09" / "05"
    (day / "notes.txt").write_text("a stray file")
    (day / "broken.json").write_text('{"kind": "note", ')
    (day / "wrong-place.json").write_bytes(good.to_json_bytes())
    (root / "entries" / "misc").mkdir()
    (day / "invalid.json").write_text('{"id": "invalid", "ts": "2026-09-05T10:00:00Z", "kind": "diary", "agent": "a", "theme": "t", "voice": "v"}')
    foreign = tree_digest(root / "entries")
    skipped: list[SkippedFile] = []
    with Journal(root) as journal:
        assert journal.reindex(on_skip=skipped.append) == 1
        assert [e.id for e in journal.list()] == [good.id]
    reasons = {s.path: s.reason for s in skipped}
    assert set(reasons) == {
        "entries/2026/09/05/notes.txt", "entries/2026/09/05/broken.json", "entries/2026/09/05/wrong-place.json",
        "entries/misc", "entries/2026/09/05/invalid.json",
    }
    assert "invalid JSON" in reasons["entries/2026/09/05/broken.json"]
    assert "belongs at" in reasons["entries/2026/09/05/wrong-place.json"]
    assert "'kind'" in reasons["entries/2026/09/05/invalid.json"]
    assert tree_digest(root / "entries") == foreign


def test_cli_reindex_prints_skipped_files_on_stderr(root: Path, make_payload: Payload) -> None:
    """`ghostjournal reindex` lists skipped files on stderr and in its JSON report."""
    with Journal(root) as journal:
        journal.append(make_payload(ts="2026-09-05T10:00:00Z"))
    (root / "entries" / "2026" / "09" / "05" / "junk.json").write_text("[]")
    result = CliRunner().invoke(cli, ["--root", str(root), "reindex"])
    assert result.exit_code == 0
    assert "skipped entries/2026/09/05/junk.json: " in result.stderr
    assert '"path": "entries/2026/09/05/junk.json"' in result.stdout


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        entries = conn.execute("SELECT id, path, ts, ts_utc, kind, agent, theme, mood, focus, novelty, tags, client_key FROM entries ORDER BY id").fetchall()
        links = conn.execute("SELECT src, dst FROM links ORDER BY src, dst").fetchall()
        text = conn.execute("SELECT e.id, f.theme, f.voice, f.tags, f.focus, f.mood FROM fts f JOIN entries e ON e.rowid = f.rowid ORDER BY e.id").fetchall()
    return [*entries, *links, *text]


_entry = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["pulse", "evening", "note", "digest"]),
        "agent": st.sampled_from(["motoko", "batou"]),
        "theme": st.text(st.characters(categories=["L", "N", "Zs"]), min_size=1, max_size=20).filter(str.strip),
        "voice": st.text(min_size=1, max_size=80).filter(str.strip),
        "tags": st.lists(st.sampled_from(["a", "b", "c", "light"]), unique=True, max_size=3),
        "ts": st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")),  # noqa: DTZ001 - hypothesis takes naive bounds
    },
    optional={"mood": st.sampled_from(["calm", "wry"]), "client_key": st.sampled_from(["k1", "k2", "k3", "k4"])},
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(_entry, max_size=12))
def test_rebuild_equals_incremental_index(tmp_path: Path, payloads: list[dict[str, Any]]) -> None:
    """For any sequence of appends, the incrementally built index equals a rebuild from the files."""
    root = tmp_path / f"j-{len(list(tmp_path.iterdir()))}"
    with Journal(root) as journal:
        for payload in payloads:
            journal.append(payload)  # a client_key is unique per agent: two agents' entries may share one
    incremental = _rows(root / "index" / "journal.sqlite3")
    shutil.rmtree(root / "index")
    Journal(root).close()
    assert _rows(root / "index" / "journal.sqlite3") == incremental
