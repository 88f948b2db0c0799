"""One Journal shared by many threads: calls behave as if run one after another, close() and fork are defined.

The stress test runs 16 threads of mixed calls on one instance, lexical
(200 calls each) and hybrid with the real model (100 each on the NumPy encoder,
50 on sentence-transformers), under faulthandler, then checks that no call failed, that each client
key has exactly one entry, and that the index equals a fresh rebuild.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import multiprocessing as mp
import random
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import threadpoolctl  # type: ignore[import-untyped]

from journal import Journal, JournalClosedError
from journal.encoding import Encoder, load_encoder
from tests._support import open_under
from tests.journal._fakes import FakeEncoder
from tests.journal._inspect import entries_on_disk

THREADS, OPS, KEYS = 16, 200, 240
QUERIES = ("quiet river", "deadline pressure", "a walk at dawn", "river walk", "pressure and calm")
WORDS = ("quiet", "river", "deadline", "pressure", "walk", "dawn", "calm", "storm", "garden", "letter", "train", "window")


@pytest.fixture(autouse=True)
def _faulthandler() -> Iterator[None]:
    """A crash in SQLite or the encoder prints every thread's stack instead of vanishing."""
    was_enabled = faulthandler.is_enabled()
    faulthandler.enable()
    yield
    if not was_enabled:
        faulthandler.disable()


@pytest.fixture(scope="module")
def fast_encoder() -> Encoder:
    return load_encoder()


def _payload(rng: random.Random, key: str) -> dict[str, Any]:
    words = rng.sample(WORDS, 4)
    return {
        "kind": rng.choice(("note", "pulse")), "agent": ("ada", "bo")[int(key[2:]) % 2], "theme": " ".join(words[:2]),
        "voice": f"{' '.join(words)} for {key}", "tags": words[2:], "client_key": key,
    }


def _worker(journal: Journal, seed: int, returned: dict[str, set[str]], ops: int) -> None:
    rng = random.Random(seed)
    mine: list[str] = []
    for op in range(ops):
        roll = rng.random()
        if seed % 4 == 0 and op == ops // 2:
            journal.reindex()
        elif roll < 0.35:
            key = f"k-{rng.randrange(KEYS)}"
            entry = journal.append(_payload(rng, key))
            returned.setdefault(key, set()).add(entry.id)  # setdefault and set.add are atomic under the GIL
            mine.append(entry.id)
        elif roll < 0.55:
            journal.search(rng.choice(QUERIES), k=5, mode=rng.choice(("auto", "lexical")))
        elif roll < 0.65:
            journal.list(kind=rng.choice((None, "note")), limit=10)
        elif roll < 0.75 and mine:
            journal.relate(rng.choice(mine), k=4)
        elif roll < 0.83:
            journal.digest(agent=rng.choice((None, "ada")))
        elif roll < 0.93:
            assert "<" in journal.prompt_context(rng.choice(QUERIES), k=3)
        elif mine:
            assert journal.get(rng.choice(mine)).id in mine


def _index_snapshot(journal: Journal) -> dict[str, Any]:
    """What the index holds, as seen through a plain connection and through lexical search."""
    with contextlib.closing(sqlite3.connect(journal.root / "index" / "journal.sqlite3")) as conn:
        entries = sorted(conn.execute("SELECT id, path, ts_utc, kind, agent, theme, tags, client_key FROM entries").fetchall())
        links = sorted(conn.execute("SELECT src, dst FROM links").fetchall())
        vectors = sorted(conn.execute("SELECT e.id, v.model FROM vectors v JOIN entries e ON e.rowid = v.entry").fetchall())
    hits = {query: [hit.entry.id for hit in journal.search(query, k=50, mode="lexical")] for query in (*QUERIES, *WORDS)}
    return {"entries": entries, "links": links, "vectors": vectors, "hits": hits}


