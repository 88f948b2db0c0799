"""An encoder's identity: what decides its vectors, and the hash of the model files it computes them from.

Vectors are stored under :attr:`EncoderIdentity.key`; a journal opened with
an encoder of another key never ranks them, it embeds its entries again.
The key names the model, the dimension, the normalisation and a hash of the
files the vectors come from (weights, configuration, vocabulary), so that a
model directory whose weights were replaced under the same name is noticed.

Hashing the 90 MB of the default model takes about 60 ms from the page
cache and far longer from a cold disk, so each file's hash is kept, keyed by
its size, mtime, ctime, inode and device: in this process, and in a
journal's ``models/weights.json`` (the directory the journal reserves for
encoder caches), so that the next process opening that journal reads a few
hundred bytes instead of the weights. The cache is only ever a shortcut: a
file whose metadata changed is hashed again, and a cache that cannot be read
or written is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from journal.files import FILE_MODE, journal_owner, take_ownership

__all__ = ["CACHE_FILE", "EncoderIdentity", "forget_hashes", "model_files", "weights_hash"]

#: The name of the hash cache in a journal's ``models/`` directory.
CACHE_FILE: Final = "weights.json"
# Per module directory of a sentence-transformers model: the files that shape its vectors.
_WEIGHTS: Final = ("model.safetensors", "pytorch_model.bin")
# Named, not globbed: a training log such as data_config.json, which the packaged model
# carries and a downloaded copy need not, must not make the same model two identities.
_SHAPING: Final = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "added_tokens.json",
    "vocab.txt",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
)
_SHORT_HASH: Final = 16  # hex digits of the hash in a key: 64 bits tell models apart, and every vector row carries the key


@dataclass(frozen=True, slots=True)
class EncoderIdentity:
    """What an encoder's vectors depend on.

    Attributes:
        model: the model's name (as configured) or its directory.
        dimension: the length of each vector.
        weights: ``"sha256:<hex>"`` of the model's files (see :func:`weights_hash`), ``""`` when unknown.
        normalization: ``"l2"``: every vector is unit length, so a dot product is a cosine.
        implementation: what computes the vectors (``"numpy"``, ``"sentence-transformers"``, ...).
    """

    model: str
    dimension: int
    weights: str
    normalization: str = "l2"
    implementation: str = ""

    @property
    def key(self) -> str:
        """The tag stored with every vector: ``"<model>:<dimension>:<normalization>:<short weights hash>"``.

        The implementation is left out on purpose. The NumPy forward pass and
        sentence-transformers give the same model's vectors to a cosine of
        0.9999 or more, with the same top 10 on the dev split (tests check
        both), so vectors either one stored rank alike under the other;
        re-embedding a journal because the process that opens it has torch
        installed, or has not, would cost minutes and change nothing.
        """
        weights = self.weights[: len("sha256:") + _SHORT_HASH] if self.weights else "unhashed"
        return f"{self.model}:{self.dimension}:{self.normalization}:{weights}"

    def to_dict(self) -> dict[str, Any]:
        """The identity as JSON data, its key included."""
        return {"key": self.key, **asdict(self)}


def model_files(path: Path) -> list[Path]:
    """The files of the sentence-transformers model in *path* that its vectors depend on.

    For the model directory and each module directory ``modules.json`` names:
    its configuration and tokenizer files, its vocabulary and its weights
    (safetensors when present, as sentence-transformers prefers them, else
    the PyTorch file). Other formats a hub snapshot may hold (ONNX,
    OpenVINO, TensorFlow), documentation and training logs are not read by
    either encoder and are left out.
    """
    directories = [path]
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        directories += [path / module["path"] for module in modules if module.get("path")]
    files: list[Path] = []
    for directory in directories:
        if not directory.is_dir():
            continue
        files += [directory / name for name in _SHAPING if (directory / name).is_file()]
        files += [directory / name for name in _WEIGHTS if (directory / name).is_file()][:1]
    return files


_memo: dict[tuple[str, int, int, int, int, int], str] = {}
_memo_lock = threading.Lock()


def _stamp(path: Path) -> tuple[str, int, int, int, int, int]:
    info = os.stat(path)
    return str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev


def _file_hash(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def weights_hash(path: Path, files: Sequence[Path], *, cache_dir: Path | None = None) -> str:
    """``"sha256:<hex>"`` over *files* of the model in *path*: their names relative to it and each one's sha256.

    Each file's hash is taken from this process's memory or from
    ``cache_dir/weights.json`` when its size, mtime, ctime, inode and device
    are those recorded there, and computed (and recorded) otherwise.
    """
    cache_file = None if cache_dir is None else cache_dir / CACHE_FILE
    cached = _read_cache(cache_file)
    changed = False
    lines = []
    for file in files:
        stamp = _stamp(file)
        with _memo_lock:
            digest = _memo.get(stamp)
        if digest is None:
            entry = cached.get(stamp[0])
            digest = entry["sha256"] if isinstance(entry, dict) and entry.get("stamp") == list(stamp[1:]) else None
            if not isinstance(digest, str):
                digest = _file_hash(file)
            with _memo_lock:
                _memo[stamp] = digest
        if cached.get(stamp[0]) != {"stamp": list(stamp[1:]), "sha256": digest}:
            cached[stamp[0]] = {"stamp": list(stamp[1:]), "sha256": digest}
            changed = True
        lines.append(f"{file.relative_to(path).as_posix()} {digest}\n")
    if changed and cache_file is not None:
        _write_cache(cache_file, cached)
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


def forget_hashes() -> None:
    """Drop this process's remembered file hashes (the caches on disk stay)."""
    with _memo_lock:
        _memo.clear()


def _read_cache(cache_file: Path | None) -> dict[str, Any]:
    if cache_file is None:
        return {}
    try:
        fd = os.open(cache_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as file:
            data = json.loads(file.read(1 << 20))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(cache_file: Path, data: dict[str, Any]) -> None:
    """Replace the cache atomically; any failure (no such directory, no write access, a full disk) leaves it as it was."""
    directory = cache_file.parent
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # not a journal's models/ directory (yet), or not ours to write
    temp = f".{CACHE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as file:
            take_ownership(fd, FILE_MODE, journal_owner(directory.parent))
            file.write(json.dumps(data, sort_keys=True).encode())
        # A cache needs no fsync: a torn or lost file is read as empty and the hashes computed again.
        os.replace(temp, CACHE_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:  # SIGTERM's SystemExit too: no temporary cache file stays in models/
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        if not isinstance(exc, OSError):
            raise
    finally:
        os.close(dir_fd)
