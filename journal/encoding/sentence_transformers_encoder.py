"""Any model through sentence-transformers: other names, model directories and devices, and the reference the tests hold the others to.

sentence-transformers and torch (the ``st`` extra) are imported when a
:class:`SentenceTransformerEncoder` is built, never at module level:
importing torch costs seconds and hundreds of megabytes (SPEC §4.3). The
model is loaded with ``local_files_only=True`` and ``trust_remote_code=False``
from the directory :func:`~journal.encoding.models.resolve_model` finds.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.encoding._identity import EncoderIdentity, model_files, weights_hash
from journal.encoding.models import DEFAULT_MODEL, ST_FIX, is_default_model, resolve_model
from journal.errors import SemanticUnavailableError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SentenceTransformerEncoder"]

_FEW_TEXTS: Final = 4  # at most this many texts are embedded on a single thread


def _sentence_transformers() -> Any:
    try:
        return importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise SemanticUnavailableError(f"sentence-transformers cannot be imported ({exc})", ST_FIX) from exc


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar, restoring its setting afterwards."""
    try:
        # Through import_module, typed Any: transformers' logging helpers carry no annotations.
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class SentenceTransformerEncoder:
    """An :class:`~journal.encoding.base.Encoder` backed by a local sentence-transformers model.

    Args:
        model: a model name (looked up offline, see :func:`~journal.encoding.models.resolve_model`) or
            a directory holding a model.
        device: the torch device; CPU unless configured.
        batch_size: texts per forward pass.
        cache_dir: where the hash of the model files is remembered (a
            journal's ``models/``), so that the next process need not read
            the weights to know their identity; None remembers it in this process only.

    Raises:
        SemanticUnavailableError: the ``st`` extra (sentence-transformers) is not installed.
        ModelNotFoundError: no local copy of the model.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_dir: Path | None = None,
    ) -> None:
        path = resolve_model(model)
        library = _sentence_transformers()
        with _quiet_loading():
            try:
                self._model = library.SentenceTransformer(str(path), device=device, local_files_only=True, trust_remote_code=False)
            except (OSError, ValueError) as exc:  # a directory that holds no model sentence-transformers can read
                reason = " ".join(str(exc).split())[:200]
                raise SemanticUnavailableError(
                    f"the model in {str(path)!r} cannot be loaded ({reason})", "pass a directory that holds a sentence-transformers model"
                ) from exc
        dimension_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dimension = int(dimension_of())
        # A directory holding the pinned default model is that model (on another device, say): its name in the identity,
        # so its vectors are the default model's and a journal is never embedded again for the path it was given by.
        self.name = DEFAULT_MODEL if os.fspath(model) != DEFAULT_MODEL and is_default_model(path, cache_dir=cache_dir) else os.fspath(model)
        self.path = path
        self.batch_size = batch_size
        weights = weights_hash(path, model_files(path), cache_dir=cache_dir)
        self._described = EncoderIdentity(self.name, self.dimension, weights, implementation="sentence-transformers")
        self._identity = self._described.key
        # One encode at a time, whoever shares this encoder: a Hugging Face fast tokenizer
        # used by two threads at once raises "Already borrowed" (huggingface/tokenizers#537),
        # and the thread count set below is process-wide.
        self._encoding = threading.Lock()

    @property
    def identity(self) -> str:
        """The vectors' tag (see :attr:`EncoderIdentity.key`)."""
        return self._identity

    def describe(self) -> EncoderIdentity:
        """The model, dimension, normalisation, weights hash and implementation."""
        return self._described

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed *texts* as unit-length float32 rows.

        A few texts (a query, one appended entry) are embedded on one thread:
        torch's thread pool gains nothing on such small work and fights the
        BLAS threads of the cosine step for the cores, which made a hybrid
        search several times slower (``bench/bench_retrieval.py speed``).
        """
        import numpy as np
        import torch

        with self._encoding:
            threads = torch.get_num_threads()
            few = len(texts) <= _FEW_TEXTS
            if few and threads != 1:
                torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
                )
            finally:
                if few and threads != 1:
                    torch.set_num_threads(threads)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder({self.name!r}, path={str(self.path)!r})"