def _stress(root: Path, seed: int, encoder: Encoder | None, ops: int = OPS) -> None:
    journal = Journal(root, enable_nn=encoder is not None, encoder=encoder)
    returned: dict[str, set[str]] = {}
    failures: list[BaseException] = []

    def run(n: int) -> None:
        try:
            _worker(journal, seed * 100 + n, returned, ops)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [], f"seed {seed}: {failures[:3]!r}"
    assert journal.skipped == []

    split = {key: ids for key, ids in returned.items() if len(ids) != 1}
    assert split == {}, f"seed {seed}: different entries for one client_key: {split}"
    files, temps = entries_on_disk(root)
    on_disk = {data["client_key"]: data["id"] for data in files.values()}
    assert len(on_disk) == len(files) and temps == [], f"seed {seed}: not exactly one entry file per client_key"
    assert on_disk == {key: next(iter(ids)) for key, ids in returned.items()}

    before = _index_snapshot(journal)
    journal.close()
    fresh = root.parent / f"{root.name}-fresh"
    shutil.copytree(root / "entries", fresh / "entries")
    shutil.copy(root / "manifest.json", fresh / "manifest.json")
    with Journal(fresh, enable_nn=encoder is not None, encoder=encoder) as rebuilt:
        if encoder is not None:
            rebuilt.embed()  # the open embeds nothing: embed() (or the first ranking) does
        assert _index_snapshot(rebuilt) == before, f"seed {seed}: the index differs from a fresh rebuild"


@pytest.mark.long
@pytest.mark.parametrize("seed", [1, 2])
def test_sixteen_threads_share_one_lexical_journal(tmp_path: Path, seed: int) -> None:
    _stress(tmp_path / "journal", seed, None)


@pytest.mark.long
def test_sixteen_threads_share_one_hybrid_journal(tmp_path: Path, fast_encoder: Encoder) -> None:
    # BLAS on one thread for the whole run, not only inside each encode: with
    # the NumPy encoder switching BLAS's pool off and on again for every
    # encode, 16 threads took 3-4 times as long on a busy two-core machine.
    # The number of BLAS threads changes no result.
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        _stress(tmp_path / "journal", 4, fast_encoder, ops=100)


@pytest.mark.long
def test_sixteen_threads_share_one_journal_on_sentence_transformers(tmp_path: Path, st_encoder: Encoder) -> None:
    # Fewer calls: torch encodes a text several times slower than the NumPy encoder on this path.
    _stress(tmp_path / "journal", 6, st_encoder, ops=50)


def test_many_asyncio_tasks_share_one_journal_through_to_thread(tmp_path: Path) -> None:
    async def main(journal: Journal) -> list[str]:
        appends = [asyncio.to_thread(journal.append, {"kind": "note", "agent": "ada", "theme": f"task {n % 20}",
                                                      "voice": "an async task", "client_key": f"t-{n % 20}"}) for n in range(100)]
        searches = [asyncio.to_thread(journal.search, "async task", k=3) for _ in range(100)]
        entries = asyncio.gather(*appends)
        await asyncio.gather(entries, *searches)
        return [entry.id for entry in entries.result()]

    with Journal(tmp_path / "journal") as journal:
        ids = asyncio.run(main(journal))
        assert len(set(ids)) == 20 and len(journal.list(limit=100)) == 20
        assert all(ids[n] == ids[n % 20] for n in range(100))


class _Gate:
    """An encoder that holds its caller until told to go on, so that a call is surely in progress."""

    def __init__(self) -> None:
        self.inner = FakeEncoder()
        self.entered, self.go = threading.Event(), threading.Event()
        self.holding = False

    @property
    def identity(self) -> str:
        return self.inner.identity

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.holding:
            self.entered.set()
            assert self.go.wait(30)
        return self.inner.encode(texts)


