"""docs/fleet.md as written: its configuration loads, its three commands run against a real redis-server, its event table is the code's."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runner.cron.slots import cron_trigger, latest_fire_time
from runner.fleet import FLEET_EVENTS
from runner.settings.config import load_config
from tests._docs import page_text
from tests._redis import RedisServer
from tests._support import PERSONA, LineReader, reap
from tests.fleet._fleet import rewind

SECTION = page_text("docs/fleet.md")


def _block(language: str) -> str:
    return SECTION.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def _readme_config(directory: Path, broker: str) -> Path:
    text = _block("toml").replace('"redis://127.0.0.1:6379/0"', f'"{broker}"').replace("/var/lib/ghostrunner/{agent}", "./journal/{agent}")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PERSONA, directory / "motoko.toml")
    (directory / "fleet.toml").write_text(text, encoding="utf-8")
    return directory / "fleet.toml"


def test_the_readme_configuration_loads_with_its_shards(tmp_path: Path) -> None:
    config = load_config(_readme_config(tmp_path, "redis://127.0.0.1:6379/0"))
    assert config.fleet is not None
    assert {agent: config.fleet.shard_of(agent) for agent in config.agents} == {"motoko": "east", "batou": "west"}


def test_the_readme_commands_run_as_written(tmp_path: Path, redis_server: RedisServer) -> None:
    path = _readme_config(tmp_path, redis_server.url)
    beat_line, worker_line, status_line = [line for line in _block("sh").splitlines() if line.strip()]
    started = [subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for line in (beat_line, worker_line)]
    beat, worker = (LineReader(process) for process in started)
    try:
        active = beat.wait(lambda event: event.get("event") == "fleet.beat_active")
        worker.wait(lambda event: event.get("event") == "scheduler.started" and event.get("role") == "worker")
        beat.wait(lambda event: event.get("event") == "scheduler.started")
        config = load_config(path)
        schedule = config.routines["evening"].schedule
        last = latest_fire_time(cron_trigger(schedule, config.timezone), datetime.now(UTC) - timedelta(hours=1))
        assert last is not None
        rewind(redis_server, "motoko", "evening", schedule, last - timedelta(seconds=1))  # as if the beat was down since
        missed = beat.wait(lambda event: event.get("event") == "scheduler.missed")
    finally:
        for process in started:
            process.terminate()
        codes = [process.wait(60) for process in started]
        for process in started:
            reap(process)
    assert codes == [0, 0], (beat.raw[-20:], worker.raw[-20:])
    assert set(active) - {"_seen"} == {"event", "level", "timestamp", "host", "lock", "lock_timeout"}
    assert (missed["agent"], missed["routine"], missed["reason"]) == ("motoko", "evening", "late")
    status = subprocess.run(["bash", "-c", status_line + " --json"], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert status.returncode == 6, status.stdout + status.stderr  # a due slot recorded missed, nothing failed or overdue
    assert '"state": "missed"' in status.stdout


def test_the_readme_lists_exactly_the_fleets_own_events() -> None:
    table = SECTION.split("## The fleet's log lines\n", 1)[1]
    assert re.findall(r"^\| `(fleet\.[a-z_]+)` \|", table, flags=re.MULTILINE) == list(FLEET_EVENTS)
