"""Plain helpers for the tests: config files, a ghostrunner subprocess, log readers, file digests.

Fixtures live in the conftest files; what a test imports lives here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from journal import Entry, Journal
from journal.files._safefs import DIR_MODE, FILE_MODE
from journal.files.store import EntryStore

__all__ = [
    "NIGHTLY",
    "PERSONA",
    "REPO",
    "SIMPLE_AGENT",
    "TEST_ZONE",
    "LineReader",
    "entries",
    "entry_files",
    "event_named",
    "ghostrunner",
    "open_under",
    "place_entries",
    "reap",
    "script",
    "start_serve",
    "state_journal",
    "tree_digest",
    "wait_for_marker",
    "wait_for_path",
    "with_key",
    "write_config",
]

REPO = Path(__file__).resolve().parents[1]
PERSONA = REPO / "examples" / "agents" / "motoko.toml"
#: What computes the default model's vectors here: the test extra brings the onnx extra, so ONNX Runtime.
DEFAULT_IMPLEMENTATION = "onnxruntime"


def _afternoon_zone(now: datetime) -> ZoneInfo:
    """A fixed-offset zone, never UTC's, in which *now* falls in the 14:00 hour (the 13:00 hour when that zone is UTC).

    The runner's tests run real serves on the wall clock: in UTC, a run of the suite
    near midnight saw a slot's rerun fall past the next fire, or "today" change under
    it. In this zone the suite starts between 13:00 and 15:00, an hour or more from
    every fire of the tests' routines (midnight, 21:00, every 4 hours), whenever it
    starts; and a test that takes its dates in UTC instead of the config's zone fails
    at every hour, not once a day.
    """
    offset = 14 - now.astimezone(UTC).hour
    offset = offset or -1
    # Etc/GMT names count the other way: Etc/GMT-9 is nine hours ahead of UTC.
    return ZoneInfo(f"Etc/GMT{-offset:+d}")


#: The zone of a config written with write_config(..., wall_clock=True) and no zone of its own.
TEST_ZONE = _afternoon_zone(datetime.now(UTC))


def write_config(directory: Path, body: str, *, runner: str = "", name: str = "ghostrunner.toml", wall_clock: bool = False) -> Path:
    """Write a config with a [runner] table (journal in ./journal, UTC, catch-up unspread), the persona copied beside it, and *body*.

    *wall_clock*: the config drives a real serve, which schedules on the wall clock: its zone is
    TEST_ZONE rather than UTC (start_serve refuses a config in UTC).
    """
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    zone = TEST_ZONE.key if wall_clock else "UTC"
    defaults = "" if "timezone" in runner else f'timezone = "{zone}"\n'
    # Catch-up runs start at once unless a test spreads them: a spread of minutes would only slow tests down.
    defaults += "" if "catchup_spread" in runner else 'catchup_spread = "0s"\n'
    text = '[runner]\njournal_root = "./journal"\n' + defaults + textwrap.dedent(runner) + "\n" + textwrap.dedent(body)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


SIMPLE_AGENT = """
[agents.motoko]
persona = "motoko.toml"
routines = ["pulse-4h", "evening", "digest"]
"""


def openai_agent(url: str, *, routines: Sequence[str] = ("evening",), model: str = "tiny", timeout: str = "10s", backend: str = "") -> str:
    """A config body whose one agent, motoko, asks the chat-completions server at *url*; *backend* adds lines to its backend table."""
    return (f'\n[agents.motoko]\npersona = "motoko.toml"\nroutines = {json.dumps(list(routines))}\n[agents.motoko.backend]\n'
            f'type = "openai"\nbase_url = "{url}"\nmodel = "{model}"\ntimeout = "{timeout}"\n') + textwrap.dedent(backend)


#: A nightly note routine, for serve tests that need one run per day.
NIGHTLY = """
[routines.nightly]
kind = "note"
schedule = "0 0 * * *"
slot = "day"
question = "what happened?"
prompt = "Write a note."
"""


def state_journal(agent: str = "motoko") -> Path:
    """Where a configuration without journal_root keeps *agent*'s journal in this test (conftest gives each test a state directory)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "ghostjournal" / agent


def script(directory: Path, name: str, code: str) -> list[str]:
    """Write a Python script for the command backend and return its argv."""
    path = directory / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return [sys.executable, str(path)]


