"""An agent's memory: the ``memory`` keys, hybrid runs that recall by meaning, vectors kept at append, and the missing extra."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import sqlite3
import threading
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog

from journal import Entry, Journal
from runner.errors import ConfigError
from runner.run._memory import EmbeddingProgress, MemoryUnavailableError
from runner.run.simulate import simulate_agent
from runner.settings.config import load_config
from tests._support import REPO, SIMPLE_AGENT, ghostrunner, script, write_config
from tests.runner._events import ALWAYS, documented_events
from tests.runner._no_nn import without_nn

RECALL = """
[routines.recall]
kind = "note"
schedule = "0 12 * * *"
slot = "day"
question = "how is my new canine companion settling in?"
prompt = "Write a short note."
window = "30d"
context_k = 3
"""


def _agent(memory: str, argv: list[str]) -> str:
    return f"""
    [agents.motoko]
    routines = ["recall"]
    memory = "{memory}"
    backend = {{ type = "command", command = {json.dumps(argv)} }}
    """


def _vectors_and_entries(root: Path) -> tuple[int, int]:
    with sqlite3.connect(root / "index" / "journal.sqlite3") as conn:
        return conn.execute("SELECT count(*) FROM vectors").fetchone()[0], conn.execute("SELECT count(*) FROM entries").fetchone()[0]


def _events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


# -- configuration ------------------------------------------------------------------


def test_memory_defaults_to_lexical_and_agents_inherit_the_runner_default(tmp_path: Path) -> None:
    """Without a key every agent is lexical; runner.memory sets every agent's default; an agent's own key wins."""
    two = SIMPLE_AGENT + '\n[agents.batou]\npersona = "motoko.toml"\nmemory = "lexical"\n'
    assert load_config(write_config(tmp_path / "none", SIMPLE_AGENT)).agent("motoko").memory == "lexical"
    inherited = load_config(write_config(tmp_path / "runner", two, runner='memory = "hybrid"\n'))
    assert (inherited.agent("motoko").memory, inherited.agent("batou").memory) == ("hybrid", "lexical")
    own = load_config(write_config(tmp_path / "agent", SIMPLE_AGENT + 'memory = "hybrid"\n'))
    assert own.agent("motoko").memory == "hybrid"
    assert not own.agent("motoko").memory_fallback  # a file's hybrid never falls back


@pytest.mark.parametrize(
    ("runner", "body", "key", "got"),
    [
        ('memory = "semantic"\n', SIMPLE_AGENT, "runner.memory", "'semantic'"),
        ("", SIMPLE_AGENT + 'memory = "Hybrid"\n', "agents.motoko.memory", "'Hybrid'"),
        ("", SIMPLE_AGENT + "memory = true\n", "agents.motoko.memory", "True"),
        ("memory = []\n", SIMPLE_AGENT, "runner.memory", "[]"),
    ],
)
def test_a_bad_memory_names_the_key_and_the_accepted_values(tmp_path: Path, runner: str, body: str, key: str, got: str) -> None:
    path = write_config(tmp_path, body, runner=runner)
    expected = f"{path}: {key}: expected one of 'lexical', 'hybrid', got {got}"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(path)


def test_the_embedded_defaults_are_hybrid_with_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GHOSTRUNNER_CONFIG", raising=False)
    motoko = load_config().agent("motoko")
    assert (motoko.memory, motoko.memory_fallback) == ("hybrid", True)


def test_the_example_keeps_motoko_lexical_and_shows_the_line_that_turns_hybrid_on(tmp_path: Path) -> None:
    """The example runs on a base install (lexical), and uncommenting its motoko's memory line makes motoko hybrid."""
    example = REPO / "examples" / "ghostrunner.toml"
    assert load_config(example).agent("motoko").memory == "lexical"
    text = example.read_text()
    [line] = [line for line in text.splitlines() if line.startswith('# memory = "hybrid"')]
    shutil.copytree(REPO / "examples" / "agents", tmp_path / "agents")
    (tmp_path / "ghostrunner.toml").write_text(text.replace(line, line.removeprefix("# ")))
    assert load_config(tmp_path / "ghostrunner.toml").agent("motoko").memory == "hybrid"


# -- hybrid runs --------------------------------------------------------------------


