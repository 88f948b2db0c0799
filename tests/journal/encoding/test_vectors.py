"""Vectors are never mixed and never silently stale: identities, re-embedding, the one-pass fill, Journal.embed, the hash cache, progress."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journal import EncoderIdentity, Journal, ProgressGate, SemanticUnavailableError, StderrProgress, progress_after, reporting_slow
from journal.encoding import document_text
from journal.encoding._identity import CACHE_FILE, forget_hashes, model_files, weights_hash
from journal.files._json import canonical_json
from journal.indexing.index import INDEX_SCHEMA_VERSION
from tests.journal._fakes import FakeEncoder

Payload = Callable[..., dict[str, Any]]


def _vector_models(root: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        return [r[0] for r in conn.execute("SELECT model FROM vectors ORDER BY entry, model")]


class _Described(FakeEncoder):
    """A FakeEncoder that describes itself, under an implementation name of its own."""

    def __init__(self, implementation: str, name: str = "fake") -> None:
        super().__init__(name)
        self.implementation = implementation

    def describe(self) -> EncoderIdentity:
        identity = EncoderIdentity("fake", self.dimension, "sha256:" + "ab" * 32, implementation=self.implementation)
        self.identity = identity.key
        return identity


def _described(implementation: str) -> _Described:
    encoder = _Described(implementation)
    encoder.describe()  # sets the identity to the description's key
    return encoder


def test_a_journal_opened_with_another_encoder_ranks_only_its_own_vectors(root: Path, make_payload: Payload) -> None:
    """Reopened with another identity, every entry is embedded again before the ranking: scores are the new encoder's cosines alone."""
    voices = ["the kettle sang at dawn", "a puppy chewed my shoes", "rain on the tin roof all night"]
    with Journal(root, enable_nn=True, encoder=FakeEncoder("old", 64)) as journal:
        for voice in voices:
            journal.append(make_payload(theme="home", tags=[], voice=voice))
    # The new encoder hears "dog" as "puppy": with the old vectors the query would match nothing by meaning.
    new = FakeEncoder("new", 64, synonyms={"dog": "puppy"})
    progress: list[tuple[int, int]] = []
    with Journal(root, enable_nn=True, encoder=new, on_progress=lambda d, t: progress.append((d, t))) as journal:
        hits = journal.search("dog", k=3, mode="semantic")
    assert progress[0] == (0, 3) and progress[-1] == (3, 3)
    assert _vector_models(root) == ["new:64", "old:64"] * 3  # the old encoder keeps its own
    query = new.encode(["dog"])[0]
    expected = {voice: float(new.encode([document_text("home", (), None, voice)])[0] @ query) for voice in voices}
    assert hits[0].entry.voice == "a puppy chewed my shoes"
    assert {hit.entry.voice: round(hit.score, 5) for hit in hits} == {v: round(s, 5) for v, s in expected.items()}


def test_an_entry_another_encoder_embedded_after_the_cache_loaded_is_embedded_again(root: Path, make_payload: Payload) -> None:
    """A vector another process stored under another identity, at the top of the table, is noticed by the next ranking."""
    mine = FakeEncoder("mine", 64)
    with Journal(root, enable_nn=True, encoder=mine) as journal:
        journal.append(make_payload(voice="the first note"))
        journal.search("first", k=1, mode="semantic")
        with Journal(root, enable_nn=True, encoder=FakeEncoder("theirs", 64)) as other:
            late = other.append(make_payload(voice="kettle whistles at midnight"))
        assert _vector_models(root) == ["mine:64", "theirs:64"]
        assert journal.search("kettle midnight", k=1, mode="semantic")[0].entry_id == late.id
    assert _vector_models(root) == ["mine:64", "mine:64", "theirs:64"]


