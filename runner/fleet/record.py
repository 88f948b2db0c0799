"""The fleet's runs record: the runner's own log lines, in one Redis stream that every worker and beat writes.

A line is a ``run.finished`` or ``scheduler.missed`` event exactly as it is
logged (the same JSON ``status`` and ``history`` read from a log), plus
``shard`` and ``host``. The stream is trimmed to ``fleet.keep_runs`` on each
write (``XADD ... MINID``): one record is about 600 bytes, so 500 agents x 8
runs a day kept for 14 days is about 34 MB in Redis.

With ``fleet.record_key_env``, each record carries its signature, an
HMAC-SHA256 of its line under that key (``sig``, tagged
:data:`SIGNATURE_TAG`), and a reader skips a record without its valid one
as a malformed line: anyone who can write to Redis can add records to the
stream, but only a holder of the key can add one ``status --fleet`` reads.
Without a key, the record is only as trustworthy as Redis's access rules.

A record that cannot be written (Redis restarting) waits in this process's
memory, at most :data:`PENDING_KEPT`, and goes with the next write; a
worker that dies meanwhile loses it, and ``status --fleet`` then shows that
slot overdue or unknown, never well. A write Redis refuses (out of memory,
a key of another type at the stream's name, an ACL that forbids it) waits
the same way and is logged each time as ``fleet.record_refused``: the
record stays waiting for the cause to go, and the refusal is never silent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Final

import redis
import structlog
from redis.typing import EncodableT, FieldT

from runner.errors import ConfigError
from runner.settings import FleetConfig
from runner.settings.config import RunnerConfig

__all__ = [
    "PENDING_KEPT",
    "RECORDED_EVENTS",
    "RUNS_STREAM",
    "SIGNATURE_TAG",
    "UNSIGNED",
    "RunsRecord",
    "broker_password",
    "fleet_of",
    "redis_client",
]

#: The stream's key in Redis.
RUNS_STREAM: Final = "ghostrunner:runs"
#: The events that go to the record: what status and history judge slots by.
RECORDED_EVENTS: Final = frozenset({"run.finished", "scheduler.missed", "scheduler.started", "scheduler.agent_unusable"})
#: Records held in memory while Redis cannot take them; the oldest go first past this.
PENDING_KEPT: Final = 10_000
_READ_BATCH: Final = 1000
#: What a record's signature starts with: the algorithm, so that another can come without misreading this one.
SIGNATURE_TAG: Final = "hmac-sha256:"
#: What a reader reads instead of a record without its valid signature: no JSON, so status counts it as malformed.
UNSIGNED: Final = "a record without the runs record key's signature (not written by this fleet)"

log = structlog.get_logger()


def _signature(key: bytes, line: str) -> str:
    """The signature of *line* under *key*, over the bytes Redis keeps of it (what cannot be UTF-8 is replaced, as the client sends it)."""
    return SIGNATURE_TAG + hmac.new(key, line.encode("utf-8", "replace"), hashlib.sha256).hexdigest()


def fleet_of(config: RunnerConfig) -> FleetConfig:
    """The configuration's ``[fleet]`` table.

    Raises:
        ConfigError: it has none.
    """
    if config.fleet is None:
        raise ConfigError(config.source, "fleet", "a [fleet] table with broker and shards (ghostrunner fleet needs one)", "none")
    return config.fleet


def broker_password(config: RunnerConfig) -> str | None:
    """The Redis password from the variable ``fleet.password_env`` names, if any.

    Raises:
        ConfigError: that variable is not set.
    """
    fleet = fleet_of(config)
    if fleet.password_env is None:
        return None
    password = os.environ.get(fleet.password_env)
    if not password:
        raise ConfigError(
            config.source, "fleet.password_env", f"the environment variable {fleet.password_env} to hold Redis's password", "it is not set"
        )
    return password


def redis_client(url: str, password: str | None = None, *, timeout: float = 10.0) -> redis.Redis:
    """A client of the fleet's Redis at *url*, whose calls give up after *timeout* seconds.

    Replies are decoded as UTF-8 with U+FFFD for what is not: anyone who can write to Redis can add
    bytes to the runs stream, and a reader must skip such a record as it skips a log's garbled line.
    """
    return redis.Redis.from_url(
        url, password=password, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True, encoding_errors="replace"
    )


class RunsRecord:
    """Appends log events to the runs stream, and reads them back as log lines.

    One instance per process; a forked child (Celery's pool) gets its own
    connection on its first write.
    """

    def __init__(self, url: str, password: str | None, keep: timedelta, *, key: bytes | None = None) -> None:
        self._key = key
        self._url = url
        self._password = password
        self._keep_ms = int(keep.total_seconds() * 1000)
        self._pending: deque[str] = deque(maxlen=PENDING_KEPT)
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None
        self._pid = 0

    def _connection(self) -> redis.Redis:
        if self._client is None or self._pid != os.getpid():
            self._client, self._pid = redis_client(self._url, self._password, timeout=5.0), os.getpid()
        return self._client

    def add(self, event: dict[str, Any]) -> None:
        """Record *event* (a log event's fields), and any earlier record that is still waiting; never raises."""
        line = json.dumps(event, ensure_ascii=False, default=str)
        refused: redis.ResponseError | None = None
        with self._lock:
            self._pending.append(line)
            try:
                client = self._connection()
                floor = int(time.time() * 1000) - self._keep_ms
                while self._pending:
                    client.xadd(RUNS_STREAM, self._fields(self._pending[0]), minid=floor, approximate=True)
                    self._pending.popleft()
            except redis.ResponseError as exc:  # Redis answered, and said no: the line waits, and it is said
                refused = exc
            except redis.RedisError:
                self._client = None  # reconnect on the next write; the line waits in _pending
            waiting = len(self._pending)
        if refused is not None:
            # Not a recorded event, so logging it never comes back here; logged outside the lock all the same.
            log.error(
                "fleet.record_refused", stream=RUNS_STREAM, error=str(refused)[:500], waiting=waiting, record_event=event.get("event")
            )

    def _fields(self, line: str) -> dict[FieldT, EncodableT]:
        """The stream entry of *line*: the line, and its signature when there is a key."""
        return {"line": line} if self._key is None else {"line": line, "sig": _signature(self._key, line)}

    def _read(self, fields: dict[str, str]) -> str:
        """The line of a stream entry, or :data:`UNSIGNED` when there is a key and the entry lacks its valid signature."""
        line = fields.get("line", "")
        if self._key is None:
            return line
        given = fields.get("sig", "").encode("utf-8", "replace")
        return line if hmac.compare_digest(given, _signature(self._key, line).encode("ascii")) else UNSIGNED

    @property
    def waiting(self) -> int:
        """How many records wait for Redis."""
        return len(self._pending)

    def lines(self) -> Iterator[str]:
        """Every kept record, oldest first, as a JSON log line; read in batches, so memory stays flat.

        Raises:
            redis.RedisError: Redis cannot be read.
        """
        client = self._connection()
        start = "-"
        while True:
            batch: list[tuple[str, dict[str, str]]] = client.xrange(RUNS_STREAM, min=start, max="+", count=_READ_BATCH)  # type: ignore[assignment]  # redis-py types the sync client's replies as Awaitable | Any
            for _, fields in batch:
                yield self._read(fields)
            if len(batch) < _READ_BATCH:
                return
            start = "(" + batch[-1][0]
