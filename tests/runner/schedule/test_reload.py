"""serve rereads its configuration on SIGHUP: a real serve, real signals, and its log lines to wait on."""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import replace
from pathlib import Path

from structlog.testing import capture_logs

from runner.schedule.reload import ConfigChange
from runner.schedule.scheduler import Scheduler
from runner.settings.config import load_config
from tests._support import GATED, LineReader, event_named, script, start_serve, wait_for_marker, with_key, write_config

NEWYEAR = """
[routines.newyear]
kind = "note"
schedule = "0 0 1 1 *"
slot = "day"
question = "what happened?"
prompt = "Write a note."
"""
RUNNER = 'catchup_grace = "400d"\nmax_concurrent_runs = {cap}\n'


def _agent(name: str, backend: str | None = None) -> str:
    backend_line = f"backend = {backend}\n" if backend else ""
    return f'\n[agents.{name}]\npersona = "motoko.toml"\nroutines = ["newyear"]\n{backend_line}'


def _gated(tmp_path: Path) -> str:
    argv = script(tmp_path, "gated.py", GATED)
    return f'{{ type = "command", command = {json.dumps(argv)}, timeout = "60s" }}'


def _stop(process: subprocess.Popen[str], reader: LineReader) -> list[dict]:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    return reader.drain()


def test_sighup_adds_and_removes_pairs_and_raises_the_cap_while_a_run_is_in_flight(tmp_path: Path, processes: list) -> None:
    """A valid new configuration takes effect at SIGHUP: the removed agent's waiting run is dropped, the added agent is
    caught up, a larger cap starts it beside the run in flight, and that run finishes."""
    gated = _gated(tmp_path)
    path = write_config(tmp_path, NEWYEAR + _agent("motoko", gated) + _agent("batou"), runner=RUNNER.format(cap=1), wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    in_flight = reader.wait(event_named("run.started", agent="motoko"))
    reader.wait(event_named("scheduler.run_queued", agent="batou"))
    wait_for_marker(tmp_path, "arrived-")

    write_config(tmp_path, NEWYEAR + _agent("motoko", gated) + _agent("kusanagi"), runner=RUNNER.format(cap=2), wall_clock=True)
    process.send_signal(signal.SIGHUP)
    reloaded = reader.wait(event_named("scheduler.reloaded"))
    assert (reloaded["added"], reloaded["removed"], reloaded["rescheduled"]) == (["kusanagi:newyear"], ["batou:newyear"], [])
    assert (reloaded["agents"], reloaded["jobs"], reloaded["max_concurrent_runs"]) == (["kusanagi", "motoko"], 2, 2)
    dropped = reader.wait(event_named("scheduler.run_skipped", agent="batou"))
    assert dropped["reason"] == "its agent or routine left the configuration"
    reader.wait(event_named("scheduler.catchup", agent="kusanagi"))
    added = reader.wait(event_named("run.finished", agent="kusanagi"))  # beside motoko's run, still at its gate
    assert added["outcome"] == "appended"

    (tmp_path / "release").touch()
    finished = reader.wait(event_named("run.finished", agent="motoko"))
    assert (finished["run_id"], finished["outcome"]) == (in_flight["run_id"], "appended")
    events = _stop(process, reader)
    assert not [e for e in events if e["event"] == "run.started" and e["agent"] == "batou"]
    assert len(with_key(tmp_path / "journal", added["client_key"])) == 1
    assert with_key(tmp_path / "journal", added["client_key"].replace("kusanagi", "batou")) == []


def test_an_invalid_configuration_is_refused_and_the_old_one_keeps_serving(tmp_path: Path, processes: list) -> None:
    """SIGHUP with a broken file logs scheduler.reload_failed naming the key; the waiting run then starts under the old
    configuration (not the broken file), and a later valid reload is taken."""
    path = write_config(tmp_path, NEWYEAR + _agent("motoko", _gated(tmp_path)) + _agent("batou"), runner=RUNNER.format(cap=1), wall_clock=True)
    process, reader = start_serve(path, tmp_path)
    processes.append(process)
    reader.wait(event_named("run.started", agent="motoko"))
    reader.wait(event_named("scheduler.run_queued", agent="batou"))
    good = path.read_text()
    path.write_text(good.replace("max_concurrent_runs = 1", "max_concurrent_runs = 0"))
    process.send_signal(signal.SIGHUP)
    failed = reader.wait(event_named("scheduler.reload_failed"))
    assert failed["config"] == str(path)
    assert failed["error"] == f"{path}: runner.max_concurrent_runs: expected an integer from 1 to 1024, got 0"

    (tmp_path / "release").touch()  # motoko's run ends; batou's worker starts while the file on disk is still broken
    assert reader.wait(event_named("run.finished", agent="motoko"))["outcome"] == "appended"
    assert reader.wait(event_named("run.finished", agent="batou"))["outcome"] == "appended"
    assert process.poll() is None

    path.write_text(good + _agent("kusanagi"))
    process.send_signal(signal.SIGHUP)
    assert reader.wait(event_named("scheduler.reloaded"))["added"] == ["kusanagi:newyear"]
    assert reader.wait(event_named("run.finished", agent="kusanagi"))["outcome"] == "appended"
    events = _stop(process, reader)
    assert [e["event"] for e in events if e["event"].startswith("scheduler.reload")] == ["scheduler.reload_failed", "scheduler.reloaded"]


def test_a_reload_that_moves_the_lock_file_is_refused(tmp_path: Path) -> None:
    """A new configuration naming another lock_file is refused (the running scheduler holds its lock), and the old one stays."""
    config = load_config(write_config(tmp_path, NEWYEAR + _agent("motoko"), runner=RUNNER.format(cap=1)))
    moved = replace(config, lock_file=tmp_path / "elsewhere.lock", max_concurrent_runs=3)
    scheduler = Scheduler(config, reload=lambda: moved)
    with capture_logs() as logs:
        assert scheduler.reload() is False
    [failed] = [e for e in logs if e["event"] == "scheduler.reload_failed"]
    assert "runner.lock_file: expected the lock file serve holds" in failed["error"] and "elsewhere.lock" in failed["error"]
    assert scheduler.config is config


def test_a_changed_schedule_is_rescheduled() -> None:
    """A kept pair whose routine's schedule changed is listed as rescheduled; an unchanged one is not."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory)
        old = load_config(write_config(base, NEWYEAR + _agent("motoko") + _agent("batou")))
        new = load_config(write_config(base, NEWYEAR.replace("0 0 1 1 *", "0 6 1 1 *") + _agent("motoko")))
        change = ConfigChange.between(old, new)
    assert change.to_fields() == {"added": [], "removed": ["batou:newyear"], "rescheduled": ["motoko:newyear"]}
