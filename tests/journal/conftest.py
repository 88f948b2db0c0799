"""Journal test fixtures: the real embedding model, loaded once per session."""

from __future__ import annotations

import pytest

from journal.encoding import Encoder
from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder
from journal.errors import SemanticUnavailableError


@pytest.fixture(scope="session")
def real_encoder() -> Encoder:
    """The real all-MiniLM-L6-v2 through the adapter; a missing model fails the test, never skips it."""
    try:
        return SentenceTransformerEncoder()
    except SemanticUnavailableError as exc:
        pytest.fail(f"the real embedding model is required for this test: {exc}", pytrace=False)
