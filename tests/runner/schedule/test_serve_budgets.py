"""Budgets under a real ``ghostrunner serve``: its workers check the ledger before the model, as ``run`` does.

The backend is a real chat-completions server on 127.0.0.1 that reports usage; the routine fires every minute.
"""

from __future__ import annotations

import signal

import pytest

from tests._chat_server import ChatServer
from tests._support import event_named, openai_agent, reap, start_serve, write_config

MINUTELY = """
[routines.minutely]
kind = "note"
schedule = "* * * * *"
slot = "minute"
question = "what now?"
prompt = "Write a note."
"""


@pytest.mark.waits_on_the_clock
def test_serve_skips_the_slot_over_budget_without_asking_the_server(tmp_path) -> None:
    """Room for one run a day: serve's first slot appends (600 tokens), its next is skipped for budget, and the server is asked once.

    The first is the catch-up of the minute before serve started, run at once: only the second waits for the clock.
    """
    with ChatServer(usage={"prompt_tokens": 500, "completion_tokens": 100}) as server:
        body = MINUTELY + openai_agent(server.url, routines=("minutely",), timeout="30s", backend="attempts = 1\n")
        runner = 'catchup_grace = "2m"\ncatchup_max = 1\n'
        path = write_config(tmp_path, body + "\n[budgets]\ntokens_per_day = 500\n", runner=runner, wall_clock=True)
        process, reader = start_serve(path, tmp_path)
        try:
            reader.wait(event_named("scheduler.started"))
            first = reader.wait(event_named("run.finished", routine="minutely"), timeout=150)
            second = reader.wait(lambda e: e.get("event") == "run.finished" and e.get("slot") != first["slot"], timeout=150)
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 0
        finally:
            reap(process)
        assert (first["outcome"], first["tokens"]) == ("appended", {"in": 500, "out": 100})
        assert (second["outcome"], second["reason"], second["attempts"]) == ("skipped", "budget", 0)
        assert len(server.requests) == 1
