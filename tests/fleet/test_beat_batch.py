"""The beat's batch on a real Redis: Celery's own messages and the beat's notes, written whole by one script, or nothing without the lock.

The fleet's fault tests (test_fleet_faults.py, test_beat_lock.py) drive whole beats and workers;
here the batch itself is held to its rule, each step checked in Redis: before the script nothing
is queued; with another beat's token in the lock nothing is written, neither task nor note; with
its own, every task and note is, and each task is the message Celery itself would have queued,
also those the batch made from the first one of their queue (and their ``task-sent`` events).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from runner.fleet.app import RUN_TASK, fleet_app
from runner.fleet.batch import FireBatch
from runner.settings.config import load_config
from tests._redis import RedisServer
from tests.fleet._fleet import fleet_body, routine, write_fleet

QUEUE = "ghostrunner.east"
LOCK = "ghostrunner:beat::lock"
FIRES = ["2026-09-05T21:00:00+00:00", "2026-09-05T21:01:00+00:00", "2026-09-05T21:02:00+00:00"]


def _captured(app: Any, batch: FireBatch, producer: Any) -> None:
    with batch.capturing(producer):
        for fire in FIRES:
            app.send_task(RUN_TASK, args=["motoko", "tick", fire], queue=QUEUE, task_id=f"motoko:tick@{fire}", producer=producer,
                          retry=False, ignore_result=True)
    batch.note("hset", "ghostrunner:beat:motoko:tick", "meta", json.dumps({"last_run_at": FIRES[-1]}))


def test_a_batch_is_written_whole_and_only_while_the_lock_holds_the_beats_token(tmp_path: Path, redis_server: RedisServer) -> None:
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    app = fleet_app(load_config(write_fleet(tmp_path, routine("tick", "0 * * * *") + fleet_body(redis_server.url, {"east": ["motoko"]}, agents))))
    client = redis_server.client()
    batch = FireBatch(client, app.clock.forward)
    with app.producer_or_acquire() as producer:
        _captured(app, batch, producer)
        assert (batch.fires, client.llen(QUEUE)) == (3, 0)  # held back until the script
        client.set(LOCK, "another beat's token")
        assert batch.send(LOCK, b"this beat's token") is False
        assert (client.llen(QUEUE), client.exists("ghostrunner:beat:motoko:tick")) == (0, 0)  # neither the tasks nor the note

        _captured(app, batch, producer)
        client.set(LOCK, "this beat's token")
        assert batch.send(LOCK, b"this beat's token") is True
        assert len(batch) == 0
    queued = [json.loads(raw) for raw in reversed(client.lrange(QUEUE, 0, -1))]
    assert [message["headers"]["id"] for message in queued] == [f"motoko:tick@{fire}" for fire in FIRES]
    assert [json.loads(base64.b64decode(message["body"]))[0] for message in queued] == [["motoko", "tick", fire] for fire in FIRES]
    assert all(message["headers"]["task"] == RUN_TASK and message["properties"]["delivery_info"]["routing_key"] == QUEUE
               for message in queued)
    assert json.loads(client.hget("ghostrunner:beat:motoko:tick", "meta") or "{}") == {"last_run_at": FIRES[-1]}


def test_a_command_outside_a_publish_is_refused(tmp_path: Path, redis_server: RedisServer) -> None:
    """Only kombu's publish adds a message's commands; the beat's own go through note(), after them."""
    batch = FireBatch(redis_server.client(), lambda: 0)
    with pytest.raises(RuntimeError, match="outside a publish"):
        batch.add("lpush", QUEUE, "a message no publish made")
    assert len(batch) == 0


def _send(app: Any, producer: Any, fire: str, sent: list[str], **options: Any) -> Any:
    """The beat's send of *fire*'s task, counted in *sent*."""

    def send() -> None:
        sent.append(fire)
        app.send_task(RUN_TASK, args=["motoko", "tick", fire], queue=QUEUE, task_id=f"motoko:tick@{fire}", producer=producer, retry=False,
                      ignore_result=True, argsrepr=repr(["motoko", "tick", fire]), kwargsrepr="{}", **options)

    return send


