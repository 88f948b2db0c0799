"""The [fleet] table: shards that hold every agent once, a broker URL that is Redis's and holds no secret, bounded timeouts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.fleet.app import RUN_TASK, fleet_app
from runner.settings.config import load_config
from tests._support import SIMPLE_AGENT, ghostrunner, write_config

TWO_AGENTS = SIMPLE_AGENT + """
[agents.batou]
persona = "motoko.toml"
routines = ["evening"]
"""


def fleet(shards: str = 'east = ["motoko"]\nwest = ["batou"]\n', extra: str = "") -> str:
    return TWO_AGENTS + f'\n[fleet]\nbroker = "redis://127.0.0.1:6399/0"\n{extra}\n[fleet.shards]\n{shards}'


def test_a_fleet_table_gives_each_agent_its_shard_and_queue(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, fleet(extra='beat_lock_timeout = "5s"\nkeep_runs = "2d"')))
    assert config.fleet is not None
    assert config.fleet.shard_of("batou") == "west"
    assert config.fleet.queue_of(config.fleet.shard_of("motoko")) == "ghostrunner.east"
    assert (config.fleet.beat_lock_timeout, config.fleet.keep_runs) == (timedelta(seconds=5), timedelta(days=2))


def test_a_configuration_without_a_fleet_table_has_none(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path, TWO_AGENTS)).fleet is None


@pytest.mark.parametrize(
    ("body", "key", "expected"),
    [
        (fleet('east = []\nwest = ["batou", "motoko"]\n'), "fleet.shards.east", "a non-empty list"),
        (fleet('east = ["motoko"]\n'), "fleet.shards", "every configured agent in one shard"),
        (fleet('east = ["motoko", "batou"]\nwest = ["batou"]\n'), "fleet.shards.west[0]", "each agent in one shard"),
        (fleet('east = ["motoko", "togusa"]\nwest = ["batou"]\n'), "fleet.shards.east[1]", "a configured agent"),
        (fleet('"a.b" = ["motoko"]\nwest = ["batou"]\n'), "fleet.shards.a.b", "a shard name"),
        (fleet('"East Side" = ["motoko"]\nwest = ["batou"]\n'), "fleet.shards.East Side", "a shard name"),
        (fleet('"x\\u0000" = ["motoko"]\nwest = ["batou"]\n'), "fleet.shards", "a shard name"),
        (fleet("", "").replace("[fleet.shards]\n", ""), "fleet.shards", "a table of shards"),
        (TWO_AGENTS + '\n[fleet]\n[fleet.shards]\neast = ["motoko", "batou"]\n', "fleet.broker", "a redis:// URL"),
        (fleet().replace("redis://127.0.0.1:6399/0", "amqp://127.0.0.1/"), "fleet.broker", "a redis:// or rediss:// URL"),
        (fleet().replace("redis://127.0.0.1:6399/0", "redis://:hunter2@127.0.0.1:6399/0"), "fleet.broker", "without user:password@"),
        (fleet().replace("redis://127.0.0.1:6399/0", "redis://127.0.0.1:99999/0"), "fleet.broker", "port is a number"),
        (fleet().replace("redis://127.0.0.1:6399/0", "redis://127.0.0.1:6399/queue"), "fleet.broker", "a database number"),
        (fleet().replace("redis://127.0.0.1:6399/0", "redis://h\u00e9st\u2028:6399/0"), "fleet.broker", "an ASCII name"),
        (fleet().replace("redis://127.0.0.1:6399/0", "redis://127.0.0.1%2F:6399/0"), "fleet.broker", "an ASCII name"),
        (fleet(extra='visibility_timeout = "1m"'), "fleet.visibility_timeout", "longer than runner.run_timeout"),
        (fleet(extra='beat_lock_timeout = "1s"'), "fleet.beat_lock_timeout", "from 2s to 1h"),
        (fleet(extra='keep_runs = "10m"'), "fleet.keep_runs", "from 1h to 3650d"),
        (fleet(extra='keep_runs = "21900d"'), "fleet.keep_runs", "from 1h to 3650d"),
        (fleet(extra='shard = "east"'), "fleet.shard", "one of the keys"),
    ],
)
def test_a_bad_fleet_table_names_its_key(tmp_path: Path, body: str, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, body))
    assert caught.value.key.startswith(key), caught.value
    assert expected in caught.value.expected


def test_a_password_in_the_broker_url_is_never_shown(tmp_path: Path) -> None:
    path = write_config(tmp_path, fleet().replace("redis://127.0.0.1:6399/0", "redis://:hunter2@127.0.0.1:6399/0"))
    result = ghostrunner("--config", str(path), "status", "--log", "-")
    assert result.returncode == 78
    assert "hunter2" not in result.stderr and "fleet.broker" in result.stderr


def test_celerys_hard_limit_kills_a_run_before_its_task_is_delivered_again(tmp_path: Path) -> None:
    other = fleet_app(load_config(write_config(tmp_path / "other", fleet())))  # another configuration's app, made first in this process
    config = load_config(write_config(tmp_path, fleet(extra='visibility_timeout = "25s"'), runner='run_timeout = "20s"'))
    limit = fleet_app(config).tasks[RUN_TASK].time_limit
    assert other.tasks[RUN_TASK].time_limit > limit  # its own: run_timeout's default of 300 s
    assert config.fleet is not None
    assert config.run_timeout.total_seconds() < limit < config.fleet.visibility_timeout.total_seconds()
