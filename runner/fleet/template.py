"""A run task's Redis commands made again for another fire: Celery's own message and ``task-sent`` event, with that fire's id and arguments.

Celery and kombu spend most of a fire's time in the beat building the same
two messages over and over (routing, options, signals, serialisation): the
task for the shard's queue (``LPUSH``) and its ``task-sent`` event for
Celery's monitors (``PUBLISH``). Of the tasks a batch publishes to one queue,
the first is made by Celery itself; a :class:`TaskTemplate` keeps its commands
and makes the next ones by putting another fire's values where that task's
were:

* the message's headers ``id``, ``root_id`` and ``argsrepr``, its properties
  ``correlation_id``, ``argsrepr`` and a new ``delivery_tag``, and its body's
  arguments;
* the event's ``uuid``, ``root_id``, ``args``, ``clock`` (the application's
  clock, forwarded as Celery forwards it) and ``timestamp``, and its
  envelope's new ``delivery_tag``.

:meth:`TaskTemplate.of` accepts a task only when that rule, applied to the
task's own values, gives back the very texts Celery made, and applied to
another fire's values leaves no trace of the first: a Celery that puts a
fire's values anywhere else (another version, other options) yields no
template, and each of its tasks is made by Celery itself.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["TaskTemplate"]

#: Another fire's values, to check that a template keeps none of its own task's.
_PROBE_ID: Final = "probe:probe@0001-01-01T00:00:00+00:00"
#: The commands that carry a task's payload: the message (to its queue) and the event (to each topic it goes to).
_PAYLOADS: Final = frozenset({"lpush", "publish"})
# Stand-ins for a task's own values in the texts of a template, each replaced by the value's JSON text when a task is made.
_ID, _REPR, _ARGS, _BODY, _TAG, _CLOCK, _STAMP = (f"\x00{name}\x00" for name in ("id", "repr", "args", "body", "tag", "clock", "stamp"))
#: A stand-in's JSON text, and the name of the value that replaces it.
_HOLES: Final = {json.dumps(hole): hole.strip("\x00") for hole in (_ID, _REPR, _ARGS, _BODY, _TAG, _CLOCK, _STAMP)}
_CUTS: Final = re.compile("(" + "|".join(re.escape(text) for text in _HOLES) + ")")


def _text(value: Any) -> tuple[str, ...]:
    """*value*'s JSON text cut at each stand-in: its parts, with the name of the stand-in's value at each odd place."""
    parts = _CUTS.split(json.dumps(value))
    return tuple(_HOLES[part] if position % 2 else part for position, part in enumerate(parts))


def _filled(text: tuple[str, ...], values: dict[str, str]) -> str:
    """*text* (as :func:`_text` cuts it) with the JSON text *values* gives each stand-in's name in its place."""
    parts = list(text)
    for position in range(1, len(parts), 2):
        parts[position] = values[parts[position]]
    return "".join(parts)


#: A string's JSON text as json.dumps writes it (ASCII).
_string: Final[Callable[[str], str]] = json.encoder.encode_basestring_ascii


def _uuid4() -> str:
    """A random UUID's text, as str(uuid.uuid4()) gives it (kombu's delivery tag), without making a UUID object."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _decoded_body(envelope: dict[str, Any]) -> Any:
    if envelope.get("content-type") != "application/json" or envelope["properties"].get("body_encoding") != "base64":
        raise ValueError("not a JSON body in base64")
    return json.loads(base64.b64decode(envelope["body"]))


def _encoded(text: str) -> str:
    """A JSON text as kombu carries a body: base64, itself as a JSON string."""
    return '"' + base64.b64encode(text.encode("utf-8")).decode("ascii") + '"'


@dataclass(frozen=True, slots=True)
class _Values:
    """What differs between two tasks of one template: the fire's id and arguments, and what each send makes new."""

    task_id: str
    args: list[str]
    tag: str
    event_tag: str
    clock: int
    timestamp: float


def _plain(command: tuple[Any, ...]) -> str:
    """A payload command's text with its body decoded, so that every value it carries can be looked for."""
    if command[0] not in _PAYLOADS:
        return repr(command)
    envelope = json.loads(command[2])
    return json.dumps([command[1], envelope, _decoded_body(envelope)])


