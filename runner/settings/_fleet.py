"""The ``[fleet]`` table of the configuration, checked field by field (see :class:`runner.settings.config.FleetConfig`).

Layout::

    [fleet]
    broker = "redis://10.0.0.5:6379/0"   # Celery's broker and result store, RedBeat's schedule and lock, the runs record
    password_env = "GHOSTRUNNER_REDIS_PASSWORD"   # the variable holding Redis's password, if it wants one
    record_key_env = "GHOSTRUNNER_RECORD_KEY"     # the variable holding the key the runs record is signed with, if any
    visibility_timeout = "15m"   # a task its worker never acknowledged (the worker died) is delivered again after this
    beat_lock_timeout = "30s"    # a standby beat takes over at most this long after the active beat died
    keep_runs = "14d"            # how long the runs record keeps the fleet's runs (status --fleet, history --fleet)

    [fleet.shards]               # every agent in exactly one shard; a shard's worker holds its agents' journals
    east = ["motoko", "batou"]
    west = ["togusa"]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final
from urllib.parse import urlsplit

from journal.frame import check_url_address, url_authority
from runner.settings._model import AgentConfig, FleetConfig
from runner.settings._schema import FieldReader

__all__ = ["FLEET_KEYS", "read_fleet"]

FLEET_KEYS: Final = ("broker", "password_env", "record_key_env", "visibility_timeout", "beat_lock_timeout", "keep_runs", "shards")
#: A shard's name becomes its queue's (``ghostrunner.NAME``), a Redis key and a Kubernetes name: nothing else is safe in all three.
_SHARD_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_LEAST_LOCK_TIMEOUT: Final = timedelta(seconds=2)
_MOST_LOCK_TIMEOUT: Final = timedelta(hours=1)
_LEAST_KEEP: Final = timedelta(hours=1)
#: The runs record trims to now - keep_runs on each write, and Redis refuses (ERR) a trim floor before 1970: anything
#: over about 56 years (as of 2026) made every write of the record fail. Ten years stays far inside for decades.
_MOST_KEEP: Final = timedelta(days=3650)
_DEFAULT_VISIBILITY: Final = timedelta(minutes=15)  # FleetConfig's default


def _broker(reader: FieldReader, value: object) -> str:
    url = reader.string(value, "fleet.broker")
    if url.partition("://")[0].lower() not in ("redis", "rediss"):
        raise reader.fail("fleet.broker", "a redis:// or rediss:// URL such as 'redis://127.0.0.1:6379/0'", url)
    if "@" in url_authority(url):
        raise reader.fail(
            "fleet.broker",
            "a URL without user:password@ (put the password in the variable password_env names)",
            "an address with credentials in it (not shown)",
        )
    if "?" in url or "#" in url:
        raise reader.fail("fleet.broker", "a URL without ?query or #fragment", url)
    try:
        check_url_address(url)  # before urlsplit, which raises ValueError on a bracket out of place
    except ValueError as exc:
        raise reader.fail("fleet.broker", str(exc), url) from None
    path = urlsplit(url).path
    if path not in ("", "/") and not re.fullmatch(r"/\d{1,2}", path):
        raise reader.fail("fleet.broker", "a URL whose path is empty or a database number such as /0", url)
    return url


def _shards(reader: FieldReader, value: object, agents: Mapping[str, AgentConfig]) -> dict[str, tuple[str, ...]]:
    table = reader.table(value, "fleet.shards", None)
    if not table:
        raise reader.fail("fleet.shards", 'at least one shard, such as east = ["motoko"]', "none")
    shards: dict[str, tuple[str, ...]] = {}
    holder: dict[str, str] = {}
    for shard, members in table.items():
        key = f"fleet.shards.{shard}"
        if not _SHARD_NAME.fullmatch(shard):
            raise reader.fail(
                key,
                "a shard name of 1-40 lowercase letters, digits or '-', starting with a letter or digit "
                "(it names the shard's queue and its volume)",
                shard,
            )
        if not isinstance(members, list) or not members:
            raise reader.fail(key, "a non-empty list of the agents this shard holds", members)
        for position, agent in enumerate(members):
            if not isinstance(agent, str) or agent not in agents:
                raise reader.fail(f"{key}[{position}]", "a configured agent (" + ", ".join(sorted(agents)) + ")", agent)
            if agent in holder:
                raise reader.fail(f"{key}[{position}]", f"each agent in one shard ({agent!r} is already in {holder[agent]!r})", agent)
            holder[agent] = shard
        shards[shard] = tuple(members)
    homeless = sorted(set(agents) - set(holder))
    if homeless:
        raise reader.fail("fleet.shards", "every configured agent in one shard", "none for " + ", ".join(repr(name) for name in homeless))
    return shards


def read_fleet(reader: FieldReader, value: object, agents: Mapping[str, AgentConfig], run_timeout: timedelta) -> FleetConfig:
    """The checked ``[fleet]`` table *value*, whose shards must hold each of *agents* once.

    Raises:
        ConfigError: the first problem, naming the key.
    """
    data: dict[str, Any] = reader.table(value, "fleet", FLEET_KEYS)
    if "broker" not in data:
        raise reader.fail("fleet.broker", "a redis:// URL (required in [fleet])", "nothing")
    if "shards" not in data:
        raise reader.fail("fleet.shards", "a table of shards, each the list of its agents (required in [fleet])", "nothing")
    fields: dict[str, Any] = {"broker": _broker(reader, data["broker"]), "shards": _shards(reader, data["shards"], agents)}
    for name in ("password_env", "record_key_env"):
        if name in data:
            fields[name] = reader.string(data[name], f"fleet.{name}")
    if "visibility_timeout" in data:
        fields["visibility_timeout"] = reader.duration(data["visibility_timeout"], "fleet.visibility_timeout")
    visibility = fields.get("visibility_timeout", _DEFAULT_VISIBILITY)
    if visibility <= run_timeout:
        # A shorter one hands a task that is still running to a second worker, which then waits on the slot lock.
        raise reader.fail(
            "fleet.visibility_timeout",
            f"a duration longer than runner.run_timeout ({int(run_timeout.total_seconds())} s)",
            data.get("visibility_timeout", "the default 15m"),
        )
    if "beat_lock_timeout" in data:
        lock_timeout = reader.duration(data["beat_lock_timeout"], "fleet.beat_lock_timeout")
        if not _LEAST_LOCK_TIMEOUT <= lock_timeout <= _MOST_LOCK_TIMEOUT:
            raise reader.fail("fleet.beat_lock_timeout", "a duration from 2s to 1h", data["beat_lock_timeout"])
        fields["beat_lock_timeout"] = lock_timeout
    if "keep_runs" in data:
        keep = reader.duration(data["keep_runs"], "fleet.keep_runs")
        if not _LEAST_KEEP <= keep <= _MOST_KEEP:
            raise reader.fail("fleet.keep_runs", "a duration from 1h to 3650d (ten years)", data["keep_runs"])
        fields["keep_runs"] = keep
    return FleetConfig(**fields)
