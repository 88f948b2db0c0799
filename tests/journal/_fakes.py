"""A small, fast Encoder behind the same protocol as the real model, for unit tests."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["FakeEncoder"]


class FakeEncoder:
    """Hashes each word into one of *dimension* slots; texts sharing words get similar vectors.

    ``synonyms`` maps a word to the word whose slot it shares, so a test can
    make two different words mean the same thing. ``calls`` counts the texts encoded.
    """

    def __init__(self, name: str = "fake", dimension: int = 64, synonyms: dict[str, str] | None = None) -> None:
        self.identity = f"{name}:{dimension}"
        self.dimension = dimension
        self.synonyms = synonyms or {}
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += len(texts)
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.01  # never the zero vector
            for found in re.findall(r"\w+", text.lower()):
                word = self.synonyms.get(found, found)
                vectors[row, 1 + zlib.crc32(word.encode()) % (self.dimension - 1)] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