def test_the_fill_lists_the_missing_entries_once_then_reads_each_batch_by_rowid(root: Path, make_payload: Payload) -> None:
    """Embedding seven entries in batches of two asks SQLite for the entries lacking a vector once, not once per batch."""
    with Journal(root) as plain:
        for i in range(7):
            plain.append(make_payload(voice=f"note {i}"))
    with Journal(root, enable_nn=True, encoder=FakeEncoder()) as journal:
        statements: list[str] = []
        journal._keeper.index.conn.set_trace_callback(statements.append)
        result = journal.embed(batch=2)
        journal._keeper.index.conn.set_trace_callback(None)
    assert result.embedded == 7
    assert sum("LEFT JOIN vectors" in sql for sql in statements) == 2  # the listing, and the count of what is left
    assert sum("WHERE e.rowid IN" in sql for sql in statements) == 4


def test_embed_fills_what_is_missing_reports_the_identities_and_is_idempotent(root: Path, make_payload: Payload) -> None:
    """Journal.embed embeds the entries lacking a vector, says which identity the index holds, and a second call embeds none."""
    with Journal(root) as plain:
        for i in range(5):
            plain.append(make_payload(voice=f"entry {i}"))
    encoder = _described("first")
    progress: list[tuple[int, int]] = []
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        first = journal.embed(batch=2, on_progress=lambda d, t: progress.append((d, t)))
        again = journal.embed()
    assert (first.embedded, first.entries, first.missing) == (5, 5, 0)
    assert progress == [(0, 5), (2, 5), (4, 5), (5, 5)]
    assert first.encoder == {"key": encoder.identity, "model": "fake", "dimension": 64, "weights": "sha256:" + "ab" * 32,
                             "normalization": "l2", "implementation": "first"}
    assert [(e["key"], e["vectors"], e["implementations"]) for e in first.encoders] == [(encoder.identity, 5, ["first"])]
    assert again.embedded == 0 and again.to_dict()["encoders"] == first.to_dict()["encoders"]


def test_two_implementations_of_one_identity_share_vectors_and_both_are_recorded(root: Path, make_payload: Payload) -> None:
    """Vectors stored by one implementation are used by another of the same key, and the index names both."""
    with Journal(root, enable_nn=True, encoder=_described("numpy")) as journal:
        journal.append(make_payload(voice="harbor lights at dusk"))
    other = _described("sentence-transformers")
    with Journal(root, enable_nn=True, encoder=other) as journal:
        assert journal.embed().embedded == 0
        journal.append(make_payload(voice="a second evening"))
        encoders = journal.embed().encoders
    assert [(e["vectors"], sorted(e["implementations"])) for e in encoders] == [(2, ["numpy", "sentence-transformers"])]


def test_another_encoder_embeds_beside_the_first_whose_record_stays(root: Path, make_payload: Payload) -> None:
    """A second encoder stores its vectors beside the first one's: the index lists both, each with its own count and record."""
    first = _described("numpy")
    with Journal(root, enable_nn=True, encoder=first) as journal:
        journal.append(make_payload())
    with Journal(root, enable_nn=True, encoder=FakeEncoder("new", 32)) as journal:
        journal.append(make_payload(voice="only the new encoder saw this one"))
        encoders = journal.embed().encoders
    assert [(e["key"], e["vectors"], e["implementations"]) for e in encoders] == [("new:32", 2, ["FakeEncoder"]), (first.identity, 1, ["numpy"])]


def test_the_records_of_an_encoder_whose_vectors_all_went_are_forgotten(root: Path, make_payload: Payload) -> None:
    """An explicit reindex drops every vector: the next fill leaves the index describing the encoder in use alone."""
    with Journal(root, enable_nn=True, encoder=_described("numpy")) as journal:
        journal.append(make_payload())
    with Journal(root, enable_nn=True, encoder=FakeEncoder("new", 32)) as journal:
        journal.reindex()
        encoders = journal.embed().encoders
    assert [(e["key"], e["implementations"]) for e in encoders] == [("new:32", ["FakeEncoder"])]


def test_embed_without_nn_names_the_fix(journal: Journal) -> None:
    """Journal.embed needs an encoder."""
    with pytest.raises(SemanticUnavailableError, match=r"opened without NN; open it with Journal\(root, enable_nn=True\) or pass --nn"):
        journal.embed()


# -- the hash of the model files ------------------------------------------------------


