"""The budgets' ledger of a fleet: in its Redis, where the fleet records its runs, so that every host's runs share one budget.

Under a configuration with a ``[fleet]`` table, a run checks and records its
budgets here instead of in the state directory of its host
(:mod:`runner.run.budgets` says what is checked and counted; this module only
keeps the same ledger elsewhere). The keys, all under :data:`LEDGER_PREFIX`:

* ``runs``: a sorted set of run ids, each scored by its slot's scheduled
  time (seconds since the epoch);
* ``spend``: a hash from run id to what the run used (or, while it is going,
  its estimate) and whose it is, as JSON ``{"a": agent, "r": routine,
  "t": tokens, "c": cost}`` (the two numbers as text, so that no digit is lost);
* ``most``: the most tokens and cost one settled run used (the estimate of a
  run without ``max_tokens_per_run``);
* ``skipped``: a hash from client key to the budget that skipped the slot,
  and ``skipped_at``, their scheduled times.

The check and the reservation are one Lua script, which Redis runs with
nothing else in between: two runs on two hosts that both start with room
left do not both count on it, as with the single host's write lock. What is
older than :data:`KEPT` (by the scheduled time, against this host's clock)
is removed by the checks as they go, a few hundred rows at a time.

The ledger is as durable as the fleet's Redis: with ``appendonly yes`` and
``appendfsync always`` a spend Redis acknowledged survives a power cut of
Redis's host; with Redis's defaults the last second of writes may not.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any, Final

import redis

from runner.errors import FleetUnavailableError
from runner.fleet.record import broker_password, fleet_of, redis_client
from runner.run.budgets import Admission, Budgets, Refusal, day_window, scopes_of
from runner.run.contract import RunIdentity
from runner.settings.config import RunnerConfig

__all__ = ["KEPT", "LEDGER_PREFIX", "FleetBudgets", "fleet_budgets"]

#: The ledger's keys in Redis start with this.
LEDGER_PREFIX: Final = "ghostrunner:ledger:"
#: How long rows are kept past their scheduled time: a window is at most a day, and a slot is run again within it.
KEPT: Final = timedelta(days=8)
_TRIM_BATCH: Final = 200
_KEYS: Final = tuple(LEDGER_PREFIX + name for name in ("runs", "spend", "most", "skipped", "skipped_at"))

# KEYS: runs, spend, most, skipped, skipped_at.
# ARGV: run_id, client_key, agent, routine, at, window start, window end, estimate tokens, estimate cost ("" for both:
# the most a settled run used), trim floor, trim batch, scope count, "1" to record a refused slot as skipped (not for a
# dry run), then per scope: key, field ("", "a" or "r"), value, tokens limit ("" for none), cost limit ("" for none).
# Returns {"skipped", budget} (skipped before), {"refused", budget, limit, used}, or {"admitted", tokens, cost}.
_ADMIT: Final = """
local function trim(zkey, hkey)
  local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', '(' .. ARGV[10], 'LIMIT', 0, tonumber(ARGV[11]))
  for _, member in ipairs(old) do
    redis.call('HDEL', hkey, member)
    redis.call('ZREM', zkey, member)
  end
end
local fmt = function(x) return string.format('%.17g', x) end
local before = redis.call('HGET', KEYS[4], ARGV[2])
if before then return {'skipped', before} end
trim(KEYS[1], KEYS[2])
trim(KEYS[5], KEYS[4])
local est_t, est_c
if ARGV[8] == '' then
  est_t = tonumber(redis.call('HGET', KEYS[3], 't') or '0')
  est_c = tonumber(redis.call('HGET', KEYS[3], 'c') or '0')
else
  est_t, est_c = tonumber(ARGV[8]), tonumber(ARGV[9])
end
local rows = {}
for i, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[6], '(' .. ARGV[7])) do
  local text = redis.call('HGET', KEYS[2], id)
  if text then rows[#rows + 1] = cjson.decode(text) end
end
for s = 0, tonumber(ARGV[12]) - 1 do
  local base = 14 + s * 5
  local field, value = ARGV[base + 1], ARGV[base + 2]
  local t, c = 0, 0
  for _, row in ipairs(rows) do
    if field == '' or row[field] == value then
      t = t + tonumber(row.t)
      c = c + tonumber(row.c)
    end
  end
  local checks = {{'tokens_per_day', ARGV[base + 3], t}, {'cost_per_day', ARGV[base + 4], c}}
  for _, check in ipairs(checks) do
    if check[2] ~= '' and check[3] >= tonumber(check[2]) then
      local budget = ARGV[base] .. '.' .. check[1]
      if ARGV[13] == '1' then
        redis.call('HSET', KEYS[4], ARGV[2], budget)
        redis.call('ZADD', KEYS[5], ARGV[5], ARGV[2])
      end
      return {'refused', budget, check[2], fmt(check[3])}
    end
  end
end
redis.call('ZADD', KEYS[1], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({a = ARGV[3], r = ARGV[4], t = fmt(est_t), c = fmt(est_c)}))
return {'admitted', fmt(est_t), fmt(est_c)}
"""

# KEYS: spend, most. ARGV: run_id, tokens, cost. A row already trimmed away is not put back.
_SETTLE: Final = """
local text = redis.call('HGET', KEYS[1], ARGV[1])
if not text then return 0 end
local row = cjson.decode(text)
row.t, row.c = ARGV[2], ARGV[3]
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(row))
if tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[2], 't') or '0') then redis.call('HSET', KEYS[2], 't', ARGV[2]) end
if tonumber(ARGV[3]) > tonumber(redis.call('HGET', KEYS[2], 'c') or '0') then redis.call('HSET', KEYS[2], 'c', ARGV[3]) end
return 1
"""

# KEYS: runs, spend. ARGV: since. Returns the tokens and cost of the rows scheduled at or after it, as text.
_USED: Final = """
local t, c = 0, 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local text = redis.call('HGET', KEYS[2], id)
  if text then
    local row = cjson.decode(text)
    t = t + tonumber(row.t)
    c = c + tonumber(row.c)
  end
