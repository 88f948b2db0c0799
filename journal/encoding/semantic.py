"""The semantic arm: entry vectors in the index, kept in step, and cosine top-n over them.

Imported only when a journal is opened with NN on (it needs numpy, which the
``nn`` extra brings). Vectors live in the index as float32 blobs tagged with
the encoder's identity; this module embeds entries that lack one and keeps an
in-memory matrix per agent, refreshed incrementally, so that a query costs one
matrix-vector product instead of reading every blob from SQLite.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from journal.encoding._blas import one_blas_thread
from journal.encoding.base import Encoder, describe, document_text
from journal.files.entry import Entry
from journal.indexing.index import WHOLE_JOURNAL, Index, VectorRow, VectorState, Window

__all__ = ["FILL_BATCH", "QUERY_MEMO_SIZE", "RELEVANCE_FLOORS", "QueryMemo", "SemanticIndex", "from_blob", "to_blob"]

#: Entries committed per transaction when filling vectors: a killed fill loses at most this many.
FILL_BATCH: Final = 256
#: Texts per encode call while filling: progress is reported after each.
_CHUNK: Final = 32
#: Query vectors an open journal remembers, the most recently used kept: 256 of the default
#: model's 384 floats are 384 KiB, and a routine or a client asks far fewer distinct questions.
QUERY_MEMO_SIZE: Final = 256

#: The cosine below which an entry found by meaning alone is not relevant, per model, keyed by
#: the hash of the model's files in its identity (the default model's here). It is calibrated, by
#: ``bench/bench_retrieval.py abstention``, as the highest cosine (in steps of 0.01) that at most 1 %
#: of answerable questions' best relevant entry falls below, on LoCoMo's dev split and the
#: journal-shaped sets. A model not listed has no floor: each model's cosines have their own scale.
RELEVANCE_FLOORS: Final[Mapping[str, float]] = {"sha256:022b83e0644b646c": 0.30}

Vector = npt.NDArray[np.float32]


def to_blob(vector: Vector) -> bytes:
    """A vector as little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> Vector:
    """The vector stored in *blob*."""
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


#: Chunks encoded at once while filling, each on its own thread: one per core, up to two.
_FILL_THREADS: Final = 2

ChunkEncoder = Callable[[Sequence[Sequence[str]]], Iterator[Vector]]


def _cores() -> int:
    """The CPUs this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@contextlib.contextmanager
def _chunk_encoder(encoder: Encoder) -> Iterator[ChunkEncoder]:
    """A function giving the vectors of each chunk of texts, in order, with up to :data:`_FILL_THREADS` chunks encoded at once.

    Each chunk is still one ``encode`` call on one BLAS thread, so its vectors
    are those a single thread gives, bit for bit; only whole chunks run side
    by side. (BLAS's own threads split a product elsewhere, which changes the
    last bits of the vectors, and switching their number per call is slow;
    two chunks at once keep the second core busy without either.)
    """
    threads = min(_FILL_THREADS, _cores())
    if threads < 2:
        yield lambda chunks: (encoder.encode(chunk) for chunk in chunks)
        return
    # The limit to one BLAS thread is taken here, for the whole fill: once OpenBLAS's own threads have
    # started, a limit set from one of the pool's threads did not take (OpenBLAS 0.3.31), and their
    # products ran on two BLAS threads, with other last bits.
    with one_blas_thread, concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="journal-embed") as pool:

        def encode_chunks(chunks: Sequence[Sequence[str]]) -> Iterator[Vector]:
            futures = [pool.submit(encoder.encode, chunk) for chunk in chunks]
            try:
                for future in futures:
                    yield future.result()
            finally:
                for future in futures:  # an error or an interrupt: the chunks not started are dropped
                    future.cancel()

        yield encode_chunks


class _Block:
    """One agent's vectors and filter fields, with room to grow (capacity doubles)."""

    def __init__(self, dimension: int) -> None:
        self.size = 0
        self.matrix: Vector = np.zeros((16, dimension), dtype=np.float32)
        self.kinds: npt.NDArray[np.str_] = np.zeros(16, dtype="U16")
        self.ts_utc: npt.NDArray[np.str_] = np.zeros(16, dtype="U32")
        self.ids: list[str] = []
        self.positions: dict[str, int] = {}

    def add(self, rows: Sequence[VectorRow]) -> None:
        needed = self.size + len(rows)
        if needed > len(self.matrix):
            capacity = max(needed, 2 * len(self.matrix))
            self.matrix = np.concatenate(
                [self.matrix[: self.size], np.zeros((capacity - self.size, self.matrix.shape[1]), dtype=np.float32)]
            )
            self.kinds = np.concatenate([self.kinds[: self.size], np.zeros(capacity - self.size, dtype="U16")])
            self.ts_utc = np.concatenate([self.ts_utc[: self.size], np.zeros(capacity - self.size, dtype="U32")])
        new = slice(self.size, needed)
        self.matrix[new] = np.frombuffer(b"".join(row.vector for row in rows), dtype="<f4").reshape(len(rows), -1)
        self.kinds[new] = [row.kind for row in rows]
        self.ts_utc[new] = [row.ts_utc for row in rows]
        for offset, row in enumerate(rows):
            self.positions[row.id] = self.size + offset
        self.ids.extend(row.id for row in rows)
        self.size = needed

    def scores(self, query: Vector, window: Window, exclude: Sequence[str]) -> Vector:
        """Cosine of every row with *query* (rows are unit length); rows outside *window*'s kind and time, or excluded, get -inf."""
        # On one BLAS thread, as the encoder's products: on two, a product this small wakes
        # OpenBLAS's second thread, which then spins for milliseconds after it, taking the core
        # the next encode needs (it burned 32 s of CPU in a simulated year of hybrid runs).
        with one_blas_thread:
            scores = self.matrix[: self.size] @ query
        if window.kind is not None:
            scores[self.kinds[: self.size] != window.kind] = -np.inf
        if window.since is not None:
            scores[self.ts_utc[: self.size] < window.since] = -np.inf
        if window.until is not None:
            scores[self.ts_utc[: self.size] >= window.until] = -np.inf
        for entry_id in exclude:
            position = self.positions.get(entry_id)
            if position is not None:
                scores[position] = -np.inf
        return scores