def _model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "onnx").mkdir()
    (model / "modules.json").write_text(json.dumps([{"path": ""}, {"path": "1_Pooling"}]))
    (model / "config.json").write_text("{}")
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (model / "vocab.txt").write_text("[PAD]\nharbor\n")
    (model / "model.safetensors").write_bytes(b"weights" * 1000)
    (model / "pytorch_model.bin").write_bytes(b"the same weights for torch")
    (model / "onnx" / "model.onnx").write_bytes(b"not read by either encoder")
    (model / "README.md").write_text("docs")
    (model / "data_config.json").write_text('{"training": "data"}')
    return model


def test_the_hash_covers_configuration_vocabulary_and_the_weights_an_encoder_reads(tmp_path: Path) -> None:
    """Safetensors win over the torch file; other formats, documentation and training logs are left out."""
    model = _model_dir(tmp_path)
    assert [p.relative_to(model).as_posix() for p in model_files(model)] == [
        "config.json", "modules.json", "vocab.txt", "model.safetensors", "1_Pooling/config.json"]
    before = weights_hash(model, model_files(model))
    (model / "onnx" / "model.onnx").write_bytes(b"changed")
    assert weights_hash(model, model_files(model)) == before
    (model / "vocab.txt").write_text("[PAD]\nharbour\n")
    assert weights_hash(model, model_files(model)) != before


def test_a_files_hash_is_remembered_in_the_cache_by_its_size_and_times(tmp_path: Path) -> None:
    """A file whose size, mtime, ctime and inode match the cache is not read again; one that changed is."""
    model = _model_dir(tmp_path)
    cache = tmp_path / "models"
    cache.mkdir()
    forget_hashes()
    first = weights_hash(model, model_files(model), cache_dir=cache)
    recorded = json.loads((cache / CACHE_FILE).read_text())
    weights = str((model / "model.safetensors").resolve())
    assert recorded[weights]["stamp"][0] == 7000 and len(recorded[weights]["sha256"]) == 64
    assert (cache / CACHE_FILE).stat().st_mode & 0o777 == 0o600
    # Believed while the file's metadata is unchanged (so it was not hashed again)...
    recorded[weights]["sha256"] = "0" * 64
    (cache / CACHE_FILE).write_text(json.dumps(recorded))
    forget_hashes()
    believed = weights_hash(model, model_files(model), cache_dir=cache)
    assert believed != first
    # ... and no longer once the file is rewritten.
    (model / "model.safetensors").write_bytes(b"weights" * 1000)
    forget_hashes()
    assert weights_hash(model, model_files(model), cache_dir=cache) == first


def test_a_cache_that_cannot_be_used_is_ignored(tmp_path: Path) -> None:
    """A missing directory, a corrupt file or a symlink in the cache's place never fails the hash, and a symlink is never followed."""
    model = _model_dir(tmp_path)
    expected = weights_hash(model, model_files(model))
    forget_hashes()
    assert weights_hash(model, model_files(model), cache_dir=tmp_path / "absent") == expected
    cache = tmp_path / "models"
    cache.mkdir()
    (cache / CACHE_FILE).write_text("{not json")
    forget_hashes()
    assert weights_hash(model, model_files(model), cache_dir=cache) == expected
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (cache / CACHE_FILE).unlink()
    (cache / CACHE_FILE).symlink_to(elsewhere)
    forget_hashes()
    assert weights_hash(model, model_files(model), cache_dir=cache) == expected
    assert elsewhere.read_text() == "{}" and not (cache / CACHE_FILE).is_symlink()


# -- progress -----------------------------------------------------------------------


def test_a_zero_threshold_shows_every_report_and_a_quick_pass_shows_none() -> None:
    """With after=0 each report passes the gate; with one second, a pass quicker than that shows nothing, a new pass starts afresh."""
    now = [0.0]
    every = ProgressGate(0, clock=lambda: now[0])
    assert [every(done, 3) is not None for done in range(4)] == [True] * 4
    gate = ProgressGate(1.0, clock=lambda: now[0])
    shown = []
    for done, at in ((0, 0.0), (2, 0.5), (3, 0.9), (0, 5.0), (1, 6.5), (2, 6.7), (3, 7.0)):
        now[0] = at
        shown.append((done, gate(done, 3)))
    assert [(done, seconds) for done, seconds in shown if seconds is not None] == [(1, 1.5), (3, 2.0)]


