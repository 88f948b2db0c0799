"""The semantic layer's plumbing with a fake encoder: vectors in the index, filling, re-embedding, modes, scoping."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from journal import Journal, ModelNotFoundError, SemanticUnavailableError
from journal.encoding.base import document_text
from journal.encoding.semantic import QUERY_MEMO_SIZE, QueryMemo
from journal.indexing.index import INDEX_SCHEMA_VERSION
from tests.journal._fakes import FakeEncoder

Payload = Callable[..., dict[str, Any]]


def _vector_models(root: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        return [r[0] for r in conn.execute("SELECT model FROM vectors ORDER BY entry, model")]


def test_append_with_nn_stores_a_vector_tagged_with_the_encoder_identity(root: Path, make_payload: Payload) -> None:
    """Each append with NN on leaves one float32 vector with the model:dimension identity."""
    with Journal(root, enable_nn=True, encoder=FakeEncoder(dimension=32)) as journal:
        journal.append(make_payload())
        journal.append(make_payload(voice="Another evening by the water."))
    assert _vector_models(root) == ["fake:32", "fake:32"]
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        assert {len(r[0]) for r in conn.execute("SELECT vector FROM vectors")} == {32 * 4}


def test_the_first_search_with_nn_fills_vectors_missing_from_entries_written_without_it(root: Path, make_payload: Payload) -> None:
    """Entries appended without NN get their vectors, with progress, before the first ranking with NN; the open itself embeds nothing."""
    with Journal(root) as plain:
        for i in range(5):
            plain.append(make_payload(voice=f"entry number {i}"))
    assert _vector_models(root) == []
    encoder = FakeEncoder()
    progress: list[tuple[int, int]] = []
    with Journal(root, enable_nn=True, encoder=encoder, on_progress=lambda d, t: progress.append((d, t))) as journal:
        assert journal.get(journal.list(limit=1)[0].id) and _vector_models(root) == [] and encoder.calls == 0
        assert [h.entry.voice for h in journal.search("number 3", k=1, mode="semantic")] == ["entry number 3"]
        assert len(_vector_models(root)) == 5
        assert progress[0] == (0, 5) and progress[-1] == (5, 5)


def test_an_entry_appended_by_a_process_without_nn_is_embedded_before_the_next_search(root: Path, make_payload: Payload) -> None:
    """A search with NN never silently skips an entry another handle appended without NN."""
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        journal.append(make_payload(voice="the first note"))
        journal.search("warm", k=1)
        with Journal(root) as plain:
            plain.append(make_payload(voice="kettle whistles at midnight"))
        assert journal.search("kettle midnight", k=1, mode="semantic")[0].entry.voice == "kettle whistles at midnight"


def test_another_model_identity_embeds_beside_the_first_and_neither_embeds_again(root: Path, make_payload: Payload) -> None:
    """Opened with a different encoder, the journal embeds its entries for it before the first ranking, keeping the first one's vectors."""
    old = FakeEncoder("old", 16)
    with Journal(root, enable_nn=True, encoder=old) as journal:
        journal.append(make_payload())
    new = FakeEncoder("new", 24)
    with Journal(root, enable_nn=True, encoder=new) as journal:
        journal.search("harbor", k=1)
    assert sorted(_vector_models(root)) == ["new:24", "old:16"]
    assert new.calls == 2  # the entry, then the query
    for encoder in (old, new):
        encoder.calls = 0
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            journal.search("harbor", k=1)
        assert encoder.calls == 1  # the query alone


def test_reindex_re_embeds_every_entry_in_batches_with_progress(root: Path, make_payload: Payload) -> None:
    """reindex with NN rebuilds the vectors and reports (done, total) after each batch."""
    encoder = FakeEncoder()
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        for i in range(7):
            journal.append(make_payload(voice=f"note {i}"))
        progress: list[tuple[int, int]] = []
        assert journal.reindex(on_progress=lambda d, t: progress.append((d, t))) == 7
    assert progress[0] == (0, 7) and progress[-1] == (7, 7)
    assert len(_vector_models(root)) == 7


