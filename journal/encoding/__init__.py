"""Meaning: encoders and the semantic arm.

The Encoder protocol and its implementations (the MiniLM in NumPy or on ONNX Runtime, sentence-transformers), an
encoder's identity, the default model's fetch, and cosine top-n over the index's vectors.
"""

from journal.encoding._minilm import one_blas_thread
from journal.encoding._modelfetch import DEFAULT_INDEX

__all__ = [
    "DEFAULT_INDEX",
    "one_blas_thread",
]