def test_progress_off_a_terminal_is_plain_lines() -> None:
    """Where stderr is a file or a pipe, each report shown is one line."""
    stream = io.StringIO()
    report = StderrProgress("embedding entries", after=0, stream=stream)
    for done in (0, 32, 40):
        report(done, 40)
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == [
        "embedding entries: 0/40", "embedding entries: 32/40", "embedding entries: 40/40"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_noted_pass_says_its_note_once_on_a_line_of_its_own_and_a_quick_one_says_none() -> None:
    """The note comes once a pass, at its first work done, with the pass's size; on a terminal the bar drawn so far is ended first."""
    notes: list[tuple[int, float]] = []

    def note(total: int, estimate: float) -> str:
        notes.append((total, estimate))
        return f"NOTE {total}"

    stream = _Terminal()
    report = StderrProgress("embedding entries", after=0, stream=stream, note=note)
    for done, total in ((0, 40), (32, 40), (40, 40), (0, 70), (32, 70), (64, 70), (70, 70)):
        report(done, total)
    lines = stream.getvalue().split("\n")
    assert [line for line in lines if line.startswith("NOTE")] == ["NOTE 40", "NOTE 70"]
    assert lines[0].startswith("\rembedding entries [") and lines[0].endswith("0/40 0s") and lines[1] == "NOTE 40"
    assert lines[2].startswith("\rembedding entries [") and lines[2].endswith("40/40 0s")
    assert [total for total, _ in notes] == [40, 70] and all(estimate >= 0 for _, estimate in notes)
    quick = io.StringIO()
    patient = StderrProgress("embedding entries", after=3600, stream=quick, note=note)
    for done in (0, 32, 40):
        patient(done, 40)
    assert quick.getvalue() == "" and len(notes) == 2


def test_a_slow_step_is_announced_and_its_end_reported_a_quick_or_failed_one_is_not() -> None:
    """reporting_slow with 0 announces at once and reports the end; with a long threshold a quick step says nothing; a failure no end."""
    said: list[str] = []
    with reporting_slow(0, lambda: said.append("start"), lambda seconds: said.append(f"done {seconds >= 0}")):
        said.append("work")
    with reporting_slow(3600, lambda: said.append("never"), lambda seconds: said.append("never")):
        pass
    with pytest.raises(KeyError), reporting_slow(0, lambda: said.append("start"), lambda seconds: said.append("never")):
        raise KeyError("boom")
    assert said == ["start", "work", "done True", "start"]


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf"])
def test_a_bad_progress_threshold_names_the_variable(raw: str) -> None:
    """GHOSTJOURNAL_PROGRESS_AFTER must be a number of seconds, 0 or more."""
    with pytest.raises(ValueError, match=rf"GHOSTJOURNAL_PROGRESS_AFTER must be a number of seconds, 0 or more, got '{raw}'"):
        progress_after({"GHOSTJOURNAL_PROGRESS_AFTER": raw})
    assert progress_after({}) == 1.0 and progress_after({"GHOSTJOURNAL_PROGRESS_AFTER": "0"}) == 0.0



def test_the_command_refuses_a_bad_progress_threshold_as_a_usage_error(root: Path) -> None:
    """ghostjournal exits 2 with one line naming the variable, and opens nothing."""
    from click.testing import CliRunner

    from journal.cli.cli import cli

    result = CliRunner().invoke(cli, ["--root", str(root), "list"], env={"GHOSTJOURNAL_PROGRESS_AFTER": "soon"})
    assert result.exit_code == 2
    assert "GHOSTJOURNAL_PROGRESS_AFTER must be a number of seconds, 0 or more, got 'soon'" in result.stderr
    assert not root.exists()


# -- vectors survive an upgrade of the index --------------------------------------------


def _index(root: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3"))


def _stored_vectors(root: Path) -> dict[tuple[str, str], bytes]:
    """Every stored vector by its encoder's identity and its entry's id."""
    with _index(root) as conn:
        return {(model, entry_id): vector for model, entry_id, vector in
                conn.execute("SELECT v.model, e.id, v.vector FROM vectors v JOIN entries e ON e.rowid = v.entry")}


def _as_older_schema(root: Path) -> None:
    """Mark the index as written by the schema before this one: the next open rebuilds every table from the files."""
    with _index(root) as conn, conn:
        conn.execute("UPDATE state SET value = ? WHERE key = 'schema_version'", (str(INDEX_SCHEMA_VERSION - 1),))


def _rewrite_voice(root: Path, entry_id: str, voice: str) -> None:
    """Edit an entry file by hand, as a user fixing a typo would, keeping its path."""
    with _index(root) as conn:
        [path] = conn.execute("SELECT path FROM entries WHERE id = ?", (entry_id,)).fetchone()
    file = root / "entries" / path
    data = json.loads(file.read_text())
    file.chmod(0o644)
    file.write_text(canonical_json({**data, "voice": voice}) + "\n")


def test_an_upgrade_of_the_index_keeps_every_encoders_vectors_of_unchanged_text(root: Path, make_payload: Payload) -> None:
    """Rebuilt for a new schema, the index keeps both encoders' vectors and their records; only the entry edited meanwhile is embedded again."""
    first, second = _described("numpy"), FakeEncoder("second", 32)
    with Journal(root, enable_nn=True, encoder=first) as journal:
        ids = [journal.append(make_payload(voice=f"harbor note {i}")).id for i in range(4)]
    with Journal(root, enable_nn=True, encoder=second) as journal:
        assert journal.embed().embedded == 4
    before = _stored_vectors(root)
    _rewrite_voice(root, ids[2], "harbor note, corrected")
    _as_older_schema(root)
    for encoder in (first, second):
        encoder.calls = 0
        with Journal(root, enable_nn=True, encoder=encoder) as journal:
            hits = journal.search("harbor note corrected", k=4, mode="semantic")
            result = journal.embed()
        assert encoder.calls == 2  # the edited entry and the query: nothing else was embedded again
        assert {hit.entry_id for hit in hits} == set(ids) and result.missing == 0
    with _index(root) as conn:
        assert conn.execute("SELECT value FROM state WHERE key = 'schema_version'").fetchone()[0] == str(INDEX_SCHEMA_VERSION)
    after = _stored_vectors(root)
    assert after.keys() == before.keys()
    assert {key for key in after if after[key] != before[key]} == {(first.identity, ids[2]), (second.identity, ids[2])}
    assert sorted((e["key"], e["vectors"], e["implementations"]) for e in result.encoders) == [
        (first.identity, 4, ["numpy"]), (second.identity, 4, ["FakeEncoder"])]


def test_an_index_of_the_layout_with_one_vector_per_entry_keeps_its_vectors(root: Path, make_payload: Payload) -> None:
    """An index of schema 6 (a vectors table keyed by the entry's rowid, one model each) is upgraded without embedding anything again."""
    encoder = FakeEncoder("old", 16)
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        ids = [journal.append(make_payload(voice=f"lighthouse {i}")).id for i in range(3)]
    with _index(root) as conn, conn:
        # The tables of schema 6, as journal/indexing/_tables.py defined them: only the vectors table differs.
        conn.execute("ALTER TABLE vectors RENAME TO today")
        conn.execute("CREATE TABLE vectors (rowid INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL)")
        conn.execute("INSERT INTO vectors (rowid, model, vector) SELECT entry, model, vector FROM today")
        conn.execute("DROP TABLE today")
        conn.execute("UPDATE state SET value = '6' WHERE key = 'schema_version'")
    encoder.calls = 0
    with Journal(root, enable_nn=True, encoder=encoder) as journal:
        assert {hit.entry_id for hit in journal.search("lighthouse", k=3, mode="semantic")} == set(ids)
        assert journal.embed().embedded == 0
    assert encoder.calls == 1  # the query alone
    assert _vector_models(root) == ["old:16"] * 3