class _ChunkRecorder(FakeEncoder):
    """A FakeEncoder that keeps each list of texts it was asked to encode."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.chunks.append(list(texts))
        return super().encode(texts)


def test_bulk_embedding_encodes_chunks_of_texts_of_about_one_length_and_stores_each_vector_with_its_entry(
    root: Path, make_payload: Payload,
) -> None:
    """A chunk is padded to its longest text: short and long entries appended in turn are embedded in chunks of their own length."""
    with Journal(root) as plain:
        for i in range(64):  # short and long in turn, so that chunks cut in append order would mix them
            plain.append(make_payload(voice=f"short {i}" if i % 2 == 0 else f"long {i} " + "word " * 60))
    encoder = _ChunkRecorder()
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        assert journal.embed().embedded == 64
        mixed = [chunk for chunk in encoder.chunks if len({text.split()[-2] == "word" for text in chunk}) > 1]
        assert len(encoder.chunks) == 2 and mixed == []
        voices = {entry.id: entry.voice for entry in journal.list(limit=64)}
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        stored = conn.execute("SELECT e.id, v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry").fetchall()
    assert len(stored) == 64
    for entry_id, blob in stored:  # each vector is its own entry's, whatever chunk it was computed in
        own = encoder.encode([document_text("harbor light", ["harbor", "light"], None, voices[entry_id])])[0]
        assert np.array_equal(np.frombuffer(blob, dtype="<f4"), own)


def test_an_index_of_the_previous_schema_version_is_rebuilt_with_a_vectors_table(root: Path, make_payload: Payload) -> None:
    """An index from before the vectors table is rebuilt from the files on open."""
    with Journal(root) as journal:
        entry = journal.append(make_payload())
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        conn.execute("DROP TABLE vectors")
        conn.execute("UPDATE state SET value = '1' WHERE key = 'schema_version'")
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        assert journal.search("harbor", k=1, mode="semantic")[0].entry_id == entry.id
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        assert conn.execute("SELECT value FROM state WHERE key = 'schema_version'").fetchone()[0] == str(INDEX_SCHEMA_VERSION)


def test_semantic_and_hybrid_results_stay_inside_the_agent(root: Path, make_payload: Payload) -> None:
    """With agent= set, neither arm nor the fusion returns another agent's entry."""
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        journal.append(make_payload(agent="batou", voice="harbor light harbor light"))
        mine = journal.append(make_payload(agent="motoko", voice="a quiet day indoors"))
        for mode in ("semantic", "hybrid"):
            assert [h.entry_id for h in journal.search("harbor light", k=5, agent="motoko", mode=mode)] == [mine.id]
        assert "batou" not in journal.prompt_context("harbor light", agent="motoko")


def test_semantic_rank_honours_kind_and_time_window(root: Path, make_payload: Payload) -> None:
    """The semantic arm filters by kind, since and until like the lexical arm."""
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        journal.append(make_payload(kind="pulse", ts="2026-01-01T00:00:00Z"))
        inside = journal.append(make_payload(kind="evening", ts="2026-02-01T00:00:00Z"))
        journal.append(make_payload(kind="evening", ts="2026-03-01T00:00:00Z"))
        hits = journal.search("harbor", k=5, kind="evening", since="2026-01-15T00:00:00Z", until="2026-02-15T00:00:00Z", mode="semantic")
        assert [h.entry_id for h in hits] == [inside.id]


def test_relate_with_nn_uses_the_entrys_own_vector(root: Path, make_payload: Payload) -> None:
    """relate finds an entry that shares no word with the source but means the same to the encoder."""
    encoder = FakeEncoder(synonyms={"puppy": "dog", "hound": "dog"})
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        source = journal.append(make_payload(theme="pets", tags=[], voice="puppy"))
        journal.append(make_payload(theme="taxes", tags=[], voice="quarterly filing"))
        twin = journal.append(make_payload(theme="walks", tags=[], voice="hound"))
        assert journal.relate(source.id, k=1)[0].entry_id == twin.id


def test_semantic_modes_without_nn_name_the_fix(journal: Journal) -> None:
    """Asking for a semantic or hybrid search on a journal opened without NN says how to turn it on."""
    for mode in ("semantic", "hybrid"):
        with pytest.raises(SemanticUnavailableError, match=f"mode '{mode}' needs entry vectors.*enable_nn=True"):
            journal.search("x", mode=mode)
    with pytest.raises(ValueError, match='mode must be one of auto, lexical, semantic, hybrid, got "fuzzy"'):
        journal.search("x", mode="fuzzy")


