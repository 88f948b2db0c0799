"""Vectors with the real model: other weights re-embed the journal, ``ghostjournal embed`` survives kill -9, and slow steps are never silent."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import threadpoolctl  # type: ignore[import-untyped]  # the library ships no type annotations

from journal import Journal
from journal.encoding import DEFAULT_MODEL, document_text, resolve_model
from journal.encoding._identity import CACHE_FILE, forget_hashes
from journal.encoding.numpy_minilm import MiniLMEncoder
from tests._support import DEFAULT_IMPLEMENTATION, REPO
from tests.journal._wheels import altered_copy

Payload = Callable[..., dict[str, Any]]
_CLI = [sys.executable, "-m", "journal.cli.cli"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _vectors(root: Path) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn, conn:
        return conn.execute("SELECT entry, model FROM vectors ORDER BY entry, model").fetchall()


def _fill(root: Path, count: int) -> None:
    with Journal(root) as journal:
        for n in range(count):
            journal.append({"kind": "note", "agent": "motoko", "theme": "tide", "voice": f"tide {n}"})


@pytest.fixture(scope="module")
def packaged() -> MiniLMEncoder:
    """The NumPy encoder of the packaged default model (a missing model fails, never skips)."""
    return MiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)


def _with_changed_weights(tmp_path: Path) -> Path:
    """A copy of the packaged model whose last layer's output bias is tripled: same name, other vectors."""
    copy = tmp_path / "model"
    shutil.copytree(resolve_model(DEFAULT_MODEL), copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    name = next(key for key in header if key.endswith("encoder.layer.5.output.dense.bias"))
    begin, end = (8 + size + offset for offset in header[name]["data_offsets"])
    data[begin:end] = (np.frombuffer(bytes(data[begin:end]), dtype="<f4") * 3).astype("<f4").tobytes()
    weights.write_bytes(data)
    return copy


def test_other_weights_under_the_same_name_re_embed_the_journal_before_any_ranking(
    tmp_path: Path, make_payload: Payload, packaged: MiniLMEncoder,
) -> None:
    """The weights hash tells the two models apart; every score afterwards is the new model's cosine, none the old one's."""
    changed = MiniLMEncoder(_with_changed_weights(tmp_path), DEFAULT_MODEL)
    assert changed.identity != packaged.identity
    assert changed.identity.rsplit(":", 1)[0] == packaged.identity.rsplit(":", 1)[0]  # only the hash differs
    voices = ["We brought a puppy home from the shelter.", "The ferry ran late in the fog.", "Rewrote the parser tests."]
    root = tmp_path / "journal"
    with Journal(root, enable_nn=True, encoder=packaged) as journal:
        for voice in voices:
            journal.append(make_payload(theme="day", tags=[], voice=voice))
    progress: list[tuple[int, int]] = []
    with Journal(root, enable_nn=True, encoder=changed, on_progress=lambda d, t: progress.append((d, t))) as journal:
        hits = journal.search("new canine companion", k=3, mode="semantic")
    assert progress == [(0, 3), (3, 3)]
    assert sorted(model for _, model in _vectors(root)) == sorted([changed.identity, packaged.identity] * 3)  # each keeps its own
    query = "new canine companion"
    new = {v: float(changed.encode([document_text("day", (), None, v)])[0] @ changed.encode([query])[0]) for v in voices}
    old = {v: float(packaged.encode([document_text("day", (), None, v)])[0] @ packaged.encode([query])[0]) for v in voices}
    assert max(abs(new[v] - old[v]) for v in voices) > 1e-3  # a mixed ranking would show
    assert {hit.entry.voice: hit.score for hit in hits} == pytest.approx(new, abs=1e-5)


def test_a_copy_of_the_default_model_with_only_its_pinned_files_has_the_packages_identity(tmp_path: Path, packaged: MiniLMEncoder) -> None:
    """The model ghostjournal download-model unpacks (no README, no training log) gets the same identity: its vectors are shared."""
    copy = tmp_path / "model"
    shutil.copytree(resolve_model(DEFAULT_MODEL), copy)
    for extra in ("README.md", ".gitattributes", "data_config.json"):
        (copy / extra).unlink(missing_ok=True)
    assert MiniLMEncoder(copy, DEFAULT_MODEL).identity == packaged.identity


def test_the_journal_remembers_the_weights_hash_and_records_the_implementation(tmp_path: Path, make_payload: Payload) -> None:
    """Opened with the default model, the journal keeps each file's hash in models/weights.json and the index names the implementation that computed them."""
    root = tmp_path / "journal"
    Journal(root).close()  # models/ exists from the first open on
    forget_hashes()
    with Journal(root, enable_nn=True) as journal:
        journal.append(make_payload())
        assert journal.encoder is not None
        identity = journal.encoder.identity
        [encoder] = journal.embed().encoders
    assert (encoder["key"], encoder["model"], encoder["dimension"], encoder["implementations"]) == (identity, DEFAULT_MODEL, 384, [DEFAULT_IMPLEMENTATION])
    cache = json.loads((root / "models" / CACHE_FILE).read_text())
    weights = str((resolve_model(DEFAULT_MODEL) / "model.safetensors").resolve())
    assert cache[weights]["stamp"][0] == (resolve_model(DEFAULT_MODEL) / "model.safetensors").stat().st_size
    # The next open believes the cache rather than reading 90 MB: a hash planted there changes the identity.
    cache[weights]["sha256"] = "0" * 64
    (root / "models" / CACHE_FILE).write_text(json.dumps(cache))
    forget_hashes()
    with Journal(root, enable_nn=True) as journal:
        assert journal.encoder is not None and journal.encoder.identity != identity
    forget_hashes()


def test_embed_survives_kill_9_losing_at_most_one_batch_and_a_rerun_completes(tmp_path: Path) -> None:
    """``ghostjournal embed`` killed mid-run keeps every committed batch; run again it embeds exactly what is missing."""
    root = tmp_path / "journal"
    _fill(root, 160)
    command = [*_CLI, "--root", str(root), "embed", "--batch", "4"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert process.stderr is not None
    lines: list[str] = []
    reported = 0
    for line in process.stderr:
        lines.append(line)
        found = re.fullmatch(r"embedding entries: (\d+)/160 \(.*\)\n", line)
        if found and int(found[1]) >= 12:
            reported = int(found[1])
            break
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    assert process.returncode == -signal.SIGKILL, "".join(lines)
    assert lines[0] == f"loading the model {DEFAULT_MODEL} ...\n"
    assert re.fullmatch(rf"loaded the model {re.escape(DEFAULT_MODEL)} in \d+\.\d s\n", lines[1])
    assert lines[2].startswith("embedding entries: 0/160 ")
    stored = len(_vectors(root))
    # Each batch of 4 is reported once embedded, and committed right after: at most that batch is lost.
    assert reported - 4 <= stored < 160 and stored % 4 == 0, (reported, stored)
    rerun = subprocess.run(command, check=False, capture_output=True, text=True, cwd=REPO, timeout=300, env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout)
    assert (result["embedded"], result["entries"], result["missing"]) == (160 - stored, 160, 0)
    assert [(e["vectors"], e["implementations"]) for e in result["encoders"]] == [(160, [DEFAULT_IMPLEMENTATION])]
    vectors = _vectors(root)
    assert len(vectors) == 160 and {model for _, model in vectors} == {result["encoder"]["key"]}
    progress = [line for line in rerun.stderr.splitlines() if line.startswith("embedding entries: ")]
    assert progress[0].startswith(f"embedding entries: 0/{160 - stored} ") and progress[-1].startswith(f"embedding entries: {160 - stored}/{160 - stored} ")


def _backfill_note(root: Path, count: int, estimate: str = "42 s") -> str:
    """The line a query's embedding pass of *count* entries starts with, its estimate given."""
    return (f"embedding {count} entries that have no vector from this model yet, once (about {estimate});"
            f" 'ghostjournal --root {root} embed' does it ahead of time")


def _estimated(line: str) -> str:
    """*line* with its estimate made the one :func:`_backfill_note` gives by default (it depends on the machine's pace)."""
    return re.sub(r"\(about \d+ (?:s|min|h)\)", "(about 42 s)", line)


def test_a_first_search_by_meaning_says_once_what_it_embeds_and_the_command_that_does_it_ahead(tmp_path: Path) -> None:
    """A query's pass over a backlog says once on stderr how many entries, about how long, and which command does it beforehand;
    --json stdout stays one JSON document; that command embeds everything without saying it, and the next search embeds nothing."""
    root = tmp_path / "journal"
    _fill(root, 100)
    search = [*_CLI, "--root", str(root), "--nn", "search", "tide 7", "-k", "1", "--json"]
    first = subprocess.run(search, check=False, capture_output=True, text=True, cwd=REPO, timeout=300, env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert first.returncode == 0, first.stderr
    assert [hit["entry"]["voice"] for hit in json.loads(first.stdout)] == ["tide 7"]
    [note] = [line for line in first.stderr.splitlines() if not line.startswith(("loading the model", "loaded the model", "embedding entries: "))]
    assert _estimated(note) == _backfill_note(root, 100), note

    other = tmp_path / "other"
    _fill(other, 100)
    ahead = shlex.split(_backfill_note(other, 100).split("'")[1])
    assert ahead[0] == "ghostjournal"
    embedded = subprocess.run([*_CLI, *ahead[1:]], check=False, capture_output=True, text=True, cwd=REPO, timeout=300,
                              env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert embedded.returncode == 0, embedded.stderr
    assert json.loads(embedded.stdout)["embedded"] == 100
    assert [line for line in embedded.stderr.splitlines() if line.startswith("embedding ") and "entries:" not in line] == []
    later = subprocess.run([*_CLI, "--root", str(other), "--nn", "search", "tide 7", "-k", "1"], check=False, capture_output=True, text=True,
                           cwd=REPO, timeout=300, env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert later.returncode == 0, later.stderr
    assert [line for line in later.stderr.splitlines() if line.startswith("embedding")] == []


def test_a_search_that_embeds_a_backlog_shows_its_progress_off_a_terminal(tmp_path: Path) -> None:
    """``ghostjournal --nn search`` over entries without vectors prints the model load and each batch on a piped stderr."""
    root = tmp_path / "journal"
    _fill(root, 40)
    result = subprocess.run([*_CLI, "--root", str(root), "--nn", "search", "tide 7", "-k", "1", "--mode", "semantic"], check=False, capture_output=True,
                            text=True, cwd=REPO, timeout=300, env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["entry"]["voice"] == "tide 7"
    shown = [re.sub(r" \(.*\)$| in \d+\.\d s$", "", _estimated(line)) for line in result.stderr.splitlines()]
    assert shown == [f"loading the model {DEFAULT_MODEL} ...", f"loaded the model {DEFAULT_MODEL}",
                     "embedding entries: 0/40", _backfill_note(root, 40), "embedding entries: 32/40", "embedding entries: 40/40"]
    again = subprocess.run([*_CLI, "--root", str(root), "--nn", "search", "tide 7", "-k", "1"], check=False, capture_output=True, text=True,
                           cwd=REPO, timeout=300, env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert [line for line in again.stderr.splitlines() if line.startswith("embedding")] == []  # nothing left to embed


def _search_in_a_process(root: Path, *model: str) -> tuple[list[str], dict[str, Any]]:
    """``ghostjournal --nn [--model M] search`` in a process of its own: its embedding lines, and what ``embed`` says the index holds."""
    options = [*_CLI, "--root", str(root), "--nn", *(("--model", model[0]) if model else ())]
    searched = subprocess.run([*options, "search", "tide 3", "-k", "1"], check=False, capture_output=True, text=True, cwd=REPO, timeout=300,
                              env=_env(GHOSTJOURNAL_PROGRESS_AFTER="0"))
    assert searched.returncode == 0, searched.stderr
    embedded = subprocess.run([*options, "embed"], check=False, capture_output=True, text=True, cwd=REPO, timeout=300, env=_env())
    assert embedded.returncode == 0, embedded.stderr
    shown = [re.sub(r" \(.*\)$", "", line) for line in searched.stderr.splitlines() if line.startswith("embedding entries")]
    return shown, json.loads(embedded.stdout)


@pytest.mark.long
def test_two_processes_with_two_encoders_each_keep_their_vectors_and_never_re_embed_each_others(tmp_path: Path) -> None:
    """The default encoder, sentence-transformers with another model's directory (another identity), then the default again: the third
    embeds nothing. (A directory holding the pinned default model is the default model itself.)"""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (the st extra): this test needs it as the second encoder")
    root = tmp_path / "journal"
    _fill(root, 40)
    first, numpy_holds = _search_in_a_process(root)
    second, torch_holds = _search_in_a_process(root, str(altered_copy(resolve_model(DEFAULT_MODEL), tmp_path / "other-model")))
    third, numpy_again = _search_in_a_process(root)
    assert first == second == ["embedding entries: 0/40", "embedding entries: 32/40", "embedding entries: 40/40"]
    assert third == []
    assert numpy_again["embedded"] == 0 and numpy_again["missing"] == 0
    assert numpy_holds["encoder"]["key"] != torch_holds["encoder"]["key"]
    assert torch_holds["encoder"]["implementation"] == "sentence-transformers"
    held = sorted((e["key"], e["vectors"], e["implementations"]) for e in numpy_again["encoders"])
    assert held == sorted([(numpy_holds["encoder"]["key"], 40, [DEFAULT_IMPLEMENTATION]), (torch_holds["encoder"]["key"], 40, ["sentence-transformers"])])


def _blas_threads() -> int:
    """The threads numpy's BLAS may use (another library's BLAS, such as one torch loads, is not the encoder's)."""
    return max(pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas" and "numpy" in pool["filepath"])


class _Watched(MiniLMEncoder):
    """The packaged model's encoder, noting for each forward pass its thread and how many threads BLAS may use there."""

    def __init__(self) -> None:
        super().__init__(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)
        self.calls: list[tuple[int, int]] = []

    def _fill(self, result: Any, ids: Any) -> None:
        self.calls.append((threading.get_ident(), _blas_threads()))
        super()._fill(result, ids)


def test_embed_encodes_two_chunks_at_once_and_stores_the_vectors_one_thread_gives_bit_for_bit(tmp_path: Path) -> None:
    """A bulk embed spreads its chunks (of texts of about one length) over two threads; every vector is the one a single-threaded encode of the same chunk gives."""
    root = tmp_path / "journal"
    with Journal(root) as journal:
        for n in range(100):  # 32 texts per encode: three full chunks and a short one
            journal.append({"kind": "note", "agent": "motoko", "theme": f"day {n}", "tags": [f"t{n % 7}"],
                            "voice": " ".join(["harbor tide lantern ferry heron"] * (1 + n % 9)) + f" entry {n}"})
    watched = _Watched()
    with Journal(root, enable_nn=True, encoder=watched) as journal:
        assert journal.embed().embedded == 100
        ordered = journal.list(agent="motoko")[::-1]  # oldest first: the order the entries are embedded in
    bulk = watched.calls[:]
    assert len({thread for thread, _ in bulk}) == 2 and threading.get_ident() not in {thread for thread, _ in bulk}
    texts = [document_text(entry.theme, entry.tags, (entry.signals or {}).get("focus"), entry.voice) for entry in ordered]
    # The chunks embed cuts: 32 texts at a time from the texts sorted by length (stable: equal lengths in entry order).
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    alone = np.empty((len(texts), 384), dtype=np.float32)
    for start in range(0, len(order), 32):
        chunk = order[start:start + 32]
        alone[chunk] = watched.encode([texts[i] for i in chunk])
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as conn:
        stored = dict(conn.execute("SELECT e.id, v.vector FROM entries e JOIN vectors v ON v.entry = e.rowid").fetchall())
    assert [stored[entry.id] for entry in ordered] == [row.astype("<f4").tobytes() for row in alone]


def test_a_query_after_a_bulk_embed_runs_on_the_calling_thread_with_one_blas_thread(tmp_path: Path) -> None:
    """After embed() used two threads, a search embeds its query on the caller's thread, BLAS held to one thread, the limit never left set."""
    root = tmp_path / "journal"
    _fill(root, 70)
    before = _blas_threads()
    watched = _Watched()
    with Journal(root, enable_nn=True, encoder=watched) as journal:
        journal.embed()
        bulk = len(watched.calls)
        journal.search("the tide came in", k=3, mode="semantic")
    query = watched.calls[bulk:]
    assert query == [(threading.get_ident(), 1)]
    assert _blas_threads() == before


def test_embed_as_text_names_the_encoder_in_a_line_and_every_other_encoders_vectors(tmp_path: Path) -> None:
    """`embed --text` shows the encoder as its model, length, short weights hash and implementation (it printed a Python dict), and
    the vectors of any other encoder the index holds, by count."""
    root = tmp_path / "journal"
    _fill(root, 6)
    with contextlib.closing(sqlite3.connect(root / "index" / "journal.sqlite3")) as index, index:  # vectors an unknown encoder left
        index.execute("INSERT INTO vectors (model, entry, vector) SELECT 'elsewhere:3:l2:none', rowid, ? FROM entries LIMIT 2",
                      (np.ones(3, dtype=np.float32).tobytes(),))
    done = subprocess.run([*_CLI, "--root", str(root), "embed", "--text"], check=False, capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=_env())
    assert done.returncode == 0, done.stderr
    rows = dict(re.split(r":\s+", line, maxsplit=1) for line in done.stdout.splitlines())
    assert rows["embedded"] == "6 entries" and (rows["entries"], rows["missing"]) == ("6", "0")
    assert re.fullmatch(rf"{re.escape(DEFAULT_MODEL)} \(384 dimensions, sha256:[0-9a-f]{{12}}, {DEFAULT_IMPLEMENTATION}\)", rows["encoder"]), rows
    assert rows["also held"] == "2 vectors of elsewhere:3:l2:none"
    assert "{" not in done.stdout
