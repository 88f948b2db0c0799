"""The default model's own encoders, in NumPy and on ONNX Runtime, against sentence-transformers, the reference.

The reference's vectors and top 10s are kept in ``tests/data/minilm-reference`` (made and checked by
``tests/data/minilm_reference.py``), so these tests need no torch; the tests that run the reference
itself use the ``st_encoder`` fixture and skip, saying so, where sentence-transformers is not installed.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import Journal
from journal.encoding import DEFAULT_MODEL, Encoder, load_encoder, resolve_model
from journal.encoding.numpy_minilm import _BATCH_TOKENS, _PADDING_SHARE, MiniLMEncoder, _batches, _map_safetensors, gelu
from journal.encoding.onnx_minilm import OnnxMiniLMEncoder
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
from journal.errors import ModelNotFoundError, SemanticUnavailableError
from tests.journal._equivalence import (
    DEV_SPLIT_ENV,
    WORDS,
    dev_split,
    dev_split_rankings,
    digest_of,
    equivalence_texts,
    load_reference,
    truncation_texts,
    varied_texts,
)
from tests.journal._wheels import altered_copy

Payload = Callable[..., dict[str, Any]]
Vectors = npt.NDArray[np.float32]
_REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", params=[OnnxMiniLMEncoder, MiniLMEncoder], ids=["onnxruntime", "numpy"])
def fast_encoder(request: pytest.FixtureRequest) -> MiniLMEncoder:
    """The packaged model in each implementation of its own; a missing model or library fails the test, never skips it."""
    try:
        path = resolve_model(DEFAULT_MODEL)
        encoder: MiniLMEncoder = request.param(path, DEFAULT_MODEL)
    except (SemanticUnavailableError, ModelNotFoundError, ImportError) as exc:
        pytest.fail(f"the real embedding model and its libraries are required for this test: {exc}", pytrace=False)
    return encoder


def _cosines(a: Vectors, b: Vectors) -> Vectors:
    result: Vectors = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return result


@pytest.fixture(scope="module")
def reference() -> tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]]:
    """The reference's kept vectors of the equivalence texts, its dev-split top 10s, and what they were made from."""
    vectors, rankings, meta = load_reference()
    texts = equivalence_texts()
    assert meta["texts_sha256"] == digest_of(texts) and vectors.shape == (len(texts), 384), (
        "the equivalence texts changed since the reference was kept: run tests/data/minilm_reference.py --write where sentence-transformers is")
    return vectors, rankings, meta


def test_the_packaged_model_gets_an_encoder_of_its_own_under_the_reference_identity(
    fast_encoder: MiniLMEncoder, reference: tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]],
) -> None:
    """Vectors any implementation stored stay usable: the identity is the reference's, only the implementation told apart."""
    assert fast_encoder.identity == reference[2]["model"]
    assert fast_encoder.identity.startswith(f"{DEFAULT_MODEL}:384:l2:sha256:")
    expected = "onnxruntime" if isinstance(fast_encoder, OnnxMiniLMEncoder) else "numpy"
    assert fast_encoder.describe().implementation == expected
    assert fast_encoder.path == resolve_model(DEFAULT_MODEL)
    assert fast_encoder.max_tokens == 256


def test_the_reference_path_has_the_same_identity(fast_encoder: MiniLMEncoder, st_encoder: Encoder) -> None:
    """Run by sentence-transformers, the default model has the identity of the encoders here, and says which implementation it is."""
    assert isinstance(st_encoder, SentenceTransformerEncoder)
    assert st_encoder.identity == fast_encoder.identity and st_encoder.describe().implementation == "sentence-transformers"


def test_the_kept_reference_is_what_sentence_transformers_says(st_encoder: Encoder, reference: tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]]) -> None:
    """Where the reference runs, its vectors of a sample of the equivalence texts are the kept ones, to float16 rounding."""
    texts = equivalence_texts()
    sample = [*range(0, 480, 8), *range(480, len(texts))]
    fresh = st_encoder.encode([texts[i] for i in sample])
    assert float(np.abs(fresh - reference[0][sample]).max()) < 5e-4


