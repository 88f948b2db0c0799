"""What every backend receives and must return.

A backend turns a :class:`ReflectionRequest` (the routine's instructions, the
agent's persona and the journal's prompt context) into the fields of
one entry. The runner, not the backend, sets kind, agent, ts, client_key and
meta, and validates the whole entry before appending it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from journal import PromptContext, json_nesting_depth, json_type_name
from runner.backends.usage import Usage, UsageMeter
from runner.errors import BackendError, BackendReplyError, BackendTimeoutError
from runner.settings.persona import Persona

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_REPLY_DEPTH",
    "REPLY_FIELDS",
    "REPLY_SCHEMA",
    "REQUIRED_REPLY_FIELDS",
    "Backend",
    "CallBudget",
    "ReflectionRequest",
    "check_reply",
    "holds_secret",
    "load_reply_json",
    "one_line",
    "parse_reply_json",
    "parse_reply_text",
]

#: The most bytes a backend's reply may hold (an HTTP body, a program's stdout).
#: An entry file is at most 1 MiB; even escaped twice (JSON text inside a JSON
#: envelope) a reply that could make one stays well below this. At most this
#: many bytes plus one are ever read.
MAX_REPLY_BYTES: Final = 8 * 1024 * 1024
#: The deepest nesting of arrays and objects a reply may have, envelope included
#: (an entry needs about four levels); deeper input is refused before parsing,
#: so no parser or validator ever recurses on it.
MAX_REPLY_DEPTH: Final = 32

#: The fields a backend may return, with what each holds (shown to models too).
REPLY_FIELDS: Final = {
    "voice": "required: the reflection itself, first person prose",
    "theme": "required: a short theme label (under 200 characters)",
    "tags": "optional: a list of short unique strings",
    "mood": "optional: one short word or phrase",
    "signals": "optional: {focus: short label, novelty: number 0..1, continuity_refs: [ids of past entries from the context that this builds on], supersedes: [ids of past entries from the context that this corrects]}",
    "anchors": "optional: a list of {type, ref, label?} external references",
    "quoted_from_outside": "optional: true when the voice quotes text taken from outside (a web page, a message, a document)",
    "quoted": "optional: text taken from outside (a web page, a message, a document) that the voice draws on, given word for word; "
    "kept as an entry of its own, marked untrusted, which later prompts leave out",
    "proposals": "optional: decisions on past entries marked 'possibly outdated by <id>' in the context: [{older: the marked entry's id, "
    "newer: the id in its mark, decision: 'accept' (the newer one does update it) or 'reject' (both stand)}]",
}
#: The most proposal decisions one reply may carry.
MAX_REPLY_DECISIONS: Final = 20
REQUIRED_REPLY_FIELDS: Final = ("voice", "theme")

_LABEL: Final = {"type": "string", "minLength": 1, "maxLength": 200}
#: REPLY_FIELDS as a JSON Schema: what the openai backend asks a server to constrain its reply to
#: (``response_format`` of type ``json_schema``) and what a command helper gets as ``reply_schema``.
#: Looser than the journal's validator (it cannot say "unique" or "a past entry's id"), never stricter.
REPLY_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "voice": {"type": "string", "minLength": 1, "description": REPLY_FIELDS["voice"]},
        "theme": {**_LABEL, "description": REPLY_FIELDS["theme"]},
        "tags": {"type": "array", "items": _LABEL, "description": REPLY_FIELDS["tags"]},
        "mood": {**_LABEL, "description": REPLY_FIELDS["mood"]},
        "signals": {
            "type": "object",
            "properties": {
                "focus": _LABEL,
                "novelty": {"type": "number", "minimum": 0, "maximum": 1},
                "continuity_refs": {"type": "array", "items": {"type": "string"}},
                "supersedes": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
            "description": REPLY_FIELDS["signals"],
        },
        "anchors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"type": _LABEL, "ref": {"type": "string", "minLength": 1}, "label": _LABEL},
                "required": ["type", "ref"],
                "additionalProperties": False,
            },
            "description": REPLY_FIELDS["anchors"],
        },
        "quoted_from_outside": {"type": "boolean", "description": REPLY_FIELDS["quoted_from_outside"]},
        "quoted": {"type": "string", "minLength": 1, "description": REPLY_FIELDS["quoted"]},
        "proposals": {
            "type": "array",
            "maxItems": MAX_REPLY_DECISIONS,
            "items": {
                "type": "object",
                "properties": {
                    "older": {"type": "string", "minLength": 1},
                    "newer": {"type": "string", "minLength": 1},
                    "decision": {"enum": ["accept", "reject"]},
                },
                "required": ["older", "newer", "decision"],
                "additionalProperties": False,
            },
            "description": REPLY_FIELDS["proposals"],
        },
    },
    "required": list(REQUIRED_REPLY_FIELDS),
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ReflectionRequest:
    """Everything a backend may use to write one entry."""

    agent: str
    routine: str
    kind: str
    slot: str
    client_key: str
    scheduled: str
    question: str
    instructions: str
    #: The past entries retrieved for the question: a backend that sends a prompt sends ``context.text``.
    context: PromptContext
    persona: Persona | None
    #: When the run's time is up (``time.monotonic()``); None: only the backend's own timeout applies.
    #: Not sent to command programs: it means nothing outside this process.
    deadline: float | None = None
    #: Set on the one retry after an unusable reply: what was wrong with it, for the model to correct.
    correction: str | None = None
    #: Which attempt of the run this request is (1 for the first).
    attempt: int = 1
    #: The most tokens the reply may use (``max_tokens_per_run``), None: no limit asked for.
    max_tokens: int | None = None
    #: Where each call reports the tokens it used (:mod:`runner.backends.usage`); shared by the run's retries.
    meter: UsageMeter | None = field(default=None, compare=False, repr=False)

    def report_usage(self, usage: Usage | None, backend: str) -> None:
        """Count one call of this request that used *usage* (None: the backend did not say) on the run's meter.

        Raises:
            BackendError: the reply used more completion tokens than ``max_tokens`` (the backend ignored the limit);
                permanent, since the next call would ignore it too.
        """
        if self.meter is not None:
            self.meter.add(usage)
        if usage is not None and self.max_tokens is not None and usage.tokens_out > self.max_tokens:
            raise BackendError(
                backend,
                f"the reply used {usage.tokens_out} completion tokens, more than max_tokens_per_run {self.max_tokens}; "
                "the backend ignored the limit: make it honour max_tokens, or raise max_tokens_per_run",
            )

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready data (what the command backend reads on stdin)."""
        return {
            "agent": self.agent,
            "routine": self.routine,
            "kind": self.kind,
            "slot": self.slot,
            "client_key": self.client_key,
            "scheduled": self.scheduled,
            "question": self.question,
            "instructions": self.instructions,
            "persona": self.persona.to_dict() if self.persona else None,
            "context": self.context.text,
            "reply_fields": dict(REPLY_FIELDS),
            "reply_schema": REPLY_SCHEMA,
            "attempt": self.attempt,
            "correction": self.correction,
            "max_tokens": self.max_tokens,
        }