def _recording_backend(tmp_path: Path) -> list[str]:
    """A command backend that keeps each request's context in seen.jsonl and writes a plain note."""
    return script(tmp_path, "record.py", f"""
        import json, sys
        request = json.load(sys.stdin)
        with open({str(tmp_path / "seen.jsonl")!r}, "a") as seen:
            seen.write(json.dumps(request["context"]) + "\\n")
        print(json.dumps({{"theme": "the day", "voice": "A quiet day at the desk."}}))
    """)


@pytest.mark.parametrize(("memory", "recalled"), [("hybrid", True), ("lexical", False)])
def test_a_hybrid_run_recalls_an_entry_by_meaning_alone(tmp_path: Path, memory: str, recalled: bool) -> None:
    """The context of a real ``ghostrunner run`` finds a note that shares no word with the question only with hybrid memory.

    The note is the oldest of the window, so the most recent entries that fill
    a lexical context never include it.
    """
    path = write_config(tmp_path, RECALL + _agent(memory, _recording_backend(tmp_path)))
    day = datetime(2026, 9, 1, 9, tzinfo=UTC)
    with Journal(tmp_path / "journal") as journal:
        puppy = journal.append({"kind": "note", "agent": "motoko", "theme": "adoption", "ts": day.isoformat(),
                                "voice": "We brought a little puppy home from the shelter today; she sleeps by the door."})
        fillers = ["The harbour was grey and the ferries ran late.", "Rewrote the parser tests before lunch.",
                   "Long call about the quarterly budget.", "Rain all afternoon; read on the balcony.",
                   "Fixed the flaky build on the old laptop.", "Bought bread and oranges at the market."]
        for n, voice in enumerate(fillers, start=1):
            journal.append({"kind": "note", "agent": "motoko", "theme": f"day {n}", "voice": voice, "ts": (day + timedelta(days=n)).isoformat()})
    # A threshold of 0 s reports every model load and embedding batch, as a slow machine would see them.
    completed = ghostrunner("run", "recall", "--agent", "motoko", "--at", "2026-09-10T12:00:00+00:00", "--config", str(path),
                            env={"GHOSTJOURNAL_PROGRESS_AFTER": "0"})
    assert completed.returncode == 0, completed.stderr
    [context] = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert (puppy.id in context) is recalled
    events = _events(completed.stderr)
    started = [event for event in events if event["event"] == "run.started"]
    assert [event["memory"] for event in started] == [memory]
    vectors, stored = _vectors_and_entries(tmp_path / "journal")
    assert stored == 8
    # Hybrid: the 7 entries appended without NN were embedded by the run's ranking, the run's own entry at its append.
    assert vectors == (stored if memory == "hybrid" else 0)
    progress = [(event["event"], event.get("done"), event.get("total")) for event in events if event["event"].startswith("memory.")]
    expected = [("memory.model_loading", None, None), ("memory.model_loaded", None, None), ("memory.embedding", 0, 7), ("memory.embedding", 7, 7)]
    assert progress == (expected if memory == "hybrid" else [])
    if memory == "hybrid":
        assert all(event["seconds"] >= 0 for event in events if event["event"] in {"memory.model_loaded", "memory.embedding"})


def test_a_hybrid_simulation_embeds_every_entry_at_append(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, SIMPLE_AGENT + 'memory = "hybrid"\n'))
    summary = simulate_agent(config, "motoko", datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 9, 15, tzinfo=UTC))
    assert summary.outcomes.get("appended", 0) > 50 and not summary.failures
    vectors, stored = _vectors_and_entries(tmp_path / "journal")
    assert vectors == stored == summary.outcomes["appended"]


def _written(root: Path) -> dict[str, tuple[Any, ...]]:
    """Each entry of a simulated journal by client_key: its fields (links as client_keys) and its vector's bytes."""
    with sqlite3.connect(root / "index" / "journal.sqlite3") as conn:
        blobs = dict(conn.execute("SELECT e.id, v.vector FROM entries e JOIN vectors v ON v.entry = e.rowid").fetchall())
    with Journal(root) as journal:
        found = journal.list(agent="motoko")
    keys = {entry.id: entry.client_key for entry in found}

    def signals(entry: Entry) -> str:  # the ids differ from journal to journal: links are compared by client_key
        return json.dumps({**(entry.signals or {}), "continuity_refs": [keys[ref] for ref in entry.continuity_refs]}, sort_keys=True)

    return {entry.client_key or "": (entry.kind, entry.ts, entry.theme, entry.tags, entry.voice, signals(entry), blobs[entry.id]) for entry in found}