def test_the_factory_takes_onnx_runtime_when_it_is_installed_and_numpy_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the onnx extra the default model runs on ONNX Runtime; a process that cannot import it gets the NumPy encoder, same identity."""
    with_runtime = load_encoder()
    assert type(with_runtime) is OnnxMiniLMEncoder
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an import of it raises ImportError for
    without = load_encoder()
    assert type(without) is MiniLMEncoder
    assert without.identity == with_runtime.identity
    assert _cosines(without.encode(WORDS), with_runtime.encode(WORDS)).min() >= 0.9999


def test_the_two_forward_passes_agree_with_each_other_to_float32_rounding() -> None:
    """ONNX Runtime's fused kernels and NumPy's products compute the same model: vectors within 1e-5 on texts of every length."""
    path = resolve_model(DEFAULT_MODEL)
    texts = varied_texts(200, seed=5)
    on_runtime, in_numpy = OnnxMiniLMEncoder(path, DEFAULT_MODEL).encode(texts), MiniLMEncoder(path, DEFAULT_MODEL).encode(texts)
    assert float(np.abs(on_runtime - in_numpy).max()) < 1e-5


def test_other_models_and_devices_stay_with_sentence_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, st_encoder: Encoder) -> None:
    """A directory of another model or another device is sentence-transformers' job; a directory of the default model is not; an absent model is an error."""
    path = resolve_model(DEFAULT_MODEL)
    assert type(load_encoder(str(path))) is type(load_encoder()), "the default model's own directory is the default model"
    assert isinstance(load_encoder(str(altered_copy(path, tmp_path / "other-model"))), SentenceTransformerEncoder)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError):
        load_encoder("someone/absent-model")


@pytest.mark.long
def test_vectors_match_sentence_transformers_on_texts_of_every_length(
    fast_encoder: MiniLMEncoder, reference: tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]],
) -> None:
    """Cosine >= 0.999 against the reference's kept vectors of 480 texts, over 40 of them truncated; the dev-split test below adds every turn."""
    texts = varied_texts(480)
    pieces = [len(fast_encoder._tokenizer.encode(text).ids) for text in texts]
    assert sum(count == 256 for count in pieces) > 40  # the truncated ones
    assert min(pieces) == 2  # [CLS] [SEP] alone
    cosines = _cosines(fast_encoder.encode(texts), reference[0][: len(texts)])
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.999, f"cosine {cosines[worst]:.6f} for {texts[worst][:80]!r}"
    assert float(np.mean(cosines)) >= 0.99999


def test_a_widened_encoder_gives_the_same_vectors_bit_for_bit_on_two_threads() -> None:
    """OnnxMiniLMEncoder.widened(2), which embedding behind a simulation uses, changes no bit of any vector."""
    narrow = OnnxMiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)
    texts = varied_texts(150, seed=9)
    one_by_one, together = np.vstack([narrow.encode([text]) for text in texts]), narrow.encode(texts)  # on one thread
    assert narrow._session().get_session_options().intra_op_num_threads == 1
    wide = narrow.widened(2)
    assert np.array_equal(np.vstack([wide.encode([text]) for text in texts]), one_by_one)
    assert np.array_equal(wide.encode(texts), together)
    assert wide.identity == narrow.identity


def test_a_widened_encoder_replaces_the_one_thread_session_rather_than_holding_a_second() -> None:
    """Each session holds its own packed copy of the weights: once widened, the encoder and its copies run on one two-thread session."""
    narrow = OnnxMiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)
    alone = narrow.encode(["a query before any widening"])
    wide = narrow.widened(2)
    wide.encode(["an entry embedded behind"])
    assert narrow._session() is wide._session()
    assert narrow._session().get_session_options().intra_op_num_threads == 2
    assert np.array_equal(narrow.encode(["a query before any widening"]), alone)
    narrow.widened(1).encode(["a narrower copy"])  # never narrows the session back: no second one is built
    assert narrow._session() is wide._session()


def test_the_session_is_handed_the_mapped_weights_and_only_the_joined_query_key_value_is_a_copy() -> None:
    """The packed copy the session makes is the only copy of a product's matrix in the process's memory: every other array is the file's."""
    encoder = OnnxMiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)
    _, weights = encoder._graph()
    mapped = encoder.word_embeddings  # a view of the encoder's map of model.safetensors: its root is the whole file
    while isinstance(mapped.base, np.ndarray):
        mapped = mapped.base
    copies = {name for name, value in weights.items() if not np.may_share_memory(value, mapped)}
    assert copies == {f"layer{number}.{part}" for number in range(6) for part in ("qkv", "qkv_bias")}  # joined, as Attention takes them
    assert sum(value.nbytes for value in weights.values()) > 40_000_000  # the layers' weights, about 43 MB, all accounted for


def test_truncation_keeps_the_first_256_word_pieces_as_the_reference_does(
    fast_encoder: MiniLMEncoder, reference: tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]],
) -> None:
    """What follows the 254th word piece of the text changes neither encoder's vector; what precedes it changes both."""
    texts = truncation_texts()
    kept = reference[0][-len(texts):]
    for vectors in (fast_encoder.encode(texts), kept):
        assert np.allclose(vectors[0], vectors[1], atol=1e-6)
        assert not np.allclose(vectors[0], vectors[2], atol=1e-3)
    assert _cosines(fast_encoder.encode(texts), kept).min() >= 0.9999