class Backend(Protocol):
    """Produces the fields of one entry for a request."""

    name: str

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        """Return the entry fields (at least voice and theme).

        Raises:
            BackendError: the backend failed or replied with something unusable.
        """
        ...


@dataclass(frozen=True, slots=True)
class CallBudget:
    """The wall-clock limit of one backend call: the backend's timeout, or what is left of the run's.

    Attributes:
        deadline: the ``time.monotonic()`` instant the call must be over by.
        seconds: the length of the limit, for messages.
        source: which limit binds, for messages ("the backend's timeout" or "what run_timeout left").
    """

    deadline: float
    seconds: float
    source: str

    @classmethod
    def of(cls, timeout: float, request: ReflectionRequest) -> CallBudget:
        """The budget of a call starting now, for a backend *timeout* and the request's run deadline."""
        now = time.monotonic()
        if request.deadline is not None and request.deadline < now + timeout:
            return cls(request.deadline, max(request.deadline - now, 0.0), "what run_timeout left for the backend")
        return cls(now + timeout, timeout, "the backend's timeout")

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(self.deadline - time.monotonic(), 0.0)

    def expired(self, backend: str) -> BackendTimeoutError:
        """The error for a call that ran out of this budget."""
        return BackendTimeoutError(backend, self.seconds, self.source)


def one_line(text: str, limit: int = 200) -> str:
    """*text* as one printable line of at most *limit* characters (for quoting a backend's words in an error).

    Line breaks, tabs and every other character that is not printable become
    one space, so a program's stderr or a server's body cannot forge log lines
    or hide text with terminal escapes.
    """
    head = text[: limit * 4]  # enough to fill the line after squeezing; a huge text is never scanned whole
    flat = " ".join("".join(char if char.isprintable() else " " for char in head).split())
    if len(flat) <= limit and len(head) == len(text):
        return flat
    return flat[: limit - 1] + "\u2026"


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {one_line(text, 40)} is too large for a float")
    return value


def load_reply_json(data: bytes | str, backend: str, what: str = "the reply") -> Any:
    """Parse untrusted JSON from a backend within the reply limits.

    Refuses, as a BackendError naming *backend*: more than MAX_REPLY_BYTES,
    bytes that are not UTF-8, nesting deeper than MAX_REPLY_DEPTH, NaN,
    Infinity and numbers out of float range, and anything that is not JSON.
    """
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > MAX_REPLY_BYTES:
        raise BackendReplyError(backend, f"{what} is larger than the limit of {MAX_REPLY_BYTES} bytes")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BackendReplyError(backend, f"{what} is not UTF-8 text (invalid byte at offset {exc.start})") from None
    else:
        text = data
    depth = json_nesting_depth(text)
    if depth > MAX_REPLY_DEPTH:
        raise BackendReplyError(backend, f"{what} is nested {depth} levels deep; at most {MAX_REPLY_DEPTH} are allowed")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise BackendReplyError(
            backend, f"{what} is not valid JSON ({one_line(str(exc), 120)}); it began {one_line(text.strip(), 80)!r}"
        ) from None