end
return {string.format('%.17g', t), string.format('%.17g', c)}
"""

#: This process's client, remade in a forked child (Celery's pool processes): (pid, url, client).
_client: tuple[int, str, redis.Redis] | None = None


def _connection(config: RunnerConfig) -> redis.Redis:
    global _client  # noqa: PLW0603 - one connection per process, as the runs record keeps one
    url = fleet_of(config).broker
    if _client is None or _client[0] != os.getpid() or _client[1] != url:
        _client = (os.getpid(), url, redis_client(url, broker_password(config), timeout=10.0))
    return _client[2]


class FleetBudgets(Budgets):
    """The budgets of a configuration with a ``[fleet]`` table, checked against the ledger in its Redis (see the module)."""

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self.broker = fleet_of(config).broker

    def _call(self, script: str, keys: tuple[str, ...], args: list[Any]) -> Any:
        """Run *script* in Redis; its reply.

        Raises:
            FleetUnavailableError: Redis cannot be reached, or refused the script.
        """
        try:
            return _connection(self.config).eval(script, len(keys), *keys, *args)
        except redis.RedisError as exc:
            raise FleetUnavailableError(
                f"the budgets' ledger in the fleet's Redis at {self.broker} (fleet.broker) cannot be used: {exc}",
                "check that redis-server runs there; the slot may be run again",
            ) from None

    def admit(self, identity: RunIdentity, scheduled: datetime, *, dry_run: bool = False) -> Admission | Refusal:
        """As :meth:`Budgets.admit`, in one script Redis runs alone.

        Raises:
            FleetUnavailableError: Redis cannot be reached, or refused the script.
        """
        agent = self.config.agent(identity.agent)
        max_tokens = self.settings.max_tokens_for(identity.agent, identity.routine)
        price = self.config.price_of(agent)
        start, end = day_window(self.config, scheduled)
        if max_tokens is not None:
            estimate: tuple[str, str] = (repr(float(max_tokens)), repr(price.of(0, max_tokens) if price is not None else 0.0))
        else:
            estimate = ("", "")
        scopes: list[str] = []
        for scope in scopes_of(self.settings, identity.agent, identity.routine):
            limits = scope.limits
            scopes += [
                scope.key,
                {None: "", "agent": "a", "routine": "r"}[scope.field],
                scope.value,
                "" if limits.tokens_per_day is None else repr(float(limits.tokens_per_day)),
                "" if limits.cost_per_day is None else repr(float(limits.cost_per_day)),
            ]
        floor = time.time() - KEPT.total_seconds()
        reply = self._call(
            _ADMIT,
            _KEYS,
            [
                identity.run_id,
                identity.client_key,
                identity.agent,
                identity.routine,
                repr(scheduled.timestamp()),
                repr(start),
                repr(end),
                *estimate,
                repr(floor),
                _TRIM_BATCH,
                len(scopes) // 5,
                "0" if dry_run else "1",
                *scopes,
            ],
        )
        if reply[0] == "skipped":
            return Refusal(reply[1], 0.0, 0.0, known=False)
        if reply[0] == "refused":
            return Refusal(reply[1], float(reply[2]), float(reply[3]))
        return Admission(self, identity.run_id, max_tokens, price, (float(reply[1]), float(reply[2])))

    def record_use(self, run_id: str, tokens: float, cost: float) -> None:
        """As :meth:`Budgets.record_use`, in Redis.

        Raises:
            FleetUnavailableError: Redis cannot be reached, or refused the script.
        """
        self._call(_SETTLE, (_KEYS[1], _KEYS[2]), [run_id, repr(float(tokens)), repr(float(cost))])

    def used(self, *, since: datetime | None = None) -> tuple[float, float]:
        """As :meth:`Budgets.used`, of the rows Redis keeps."""
        tokens, cost = self._call(_USED, (_KEYS[0], _KEYS[1]), ["-inf" if since is None else repr(since.timestamp())])
        return float(tokens), float(cost)

    def close(self) -> None:
        """Nothing to close: the process keeps its connection for the next run."""


def fleet_budgets(config: RunnerConfig) -> Budgets:
    """The budgets of *config*: the fleet's ledger in Redis (a configuration with a ``[fleet]`` table), else the host's."""
    return FleetBudgets(config) if config.fleet is not None else Budgets(config)
