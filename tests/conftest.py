"""Shared fixtures: a clean environment and logging, a fresh journal root, a journal, entry payloads, reaped processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import structlog

from journal import Journal
from tests._browser import Browser, launched
from tests._support import reap
from tests.attack._faults import Mounts


def pytest_configure(config: pytest.Config) -> None:
    """Put this interpreter's scripts first on PATH.

    The tests run ``ghostjournal`` and ``ghostrunner`` as a user does, by name. Found on an unrelated PATH
    entry (another checkout's install, a version manager's shim), they would test another copy of the code.
    """
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    _share_the_downloaded_model()
    _keep_the_bytecode(config)
    # No example is failed for its time: Hypothesis' default deadline (200 ms) fails a correct example on a loaded
    # machine, and then replays it from its database in every later run. A property that sets its own settings keeps this.
    hypothesis.settings.register_profile("no-deadline", deadline=None)
    hypothesis.settings.load_profile("no-deadline")
    config.addinivalue_line("markers", "waits_on_the_clock: waits minutes of wall-clock time for real schedules; started first")
    config.addinivalue_line("markers", "long: takes half a minute or more on an idle machine; started early, after the clock's")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Three workers a core (``--numprocesses=auto``; ``--maxprocesses`` caps it): most tests wait rather than compute.

    They wait on the processes, servers and browsers they start, on timeouts, and the clock's tests on minute
    boundaries for minutes: with one worker a core, those three held one of two workers for about 8 minutes,
    one after the other, while the other worker did the rest, and a core was idle for much of the suite.
    """
    return 3 * len(os.sched_getaffinity(0))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the tests that wait minutes on the wall clock first, then the long ones, so that they overlap the rest of the suite.

    Last in the order (by their paths), they ran alone at the end, the other workers idle: minutes of the suite's time.
    xdist hands out its groups (a booted systemd, a browser) before any single test, the largest first.
    """

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("waits_on_the_clock") is not None:
            return 0
        return 1 if item.get_closest_marker("long") is not None else 2

    items.sort(key=rank)  # a stable sort: the rest keep their order


def _keep_the_bytecode(config: pytest.Config) -> None:
    """Where the environment turns bytecode off (PYTHONDONTWRITEBYTECODE, as container images often do), keep it in pytest's cache.

    Otherwise every process a test starts compiles the project's modules (and those of any library installed without
    its bytecode) from source again: 0.15 s of the 0.37 s of CPU a ``ghostjournal list`` takes, in each of the suite's
    thousands of commands, and each worker rewrites every test module. The cache directory is outside the sources,
    which is what turning bytecode off usually protects.
    """
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if not sys.dont_write_bytecode or cache is None or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    try:
        prefix = str(cache.mkdir("pycache"))
    except OSError:  # a checkout this user may not write: compiled from source as before
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix  # the processes the tests start, xdist's workers among them
    sys.pycache_prefix, sys.dont_write_bytecode = prefix, False


def _share_the_downloaded_model() -> None:
    """Let a test's process that has a home of its own still find the model ``ghostjournal download-model`` put in the real one.

    Some tests (the docs' blocks, a user's first run) start commands with HOME and XDG_DATA_HOME in a temporary
    directory; the model is looked for in XDG_DATA_DIRS after them, where an operator would share one copy.
    """
    from journal.encoding._modelfetch import installed_model_dir, model_dirs

    found = installed_model_dir()
    if found is None:
        return
    shared = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    base = str(found.parent.parent.parent)  # <base>/ghostjournal/models/all-MiniLM-L6-v2
    if found.parent not in model_dirs()[1:]:
        os.environ["XDG_DATA_DIRS"] = os.pathsep.join([base, shared])


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep a developer's own journal and runner settings out of every test.

    A configuration without journal_root writes into the user's state directory: each test (and
    every process it starts) gets a fresh one of its own (see ``state_journal``).
    """
    monkeypatch.delenv("GHOSTJOURNAL_ROOT", raising=False)
    monkeypatch.delenv("GHOSTRUNNER_CONFIG", raising=False)
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _clean_logging() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults, whatever a CLI it ran configured."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "journal"


@pytest.fixture
def journal(root: Path) -> Iterator[Journal]:
    with Journal(root) as opened:
        yield opened


@pytest.fixture
def make_payload() -> Callable[..., dict[str, Any]]:
    """Build a valid payload; keyword arguments override or add fields."""

    def build(**overrides: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "kind": "note",
            "agent": "motoko",
            "theme": "harbor light",
            "voice": "The harbor lights flickered while the ferry left; I kept thinking about the tide tables.",
            "tags": ["harbor", "light"],
        }
        payload.update(overrides)
        return payload

    return build


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test started; each is reaped when the test ends."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        reap(process)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium per test module (see tests._browser): skipped without it, failed under CI."""
    yield from launched(tmp_path_factory.mktemp("chromium"))


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    """Real tmpfs and bind mounts made on demand (tests/attack/_faults.py); all are unmounted when the test ends."""
    made = Mounts()
    try:
        yield made
    finally:
        made.release()
