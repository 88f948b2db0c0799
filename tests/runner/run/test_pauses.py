"""Pause and resume: kept in the state directory, honoured by every run (timer, manual, serve's workers) without a restart."""

from __future__ import annotations

import json
import os
import shutil
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from runner.monitor.logs import configure_logging
from runner.run.contract import RunIdentity
from runner.run.pauses import PauseBook
from runner.run.worker import Worker
from runner.schedule.scheduler import Scheduler
from runner.settings.config import RunnerConfig, load_config
from tests._support import NIGHTLY, TEST_ZONE, entries, event_named, ghostrunner, script, start_serve, with_key, write_config

NOBODY = 65534

#: A command backend that counts its calls in a file beside it.
COUNTING = """
import json, os, sys
sys.stdin.read()
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls"), "a") as calls:
    calls.write("x")
print(json.dumps({"voice": "a night like any other", "theme": "night"}))
"""


def _config(tmp_path: Path, *, agents: tuple[str, ...] = ("motoko",), runner: str = "") -> Path:
    argv = script(tmp_path, "counting.py", COUNTING)
    body = NIGHTLY + "".join(f"""
    [agents.{name}]
    routines = ["nightly", "evening"]
    backend = {{ type = "command", command = {json.dumps(argv)} }}
    """ for name in agents)
    return write_config(tmp_path, body, runner='lock_file = "serve.lock"\n' + runner, wall_clock=True)


def _calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return len(path.read_text()) if path.exists() else 0


def _cli(config: Path, *args: str) -> dict:
    result = ghostrunner(*args, "--config", str(config), cwd=config.parent)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_pause_and_resume_persist_and_report_what_changed(tmp_path: Path) -> None:
    """pause/resume of an agent or one routine are kept in serve.state/pauses.json; repeating one changes nothing."""
    config = _config(tmp_path)
    assert _cli(config, "pause", "motoko", "evening") == {
        "agent": "motoko", "routine": "evening", "action": "pause", "changed": True, "paused_routines": ["evening"]}
    assert _cli(config, "pause", "motoko", "evening")["changed"] is False
    assert _cli(config, "pause", "motoko")["paused_routines"] == ["nightly", "evening"]
    # Resuming one routine out of a pause of the whole agent leaves the others paused.
    assert _cli(config, "resume", "motoko", "nightly")["paused_routines"] == ["evening"]
    document = json.loads((tmp_path / "serve.state" / "pauses.json").read_text())
    assert document["format"] == "ghostrunner-pauses" and [(p["agent"], p["routine"]) for p in document["paused"]] == [("motoko", "evening")]
    assert _cli(config, "resume", "motoko") == {"agent": "motoko", "routine": None, "action": "resume", "changed": True, "paused_routines": []}
    assert _cli(config, "resume", "motoko")["changed"] is False
    assert sorted(p.name for p in (tmp_path / "serve.state").iterdir()) == ["pauses.json", "pauses.json.lock"]  # no temporary file left
    assert oct((tmp_path / "serve.state").stat().st_mode & 0o777) == "0o700"


def test_pause_and_resume_speak_text_to_a_person_and_json_to_a_pipe(tmp_path: Path) -> None:
    """Piped, the change is JSON; with --text (what a terminal gets), one line saying what changed and what is paused now."""
    config = _config(tmp_path)
    assert _cli(config, "pause", "motoko", "evening")["changed"] is True
    again = ghostrunner("pause", "motoko", "evening", "--text", "--config", str(config), cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, "motoko evening: nothing to pause; motoko's paused routines: evening\n")
    resumed = ghostrunner("resume", "motoko", "--text", "--config", str(config), cwd=tmp_path)
    assert (resumed.returncode, resumed.stdout) == (0, "resumed motoko; motoko's paused routines: none\n")
    assert json.loads(ghostrunner("pause", "motoko", "--json", "--config", str(config), cwd=tmp_path).stdout)["action"] == "pause"


