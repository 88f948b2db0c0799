"""Helpers of the fleet's process tests: a configuration, real beat and worker processes, a pair's last handled fire.

A pair's schedule fires on chosen minutes of each hour (:func:`minutes_back`):
the minutes just gone, so that nothing fires on its own while a test runs.
A test then sets the pair's last handled fire (:func:`rewind`) a few minutes
back, which is the beat's state after it was down over those fires, and the
beat publishes them at its next tick, as it would after any outage.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runner.cron.slots import cron_trigger
from tests._redis import RedisServer
from tests._support import LineReader, entry_files, reap, write_config

__all__ = ["FleetProcess", "entries_by_key", "fleet_body", "minutes_back", "rewind", "routine", "write_fleet"]

BEAT_PREFIX = "ghostrunner:beat:"


def minutes_back(count: int, now: datetime | None = None) -> tuple[str, list[datetime]]:
    """A cron expression firing on the *count* minutes before this one, hourly, and those fires (UTC, oldest first)."""
    now = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    fires = [now - timedelta(minutes=back) for back in range(count, 0, -1)]
    return ",".join(str(fire.minute) for fire in fires) + " * * * *", fires


def routine(name: str, schedule: str) -> str:
    return f"""
[routines.{name}]
kind = "note"
schedule = "{schedule}"
slot = "minute"
question = "what now?"
prompt = "Write a short note."
"""


def fleet_body(broker: str, shards: dict[str, list[str]], agents: str, *, extra: str = "", visibility: str = "25s", lock: str = "4s") -> str:
    table = "".join(f"{shard} = {json.dumps(members)}\n" for shard, members in shards.items())
    return agents + f'\n[fleet]\nbroker = "{broker}"\nvisibility_timeout = "{visibility}"\nbeat_lock_timeout = "{lock}"\n{extra}\n[fleet.shards]\n{table}'


def write_fleet(directory: Path, body: str, *, runner: str = "", slot_retries: int = 0, name: str = "ghostrunner.toml") -> Path:
    """A fleet configuration in UTC: journals in ./journal/AGENT, misfire_grace 10m, run_timeout 20s, no reruns unless asked."""
    settings = f'misfire_grace = "10m"\nrun_timeout = "20s"\nslot_retries = {slot_retries}\n' + runner
    path = write_config(directory, body, runner=settings, name=name)
    text = path.read_text(encoding="utf-8").replace('journal_root = "./journal"', 'journal_root = "./journal/{agent}"')
    path.write_text(text, encoding="utf-8")
    return path


def rewind(server: RedisServer, agent: str | list[str], routine_name: str | list[str], schedule: str, to: datetime) -> None:
    """Make *to* the last fire the beat handled for the pair (or each of the agents' routines listed, at once: one beat pass sees them all).

    The beat's next tick publishes every later fire up to now.
    """
    names = [routine_name] if isinstance(routine_name, str) else routine_name
    moment = to.astimezone(UTC)
    meta = {"last_run_at": {"__type__": "datetime", "year": moment.year, "month": moment.month, "day": moment.day, "hour": moment.hour,
                            "minute": moment.minute, "second": moment.second, "microsecond": moment.microsecond, "timezone": "UTC"}}
    following = cron_trigger(schedule, UTC).get_next_fire_time(moment, moment)
    assert following is not None
    client = server.client()
    keys = [f"{BEAT_PREFIX}{each}:{name}" for each in ([agent] if isinstance(agent, str) else agent) for name in names]
    assert all(client.exists(key) for key in keys), f"the beat has not installed {keys} yet"
    with client.pipeline() as pipe:
        for key in keys:
            pipe.hset(key, "meta", json.dumps(meta))
            pipe.zadd(f"{BEAT_PREFIX}:schedule", {key: following.timestamp()})
        pipe.execute()


class FleetProcess:
    """``ghostrunner fleet beat`` or ``fleet worker`` in its own session, its log lines read on a thread."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [shutil.which("ghostrunner") or "ghostrunner", "--config", str(config), "fleet", *args], cwd=config.parent,
            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.log = LineReader(self.process)

    def wait_for(self, event: str, timeout: float = 60, **fields: Any) -> dict[str, Any]:
        return self.log.wait(lambda line: line.get("event") == event and all(line.get(k) == v for k, v in fields.items()), timeout)

    def kill_all(self) -> None:
        """SIGKILL the process and every process of its session, as a host that loses power would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> int:
        """SIGTERM, then the exit status (SIGKILL after 60 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill_all()
        code = self.process.returncode
        reap(self.process)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a pool child left behind
        return code


def entries_by_key(journal: Path) -> dict[str, int]:
    """How many entry files of the journal at *journal* carry each client key, read from the files themselves."""
    counts: dict[str, int] = {}
    for name in entry_files(journal):
        key = json.loads((journal / "entries" / name).read_text(encoding="utf-8")).get("client_key") or ""
        counts[key] = counts.get(key, 0) + 1
    return counts
