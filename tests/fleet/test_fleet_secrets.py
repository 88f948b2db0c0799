"""The Redis password never reaches what a worker or beat shows its operators' tools: ``celery inspect conf``, ``report``, Flower.

Celery hides a setting whose name says it is secret (``broker_password``) and
the password inside ``broker_url``; any other setting is shown as it is. A
URL with the password in it, under any name Celery does not mask (RedBeat's
``redbeat_redis_url``, say), would be shown in clear text, so the password
is in no URL at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from runner.fleet.app import fleet_app
from runner.fleet.beat import beat_schedule
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests.fleet._fleet import FleetProcess, fleet_body, minutes_back, routine, write_fleet

PASSWORD = "s3cr@t/w#rd?%41:x"  # noqa: S105 - a made-up password for a server that lives for one test
#: Every spelling of the password a URL or a repr could carry.
SPELLINGS = (PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD), repr(PASSWORD)[1:-1])
AGENT = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'


@pytest.fixture
def secret_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    monkeypatch.setenv("GHOSTRUNNER_REDIS_PASSWORD", PASSWORD)
    yield server
    server.stop()


def _config(tmp_path: Path, server: RedisServer) -> Path:
    schedule, _ = minutes_back(1)
    extra = 'password_env = "GHOSTRUNNER_REDIS_PASSWORD"'
    return write_fleet(tmp_path, routine("tick", schedule) + fleet_body(server.url, {"east": ["motoko"]}, AGENT, extra=extra))


def _leaks(shown: object) -> list[str]:
    text = json.dumps(shown, default=repr)
    return [spelling for spelling in SPELLINGS if spelling in text]


def test_a_workers_inspect_conf_and_report_never_show_the_redis_password(tmp_path: Path, secret_redis: RedisServer) -> None:
    """A real worker answers ``inspect conf`` (what Flower's worker page shows) and ``report`` without the password."""
    config = _config(tmp_path, secret_redis)
    worker = FleetProcess(config, "worker", "--shard", "east", "--concurrency", "1")
    try:
        worker.wait_for("scheduler.started", role="worker")
        ready = worker.log.wait(lambda line: str(line.get("event", "")).endswith(" ready."))  # consuming, its remote control too
        name = str(ready["event"]).split()[0]
        control = fleet_app(load_config(config)).control
        # A broadcast sent before the worker's remote control has subscribed is lost (Redis pub/sub keeps none): ping until it answers.
        deadline = time.monotonic() + 60
        while not control.inspect(destination=[name], limit=1, timeout=1).ping() and time.monotonic() < deadline:
            pass
        inspect = control.inspect(destination=[name], limit=1, timeout=60)
        shown = {"conf": inspect.conf(), "conf with defaults": inspect.conf(with_defaults=True), "report": inspect.report()}
    finally:
        assert worker.stop() == 0
    assert all(answer and name in answer for answer in shown.values()), shown  # it answered, so it reached Redis with the password
    assert shown["conf with defaults"][name]["broker_url"].startswith("redis://")
    assert _leaks(shown) == []


def test_no_setting_of_the_fleets_celery_app_holds_the_password_even_uncensored(tmp_path: Path, secret_redis: RedisServer) -> None:
    """The beat's and worker's app keep the password only where Celery masks it; everything else (URLs included) holds none."""
    config = load_config(_config(tmp_path, secret_redis))
    app = fleet_app(config)
    app.conf.beat_schedule = beat_schedule(config)
    app.conf.ghostrunner_config = config
    assert _leaks(app.conf.table(with_defaults=True)) == []
    assert _leaks(app.conf.humanize(with_defaults=True)) == []
    uncensored = app.conf.table(with_defaults=True, censored=False)
    holders = sorted(key for key, value in uncensored.items() if _leaks(value))
    assert holders == ["broker_password", "redbeat_redis_options", "redis_password"]
    assert app.connection_for_write().as_uri() == secret_redis.url.replace("redis://", "redis://:**@")
    assert app.backend.client.ping()  # the result store, RedBeat and the broker each get the password all the same
