"""What a run's backend calls used: tokens in and out, as the backends report them.

Each backend call reports its :class:`Usage` to the run's :class:`UsageMeter`
(``ReflectionRequest.meter``), which adds up every call of the run, retries
included. Where the usage comes from:

* ``openai``: the answer's ``usage`` object (``prompt_tokens`` and
  ``completion_tokens``), read by :func:`usage_of_completion`;
* ``command``: an optional ``usage`` object beside the entry fields in the
  program's reply (``{"usage": {"prompt_tokens": 812, "completion_tokens": 96}}``),
  taken out by :func:`split_usage` before the reply is checked;
* ``simulated``: :func:`estimate_tokens` of what it was given and wrote, a
  deterministic estimate (four characters a token).

A call whose usage is missing or malformed (no ``usage``, a count that is not
a whole non-negative number) leaves the run's tokens **unknown**: the meter
says so (:attr:`UsageMeter.is_known`) rather than count the call as free,
and a budget counts such a run at its ``max_tokens_per_run``
(:mod:`runner.run.budgets`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["CHARS_PER_TOKEN", "Usage", "UsageMeter", "estimate_tokens", "split_usage", "usage_of_completion"]

#: The simulated backend's estimate: four characters of English make about one token.
CHARS_PER_TOKEN: Final = 4
#: A count past this is no real call's (a server's garbage): it is read as unknown.
_MAX_COUNT: Final = 10**12


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens of one backend call: ``tokens_in`` (the prompt) and ``tokens_out`` (the completion)."""

    tokens_in: int
    tokens_out: int


def estimate_tokens(text: str) -> int:
    """The estimated tokens of *text*: one per :data:`CHARS_PER_TOKEN` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        return None
    return value


def _usage(data: object) -> Usage | None:
    if not isinstance(data, dict):
        return None
    tokens_in, tokens_out = _count(data.get("prompt_tokens")), _count(data.get("completion_tokens"))
    if tokens_in is None or tokens_out is None:
        return None
    return Usage(tokens_in, tokens_out)


def usage_of_completion(payload: object) -> Usage | None:
    """The usage a chat-completions answer (parsed JSON) reports, or None when it has none or a malformed one."""
    return _usage(payload.get("usage")) if isinstance(payload, dict) else None


def split_usage(reply: object) -> tuple[object, Usage | None, bool]:
    """A command program's *reply* without its ``usage`` key, the usage it reported, and whether it had the key at all."""
    if not isinstance(reply, dict) or "usage" not in reply:
        return reply, None, False
    rest = {key: value for key, value in reply.items() if key != "usage"}
    return rest, _usage(reply["usage"]), True


class UsageMeter:
    """The tokens one run's backend calls used, added up; unknown once any call reported none (see the module)."""

    __slots__ = ("calls", "tokens_in", "tokens_out", "unknown_calls")

    def __init__(self) -> None:
        self.calls = 0
        self.unknown_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0

    def add(self, usage: Usage | None) -> None:
        """Count one backend call that used *usage* (None: it did not say)."""
        self.calls += 1
        if usage is None:
            self.unknown_calls += 1
            return
        self.tokens_in += usage.tokens_in
        self.tokens_out += usage.tokens_out

    @property
    def is_known(self) -> bool:
        """Whether every call said what it used (and there was at least one)."""
        return self.calls > 0 and self.unknown_calls == 0

    def tokens(self) -> dict[str, Any] | None:
        """The run's tokens as ``run.finished`` carries them: ``{"in": N, "out": M}``, None when unknown or no call was made."""
        if not self.is_known:
            return None
        return {"in": self.tokens_in, "out": self.tokens_out}
