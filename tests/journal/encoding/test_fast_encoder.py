"""The packaged model's own encoders, in NumPy and on ONNX Runtime, against sentence-transformers, the reference."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from journal import Journal
from journal.encoding import DEFAULT_MODEL, Encoder, document_text, load_encoder, resolve_model
from journal.encoding.numpy_minilm import MiniLMEncoder, _map_safetensors, gelu
from journal.encoding.onnx_minilm import OnnxMiniLMEncoder
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
from journal.errors import ModelNotFoundError, SemanticUnavailableError

Payload = Callable[..., dict[str, Any]]
Vectors = npt.NDArray[np.float32]
_REPO = Path(__file__).resolve().parents[3]
_DEV_SPLIT_ENV = "GHOSTJOURNAL_LOCOMO_DEV"


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


_WORDS = [
    "harbor", "ferry", "tide", "lantern", "puppy", "adopted", "shoes", "chewed", "release", "rollback", "queue", "stalled",
    "miso", "dashi", "insomnia", "ceiling", "quarterly", "tax", "mackerel", "daikon", "canal", "heron", "bridge", "weekend",
    "ticket", "vendor", "garden", "tomato", "violin", "rehearsal", "marathon", "knee", "physiotherapy", "grandmother", "recipe",
    "dumpling", "train", "delayed", "platform", "umbrella", "thunderstorm", "museum", "sculpture",
]
_UNICODE = [
    "café", "naïve", "résumé", "Zürich", "São Paulo", "façade", "Ångström", "smørrebrød", "Dvořák", "İstanbul",
    "東京の天気は晴れです", "我今天去了图书馆", "서울에서 만나요", "Привет, как дела?", "مرحبا بالعالم", "नमस्ते दुनिया",
    "สวัสดีครับ", "Γειά σου κόσμε", "🍕🐶", "I love 🍕 and 🐶!!", "👩‍👩‍👧 family trip ✈️", "ﬁne ligature", "zero\u200bwidth",
    "tab\there", "new\nline", "Ｆｕｌｌｗｉｄｔｈ", "x² + y² = z²", "€100 or ¥12,000", "OPS-7731", "v1.2.3-rc4",
]


_VOCABULARY = [*_WORDS, *_UNICODE]


def _varied_texts(count: int, seed: int = 11) -> list[str]:
    """Texts of every length: blank, punctuation, one word, accents/CJK/emoji, sentences, and texts far over 256 word pieces."""
    rng = random.Random(seed)
    texts = ["", " ", "\n\t ", ".", "?!", "a", "I", "the", "[CLS]", "[SEP] [PAD]", "[UNK]", "a" * 150, "#" * 40]
    texts += _VOCABULARY
    while len(texts) < count:
        shape = rng.random()
        if shape < 0.2:
            texts.append(rng.choice(_VOCABULARY))
        elif shape < 0.9:
            words = [rng.choice(_WORDS) if rng.random() < 0.8 else rng.choice(_UNICODE) for _ in range(rng.randint(2, 60))]
            texts.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ""]))
        else:  # 300 to 900 words: truncated to 256 word pieces
            texts.append(" ".join(rng.choice(_VOCABULARY) for _ in range(rng.randint(300, 900))))
    return texts


def test_the_packaged_model_gets_an_encoder_of_its_own_under_the_reference_identity(fast_encoder: MiniLMEncoder, real_encoder: Encoder) -> None:
    """Vectors any implementation stored stay usable: the identity is the same, only the implementation told apart."""
    assert fast_encoder.identity == real_encoder.identity
    assert fast_encoder.identity.startswith(f"{DEFAULT_MODEL}:384:l2:sha256:")
    assert isinstance(real_encoder, SentenceTransformerEncoder)
    expected = "onnxruntime" if isinstance(fast_encoder, OnnxMiniLMEncoder) else "numpy"
    assert (fast_encoder.describe().implementation, real_encoder.describe().implementation) == (expected, "sentence-transformers")
    assert fast_encoder.path == resolve_model(DEFAULT_MODEL)
    assert fast_encoder.max_tokens == 256


def test_the_factory_takes_onnx_runtime_when_it_is_installed_and_numpy_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the onnx extra the default model runs on ONNX Runtime; a process that cannot import it gets the NumPy encoder, same identity."""
    with_runtime = load_encoder()
    assert type(with_runtime) is OnnxMiniLMEncoder
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an import of it raises ImportError for
    without = load_encoder()
    assert type(without) is MiniLMEncoder
    assert without.identity == with_runtime.identity
    assert _cosines(without.encode(_WORDS), with_runtime.encode(_WORDS)).min() >= 0.9999


def test_the_two_forward_passes_agree_with_each_other_to_float32_rounding() -> None:
    """ONNX Runtime's fused kernels and NumPy's products compute the same model: vectors within 1e-5 on texts of every length."""
    path = resolve_model(DEFAULT_MODEL)
    texts = _varied_texts(200, seed=5)
    on_runtime, in_numpy = OnnxMiniLMEncoder(path, DEFAULT_MODEL).encode(texts), MiniLMEncoder(path, DEFAULT_MODEL).encode(texts)
    assert float(np.abs(on_runtime - in_numpy).max()) < 1e-5


def test_other_models_and_devices_stay_with_sentence_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A named directory or another device is sentence-transformers' job; an absent model is an error, not a fallback."""
    path = resolve_model(DEFAULT_MODEL)
    assert isinstance(load_encoder(str(path)), SentenceTransformerEncoder)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError):
        load_encoder("someone/absent-model")