def test_a_hybrid_simulation_embedding_behind_writes_what_embedding_at_each_append_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same days simulated with each entry embedded on a second thread, and in its own append: the same entries, contexts and vector bits."""
    original_context = Journal.context
    contexts: dict[str, list[list[str]]] = {"behind": [], "in append": []}
    current: list[list[list[str]]] = []

    def recording_context(journal: Journal, *args: Any, **kwargs: Any) -> Any:
        context = original_context(journal, *args, **kwargs)
        current[0].append([f"{record.theme}|{record.voice}" for record in context.records])
        return context

    monkeypatch.setattr(Journal, "context", recording_context)
    written = {}
    for way in ("behind", "in append"):
        current[:] = [contexts[way]]
        # The same ids in both journals: a digest breaks ties between entries by id.
        numbers = itertools.count(1)
        monkeypatch.setattr(uuid, "uuid4", lambda numbers=numbers: uuid.UUID(int=next(numbers), version=4))
        if way == "in append":  # as before the journal could embed behind: each append embeds its own entry
            monkeypatch.setattr(Journal, "embedding_behind", lambda journal: contextlib.nullcontext())
        config = load_config(write_config(tmp_path / way.replace(" ", "-"), SIMPLE_AGENT + 'memory = "hybrid"\n'))
        summary = simulate_agent(config, "motoko", datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 9, 13, tzinfo=UTC))
        assert summary.outcomes.get("appended", 0) > 70 and not summary.failures
        written[way] = _written(config.agent("motoko").journal_root)
    assert len(written["behind"]) == summary.outcomes["appended"]
    assert written["behind"] == written["in append"]
    assert contexts["behind"] == contexts["in append"] and any(contexts["behind"])


def test_an_entry_appended_while_embedding_behind_is_embedded_off_the_caller_thread_and_found_by_the_next_search(tmp_path: Path) -> None:
    """Within embedding_behind an append's encode runs on another thread; the next search ranks the entry by meaning; the block leaves none missing."""
    from journal.encoding import load_encoder

    threads: list[int] = []

    class Watched:
        def __init__(self) -> None:
            self.encoder = load_encoder()
            self.identity = self.encoder.identity

        def encode(self, texts: Any) -> Any:
            threads.append(threading.get_ident())
            return self.encoder.encode(texts)

    with Journal(tmp_path / "j", enable_nn=True, encoder=Watched()) as journal:
        with journal.embedding_behind():
            journal.append({"kind": "note", "agent": "motoko", "theme": "pets", "voice": "I adopted a puppy last week; she chews my shoes."})
            appended_on = threads[:]
            hits = journal.search("new canine companion", k=1, mode="semantic")
            journal.append({"kind": "note", "agent": "motoko", "theme": "tax", "voice": "Filed the quarterly taxes at last."})
        missing = journal._keeper.semantic.missing() if journal._keeper.semantic else -1
    assert appended_on and appended_on[0] != threading.get_ident()
    assert [hit.entry.theme for hit in hits] == ["pets"]
    assert missing == 0


# -- progress -----------------------------------------------------------------------


def test_embedding_progress_is_logged_only_once_a_pass_takes_a_second() -> None:
    now = [0.0]
    with structlog.testing.capture_logs() as quick_logs:
        quick = EmbeddingProgress("motoko", clock=lambda: now[0])
        for done, at in ((0, 0.0), (64, 0.4), (100, 0.9)):
            now[0] = at
            quick(done, 100)
    assert quick_logs == []
    with structlog.testing.capture_logs() as slow_logs:
        slow = EmbeddingProgress("motoko", clock=lambda: now[0])
        for done, at in ((0, 10.0), (64, 10.5), (128, 11.2), (192, 11.6), (256, 12.3), (300, 12.4)):
            now[0] = at
            slow(done, 300)
    # The first report once a second has gone, then at most one a second, and always the last.
    assert [(event["done"], event["total"], event["seconds"]) for event in slow_logs] == [(128, 300, 1.2), (256, 300, 2.3), (300, 300, 2.4)]
    assert {event["event"] for event in slow_logs} == {"memory.embedding"}


class _Counting:
    """An encoder giving each text a vector made from its length, counting the texts it embeds."""

    identity = "counting:2"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def encode(self, texts: Any) -> Any:
        import numpy as np

        self.embedded += texts
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)


