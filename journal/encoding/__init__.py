"""Meaning: encoders and the semantic arm.

The Encoder protocol and its implementations (the MiniLM in NumPy or on ONNX Runtime, sentence-transformers), an
encoder's identity, the default model's fetch, and cosine top-n over the index's vectors.
"""

__all__: list[str] = []