def keep_shown_ids(fields: dict[str, Any], shown: set[str]) -> dict[str, Any]:
    """*fields* with only the ids of entries the reply was *shown* left in ``signals.continuity_refs`` and ``signals.supersedes``.

    A reply may cite, or correct, only entries it was shown; ids it invented
    (or remembered from elsewhere) are dropped, and an emptied list with them.
    """
    signals = fields.get("signals")
    if isinstance(signals, dict):
        for field in ("continuity_refs", "supersedes"):
            if isinstance(signals.get(field), list):
                refs = [ref for ref in signals[field] if ref in shown]
                signals = {k: v for k, v in signals.items() if k != field} | ({field: refs} if refs else {})
        fields["signals"] = signals
    return fields


def check_reply(reply: object, backend: str) -> dict[str, Any]:
    """Check a reply's shape: a JSON object with voice and theme and only known fields.

    The full entry rules are checked later by the journal's validator.

    Raises:
        BackendError: naming the missing or unexpected field.
    """
    if not isinstance(reply, Mapping):
        raise BackendReplyError(backend, f"the reply must be a JSON object with {', '.join(REPLY_FIELDS)}; got {json_type_name(reply)}")
    for key in reply:
        if key not in REPLY_FIELDS:
            raise BackendReplyError(
                backend, f"the reply has an unexpected field {one_line(repr(key), 80)}; allowed: {', '.join(REPLY_FIELDS)}"
            )
    for key in REQUIRED_REPLY_FIELDS:
        value = reply.get(key)
        if not isinstance(value, str) or not value.strip():
            raise BackendReplyError(backend, f"the reply lacks the field {key!r} (a non-empty string)")
    if not isinstance(reply.get("quoted_from_outside", False), bool):
        raise BackendReplyError(backend, "the reply's field 'quoted_from_outside' must be true or false")
    quoted = reply.get("quoted")
    if quoted is not None and (not isinstance(quoted, str) or not quoted.strip()):
        raise BackendReplyError(backend, f"the reply's field 'quoted' must be a non-empty string, got {json_type_name(quoted)}")
    _check_decisions(reply.get("proposals", []), backend)
    return dict(reply)


def _check_decisions(decisions: object, backend: str) -> None:
    """Refuse a reply's ``proposals`` that is not a list of at most MAX_REPLY_DECISIONS {older, newer, decision} objects."""
    expected = f"a list of at most {MAX_REPLY_DECISIONS} objects {{older, newer, decision: 'accept' or 'reject'}}"
    if not isinstance(decisions, list) or len(decisions) > MAX_REPLY_DECISIONS:
        raise BackendReplyError(backend, f"the reply's field 'proposals' must be {expected}, got {json_type_name(decisions)}")
    for position, item in enumerate(decisions):
        if (
            not isinstance(item, Mapping)
            or set(item) != {"older", "newer", "decision"}
            or not all(isinstance(item[name], str) and item[name].strip() for name in ("older", "newer"))
            or item["decision"] not in ("accept", "reject")
        ):
            raise BackendReplyError(
                backend, f"the reply's field 'proposals[{position}]' must be {{older, newer, decision: 'accept' or 'reject'}}"
            )


def holds_secret(value: object, secret: str) -> bool:
    """Whether *secret* is in any string of parsed JSON *value* (object keys included).

    A reply can spell a key with JSON escapes (``\\u0073k-...``), which no check
    of the raw bytes sees; the parsed strings are what an entry or an error would hold.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if secret in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_reply_text(text: str, backend: str, secret: str | None = None) -> dict[str, Any]:
    """Parse a reply's JSON text (a Markdown code fence around it is tolerated) and check it.

    With *secret* (an API key), a reply holding it in any parsed string is refused
    before any of it is checked or quoted, so no entry and no error ever holds it.

    Raises:
        BackendError: not JSON, over the reply limits, not a usable reply, or holding *secret*.
    """
    return check_reply(parse_reply_json(text, backend, secret), backend)


def parse_reply_json(text: str, backend: str, secret: str | None = None) -> Any:
    """:func:`parse_reply_text` short of the check of the reply's shape: the parsed JSON.

    Raises:
        BackendError: not JSON, over the reply limits, or holding *secret*.
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    reply = load_reply_json(body, backend)
    if secret and holds_secret(reply, secret):
        raise BackendError(backend, "the reply contains the API key; it is refused so that no entry or log ever holds the key")
    return reply