def test_a_vector_does_not_depend_on_its_batch(fast_encoder: MiniLMEncoder) -> None:
    """Padding is masked: a text embedded alone or among much longer ones gets the same vector."""
    texts = ["puppy", "a quiet day indoors with tea", " ".join(WORDS * 8), "東京の天気は晴れです", ""]
    together = fast_encoder.encode(texts)
    alone = np.vstack([fast_encoder.encode([text]) for text in texts])
    assert np.allclose(together, alone, atol=1e-6)
    assert fast_encoder.encode([]).shape == (0, 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)
    assert together.dtype == np.float32


def test_a_batch_is_encoded_in_buckets_of_about_one_length() -> None:
    """Each bucket is padded to its own longest text, with at most an eighth of its word pieces padding; every text is in one bucket."""
    lengths = [2, 3, 5, 5, 6, 7, 9, 12, 14, 20, 31, 40, 41, 60, 90, 128, 200, 256, 256, *[8] * 300]
    ids = [[0] * length for length in random_order(lengths)]
    buckets = list(_batches(ids))
    assert sorted(i for bucket in buckets for i in bucket) == list(range(len(ids)))
    for bucket in buckets:
        widths = [len(ids[i]) for i in bucket]
        padded = len(bucket) * max(widths)
        assert widths == sorted(widths)
        assert padded <= _BATCH_TOKENS or len(bucket) == 1
        assert padded - sum(widths) <= _PADDING_SHARE * padded
    # Texts of about one length still go through together: the 300 of 8 word pieces share one pass.
    assert any(len(bucket) >= 300 for bucket in buckets)


def random_order(values: Sequence[int]) -> list[int]:
    """*values* in an order that is not sorted, the same in every run."""
    shuffled = list(values)
    rng = np.random.default_rng(7)
    rng.shuffle(shuffled)
    return shuffled


def test_a_mixed_batch_comes_back_in_the_order_given(fast_encoder: MiniLMEncoder) -> None:
    """Short and long texts interleaved, some repeated: each row is the vector of the text at its place, as encoded alone."""
    texts = varied_texts(116, seed=3)[80:]  # blank and one-word texts, sentences of 9 to 65 words, four truncated at 256 word pieces
    mixed = [texts[i] for i in random_order(list(range(len(texts))))] + texts[:5]
    together = fast_encoder.encode(mixed)
    alone = np.vstack([fast_encoder.encode([text]) for text in mixed])
    assert np.allclose(together, alone, atol=1e-6)
    assert np.array_equal(together[-5:], together[[mixed.index(text) for text in texts[:5]]])


_TEXT = st.lists(st.sampled_from([*WORDS, "東京", "🍕", "!", "x" * 30]), max_size=120).map(" ".join)


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(_TEXT, max_size=12))
def test_bucketed_vectors_are_those_of_one_text_at_a_time(fast_encoder: MiniLMEncoder, texts: list[str]) -> None:
    """Any batch (empty texts, repeats, up to 120 words each), encoded at once in buckets, gives each text its vector alone, in order."""
    together = fast_encoder.encode(texts)
    assert together.shape == (len(texts), 384)
    for row, text in zip(together, texts, strict=True):
        assert np.allclose(row, fast_encoder.encode([text])[0], atol=1e-6)


def test_gelu_is_the_erf_form_to_float32_precision() -> None:
    """The erfc-based Gaussian CDF gives x * Phi(x) within float32 rounding of the exact erf GELU, in the tails too."""
    x = np.linspace(-12.0, 12.0, 200_001, dtype=np.float32)
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)])
    assert gelu(x).dtype == np.float32
    error = np.abs(gelu(x).astype(np.float64) - exact)
    assert float(np.max(error / np.maximum(1.0, np.abs(exact)))) < 4e-7
    tanh_form = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    assert float(np.max(np.abs(tanh_form - exact))) > 1e-4  # the approximation BERT does not use is told apart


def test_the_mapped_weights_are_the_safetensors_loaders(fast_encoder: MiniLMEncoder) -> None:
    """The memory-mapped reader gives every tensor bit for bit as safetensors' own NumPy loader."""
    from safetensors.numpy import load_file

    path = fast_encoder.path / "model.safetensors"
    reference = {name: value for name, value in load_file(str(path)).items() if value.dtype == np.float32}
    mapped = _map_safetensors(path)
    assert reference.keys() <= mapped.keys()
    for name, value in reference.items():
        assert mapped[name].shape == value.shape and np.array_equal(mapped[name], value), name