class _Recording:
    """The real encoder, recording every text it is asked to embed."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.identity = encoder.identity
        self.texts: list[str] = []

    def describe(self) -> Any:
        return self.encoder.describe()

    def encode(self, texts: Any) -> Any:
        self.texts += texts
        return self.encoder.encode(texts)


def test_a_hybrid_simulation_embeds_each_question_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulation keeps one journal open across its runs: the journal remembers the question each routine asks at every run."""
    recorded: list[_Recording] = []
    loading = Journal.encoder_for

    def recording(root: Path, **options: Any) -> _Recording:
        recorded.append(_Recording(loading(root, **options)))
        return recorded[-1]

    monkeypatch.setattr(Journal, "encoder_for", staticmethod(recording))
    config = load_config(write_config(tmp_path, SIMPLE_AGENT + 'memory = "hybrid"\n'))
    summary = simulate_agent(config, "motoko", datetime(2026, 9, 1, tzinfo=UTC), datetime(2026, 9, 8, tzinfo=UTC))
    [encoder] = recorded
    questions = {config.routine_for(config.agent("motoko"), name).question for name in config.agent("motoko").routines}
    asked = Counter(text for text in encoder.texts if text in questions)
    assert summary.runs > 40 and not summary.failures
    assert len(asked) >= 2 and set(asked.values()) == {1}  # the pulse's and the evening's questions, asked at each of their runs


# -- the nn extra missing -----------------------------------------------------------


def test_configured_hybrid_memory_without_the_extra_fails_the_run_naming_key_and_fix(tmp_path: Path) -> None:
    path = write_config(tmp_path, RECALL + _agent("hybrid", _recording_backend(tmp_path)))
    completed = without_nn("run", "recall", "--agent", "motoko", "--at", "2026-09-10T12:00:00+00:00", "--config", str(path), cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    [finished] = [event for event in _events(completed.stderr) if event["event"] == "run.finished"]
    assert finished["outcome"] == "failed"
    assert 'memory = "hybrid" (agents.motoko.memory, or runner.memory' in finished["error"]
    assert "pip install 'ghostjournal[nn]'" in finished["error"] and 'set memory = "lexical"' in finished["error"]
    assert not (tmp_path / "seen.jsonl").exists()  # the backend was never asked


def test_the_embedded_defaults_fall_back_to_lexical_without_the_extra_and_say_so(tmp_path: Path) -> None:
    completed = without_nn("run", "evening", "--agent", "motoko", "--at", "2026-09-10T21:00:00+09:00", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    events = _events(completed.stderr)
    [fallback] = [event for event in events if event["event"] == "memory.fallback"]
    assert set(fallback) == documented_events()["memory.fallback"] | ALWAYS
    assert (fallback["level"], fallback["memory"]) == ("warning", "lexical")
    assert "cannot be imported" in fallback["reason"] and "ghostjournal[nn]" in fallback["reason"]
    assert [event["memory"] for event in events if event["event"] == "run.started"] == ["lexical"]
    assert _vectors_and_entries(tmp_path / "state" / "ghostjournal" / "motoko") == (0, 1)


def test_memory_unavailable_error_survives_a_worker_round_trip() -> None:
    import pickle

    error = MemoryUnavailableError("motoko", "numpy is missing", "install the extra")
    restored = pickle.loads(pickle.dumps(error))  # noqa: S301 - the bytes were made by this test one line above
    assert (str(restored), restored.agent, restored.fix) == (str(error), "motoko", "install the extra")


def test_a_bad_progress_threshold_fails_a_hybrid_run_naming_the_variable(tmp_path: Path) -> None:
    """GHOSTJOURNAL_PROGRESS_AFTER that is not a number of seconds fails the run with one line, before the model loads."""
    path = write_config(tmp_path, RECALL + _agent("hybrid", _recording_backend(tmp_path)))
    completed = ghostrunner("run", "recall", "--agent", "motoko", "--at", "2026-09-10T12:00:00+00:00", "--config", str(path),
                            env={"GHOSTJOURNAL_PROGRESS_AFTER": "soon"})
    assert completed.returncode == 1
    [finished] = [event for event in _events(completed.stderr) if event["event"] == "run.finished"]
    assert finished["outcome"] == "failed"
    assert finished["error"] == "the environment: GHOSTJOURNAL_PROGRESS_AFTER: expected a number of seconds, 0 or more, got 'soon'"
    assert not (tmp_path / "seen.jsonl").exists()
