"""One round trip for many fires: Celery's messages and the beat's notes of them, written by one Redis script while the lock is the beat's.

Celery builds each task's message as it always does (``app.send_task`` with
the beat's producer); while a :class:`FireBatch` is open on that producer,
kombu hands the Redis commands that would deliver the message (``LPUSH`` to
the queue, ``PUBLISH`` of the ``task-sent`` event) to the batch instead of
sending them, through the hook kombu's own publish batches use; the later
tasks to the same queue, in this batch and the next ones until
:meth:`FireBatch.clear` (the beat clears it at the end of each pass), are
made from that first one's commands (:mod:`runner.fleet.template`), without
Celery's cost a task. The beat adds
its notes (an entry's ``last_run_at`` and score, a planned rerun's removal),
and :meth:`FireBatch.send` runs all of them as one script.

A script runs whole or not at all, so a fire is noted exactly when its task
is in Redis: a beat killed at any moment leaves no fire noted without its
task, and none published without its note. The script first compares the
lock with the beat's token and writes nothing when another beat holds it,
so two beats never publish at once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Final

import redis

from runner.fleet.template import TaskTemplate

__all__ = ["FIRES_PER_BATCH", "FireBatch"]

#: The most fires one script publishes: a tick's burst goes in a few round trips, and Redis is held a few milliseconds each.
FIRES_PER_BATCH: Final = 250

# KEYS[1] is the lock (none: no check); ARGV[1] the beat's token; ARGV[2] the commands, a JSON array of arrays of strings:
# one argument, not one per word, since the client spends more on each argument than the script spends decoding them all.
_SCRIPT: Final = """
if #KEYS > 0 and redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
for _, command in ipairs(cjson.decode(ARGV[2])) do
  redis.call(unpack(command))
end
return 1
"""


def _word(value: Any) -> str:
    """A command's word as the script's JSON carries it: a string, numbers written as the Redis client writes them.

    Made when the command is added, so that the tasks a template makes from a batch's first are strings already.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):  # bool is an int; no command of the batch has one
        raise TypeError(f"a Redis command's word of the batch is a string or a number, got {value!r}")
    return repr(value)  # redis-py's encoding too: repr of a float keeps every digit (a Lua number would keep 14)


class FireBatch:
    """The Redis commands of a pass's fires and notes, not yet sent; :meth:`send` writes them in one script, :meth:`clear` drops them."""

    def __init__(self, client: redis.Redis, clock: Callable[[], int]) -> None:
        """*clock*: the Celery application's clock, forwarded for each task's ``task-sent`` event as Celery forwards it."""
        self._script = client.register_script(_SCRIPT)
        self._clock = clock
        self._commands: list[tuple[Any, ...]] = []
        self._collecting = False
        #: The template of each kind of task in this batch (None: Celery makes each of that kind itself).
        self._templates: dict[Hashable, TaskTemplate | None] = {}
        #: Fires (tasks) in the batch.
        self.fires = 0

    def __len__(self) -> int:
        return len(self._commands)

    @contextlib.contextmanager
    def capturing(self, producer: Any) -> Iterator[None]:
        """While open, the tasks *producer* publishes are added to this batch instead of sent (kombu's batch hook)."""
        local = producer._batch_local  # kombu's per-thread publish batch, which Producer._publish hands each message to
        if getattr(local, "current", None) is not None:
            raise RuntimeError("the producer already has a publish batch open")
        local.current = self
        try:
            yield
        finally:
            del local.current

    def task(self, kind: Hashable, task_id: str, args: list[str], send: Callable[[], None]) -> None:
        """Add the task of *task_id* and *args*: made by *send* (Celery's ``send_task`` on a producer this batch captures) for the
        first of its *kind* (its queue and options) since the batch was cleared, and from that first one's commands for the others."""
        if kind in self._templates:
            template = self._templates[kind]
            if template is not None:
                self._commands += template.commands_of(task_id, args, self._clock)
                self.fires += 1
                return
        first = len(self._commands)
        send()
        if kind not in self._templates:
            self._templates[kind] = TaskTemplate.of(self._commands[first:], task_id, args)

    # kombu's Producer._publish calls this with the prepared message, in place of channel.basic_publish.
    def publish(self, channel: Any, message: Any, **kwargs: Any) -> Any:
        self._collecting = True
        try:
            # kombu's Redis channel adds each command that would deliver the message through add() (its _publish_batch hook).
            return channel.basic_publish(message, _publish_batch=self, **kwargs)
        finally:
            self._collecting = False

    def add(self, name: str, *args: Any) -> None:
        """A command of the message being published (called by kombu's Redis channel)."""
        if not self._collecting:
            raise RuntimeError(f"a Redis command {name!r} added outside a publish")
        if name == "lpush":
            self.fires += 1
        self._commands.append((name, *map(_word, args)))

    def note(self, *command: Any) -> None:
        """A command of the beat's own (a note), run after every command added before it."""
        self._commands.append(tuple(map(_word, command)))

    def send(self, lock_key: str | None, token: bytes | None) -> bool:
        """Run every command in one script, only while *lock_key* holds *token* (no check without a key); False: nothing was written.

        The batch is empty afterwards, whatever the outcome: a batch the script refused, or that a
        Redis error left uncertain, was written whole or not at all, and the beat reads its entries
        from Redis again before it publishes anything more.
        """
        commands, self._commands, self.fires = self._commands, [], 0
        if not commands:
            return True
        text = json.dumps(commands, ensure_ascii=False)  # each word a string already (add, note, templates); UTF-8 as it is
        keys = [lock_key] if lock_key is not None and token is not None else []
        return bool(self._script(keys=keys, args=[token or b"", text]))

    def clear(self) -> None:
        """Drop the commands not sent, and the templates: Celery makes the next task of each kind itself (it reads its routing anew)."""
        self._commands, self.fires = [], 0
        self._templates.clear()