def ghostrunner(*args: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ghostrunner console script."""
    return subprocess.run(
        [shutil.which("ghostrunner") or "ghostrunner", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def entries(root: Path, agent: str = "motoko") -> list[Entry]:
    """Every entry of *agent* in the journal at *root*, through the public API."""
    if not (root / "manifest.json").exists():
        return []
    with Journal(root) as journal:
        return journal.list(agent=agent)


def with_key(root: Path, key: str) -> list[Entry]:
    """Entries carrying client_key *key*."""
    return [entry for entry in entries(root, key.split(":")[0]) if entry.client_key == key]


def wait_for_path(path: Path, timeout: float = 30) -> None:
    """Wait until *path* exists (a marker a test script writes), failing after *timeout*."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def wait_for_marker(directory: Path, prefix: str, timeout: float = 30) -> Path:
    """Wait until a file whose name starts with *prefix* appears in *directory*; return it."""
    deadline = time.monotonic() + timeout
    while True:
        found = sorted(p for p in directory.iterdir() if p.name.startswith(prefix))
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {prefix}* file appeared in {directory} within {timeout} s")
        time.sleep(0.02)


class LineReader:
    """Collects a subprocess's stdout lines (JSON log events) on a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.events: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        assert process.stdout is not None
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self.raw.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._queue.put(event)
        self._queue.put(None)

    def wait(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict[str, Any]:
        """Wait for the first new event matching *predicate*."""
        for event in self.events:
            if predicate(event) and not event.get("_seen"):
                event["_seen"] = True
                return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching log event within {timeout} s; got: {''.join(self.raw)[-3000:]}")
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if event is None:
                raise AssertionError(f"the process ended before a matching event; output: {''.join(self.raw)[-3000:]}")
            self.events.append(event)
            if predicate(event):
                event["_seen"] = True
                return event

    def drain(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Wait for the stream to end and return every event."""
        self._thread.join(timeout)
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if event is not None:
                self.events.append(event)
        return self.events


def terminated_while_locked(journal_root: Path, argv: list[str], directory: Path, prefix: str) -> subprocess.CompletedProcess[str]:
    """Run *argv* (a real command) while *journal_root*'s writer lock is held; SIGTERM it once a *prefix* file is in *directory*.

    Held by the test as an appending agent would hold it, the lock makes the command wait with its hidden
    temporary already made, so the signal lands while there is something to leave behind.
    """
    lock = os.open(journal_root / ".write.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        process = subprocess.Popen([shutil.which(argv[0]) or argv[0], *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=directory.parent)
        try:
            wait_for_marker(directory, prefix)
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    finally:
        os.close(lock)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_serve(path: Path, cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], LineReader]:
    """Start a real ``ghostrunner serve`` with config *path*; its log events are read on a thread."""
    # A UTC config puts the tests' midnight routines wherever the wall clock happens to be.
    assert 'timezone = "UTC"' not in path.read_text(encoding="utf-8"), f"{path}: write it with write_config(..., wall_clock=True)"
    process = subprocess.Popen([shutil.which("ghostrunner") or "ghostrunner", "serve", "--config", str(path)], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, LineReader(process)


def catchup_planned_at(reader: LineReader) -> datetime:
    """The moment a real serve planned its catch-up at: its first ``scheduler.catchup`` starts then (see runner.schedule.catchup.spread).

    What serve catches up depends on the day and the hour it starts at; a test derives what it expects from this
    moment, never from a clock it read before serve started: a midnight or a fire in between would change the answer.
    """
    return datetime.fromisoformat(reader.wait(event_named("scheduler.catchup"))["starts"])


def reap(process: subprocess.Popen[str]) -> None:
    """Kill *process* if it still runs, wait for it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def event_named(name: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """A predicate for a log event called *name* with these field values."""
    return lambda event: event.get("event") == name and all(event.get(k) == v for k, v in fields.items())


def tree_digest(path: Path) -> dict[str, str]:
    """Map every file below *path* (relative name) to a hash of its bytes; symlinks by target, FIFOs by their kind."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            full = Path(dirpath) / name
            rel = str(full.relative_to(path))
            if full.is_symlink():
                result[rel] = "link:" + os.readlink(full)
            elif full.is_fifo():
                result[rel] = "fifo"  # reading one would wait for a writer for ever
            else:
                result[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return result


def place_entries(journal: Journal, payloads: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """Entry files written by hand, in the given order, then indexed by ``reindex()``; the entries, filled in.

    For links append refuses, to an id no entry holds or to another agent's
    entry, as an earlier version, a restore or a file copied in could have
    left them: the reads must still never follow them.
    """
    placed = [Entry.from_payload(payload) for payload in payloads]
    for entry in placed:
        path = journal.root / "entries" / EntryStore.rel_path_for(entry)
        for directory in reversed(path.parents[:3]):  # the year, month and day directories, each made as the journal makes them
            if not directory.exists():
                directory.mkdir(DIR_MODE)
        path.write_bytes(entry.to_json_bytes())
        path.chmod(FILE_MODE)
    journal.reindex()
    return placed


def entry_files(root: Path) -> dict[str, str]:
    """Hashes of the canonical entry files only."""
    return {k: v for k, v in tree_digest(root / "entries").items() if not Path(k).name.startswith(".")}


#: A command backend that announces itself, then waits for a release file (or for as many peers as BARRIER says).
GATED = """
import json, os, sys, time
request = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(here, "arrived-%d" % os.getpid()), "w").close()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    arrived = [n for n in os.listdir(here) if n.startswith("arrived-")]
    if os.path.exists(os.path.join(here, "release")) or len(arrived) >= int(os.environ.get("BARRIER", "99")):
        break
    time.sleep(0.02)
print(json.dumps({"voice": "written by " + str(os.getpid()), "theme": "t"}))
"""


def open_under(root: Path) -> list[str]:
    """The files under *root* this process holds open, as /proc/self/fd names them."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target == str(root) or target.startswith(f"{root}{os.sep}"):
                held.append(target)
    return held
