"""Each extra, installed alone in a fresh venv, installs what it runs: its commands start and serve.

The project's wheel is built once; each extra goes into a venv of its own
with ``pip install 'ghostjournal[EXTRA]'`` from that wheel, taking its
dependencies from the package index pip is configured with, as a user's
install would. Then the venv's own console scripts start what the extra
serves: the fleet's worker and beat against a real redis-server, the MCP
server answering an MCP client's ``initialize``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._redis import RedisServer
from tests._support import PERSONA, REPO, LineReader, reap

#: Every test here shares the one wheel built for the module: one xdist worker runs them all.
pytestmark = pytest.mark.xdist_group("extras")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built as pip builds it for a user (hatchling from the package index)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(REPO)], check=True, timeout=600)
    (built,) = out.glob("ghostjournal-*.whl")
    return built


def _venv_with(wheel: Path, extra: str, directory: Path) -> Path:
    """A fresh venv in *directory* with ``ghostjournal[extra]`` installed and nothing else; its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True, timeout=300)
    bin_dir = directory / "bin"
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", f"ghostjournal[{extra}] @ {wheel.as_uri()}"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return bin_dir


def _clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a user of that venv alone: its bin first, nothing of this checkout on the import path."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "GHOSTRUNNER_CONFIG")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", **extra}


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


def test_the_fleet_extra_alone_starts_a_worker_and_a_beat(wheel: Path, tmp_path: Path, redis_server: RedisServer) -> None:
    """pip install 'ghostjournal[fleet]' in a fresh venv: fleet worker and fleet beat start, serve, and stop on SIGTERM with 0."""
    bin_dir = _venv_with(wheel, "fleet", tmp_path / "venv")
    (tmp_path / "motoko.toml").write_text(PERSONA.read_text(encoding="utf-8"), encoding="utf-8")
    config = tmp_path / "fleet.toml"
    config.write_text(
        f'[runner]\njournal_root = "./journal/{{agent}}"\n\n[agents.motoko]\npersona = "motoko.toml"\nroutines = ["evening"]\n\n'
        f'[fleet]\nbroker = "{redis_server.url}"\n\n[fleet.shards]\neast = ["motoko"]\n',
        encoding="utf-8",
    )
    env = _clean_env(bin_dir)
    started = {
        role: subprocess.Popen([str(bin_dir / "ghostrunner"), "--config", str(config), "fleet", *command], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        for role, command in (("worker", ["worker", "--shard", "east", "--concurrency", "1"]), ("beat", ["beat"]))
    }
    readers = {role: LineReader(process) for role, process in started.items()}
    try:
        for role, reader in readers.items():
            reader.wait(lambda event, role=role: event.get("event") == "scheduler.started" and event.get("role") == role, timeout=120)
        readers["worker"].wait(lambda event: str(event.get("event", "")).endswith(" ready."), timeout=120)
    finally:
        for process in started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {role: process.wait(120) for role, process in started.items()}
        for process in started.values():
            reap(process)
    assert codes == {"worker": 0, "beat": 0}, {role: reader.raw[-20:] for role, reader in readers.items()}
    assert not [line for reader in readers.values() for line in reader.raw if "Traceback" in line or "ModuleNotFoundError" in line]


def test_the_mcp_extra_alone_starts_a_server_that_answers_initialize(wheel: Path, tmp_path: Path) -> None:
    """pip install 'ghostjournal[mcp]' in a fresh venv: ghostjournal mcp answers an MCP client's initialize over stdio."""
    bin_dir = _venv_with(wheel, "mcp", tmp_path / "venv")
    init = subprocess.run([str(bin_dir / "ghostjournal"), "--root", str(tmp_path / "journal"), "init"], env=_clean_env(bin_dir),
                          capture_output=True, text=True, timeout=120, check=False)
    assert init.returncode == 0, init.stderr
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "extras-test", "version": "1"}}}
    with subprocess.Popen(
        [str(bin_dir / "ghostjournal"), "--root", str(tmp_path / "journal"), "mcp", "--agent", "motoko"], env=_clean_env(bin_dir),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline())
        _, stderr = server.communicate(timeout=120)  # stdin closed: the client went away, and the server ends
    code = server.returncode
    assert reply["id"] == 1 and "serverInfo" in reply["result"], (reply, stderr[-2000:])
    assert code == 0 and "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.parametrize("extra", ["nn", "onnx"])
def test_the_nn_and_onnx_extras_alone_search_by_meaning(wheel: Path, tmp_path: Path, extra: str) -> None:
    """pip install 'ghostjournal[nn]' (or [onnx]) in a fresh venv: ghostjournal --nn appends with a vector and finds the entry by meaning."""
    bin_dir = _venv_with(wheel, extra, tmp_path / "venv")
    root = ["--root", str(tmp_path / "journal")]
    entry = {"kind": "note", "agent": "motoko", "theme": "rain", "voice": "Rain on the tin roof all night."}
    steps = [(["init"], None), (["--nn", "append"], json.dumps(entry)), (["--nn", "search", "a storm over the house", "-k", "1", "--json"], None)]
    results = [
        subprocess.run([str(bin_dir / "ghostjournal"), *root, *args], input=stdin, env=_clean_env(bin_dir), capture_output=True, text=True,
                       timeout=300, check=False)
        for args, stdin in steps
    ]
    assert [result.returncode for result in results] == [0, 0, 0], [result.stderr[-2000:] for result in results]
    hits = json.loads(results[-1].stdout)
    # No word of the question is in the entry: only its vector finds it (a lexical search finds nothing).
    assert [hit["entry"]["voice"] for hit in hits] == [entry["voice"]] and "Traceback" not in results[-1].stderr