@dataclass(frozen=True, slots=True)
class TaskTemplate:
    """The commands of one task as Celery made them, decoded, to be made again for other fires (see the module)."""

    #: The commands in Celery's order: a payload's as (its name, its key), any other as made (such as a queue's expiry).
    commands: tuple[tuple[Any, ...], ...]
    #: The texts of the message, its body, the event and its body, cut at the stand-ins of the task's values (no event: empty).
    message: tuple[str, ...]
    body: tuple[str, ...]
    event: tuple[str, ...]
    event_body: tuple[str, ...]

    @classmethod
    def of(cls, commands: Sequence[tuple[Any, ...]], task_id: str, args: list[str]) -> TaskTemplate | None:
        """The template of the task of *task_id* and *args* whose commands are *commands*, or None when the rule does not fit them."""
        try:
            return cls._of(commands, task_id, args)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError):  # JSONDecodeError and binascii.Error are ValueErrors
            return None

    @classmethod
    def _of(cls, commands: Sequence[tuple[Any, ...]], task_id: str, args: list[str]) -> TaskTemplate | None:
        messages = [command[2] for command in commands if command[0] == "lpush"]
        events = {command[2] for command in commands if command[0] == "publish"}
        if len(messages) != 1 or len(events) > 1:
            return None
        message = json.loads(messages[0])
        body = _decoded_body(message)
        headers, properties = message["headers"], message["properties"]
        if not (headers["id"] == headers["root_id"] == properties["correlation_id"] == task_id):
            return None
        if not (headers["argsrepr"] == properties["argsrepr"] == repr(args) and body[0] == args):
            return None
        event = event_body = None
        if events:
            event = json.loads(next(iter(events)))
            event_body = _decoded_body(event)
            if not (event_body["uuid"] == event_body["root_id"] == task_id and event_body["args"] == repr(args)):
                return None
            if not (isinstance(event_body["clock"], int) and isinstance(event_body["timestamp"], float)):
                return None
        own = _Values(
            task_id,
            args,
            properties["delivery_tag"],
            event["properties"]["delivery_tag"] if event is not None else "",
            event_body["clock"] if event_body is not None else 0,
            event_body["timestamp"] if event_body is not None else 0.0,
        )
        shapes = tuple((command[0], command[1]) if command[0] in _PAYLOADS else tuple(command) for command in commands)
        message["body"] = _BODY
        message["headers"].update(id=_ID, root_id=_ID, argsrepr=_REPR)
        message["properties"].update(correlation_id=_ID, argsrepr=_REPR, delivery_tag=_TAG)
        if event is not None and event_body is not None:
            event["body"] = _BODY
            event["properties"]["delivery_tag"] = _TAG
            event_body.update(uuid=_ID, root_id=_ID, args=_REPR, clock=_CLOCK, timestamp=_STAMP)
        template = cls(
            shapes,
            _text(message),
            _text([_ARGS, *body[1:]]),
            () if event is None else _text(event),
            () if event_body is None else _text(event_body),
        )
        if template._made(own) != [tuple(command) for command in commands]:
            return None  # the rule misses a difference: Celery's texts are not made again exactly
        other = "\n".join(_plain(command) for command in template._made(_Values(_PROBE_ID, [*args[:-1], _PROBE_ID], "", "", 0, 0.0)))
        if task_id in other or args[-1] in other:
            return None  # the task's own values are somewhere the rule does not put another fire's
        return template

    def commands_of(self, task_id: str, args: list[str], clock: Callable[[], int]) -> list[tuple[Any, ...]]:
        """The commands of the task of *task_id* and *args*, with new delivery tags, *clock*'s next value and this moment."""
        return self._made(_Values(task_id, args, _uuid4(), _uuid4(), clock() if self.event is not None else 0, time.time()))

    def _made(self, values: _Values) -> list[tuple[Any, ...]]:
        # The values' JSON texts as json.dumps writes them (ASCII, ", " between items), without its encoder's cost a value.
        task_id, argsrepr = _string(values.task_id), _string(repr(values.args))
        body = _filled(self.body, {"args": "[" + ", ".join(map(_string, values.args)) + "]"})
        payloads = {"lpush": _filled(self.message, {"id": task_id, "repr": argsrepr, "body": _encoded(body), "tag": _string(values.tag)})}
        if self.event:
            event_body = _filled(
                self.event_body,
                {"id": task_id, "repr": argsrepr, "clock": int.__repr__(values.clock), "stamp": float.__repr__(values.timestamp)},
            )
            payloads["publish"] = _filled(self.event, {"body": _encoded(event_body), "tag": _string(values.event_tag)})
        return [(*shape, payloads[shape[0]]) if shape[0] in _PAYLOADS else shape for shape in self.commands]