def test_several_threads_may_share_one_encoder(fast_encoder: MiniLMEncoder) -> None:
    """Concurrent encodes of few and many texts give what each gives alone."""
    jobs = [[f"thread {n} says {word}" for word in WORDS[n:n + (1 if n % 2 else 12)]] for n in range(6)]
    expected = [fast_encoder.encode(job) for job in jobs]
    got: dict[int, Vectors] = {}
    barrier = threading.Barrier(len(jobs))

    def work(n: int) -> None:
        barrier.wait()
        for _ in range(3):
            got[n] = fast_encoder.encode(jobs[n])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n, vectors in enumerate(expected):
        assert np.allclose(got[n], vectors, atol=1e-6)


class _Counting:
    """An encoder counting the texts it embeds."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.encode(texts)


def test_vectors_stored_by_sentence_transformers_are_used_as_they_are(
    root: Path, make_payload: Payload, fast_encoder: MiniLMEncoder, st_encoder: Encoder,
) -> None:
    """Reopened with the NumPy encoder, a journal embedded by the reference re-embeds nothing and ranks by meaning."""
    with Journal(root, enable_nn=True, encoder=st_encoder) as journal:
        puppy = journal.append(make_payload(theme="pets", tags=[], voice="I adopted a puppy last week; she chews my shoes."))
        journal.append(make_payload(theme="cooking", tags=[], voice="Made miso soup from scratch; the dashi took an hour."))
    counting = _Counting(fast_encoder)
    with Journal(root, enable_nn=True, encoder=counting) as journal:
        assert counting.texts == 0
        assert journal.search("new canine companion", k=1, mode="semantic")[0].entry_id == puppy.id
        assert counting.texts == 1  # the query alone


def test_building_and_using_it_never_imports_torch() -> None:
    """The default encoder loads without torch, sentence-transformers or transformers."""
    script = (
        "import sys\nimport journal.encoding, journal.encoding.numpy_minilm\n"
        "light = sorted(m for m in ('numpy', 'tokenizers') if m in sys.modules)\n"
        "journal.encoding.load_encoder().encode(['one query'])\n"
        "print(light, sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120, cwd=_REPO)
    assert result.stdout.strip() == "[] []"



def test_the_nn_command_searches_by_meaning_without_torch(tmp_path: Path) -> None:
    """`ghostjournal --nn` builds the default model's own encoder: a semantic search in a fresh process loads no torch."""
    script = (
        "import sys\nfrom journal import Journal\n"
        "with Journal(sys.argv[1], create=True, enable_nn=True) as j:\n"
        "    puppy = j.append({'kind': 'note', 'agent': 'motoko', 'theme': 'home', 'voice': 'We adopted a puppy from the shelter today.'})\n"
        "    j.append({'kind': 'note', 'agent': 'motoko', 'theme': 'work', 'voice': 'The quarterly report is due on Friday.'})\n"
        "    top = j.search('new canine companion', k=1, mode='semantic')[0].entry_id\n"
        "print(top == puppy.id, sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "j")], capture_output=True, text=True, check=True, timeout=120, cwd=_REPO)
    assert result.stdout.strip() == "True []", result.stderr
    cli = subprocess.run([sys.executable, "-X", "importtime", "-m", "journal.cli.cli", "--root", str(tmp_path / "j"), "--nn", "search", "canine", "--mode", "semantic"],
                         capture_output=True, text=True, check=False, timeout=120, cwd=_REPO)
    assert cli.returncode == 0, cli.stderr
    imported = {line.split("|")[-1].strip() for line in cli.stderr.splitlines() if line.startswith("import time:")}
    assert "journal.encoding.numpy_minilm" in imported and not {"torch", "sentence_transformers"} & imported

@pytest.mark.long
def test_top_10_rankings_on_the_dev_split_are_the_references(
    fast_encoder: MiniLMEncoder, reference: tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]],
) -> None:
    """Every dev-split question ranks its conversation's turns into the reference's top 10, as kept."""
    split = dev_split()
    if split is None:
        message = f"the LoCoMo dev split is required (set {DEV_SPLIT_ENV})"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    rankings, digest = dev_split_rankings(fast_encoder.encode, split)
    assert digest == reference[2]["dev_split_sha256"], "the dev split changed since the reference was kept: run tests/data/minilm_reference.py --write"
    assert len(rankings) >= 300
    differing = [i for i in range(len(rankings)) if not np.array_equal(rankings[i], reference[1][i])]
    assert differing == []