def _plain(raw: str, *, varying: tuple[str, ...]) -> dict[str, Any]:
    """A message or event as Redis holds it, its body decoded, without the *varying* fields of its body and its delivery tag."""
    message = json.loads(raw)
    body = json.loads(base64.b64decode(message.pop("body")))
    message["properties"].pop("delivery_tag")
    if isinstance(body, dict):
        body = {name: value for name, value in body.items() if name not in varying}
    return {**message, "body": body}


def _published(client: Any, write: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """What *write* puts in the queue and the ``task-sent`` events it publishes (as :func:`_plain`), and the delivery tags."""
    client.delete(QUEUE)
    with client.pubsub() as events:
        events.subscribe("/0.celeryev/task.sent")
        assert events.get_message(timeout=10) is not None  # subscribed
        write()
        raw = list(reversed(client.lrange(QUEUE, 0, -1)))
        published = [events.get_message(timeout=10) for _ in raw]
    sent = [message["data"] for message in published if message is not None]
    tags = [json.loads(text)["properties"]["delivery_tag"] for text in [*raw, *sent]]
    return [_plain(text, varying=()) for text in raw], [_plain(text, varying=("clock", "timestamp")) for text in sent], tags


def test_tasks_made_from_the_batchs_first_are_the_messages_and_events_celery_makes(tmp_path: Path, redis_server: RedisServer) -> None:
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    app = fleet_app(load_config(write_fleet(tmp_path, routine("tick", "0 * * * *") + fleet_body(redis_server.url, {"east": ["motoko"]}, agents))))
    client = redis_server.client()
    batch = FireBatch(client, app.clock.forward)
    by_celery: list[str] = []
    by_batch: list[str] = []
    with app.producer_or_acquire() as producer:

        def celery() -> None:
            for fire in FIRES:
                _send(app, producer, fire, by_celery)()

        def made() -> None:
            with batch.capturing(producer):
                for fire in FIRES:
                    batch.task(QUEUE, f"motoko:tick@{fire}", ["motoko", "tick", fire], _send(app, producer, fire, by_batch))
            clock = app.clock.value
            assert batch.send(None, None) is True
            assert app.clock.value == clock  # each event forwarded the clock as it was made, not when written

        expected = _published(client, celery)
        got = _published(client, made)
        assert by_batch == FIRES[:1]  # Celery made the first task only
        again = _published(client, made)  # the pass's next batch: made from the same first task
        assert by_batch == FIRES[:1]
        batch.clear()  # the pass's end: Celery makes the next pass's first task again
        cleared = _published(client, made)
    assert (by_celery, by_batch) == (FIRES, FIRES[:1] * 2)
    assert got[:2] == again[:2] == cleared[:2] == expected[:2]
    assert len(set(got[2])) == len(got[2]) == 2 * len(FIRES)  # each message and event its own delivery tag


def test_a_task_that_carries_its_values_where_the_template_does_not_put_them_is_made_by_celery(tmp_path: Path, redis_server: RedisServer) -> None:
    """Options that put the task's id elsewhere (here a header of its own) leave no template: Celery makes each task, and each is right."""
    agents = '[agents.motoko]\npersona = "motoko.toml"\nroutines = ["tick"]\n'
    app = fleet_app(load_config(write_fleet(tmp_path, routine("tick", "0 * * * *") + fleet_body(redis_server.url, {"east": ["motoko"]}, agents))))
    client = redis_server.client()
    batch = FireBatch(client, app.clock.forward)
    sent: list[str] = []
    with app.producer_or_acquire() as producer, batch.capturing(producer):
        for fire in FIRES:
            batch.task(QUEUE, f"motoko:tick@{fire}", ["motoko", "tick", fire], _send(app, producer, fire, sent, headers={"trace": fire}))
    assert batch.send(None, None) is True
    assert sent == FIRES
    queued = [json.loads(raw) for raw in reversed(client.lrange(QUEUE, 0, -1))]
    assert [(message["headers"]["id"], message["headers"]["trace"]) for message in queued] == [(f"motoko:tick@{fire}", fire) for fire in FIRES]