def test_vectors_match_sentence_transformers_on_texts_of_every_length(fast_encoder: MiniLMEncoder, real_encoder: Encoder) -> None:
    """Cosine >= 0.999 against the reference on 480 texts, over 40 of them truncated; the dev-split test below adds every turn of its conversations."""
    texts = _varied_texts(480)
    pieces = [len(fast_encoder._tokenizer.encode(text).ids) for text in texts]
    assert sum(count == 256 for count in pieces) > 40  # the truncated ones
    assert min(pieces) == 2  # [CLS] [SEP] alone
    cosines = _cosines(fast_encoder.encode(texts), real_encoder.encode(texts))
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.999, f"cosine {cosines[worst]:.6f} for {texts[worst][:80]!r}"
    assert float(np.mean(cosines)) >= 0.99999


def test_a_widened_encoder_gives_the_same_vectors_bit_for_bit_on_two_threads() -> None:
    """OnnxMiniLMEncoder.widened(2), which embedding behind a simulation uses, changes no bit of any vector; queries keep one thread."""
    narrow = OnnxMiniLMEncoder(resolve_model(DEFAULT_MODEL), DEFAULT_MODEL)
    wide = narrow.widened(2)
    texts = _varied_texts(150, seed=9)
    assert np.array_equal(np.vstack([wide.encode([text]) for text in texts]), np.vstack([narrow.encode([text]) for text in texts]))
    assert np.array_equal(wide.encode(texts), narrow.encode(texts))
    assert wide.identity == narrow.identity
    options = {threads: session.get_session_options().intra_op_num_threads for threads, session in narrow._sessions.items()}
    assert options == {1: 1, 2: 2}  # one session each, built once and shared by the copies


def test_truncation_keeps_the_first_256_word_pieces_as_the_reference_does(fast_encoder: MiniLMEncoder, real_encoder: Encoder) -> None:
    """What follows the 254th word piece of the text changes neither encoder's vector; what precedes it changes both."""
    head = " ".join(_WORDS[i % len(_WORDS)] for i in range(300))
    texts = [head + " and then a tail about something else", head + " 東京 🍕 completely different", "changed " + head]
    for vectors in (fast_encoder.encode(texts), real_encoder.encode(texts)):
        assert np.allclose(vectors[0], vectors[1], atol=1e-6)
        assert not np.allclose(vectors[0], vectors[2], atol=1e-3)
    assert _cosines(fast_encoder.encode(texts), real_encoder.encode(texts)).min() >= 0.9999


def test_a_vector_does_not_depend_on_its_batch(fast_encoder: MiniLMEncoder) -> None:
    """Padding is masked: a text embedded alone or among much longer ones gets the same vector."""
    texts = ["puppy", "a quiet day indoors with tea", " ".join(_WORDS * 8), "東京の天気は晴れです", ""]
    together = fast_encoder.encode(texts)
    alone = np.vstack([fast_encoder.encode([text]) for text in texts])
    assert np.allclose(together, alone, atol=1e-6)
    assert fast_encoder.encode([]).shape == (0, 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)
    assert together.dtype == np.float32


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
    jobs = [[f"thread {n} says {word}" for word in _WORDS[n:n + (1 if n % 2 else 12)]] for n in range(6)]
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
    root: Path, make_payload: Payload, fast_encoder: MiniLMEncoder, real_encoder: Encoder,
) -> None:
    """Reopened with the NumPy encoder, a journal embedded by the reference re-embeds nothing and ranks by meaning."""
    with Journal(root, enable_nn=True, encoder=real_encoder) as journal:
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

def _dev_split() -> Path | None:
    """The LoCoMo dev split: $GHOSTJOURNAL_LOCOMO_DEV, else ``shared/data/locomo-dev`` beside the checkout or an ancestor of it."""
    if os.environ.get(_DEV_SPLIT_ENV):
        return Path(os.environ[_DEV_SPLIT_ENV])
    return next((found for parent in _REPO.parents if (found := parent / "shared" / "data" / "locomo-dev").is_dir()), None)


def test_top_10_rankings_on_the_dev_split_are_the_references(fast_encoder: MiniLMEncoder, real_encoder: Encoder) -> None:
    """Every dev-split question ranks its conversation's turns into the same top 10 with either encoder."""
    split = _dev_split()
    if split is None:
        message = f"the LoCoMo dev split is required (set {_DEV_SPLIT_ENV})"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    sys.path.insert(0, str(_REPO / "bench"))
    try:
        from retrieval_sets import load_locomo
    finally:
        sys.path.remove(str(_REPO / "bench"))
    payloads, queries = load_locomo(split)
    texts = [document_text(p["theme"], p.get("tags", []), None, p["voice"]) for p in payloads]
    agents = np.array([p["agent"] for p in payloads])
    questions = [q["query"] for q in queries]
    rankings = []
    for encoder in (fast_encoder, real_encoder):
        documents, asked = encoder.encode(texts), encoder.encode(questions)
        scores = asked @ documents.T
        scores[agents[None, :] != np.array([q["agent"] for q in queries])[:, None]] = -np.inf
        rankings.append(np.argsort(-scores, axis=1, kind="stable")[:, :10])
    assert len(questions) >= 300
    differing = [questions[i] for i in range(len(questions)) if not np.array_equal(rankings[0][i], rankings[1][i])]
    assert differing == []
