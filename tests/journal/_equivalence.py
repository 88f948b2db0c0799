"""The texts the MiniLM encoders are held to the reference with, and where the reference's own vectors and rankings are kept.

The reference is the pinned all-MiniLM-L6-v2 run by sentence-transformers. Its
vectors of :func:`equivalence_texts` and its top 10s on the LoCoMo dev split
are computed once by ``tests/data/minilm_reference.py`` and kept in
``tests/data/minilm-reference/``, so the encoders this project runs (ONNX
Runtime, NumPy) are compared with it on a machine without torch; where
sentence-transformers is installed, that script (and a test) checks the kept
figures against a fresh run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEV_SPLIT_ENV", "REFERENCE_DIR", "UNICODE", "VOCABULARY", "WORDS", "dev_split", "dev_split_rankings", "digest_of",
    "equivalence_texts", "load_reference", "truncation_texts", "varied_texts",
]

Vectors = npt.NDArray[np.float32]
REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / "tests" / "data" / "minilm-reference"
DEV_SPLIT_ENV = "GHOSTJOURNAL_LOCOMO_DEV"


WORDS = [
    "harbor", "ferry", "tide", "lantern", "puppy", "adopted", "shoes", "chewed", "release", "rollback", "queue", "stalled",
    "miso", "dashi", "insomnia", "ceiling", "quarterly", "tax", "mackerel", "daikon", "canal", "heron", "bridge", "weekend",
    "ticket", "vendor", "garden", "tomato", "violin", "rehearsal", "marathon", "knee", "physiotherapy", "grandmother", "recipe",
    "dumpling", "train", "delayed", "platform", "umbrella", "thunderstorm", "museum", "sculpture",
]
UNICODE = [
    "café", "naïve", "résumé", "Zürich", "São Paulo", "façade", "Ångström", "smørrebrød", "Dvořák", "İstanbul",
    "東京の天気は晴れです", "我今天去了图书馆", "서울에서 만나요", "Привет, как дела?", "مرحبا بالعالم", "नमस्ते दुनिया",
    "สวัสดีครับ", "Γειά σου κόσμε", "🍕🐶", "I love 🍕 and 🐶!!", "👩‍👩‍👧 family trip ✈️", "ﬁne ligature", "zero\u200bwidth",
    "tab\there", "new\nline", "Ｆｕｌｌｗｉｄｔｈ", "x² + y² = z²", "€100 or ¥12,000", "OPS-7731", "v1.2.3-rc4",
]


VOCABULARY = [*WORDS, *UNICODE]


def varied_texts(count: int, seed: int = 11) -> list[str]:
    """Texts of every length: blank, punctuation, one word, accents/CJK/emoji, sentences, and texts far over 256 word pieces."""
    rng = random.Random(seed)
    texts = ["", " ", "\n\t ", ".", "?!", "a", "I", "the", "[CLS]", "[SEP] [PAD]", "[UNK]", "a" * 150, "#" * 40]
    texts += VOCABULARY
    while len(texts) < count:
        shape = rng.random()
        if shape < 0.2:
            texts.append(rng.choice(VOCABULARY))
        elif shape < 0.9:
            words = [rng.choice(WORDS) if rng.random() < 0.8 else rng.choice(UNICODE) for _ in range(rng.randint(2, 60))]
            texts.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ""]))
        else:  # 300 to 900 words: truncated to 256 word pieces
            texts.append(" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(300, 900))))
    return texts


def truncation_texts() -> list[str]:
    """Three texts over 256 word pieces: two that differ only past the 254th piece, one that differs before it."""
    head = " ".join(WORDS[i % len(WORDS)] for i in range(300))
    return [head + " and then a tail about something else", head + " 東京 🍕 completely different", "changed " + head]


def equivalence_texts() -> list[str]:
    """Every text whose reference vector is kept: 480 texts of every length, then the truncation texts."""
    return [*varied_texts(480), *truncation_texts()]


def digest_of(texts: Sequence[str]) -> str:
    """A sha256 of *texts* in order, to tell kept figures from texts that have changed since they were made."""
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode("utf-8")).hexdigest()


def dev_split() -> Path | None:
    """The LoCoMo dev split: $GHOSTJOURNAL_LOCOMO_DEV, else ``shared/data/locomo-dev`` beside the checkout or an ancestor of it."""
    if os.environ.get(DEV_SPLIT_ENV):
        return Path(os.environ[DEV_SPLIT_ENV])
    return next((found for parent in REPO.parents if (found := parent / "shared" / "data" / "locomo-dev").is_dir()), None)


def _dev_split_set(split: Path) -> tuple[list[str], npt.NDArray[Any], list[str], npt.NDArray[Any]]:
    """The dev split's turns as document texts and their agents, and its questions and theirs."""
    from journal.encoding import document_text

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from retrieval_sets import load_locomo
    finally:
        sys.path.remove(str(REPO / "bench"))
    payloads, queries = load_locomo(split, layout="paper")  # the layout the reference was kept in
    texts = [document_text(p["theme"], p.get("tags", []), None, p["voice"]) for p in payloads]
    return texts, np.array([p["agent"] for p in payloads]), [q["query"] for q in queries], np.array([q["agent"] for q in queries])


def dev_split_rankings(encode: Any, split: Path) -> tuple[npt.NDArray[np.int32], str]:
    """Each dev-split question's top 10 of its own conversation's turns by cosine under *encode*, and a digest of the set."""
    texts, agents, questions, asked_by = _dev_split_set(split)
    documents, asked = encode(texts), encode(questions)
    scores = asked @ documents.T
    scores[agents[None, :] != asked_by[:, None]] = -np.inf
    return np.argsort(-scores, axis=1, kind="stable")[:, :10].astype(np.int32), digest_of([*texts, *questions])


def load_reference() -> tuple[Vectors, npt.NDArray[np.int32], dict[str, Any]]:
    """The kept reference: the vectors of :func:`equivalence_texts`, the dev split's top 10s, and what they were made from."""
    meta = json.loads((REFERENCE_DIR / "meta.json").read_text(encoding="utf-8"))
    vectors = np.load(REFERENCE_DIR / "vectors.npy").astype(np.float32)
    rankings = np.load(REFERENCE_DIR / "dev-top10.npy")
    return vectors, rankings, meta