def test_an_encoder_without_nn_is_a_usage_error(root: Path) -> None:
    """Passing encoder= without enable_nn=True is refused rather than ignored."""
    with pytest.raises(ValueError, match="encoder= is used only with enable_nn=True"):
        Journal(root, encoder=FakeEncoder())


def test_a_missing_model_directory_names_the_path_and_the_fix(root: Path, tmp_path: Path) -> None:
    """A model path that does not exist fails with ModelNotFoundError, before anything is created."""
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError, match=f"'{missing}' was not found offline.*pass a directory that holds a sentence-transformers model"):
        Journal(root, enable_nn=True, model=missing)
    assert not root.exists()


def test_an_unknown_model_name_points_to_download_model(root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A model name in no local cache says to run 'ghostjournal download-model --model NAME'."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match=r"run 'ghostjournal download-model --model someone/absent-model' once"):
        Journal(root, enable_nn=True, model="someone/absent-model")


def test_opening_a_journal_without_nn_never_imports_torch(tmp_path: Path) -> None:
    """A journal used without NN leaves torch, sentence_transformers and numpy unimported."""
    script = (
        "import sys\nfrom journal import Journal\n"
        f"j = Journal({str(tmp_path / 'j')!r})\n"
        "e = j.append({'kind': 'note', 'agent': 'a', 'theme': 't', 'voice': 'v'})\n"
        "j.search('v'); j.relate(e.id); j.prompt_context('v'); j.reindex()\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'numpy') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "[]"


def test_hybrid_hits_carry_word_snippets_or_a_preview(root: Path, make_payload: Payload) -> None:
    """A hybrid hit that the words found shows their snippet; one found by meaning alone shows the start of its voice."""
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        worded = journal.append(make_payload(voice="the lighthouse keeper counted ships all night", tags=[], theme="watch"))
        other = journal.append(make_payload(voice="a quiet day indoors with tea", tags=[], theme="rest"))
        hits = {h.entry_id: h.snippet for h in journal.search("lighthouse", k=5, mode="hybrid")}
        assert "lighthouse" in hits[worded.id]
        assert hits.get(other.id, "a quiet day").startswith("a quiet day")


def test_an_open_journal_embeds_a_repeated_question_once(root: Path, make_payload: Payload) -> None:
    """Asked again, by a search or a prompt context, a recent question is recalled, not embedded; a new one is embedded."""
    encoder = FakeEncoder()
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        journal.append(make_payload(voice="the harbor at dusk"))
        journal.search("harbor lights", k=1)
        encoder.calls = 0
        journal.search("harbor lights", k=1, mode="semantic")
        journal.prompt_context("harbor lights", k=1)
        assert encoder.calls == 0
        journal.search("another question", k=1)
        assert encoder.calls == 1


def test_the_query_memo_keeps_the_most_recently_used_and_hands_out_copies() -> None:
    """The memo holds at most its size, forgets the least recently used first, and a caller's change to a vector never reaches it."""
    encoder = FakeEncoder()
    memo = QueryMemo(encoder.encode, size=2)
    first = memo("what keeps returning?")
    kept = first.copy()
    first[:] = 0.0
    assert memo("what keeps returning?").tolist() == kept.tolist()
    memo("a")
    memo("what keeps returning?")  # the most recently used stays
    memo("b")  # forgets "a"
    assert len(memo) == 2 and encoder.calls == 3
    memo("what keeps returning?")
    assert encoder.calls == 3
    memo("a")
    assert encoder.calls == 4


def test_a_journal_remembers_at_most_query_memo_size_questions(root: Path, make_payload: Payload) -> None:
    """After QUERY_MEMO_SIZE other questions, the first is embedded again: an open journal's memory of queries is bounded."""
    encoder = FakeEncoder()
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        journal.append(make_payload(voice="the harbor at dusk"))
        for n in range(QUERY_MEMO_SIZE + 1):
            journal.search(f"question {n}", k=1, mode="semantic")
        encoder.calls = 0
        journal.search(f"question {QUERY_MEMO_SIZE}", k=1, mode="semantic")
        assert encoder.calls == 0
        journal.search("question 0", k=1, mode="semantic")
        assert encoder.calls == 1


def test_a_query_memo_of_no_room_is_refused_naming_the_size() -> None:
    """A memo must hold at least one vector."""
    with pytest.raises(ValueError, match="size must be at least 1, got 0"):
        QueryMemo(FakeEncoder().encode, size=0)