def test_an_unknown_agent_or_routine_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    """Pausing or resuming a name the configuration does not define exits 2 with one line, and writes no pause file."""
    config = _config(tmp_path)
    for args, message in (
        (("pause", "batou"), "ghostrunner: error: no agent 'batou' in the configuration; configured: motoko\n"),
        (("resume", "motoko", "lunch"), "ghostrunner: error: no routine 'lunch' for agent 'motoko'; configured: nightly, evening\n"),
    ):
        result = ghostrunner(*args, "--config", str(config), cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", message)
    assert not (tmp_path / "serve.state" / "pauses.json").exists()


def test_a_pause_file_that_is_not_the_runners_fails_runs_and_commands_with_one_line(tmp_path: Path) -> None:
    """A damaged pause file: a run fails naming it (no backend call), and pause exits 1 with one line, leaving the file as it was."""
    config = _config(tmp_path)
    (tmp_path / "serve.state").mkdir()
    (tmp_path / "serve.state" / "pauses.json").write_text("{not json")
    run = ghostrunner("run", "nightly", "--agent", "motoko", "--at", "2026-09-05T01:00", "--config", str(config), cwd=tmp_path)
    printed = json.loads(run.stdout)
    assert (run.returncode, printed["outcome"]) == (1, "failed") and "pauses.json" in printed["error"] and "remove it" in printed["error"]
    assert _calls(tmp_path) == 0
    result = ghostrunner("pause", "motoko", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "the pause file is not JSON" in result.stderr
    assert (tmp_path / "serve.state" / "pauses.json").read_text() == "{not json"


def test_a_paused_run_is_skipped_without_its_backend_and_runs_again_once_resumed(tmp_path: Path) -> None:
    """A manual or timer run of a paused pair is skipped with reason paused, asks nothing and opens no journal; resumed, it appends."""
    config = _config(tmp_path)
    _cli(config, "pause", "motoko")
    args = ("run", "nightly", "--agent", "motoko", "--at", "2026-09-05T01:00", "--config", str(config))
    paused = ghostrunner(*args, cwd=tmp_path)
    printed = json.loads(paused.stdout)
    assert (paused.returncode, printed["outcome"], printed["reason"], printed["error"]) == (0, "skipped", "paused", None)
    [finished] = [json.loads(line) for line in paused.stderr.splitlines()]
    assert (finished["event"], finished["reason"], finished["dry_run"]) == ("run.finished", "paused", False)
    assert _calls(tmp_path) == 0 and not (tmp_path / "journal").exists()
    _cli(config, "resume", "motoko", "nightly")
    resumed = json.loads(ghostrunner(*args, cwd=tmp_path).stdout)
    assert resumed["outcome"] == "appended" and _calls(tmp_path) == 1
    evening = json.loads(ghostrunner("run", "evening", "--agent", "motoko", "--at", "2026-09-05T22:00", "--config", str(config), cwd=tmp_path).stdout)
    assert (evening["outcome"], evening["reason"], _calls(tmp_path)) == ("skipped", "paused", 1)  # still paused


def test_concurrent_pauses_serialise_on_the_change_lock_and_lose_none(tmp_path: Path) -> None:
    """Six pauses released at once by a barrier, then six resumes, round after round: none is lost, none left over."""
    agents = tuple(f"agent{n}" for n in range(6))
    config = load_config(_config(tmp_path, agents=agents))
    book = PauseBook(config)
    barrier = threading.Barrier(len(agents))

    def change(agent: str, action: str) -> None:
        barrier.wait()  # every thread does its read-modify-write of the file at the same moment
        getattr(PauseBook(config), action)(agent)

    for _ in range(5):
        for action, expected in (("pause", set(agents)), ("resume", set())):
            threads = [threading.Thread(target=change, args=(agent, action)) for agent in agents]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert {pause.agent for pause in book.read()} == expected


def test_serve_honours_a_pause_at_start_and_its_scheduler_honours_changes_without_a_restart(
    tmp_path: Path, processes: list, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real serve's catch-up of a paused pair is skipped; one Scheduler's fires follow pause and resume as they happen.

    A paused run starts no worker process: the scheduler logs its skip itself, in the same line a worker would.
    """
    config_path = _config(tmp_path, runner='catchup_grace = "2d"\n')
    _cli(config_path, "pause", "motoko")
    process, reader = start_serve(config_path, tmp_path)
    processes.append(process)
    for routine in ("nightly", "evening"):  # each has a missed slot within the two days
        finished = reader.wait(event_named("run.finished", routine=routine))
        assert (finished["outcome"], finished["reason"]) == ("skipped", "paused")
    process.terminate()
    assert process.wait(60) == 0
    assert _calls(tmp_path) == 0

    # The fires of one scheduler (the function serve's cron jobs call), on its own clock, with real workers.
    config = load_config(config_path)
    clock = [datetime(2026, 9, 5, 1, 0, tzinfo=config.timezone)]
    workers_log = tmp_path / "workers.log"
    started: list[str] = []

    class CountedWorker(Worker):
        def __init__(self, config: RunnerConfig, identity: RunIdentity, scheduled: datetime, stderr: int | None) -> None:
            started.append(identity.slot)
            super().__init__(config, identity, scheduled, stderr)

    monkeypatch.setattr("runner.schedule.scheduler.Worker", CountedWorker)
    with workers_log.open("w") as log_stream:
        configure_logging(stream=log_stream, level="info", json=True)  # as serve's own lines go to the stream its workers write to
        scheduler = Scheduler(config, now=lambda: clock[0], log_stream=log_stream)
        scheduler._queue.open()  # serve opens its run queue once its jobs are set; here the test hands it each run

        def dispatched() -> None:
            assert scheduler.dispatch("motoko", "nightly")
            assert scheduler._queue.wait_idle(120)

        dispatched()
        _cli(config_path, "resume", "motoko")
        dispatched()
        _cli(config_path, "pause", "motoko")
        clock[0] = datetime(2026, 9, 6, 1, 0, tzinfo=config.timezone)
        dispatched()
    finished = [json.loads(line) for line in workers_log.read_text().splitlines() if '"run.finished"' in line]
    assert [(f["slot"], f["outcome"], f.get("reason")) for f in finished] == [
        ("2026-09-05", "skipped", "paused"), ("2026-09-05", "appended", None), ("2026-09-06", "skipped", "paused")]
    assert started == ["2026-09-05"]  # the resumed run's worker only
    assert _calls(tmp_path) == 1
    assert len(with_key(tmp_path / "journal", "motoko:nightly:2026-09-05")) == 1 and len(entries(tmp_path / "journal")) == 1


def test_status_shows_a_paused_pair_as_paused_not_overdue(tmp_path: Path) -> None:
    """A pair whose due slot has no run is overdue (exit 3); paused, it is paused (exit 0); the log decides when the file cannot."""
    config = _config(tmp_path)
    # status judges at noon two days from now, so that the log (written now) reaches back to every due slot.
    noon = datetime.now(TEST_ZONE).replace(hour=12, minute=0, second=0, microsecond=0) + timedelta(days=2)
    log = tmp_path / "runs.log"
    lines = []
    for routine, at in (("nightly", noon - timedelta(hours=1)), ("evening", noon - timedelta(days=2))):
        run = ghostrunner("run", routine, "--agent", "motoko", "--at", at.isoformat(), "--config", str(config), cwd=tmp_path)
        lines.append(run.stderr)
    log.write_text("".join(lines))

    def status() -> tuple[int, dict[str, str]]:
        result = ghostrunner("status", "--config", str(config), "--log", str(log), "--now", noon.isoformat(), "--json", cwd=tmp_path)
        return result.returncode, {pair["routine"]: pair["state"] for pair in json.loads(result.stdout)["pairs"]}

    assert status() == (3, {"nightly": "ok", "evening": "overdue"})
    _cli(config, "pause", "motoko", "evening")
    assert status() == (0, {"nightly": "ok", "evening": "paused"})
    _cli(config, "pause", "motoko")
    assert status() == (0, {"nightly": "paused", "evening": "paused"})
    # A skipped run of the due slot is logged; with the pause file unreadable, that line says the pair is paused.
    skipped = ghostrunner("run", "evening", "--agent", "motoko", "--at", noon.isoformat(), "--config", str(config), cwd=tmp_path)
    assert json.loads(skipped.stdout)["reason"] == "paused"
    log.write_text("".join(lines) + skipped.stderr)
    (tmp_path / "serve.state" / "pauses.json").write_text("[]")
    assert status() == (0, {"nightly": "ok", "evening": "paused"})
    # Resumed (no pause file): the slot skipped while paused was skipped on purpose, and counts as run.
    (tmp_path / "serve.state" / "pauses.json").unlink()
    assert status() == (0, {"nightly": "ok", "evening": "ok"})
    # No state directory at all (the logs were shipped to another host): the log's skipped/paused line decides.
    shutil.rmtree(tmp_path / "serve.state")
    assert status() == (0, {"nightly": "ok", "evening": "paused"})


def test_root_hands_the_state_it_creates_to_the_owner_of_the_services_directory(tmp_path: Path) -> None:
    """Root pausing and running beside a service's lock file leaves the state directory and its files to that service's user."""
    if os.geteuid() != 0:
        pytest.skip("only root can create files for another user")
    service = tmp_path / "var-lib-ghostrunner"
    service.mkdir()
    os.chown(service, NOBODY, NOBODY)
    config = _config(tmp_path, runner="")
    config.write_text(config.read_text().replace('lock_file = "serve.lock"', f'lock_file = "{service}/serve.lock"'))
    _cli(config, "pause", "motoko", "evening")
    run = ghostrunner("run", "nightly", "--agent", "motoko", "--at", "2026-09-05T01:00", "--config", str(config), cwd=tmp_path)
    assert json.loads(run.stdout)["outcome"] == "appended", run.stderr
    state = service / "serve.state"
    made = [state, state / "pauses.json", state / "pauses.json.lock", state / "slots", state / "slots" / "motoko+nightly.lock"]
    assert {path.name: (path.stat().st_uid, path.stat().st_gid) for path in made} == {path.name: (NOBODY, NOBODY) for path in made}