def test_close_waits_for_the_call_in_progress_and_later_calls_raise(tmp_path: Path) -> None:
    gate = _Gate()
    journal = Journal(tmp_path / "journal", enable_nn=True, encoder=gate)
    journal.append({"kind": "note", "agent": "ada", "theme": "before", "voice": "before the close"})
    gate.holding = True
    found: list[int] = []
    searcher = threading.Thread(target=lambda: found.append(len(journal.search("before close", k=3))))
    searcher.start()
    assert gate.entered.wait(30)
    closer = threading.Thread(target=journal.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close() returned while a search was in progress"
    gate.go.set()
    searcher.join()
    closer.join()
    assert found == [1]
    with pytest.raises(JournalClosedError, match="is closed"):
        journal.search("before")
    with pytest.raises(JournalClosedError):
        journal.append({"kind": "note", "agent": "ada", "theme": "after", "voice": "after the close"})
    journal.close()  # a second close is harmless


@pytest.mark.parametrize("call", ["reindex", "embed", "search"])
def test_close_from_a_callback_lets_the_call_finish_and_then_leaves_no_file_open(tmp_path: Path, fast_encoder: Encoder, call: str) -> None:
    """close() in an on_progress callback of a running call: the call completes its work, returns, and nothing of the journal stays open."""
    root = tmp_path / "journal"
    rng = random.Random(7)
    with Journal(root) as lexical:  # entries without vectors: the NN call embeds them in batches, reporting each
        for n in range(100):
            lexical.append(_payload(rng, f"k-{n}"))
    progress: list[tuple[int, int]] = []

    def close_at_first_report(done: int, total: int) -> None:
        progress.append((done, total))
        if len(progress) == 1:
            journal.close()
            with pytest.raises(JournalClosedError, match="is closed"):
                journal.list()  # a call made after the close, even from inside the running one, is refused

    journal = Journal(root, enable_nn=True, encoder=fast_encoder, on_progress=close_at_first_report if call == "search" else None)
    if call == "reindex":
        assert journal.reindex(on_progress=close_at_first_report) == 100
    elif call == "embed":
        assert journal.embed(on_progress=close_at_first_report).embedded == 100
    else:
        assert len(journal.search("quiet river", k=3)) == 3
    assert progress[0] == (0, 100) and progress[-1] == (100, 100) and len(progress) > 2  # closed at the first batch, finished all
    assert open_under(root) == []
    with pytest.raises(JournalClosedError):
        journal.search("quiet river")
    assert open_under(root) == []
    with Journal(root, enable_nn=True, encoder=fast_encoder) as reopened:
        assert reopened.embed().embedded == 0  # the closed call's work was all committed


def _use_inherited(journal: Journal, out: Any) -> None:
    try:
        journal.search("inherited")
    except JournalClosedError as exc:
        journal.close()
        out.put(f"closed: {exc}")
    else:
        out.put("searched")


def _use_own(root: str, out: Any) -> None:
    with Journal(root) as journal:
        out.put(f"found {len(journal.search('inherited', k=5))}")


def test_a_journal_inherited_through_fork_raises_and_a_spawned_child_opens_its_own(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    with Journal(root) as journal:
        journal.append({"kind": "note", "agent": "ada", "theme": "inherited", "voice": "an inherited journal"})
        fork, spawn = mp.get_context("fork"), mp.get_context("spawn")
        out = fork.Queue()
        child = fork.Process(target=_use_inherited, args=(journal, out))
        child.start()
        message = out.get(timeout=60)
        child.join(60)
        assert child.exitcode == 0 and message.startswith("closed: ") and "before a fork" in message, message
        # The parent's journal is untouched by the child's failed call and close().
        assert len(journal.search("inherited", k=5)) == 1
        journal.append({"kind": "note", "agent": "ada", "theme": "inherited again", "voice": "after the fork"})
        spawned_out = spawn.Queue()
        spawned = spawn.Process(target=_use_own, args=(str(root), spawned_out))
        spawned.start()
        assert spawned_out.get(timeout=60) == "found 2"
        spawned.join(60)
        assert spawned.exitcode == 0


def _append_in_own_journal(root: str, out: Any) -> None:
    import signal

    signal.alarm(30)  # a child stuck on a lock nobody releases dies instead of hanging the test
    with Journal(root, lock_timeout=20) as journal:
        out.put(journal.append({"kind": "note", "agent": "ada", "theme": "child", "voice": "written by a forked child"}).id)


def test_a_child_forked_while_a_thread_writes_opens_its_own_journal_and_writes(tmp_path: Path) -> None:
    """A fork waits for the calls in progress: forked mid-append, the child's SQLite did not inherit a write lock it cannot release."""
    root = tmp_path / "journal"
    fork = mp.get_context("fork")
    with Journal(root) as journal:
        stop = threading.Event()
        written = [0]

        def hammer() -> None:
            while not stop.is_set():
                journal.append({"kind": "note", "agent": "ada", "theme": "parent", "voice": f"parent {written[0]}"})
                written[0] += 1

        writer = threading.Thread(target=hammer)
        writer.start()
        children = []
        try:
            for _ in range(6):
                out = fork.Queue()
                child = fork.Process(target=_append_in_own_journal, args=(str(root), out))
                child.start()
                children.append((child, out.get(timeout=60)))
                child.join(60)
        finally:
            stop.set()
            writer.join(60)
        assert [child.exitcode for child, _ in children] == [0] * 6
        ids = {entry.id for entry in journal.list(agent="ada", kind="note")}
        assert {entry_id for _, entry_id in children} <= ids and len(ids) == written[0] + 6