class QueryMemo:
    """The vectors of the last *size* queries embedded, least recently used forgotten first; safe to share between threads.

    A journal kept open (an MCP server, a simulation's thousands of runs) is
    asked the same questions again and again: each is embedded once.
    """

    def __init__(self, encode: Callable[[Sequence[str]], Vector], size: int = QUERY_MEMO_SIZE) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size!r}")
        self._encode = encode
        self.size = size
        self._vectors: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def __call__(self, text: str) -> Vector:
        """*text*'s vector, embedded unless it is remembered (a copy: a caller may change it)."""
        with self._lock:
            kept = self._vectors.get(text)
            if kept is not None:
                self._vectors.move_to_end(text)
                return kept.copy()
        vector: Vector = self._encode([text])[0]  # outside the lock: another thread's query need not wait for this one
        with self._lock:
            self._vectors[text] = vector.copy()
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector


class SemanticIndex:
    """Entry vectors for one encoder: embedding, filling and cosine ranking.

    Only vectors stored under the encoder's identity are ever ranked. An
    entry without one (appended without NN, or embedded by another encoder
    only) is embedded before the next ranking sees the entries, a batch at a
    time, never ranked with a mix of vectors. Each encoder keeps its own
    vectors beside the others': a journal opened in turn with two encoders
    embeds each entry once per encoder. Query vectors are remembered
    (:class:`QueryMemo`, :data:`QUERY_MEMO_SIZE` of them).

    Args:
        index: the journal's index.
        encoder: the encoder whose identity tags every vector written.
        on_progress: called with ``(done, total)`` while entries are embedded
            to catch up before a ranking (see :meth:`fill`).
    """

    def __init__(self, index: Index, encoder: Encoder, *, on_progress: Callable[[int, int], None] | None = None) -> None:
        self._index = index
        self.encoder = encoder
        self.model = encoder.identity
        self.on_progress = on_progress
        self.described = describe(encoder)
        self._blocks: dict[str, _Block] = {}
        self._state = VectorState("", -1, -1)
        self._loaded_to = 0
        # Entries up to this rowid are known to have a vector from this encoder (within the epoch of _state).
        self._checked_to = 0
        self._lock = threading.Lock()
        self._queries = QueryMemo(encoder.encode)
        # Embedding behind (see behind()): the helper thread's pool, and the stored entries whose vectors it computes.
        self._behind: tuple[concurrent.futures.ThreadPoolExecutor, Encoder] | None = None
        self._pending: list[tuple[str, concurrent.futures.Future[bytes]]] = []

    @property
    def relevance_floor(self) -> float | None:
        """This encoder's calibrated relevance floor (see :data:`RELEVANCE_FLOORS`), None without one."""
        weights = ":".join(self.model.rsplit(":", 2)[-2:])
        return RELEVANCE_FLOORS.get(weights)

    # -- writing -------------------------------------------------------------------

    def embed_entry(self, entry: Entry, encoder: Encoder | None = None) -> bytes:
        """The blob of *entry*'s vector (by *encoder*, default this index's), to store in the append's transaction."""
        text = document_text(entry.theme, entry.tags, (entry.signals or {}).get("focus"), entry.voice)
        return to_blob((encoder or self.encoder).encode([text])[0])

    # -- embedding behind ----------------------------------------------------------

    @contextlib.contextmanager
    def behind(self) -> Iterator[None]:
        """Within the block, :meth:`embed_behind` embeds each appended entry on a helper thread.

        BLAS is held to one thread for the whole block, from the thread that
        enters it: once OpenBLAS's own threads have started, a limit set from
        the helper thread did not take (OpenBLAS 0.3.31), and its products ran
        on two BLAS threads, with other last bits.
        An encoder that can spread one text over several threads (ONNX
        Runtime's, see ``OnnxMiniLMEncoder.widened``) embeds on up to
        :data:`_FILL_THREADS` of them here: the run waits for each vector before
        its ranking, so one text at a time is all there is to spread.
        The caller stores what is pending with :meth:`settle` before leaving.
        """
        widened = getattr(self.encoder, "widened", None)
        threads = min(_FILL_THREADS, _cores())
        encoder: Encoder = widened(threads) if callable(widened) and threads > 1 else self.encoder
        with one_blas_thread, concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal-embed-behind") as pool:
            self._behind = pool, encoder
            try:
                yield
            finally:
                self._behind = None

    def embed_behind(self, entry: Entry) -> concurrent.futures.Future[bytes] | None:
        """Start embedding *entry* on the helper thread of :meth:`behind`; None outside that block."""
        behind = self._behind
        if behind is None:
            return None
        pool, encoder = behind
        return pool.submit(self.embed_entry, entry, encoder)

    def pend(self, entry_id: str, vector: concurrent.futures.Future[bytes]) -> None:
        """Store *vector*, the vector of the stored entry *entry_id*, at the next :meth:`settle`."""
        self._pending.append((entry_id, vector))

    def settle(self) -> None:
        """Store the vectors embedded behind, waiting for those still being computed (a call of the journal's own, under its call lock).

        An entry whose vector is not stored (the process ended first) lacks
        one, like an entry appended without NN: the next ranking embeds it.
        """
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        blobs = {entry_id: vector.result() for entry_id, vector in pending}
        rowids = self._index.rowids_of(list(blobs))
        rows = sorted((rowid, entry_id, blobs[entry_id]) for entry_id, rowid in rowids.items())
        if rows:
            self._index.store_vectors(self.model, rows, self.described)

    def insert(self, conn: sqlite3.Connection, entry_id: str, vector: bytes) -> None:
        """Store the vector of an entry inserted in the same open transaction, and record the encoder."""
        self._index.insert_vector(conn, entry_id, self.model, vector)
        self._index.record_encoder(conn, self.described)

    def missing(self) -> int:
        """How many entries lack a vector from this encoder."""
        self.settle()
        return self._index.count_missing_vectors(self.model)

    def fill(self, *, on_progress: Callable[[int, int], None] | None = None, batch: int = FILL_BATCH, after: int = 0) -> int:
        """Embed every entry (above rowid *after*) that lacks a vector from this encoder; return how many.

        The entries lacking one are listed once; then each batch of *batch*
        is read, embedded outside any transaction and stored in its own short
        one, so appends and readers are not held up for long and a killed
        process loses at most the batch it was embedding. *on_progress*
        (else the one given at construction) gets ``(0, total)`` first, then
        ``(done, total)`` after every few dozen texts embedded.
        """
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch!r}")
        report = on_progress or self.on_progress
        self.settle()
        rowids = self._index.missing_vectors(self.model, after=after)
        total = len(rowids)
        done = 0
        if report is not None and total:
            report(0, total)
        with _chunk_encoder(self.encoder) as encode_chunks:
            for start in range(0, total, batch):
                rows = self._index.texts_of(rowids[start : start + batch])  # entries removed meanwhile are left out
                texts = [document_text(theme, tags, focus, voice) for _, _, theme, tags, focus, voice in rows]
                # Chunks of texts of about one length: a chunk is padded to its longest text, so chunks
                # cut in rowid order spent a third of their work on padding (journal-shaped texts).
                order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
                chunks = [order[first : first + _CHUNK] for first in range(0, len(order), _CHUNK)]
                blobs = [b""] * len(texts)
                for chunk, vectors in zip(chunks, encode_chunks([[texts[i] for i in chunk] for chunk in chunks]), strict=True):
                    for i, vector in zip(chunk, vectors, strict=True):
                        blobs[i] = to_blob(vector)
                    done += len(vectors)
                    if report is not None:
                        report(done, total)
                self._index.store_vectors(
                    self.model, [(row[0], row[1], blob) for row, blob in zip(rows, blobs, strict=True)], self.described
                )
        if report is not None and done != total:
            report(done, done)  # some entries went away meanwhile: the pass still ends at its total
        if done and after == 0:
            self._index.prune_encoders()
        return done

    # -- reading -------------------------------------------------------------------

    def _refresh(self) -> None:
        """Bring the in-memory blocks in step with the index, embedding what lacks a vector from this encoder first."""
        self.settle()
        state = self._index.vector_state()
        if state == self._state:
            return
        after = self._checked_to if state.epoch == self._state.epoch else 0
        if state.max_entry_rowid > after:
            self.fill(after=after)
            self._checked_to = state.max_entry_rowid
            state = self._index.vector_state()
        with self._index.snapshot():
            state = self._index.vector_state()
            if state.epoch != self._state.epoch:
                self._blocks = {}
                self._loaded_to = 0
            rows = self._index.vectors_after(self.model, self._loaded_to)
        by_agent: dict[str, list[VectorRow]] = {}
        for row in rows:
            by_agent.setdefault(row.agent, []).append(row)
        dimension = len(rows[0].vector) // 4 if rows else 0
        for agent, agent_rows in by_agent.items():
            self._blocks.setdefault(agent, _Block(dimension)).add(agent_rows)
        if rows:
            self._loaded_to = rows[-1].rowid
        self._state = state

    def query_vector(self, text: str) -> Vector:
        """Embed a query, or recall its vector if it was among the last :data:`QUERY_MEMO_SIZE` asked."""
        return self._queries(text)

    def vector_of(self, entry_id: str) -> Vector | None:
        """The stored vector of *entry_id* under this encoder."""
        self.settle()
        blob = self._index.vector_of(entry_id, self.model)
        return None if blob is None else from_blob(blob)

    def entry_vector(self, entry: Entry) -> Vector:
        """*entry*'s stored vector, or a fresh embedding when it has none yet."""
        stored = self.vector_of(entry.id)
        return stored if stored is not None else from_blob(self.embed_entry(entry))

    def rank(self, query: Vector, n: int, window: Window = WHOLE_JOURNAL, *, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
        """The *n* entries in *window* most similar to *query* (cosine, best first) as ``(entry_id, score)``."""
        agent = window.agent
        with self._lock:
            self._refresh()
            blocks = (
                [self._blocks[agent]]
                if agent is not None and agent in self._blocks
                else []
                if agent is not None
                else list(self._blocks.values())
            )
            found: list[tuple[str, float, str]] = []
            for block in blocks:
                if block.size == 0:
                    continue
                scores = block.scores(query, window, exclude)
                take = min(n, block.size)
                top = np.argpartition(-scores, take - 1)[:take] if take < block.size else np.arange(block.size)
                found.extend((block.ids[i], float(scores[i]), str(block.ts_utc[i])) for i in top if np.isfinite(scores[i]))
        # Equal cosines (entries of one text) go to the newer entry, then the greater id, as
        # lexical ties do; never to the order the vectors were loaded in, which a reindex changes.
        found.sort(key=lambda item: (item[2], item[0]), reverse=True)
        found.sort(key=lambda item: -item[1])
        return [(entry_id, score) for entry_id, score, _ in found[:n]]
