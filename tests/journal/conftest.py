"""Journal test fixtures: the real embedding model, loaded once per session, and the reference path beside it."""

from __future__ import annotations

import importlib.util

import pytest

from journal.encoding import Encoder, load_encoder
from journal.errors import ModelNotFoundError, SemanticUnavailableError


@pytest.fixture(scope="session")
def real_encoder() -> Encoder:
    """The real all-MiniLM-L6-v2 as a user's journal loads it (ONNX Runtime, else NumPy; no torch); a missing model fails the test, never skips it."""
    try:
        return load_encoder()
    except (SemanticUnavailableError, ModelNotFoundError) as exc:
        pytest.fail(f"the real embedding model is required for this test (ghostjournal download-model fetches it): {exc}", pytrace=False)


@pytest.fixture(scope="session")
def st_encoder() -> Encoder:
    """The same model through sentence-transformers (the st extra), for the tests of that path; where it is not installed, they say so and skip.

    The test install brings no torch (a plain one from the package index is the multi-GB CUDA build), so
    this path is tested where a user installed torch's CPU build and the st extra, as docs/retrieval.md says.
    """
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed (the st extra, after torch's CPU build): the st path's own tests run where it is")
    from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder

    try:
        return SentenceTransformerEncoder()
    except (SemanticUnavailableError, ModelNotFoundError) as exc:
        pytest.fail(f"the real embedding model is required for this test: {exc}", pytrace=False)
